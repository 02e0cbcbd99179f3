"""Injected faults in the live view, in headless Chromium, as a person sees them.

``kafkasim serve --brokers 0:r1,1:r2`` and ``kafkasim view`` as processes, a kafka-python producer.
``kafkasim fault add --api Produce --error NOT_LEADER_OR_FOLLOWER --count 3 --topic orders
--partition 0`` fails the producer's next three sends to orders-0 (it retries and delivers): the
page flashes orders-0's cell red (checked in the screenshot's pixels at the animation's start,
against the cell before), the flash fades within 2 s, and the cell is labelled
``NOT_LEADER_OR_FOLLOWER ×3``; orders-1 does not flash. Then ``kafkasim cluster fill-disk 1``:
broker 1's box says ``disk full`` and ``log dir offline``, in red, and broker 0's says nothing.
Screenshots are kept in the test's tmp dir.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from kafkasim.server.address import read_address
from tests.server.conftest import wait_until

pytestmark = pytest.mark.slow

TOPIC = "orders"

CELL = """(tp => {
  const g = document.querySelector(`[data-partition="${tp}"]`);
  if (!g) return null;
  const bar = g.querySelector('rect.owner-bar').getBoundingClientRect();
  const label = g.querySelector('text.fault-label');
  return {records: +g.dataset.records, faults: g.dataset.faults, label: label ? label.textContent : null,
          x: Math.round(bar.x + bar.width / 2), y: Math.round(bar.y + bar.height / 2)};
})"""

# The flash of one partition, stopped at its first frame: what the page shows the moment it flashes.
FLASH_AT_START = """(tp => {
  const rect = document.querySelector(`#fault-flashes [data-fault="${tp}"]`);
  if (!rect) return null;
  const anims = rect.getAnimations();
  for (const a of anims) { a.pause(); a.currentTime = 0; }
  return anims.map(a => ({name: a.animationName, duration: a.effect.getTiming().duration}));
})"""

RESUME = "document.querySelectorAll('#fault-flashes rect').forEach(r => r.getAnimations().forEach(a => a.play()))"

BROKERS = """[...document.querySelectorAll('#brokers .broker')].map(b => ({
  id: +b.dataset.broker, faultState: b.dataset.faultState, text: b.textContent,
  roles: [...b.querySelectorAll('[data-replica]')].map(c => c.dataset.role),
  stateColor: (e => e ? getComputedStyle(e).color : null)(b.querySelector('.fault-state'))}))"""


def pixel(png: bytes, x: int, y: int) -> tuple:
    from PIL import Image

    return Image.open(io.BytesIO(png)).convert("RGB").getpixel((x, y))


def red(rgb: tuple) -> bool:
    r, g, b = rgb
    return r >= 200 and g <= 130 and b <= 130


def cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kafkasim", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_injected_fault_flashes_its_partition_and_a_full_disk_shows_on_its_broker(
        tmp_path, serve_process, view_process, page, console_messages):
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    data = tmp_path / "data"
    serve_process(data, "--brokers", "0:r1,1:r2")
    bootstrap = [f"{b['host']}:{b['port']}" for b in read_address(str(data))["brokers"]]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, 2, 2)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="shop", retries=5, retry_backoff_ms=100)
    for p in (0, 1):
        producer.send(TOPIC, value=b"first", partition=p).get(timeout=30)

    page.goto(view_process(data))
    shots = tmp_path / "screenshots"
    shots.mkdir()
    cell = wait_until(lambda: (c := page.evaluate(CELL, f"{TOPIC}-0")) and c["records"] == 1 and c, 30, 0.1,
                      "the page to draw orders-0")
    before = page.screenshot(path=shots / "1-before.png")
    assert not red(pixel(before, cell["x"], cell["y"])) and not cell["faults"] and cell["label"] is None

    cli("fault", "add", "--api", "Produce", "--error", "NOT_LEADER_OR_FOLLOWER", "--count", "3",
        "--topic", TOPIC, "--partition", "0", "--data-dir", str(data))
    producer.send(TOPIC, value=b"second", partition=0).get(timeout=30)    # three retries, then stored
    flash = wait_until(lambda: page.evaluate(FLASH_AT_START, f"{TOPIC}-0"), 10, 0.05, "orders-0 to flash")
    assert [f["name"] for f in flash] == ["faultflash"] and 1000 <= flash[0]["duration"] <= 2000
    cell = page.evaluate(CELL, f"{TOPIC}-0")
    shot = page.screenshot(path=shots / "2-orders-0-flashing.png")
    assert red(pixel(shot, cell["x"], cell["y"])), pixel(shot, cell["x"], cell["y"])
    if os.environ.get("KAFKASIM_VIEW_DOCS_IMG"):        # how docs/img/view-fault-flash.png is made
        from PIL import Image

        Image.open(io.BytesIO(shot)).crop((0, 50, 1280, 400)).save(os.environ["KAFKASIM_VIEW_DOCS_IMG"], optimize=True)
    page.evaluate(RESUME)
    wait_until(lambda: page.evaluate(f"!document.querySelector('#fault-flashes [data-fault=\"{TOPIC}-0\"]')"),
               2.5, 0.05, "the flash to fade and go")
    cell = wait_until(lambda: (c := page.evaluate(CELL, f"{TOPIC}-0"))["label"] == "NOT_LEADER_OR_FOLLOWER ×3" and c,
                      5, 0.05, "orders-0 labelled with the three errors")
    assert cell["records"] == 2 and cell["faults"] == "NOT_LEADER_OR_FOLLOWER ×3"
    after = page.screenshot(path=shots / "3-after-the-flash.png")
    assert not red(pixel(after, cell["x"], cell["y"]))
    assert page.evaluate(CELL, f"{TOPIC}-1")["label"] is None
    assert page.evaluate(f"!!document.querySelector('#fault-flashes [data-fault=\"{TOPIC}-1\"]')") is False
    producer.close()

    cli("cluster", "fill-disk", "1", "--data-dir", str(data))
    brokers = wait_until(lambda: (bs := page.evaluate(BROKERS)) and "disk full" in bs[1]["text"] and bs, 5, 0.05,
                         "broker 1's box to say disk full")
    page.screenshot(path=shots / "4-broker-1-disk-full.png")
    assert [b["id"] for b in brokers] == [0, 1]
    assert brokers[1]["faultState"] == "disk full, log dir offline" and "log dir offline" in brokers[1]["text"]
    assert brokers[1]["stateColor"] == "rgb(187, 0, 0)"
    assert brokers[1]["roles"] == ["offline", "offline"]              # Kafka's offline replicas
    assert brokers[0]["faultState"] == "" and "disk full" not in brokers[0]["text"]
    assert console_messages == [], console_messages
