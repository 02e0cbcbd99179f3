"""The live view of a served 3-broker cluster over racks, in headless Chromium, as a person sees it.

``kafkasim serve --brokers 0:r1,1:r2,2:r3`` (one listener per broker), ``kafkasim view`` as a
process, kafka-python producer and consumers, Debian's Chromium driven by Playwright
(tests/view/conftest.py). What is asserted is what the page renders: three broker boxes, each in its
rack, with its own port and the replicas it holds (leader marked); the consumer group (its
``__consumer_offsets`` sits at the cluster data dir's root) with both members, what each owns,
and each one's position (its last fetch offset, recorded by serve); then ``kafkasim cluster
stop-broker 1`` turns broker 1's box red and "stopped" and moves its partitions' leaders on the
page within 3 s; ``start-broker 1`` brings it back. One screenshot per state is kept in the test's tmp dir.
"""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time

import pytest

from kafkasim.server.address import read_address
from tests.server.conftest import wait_until

pytestmark = pytest.mark.slow

TOPIC, GROUP, N = "ledger", "ledger-readers", 6
BROKERS = "0:r1,1:r2,2:r3"

PAGE = """(() => {
  const brokers = [...document.querySelectorAll('#brokers .broker')].map(b => ({
    id: +b.dataset.broker, state: b.dataset.state, listener: b.dataset.listener,
    rack: b.closest('.rack').dataset.rack, text: b.textContent,
    border: getComputedStyle(b).borderTopColor,
    box: (r => [Math.round(r.x + 1), Math.round(r.y + r.height / 2)])(b.getBoundingClientRect()),
    replicas: Object.fromEntries([...b.querySelectorAll('[data-replica]')].map(c => [c.dataset.replica, c.dataset.role]))}));
  const parts = Object.fromEntries([...document.querySelectorAll('[data-partition]')].map(g =>
    [g.dataset.partition, {leader: +g.dataset.leader, records: +g.dataset.records, leo: +g.dataset.leo,
                           owner: g.dataset.owner}]));
  const members = [...document.querySelectorAll('[data-member]')].map(g => ({
    client: g.dataset.clientId, owns: g.dataset.owns ? g.dataset.owns.split(',') : [],
    positions: Object.fromEntries([...g.querySelectorAll('[data-tp]')].map(t => [t.dataset.tp, t.dataset.position]))}));
  return {brokers, parts, members, racks: [...document.querySelectorAll('#brokers .rack')].map(r => r.dataset.rack),
          title: (document.getElementById('diagram') || {}).textContent || ''};
})()"""


def rendered(page) -> dict:
    """What the page renders now: its brokers, partitions, group members, racks and title."""
    return page.evaluate(PAGE) or {"brokers": [], "parts": {}, "members": [], "racks": [], "title": ""}


def pixel(png: bytes, x: int, y: int) -> tuple:
    from PIL import Image

    return Image.open(io.BytesIO(png)).convert("RGB").getpixel((x, y))


class Member:
    """A kafka-python consumer of the group, polling in its own thread (as in its own process)."""

    def __init__(self, bootstrap: list[str], client_id: str) -> None:
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(bootstrap, client_id), daemon=True)
        self.thread.start()

    def _run(self, bootstrap, client_id) -> None:
        from kafka import KafkaConsumer

        try:
            consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, client_id=client_id,
                                     auto_offset_reset="earliest", heartbeat_interval_ms=300,
                                     session_timeout_ms=10_000, enable_auto_commit=True,
                                     auto_commit_interval_ms=300)
            try:
                while not self.stop.is_set():
                    consumer.poll(timeout_ms=100)
            finally:
                consumer.close(autocommit=False)
        except BaseException as exc:        # surfaced by the test
            self.errors.append(exc)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def test_a_served_cluster_over_racks_in_the_browser(tmp_path, serve_process, view_process, page,
                                                    console_messages):
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    from kafkasim.server.control import ServedCluster

    data = tmp_path / "data"
    serve_process(data, "--brokers", BROKERS)
    ports = {b["id"]: f"{b['host']}:{b['port']}" for b in read_address(str(data))["brokers"]}
    assert len(set(ports.values())) == 3
    bootstrap = list(ports.values())
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, N, 3)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="till")
    for i in range(30):
        producer.send(TOPIC, key=f"account-{i}".encode(), value=b"100")
    producer.flush()                       # kept open: one more record is sent once the page shows the group

    url = view_process(data)
    page.goto(url)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    wait_until(lambda: len(rendered(page)["parts"]) == N, 30, 0.2, "the page to draw the topic")
    seen = rendered(page)
    assert [(b["id"], b["rack"]) for b in seen["brokers"]] == [(0, "rack r1"), (1, "rack r2"), (2, "rack r3")]
    assert seen["racks"] == ["rack r1", "rack r2", "rack r3"]
    for b in seen["brokers"]:                      # each broker its own port, not the first's
        assert b["state"] == "alive" and b["listener"] == ports[b["id"]] and ports[b["id"]] in b["text"]
    truth = {p["partition"]: p for p in ServedCluster(str(data)).describe_cluster()["partitions"]
             if p["topic"] == TOPIC}
    for b in seen["brokers"]:                      # every broker holds a replica of each partition (rf 3)
        assert b["replicas"] == {f"{TOPIC}-{p}": "leader" if truth[p]["leader"] == b["id"] else "follower"
                                 for p in range(N)}
    assert {p: seen["parts"][f"{TOPIC}-{p}"]["leader"] for p in range(N)} == {p: truth[p]["leader"] for p in range(N)}

    members = [Member(bootstrap, "c1")]
    try:
        wait_until(lambda: [m["client"] for m in rendered(page)["members"]] == ["c1"], 60, 0.2,
                   "the group on the cluster with c1")
        wait_until(lambda: len(rendered(page)["members"][0]["owns"]) == N, 30, 0.2, "c1 to own every partition")
        page.screenshot(path=shots / "1-one-member.png")
        members.append(Member(bootstrap, "c2"))
        wait_until(lambda: sorted(m["client"] for m in rendered(page)["members"]) == ["c1", "c2"], 60, 0.2,
                   "c2 to join the group on the page")
        seen = rendered(page)
        owns = {m["client"]: m["owns"] for m in seen["members"]}
        assert len(owns["c1"]) < N and owns["c1"] and owns["c2"]            # c1's partitions changed
        assert sorted(owns["c1"] + owns["c2"]) == sorted(f"{TOPIC}-{p}" for p in range(N))

        def caught_up():                            # positions: each member's last fetch offset
            now = rendered(page)
            return all(m["positions"].get(tp) == str(now["parts"][tp]["leo"])
                       for m in now["members"] for tp in m["owns"]) and len(now["members"]) == 2
        wait_until(caught_up, 30, 0.2, "both members' positions to reach the log end offsets")
        page.screenshot(path=shots / "2-two-members.png")
        flows = int(page.evaluate("document.body.dataset.flows || '0'"))
        producer.send(TOPIC, key=b"account-99", value=b"5").get(timeout=30)   # travels to its partition
        wait_until(lambda: int(page.evaluate("document.body.dataset.flows || '0'")) > flows, 10, 0.05,
                   "the new record's dot to be animated")
        producer.close()

        led_by_1 = [p for p in range(N) if truth[p]["leader"] == 1]
        assert led_by_1
        stop = subprocess.run([sys.executable, "-m", "kafkasim", "cluster", "stop-broker", "1",
                               "--data-dir", str(data)], capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0, stop.stderr
        stopped_at = time.monotonic()

        def broker_1_down():
            now = rendered(page)
            b1 = next(b for b in now["brokers"] if b["id"] == 1)
            return (b1["state"] == "stopped" and all(now["parts"][f"{TOPIC}-{p}"]["leader"] not in (1, -1)
                                                      for p in led_by_1)) and now
        now = wait_until(broker_1_down, 3, 0.05, "broker 1 stopped and its leaders moved, on the page")
        assert time.monotonic() - stopped_at <= 3
        shot = page.screenshot(path=shots / "3-broker-1-stopped.png")
        b1 = next(b for b in now["brokers"] if b["id"] == 1)
        assert "stopped" in b1["text"] and f"{ports[1]} closed" in b1["text"]
        assert set(b1["replicas"].values()) == {"offline"}
        assert b1["border"] == "rgb(225, 87, 89)"                       # red, as drawn
        assert pixel(shot, *b1["box"]) == (225, 87, 89)
        for b in now["brokers"]:
            if b["id"] != 1:
                assert b["state"] == "alive" and b["border"] != "rgb(225, 87, 89)"
        truth = {p["partition"]: p for p in ServedCluster(str(data)).describe_cluster()["partitions"]
                 if p["topic"] == TOPIC}
        assert {p: now["parts"][f"{TOPIC}-{p}"]["leader"] for p in range(N)} == \
            {p: truth[p]["leader"] for p in range(N)}

        start = subprocess.run([sys.executable, "-m", "kafkasim", "cluster", "start-broker", "1",
                                "--data-dir", str(data)], capture_output=True, text=True, timeout=60)
        assert start.returncode == 0, start.stderr

        def broker_1_back():
            b1 = next(b for b in rendered(page)["brokers"] if b["id"] == 1)
            return b1["state"] == "alive" and "offline" not in b1["replicas"].values() and b1
        b1 = wait_until(broker_1_back, 5, 0.05, "broker 1 alive again on the page")
        assert "closed" not in b1["text"] and ports[1] in b1["text"] and b1["border"] != "rgb(225, 87, 89)"
        page.screenshot(path=shots / "4-broker-1-restarted.png")
    finally:
        for m in members:
            m.close()
        producer.close()
    assert not [e for m in members for e in m.errors]
    assert console_messages == [], console_messages
