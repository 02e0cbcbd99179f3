"""The live view in headless Chromium, over a running ``kafkasim serve`` and real Kafka clients.

A page loads; a record produced by kafka-python appears in the count of the partition Kafka's
partitioner chose (``murmur2(key) mod N``), read from the DOM; a second consumer joining the
group changes the owners shown, and the screenshots before and after show it: the owner colour
of a partition that moved changes, the colour of one that stayed does not. A kafka-python
transactional producer's open transaction is listed with its transactional id and partition, the
partition shows its LSO held at the transaction's first offset below the high watermark, and both
change when it commits.
"""

from __future__ import annotations

import io
import threading
import time

import pytest

from kafkasim.partitioning.base import murmur2_partition
from tests.server.conftest import wait_until

pytestmark = pytest.mark.slow

TOPIC, GROUP, N = "orders", "viewers", 4

CELLS = """[...document.querySelectorAll('[data-partition]')].map(g => {
  const bar = g.querySelector('rect.owner-bar').getBoundingClientRect();
  return {partition: g.dataset.partition, records: +g.dataset.records, owner: g.dataset.owner,
          color: g.dataset.ownerColor, x: Math.round(bar.x + bar.width / 2), y: Math.round(bar.y + bar.height / 2)};
})"""


def cells(page) -> dict:
    return {int(c["partition"].rsplit("-", 1)[1]): c for c in page.evaluate(CELLS) or []}


def pixel(png: bytes, x: int, y: int) -> str:
    from PIL import Image

    r, g, b = Image.open(io.BytesIO(png)).convert("RGB").getpixel((x, y))
    return f"#{r:02x}{g:02x}{b:02x}"


def not_blank(png: bytes) -> None:
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50, "the screenshot is (nearly) one colour"
    white = max(count for count, rgb in colours if rgb == (255, 255, 255)) if any(
        rgb == (255, 255, 255) for _, rgb in colours) else 0
    assert white < 0.97 * img.width * img.height


class GroupMember:
    """A kafka-python consumer polling in its own thread, as it would in its own process."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(bootstrap, client_id), daemon=True)
        self.thread.start()

    def _run(self, bootstrap: str, client_id: str) -> None:
        from kafka import KafkaConsumer

        try:
            consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, client_id=client_id,
                                     auto_offset_reset="earliest", heartbeat_interval_ms=300,
                                     session_timeout_ms=10_000, auto_commit_interval_ms=200)
            try:
                while not self.stop.is_set():
                    consumer.poll(timeout_ms=100)
            finally:
                consumer.close()
        except BaseException as exc:      # surfaced by the test
            self.errors.append(exc)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def test_the_live_view_shows_a_produced_record_and_a_rebalance(tmp_path, serve_process, view_process, page,
                                                               console_messages):
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    server = serve_process(tmp_path / "data")
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic(TOPIC, N, 1)])
    admin.close()
    url = view_process(tmp_path / "data")
    page.goto(url)
    wait_until(lambda: len(cells(page)) == N, 30, 0.2, "the page to draw the topic's partitions")
    assert "serving" in page.evaluate("document.getElementById('brokers').textContent")

    members = [GroupMember(server.bootstrap, "c1")]
    try:
        wait_until(lambda: all(c["owner"].startswith("c1 ") for c in cells(page).values()), 60, 0.2,
                   "c1 to own every partition on the page")
        before = cells(page)
        shot1 = page.screenshot(path=tmp_path / "one-member.png")
        not_blank(shot1)
        for c in before.values():
            assert pixel(shot1, c["x"], c["y"]) == c["color"]

        key = b"user-42"
        producer = KafkaProducer(bootstrap_servers=server.bootstrap, client_id="shop")
        meta = producer.send(TOPIC, key=key, value=b"hello").get(timeout=30)
        producer.close()
        assert meta.partition == murmur2_partition(key, N)
        target = meta.partition
        wait_until(lambda: cells(page)[target]["records"] == before[target]["records"] + 1, 30, 0.2,
                   "the produced record to show in its partition's count")
        assert all(cells(page)[p]["records"] == before[p]["records"] for p in range(N) if p != target)
        row = page.evaluate("document.querySelector('#recent tbody tr').textContent")
        assert "user-42" in row

        members.append(GroupMember(server.bootstrap, "c2"))
        wait_until(lambda: {c["owner"].split(" ")[0] for c in cells(page).values()} == {"c1", "c2"}, 60, 0.2,
                   "the rebalance to show c1 and c2 as owners")
        time.sleep(0.5)                     # let the page settle after the last snapshot
        after = cells(page)
        shot2 = page.screenshot(path=tmp_path / "two-members.png")
        not_blank(shot2)
        moved = [p for p in range(N) if after[p]["owner"].startswith("c2 ")]
        kept = [p for p in range(N) if after[p]["owner"].startswith("c1 ")]
        assert moved and kept
        for p in moved:
            assert pixel(shot2, after[p]["x"], after[p]["y"]) == after[p]["color"] != pixel(
                shot1, before[p]["x"], before[p]["y"])
        for p in kept:
            assert pixel(shot2, after[p]["x"], after[p]["y"]) == pixel(shot1, before[p]["x"], before[p]["y"])
        rebalances = page.evaluate("document.getElementById('rebalances').textContent")
        assert "joined c2" in rebalances
        hosts = page.evaluate("document.getElementById('diagram').textContent")
        assert "host /127.0.0.1" in hosts or "host 127.0.0.1" in hosts
    finally:
        for m in members:
            m.close()
    assert not [e for m in members for e in m.errors]
    assert console_messages == [], console_messages


LSO_CELLS = """[...document.querySelectorAll('[data-partition]')].map(g => ({partition: g.dataset.partition,
  lso: +g.dataset.lso, hw: +g.dataset.hw, text: g.textContent}))"""
TXN_ROWS = """[...document.querySelectorAll('#transactions tbody tr')].map(tr => ({id: tr.dataset.transactionalId,
  partitions: tr.dataset.partitions, text: tr.textContent}))"""


def test_the_live_view_shows_an_open_transaction_and_the_lso_it_holds_back(tmp_path, serve_process, view_process,
                                                                           page, console_messages):
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    server = serve_process(tmp_path / "data")
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic("payments", 2, 1)])
    admin.close()
    url = view_process(tmp_path / "data")
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="view-tx")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(3):
        producer.send("payments", b"v%d" % i, partition=1)
    producer.flush()
    page.goto(url)

    def rows():
        return page.evaluate(TXN_ROWS) or []

    wait_until(lambda: any(r["id"] == "view-tx" for r in rows()), 30, 0.2, "the open transaction on the page")
    (row,) = rows()
    assert row["partitions"] == "payments-1" and "Ongoing" in row["text"] and "from offset 0" in row["text"]
    cell = {c["partition"]: c for c in page.evaluate(LSO_CELLS)}["payments-1"]
    assert (cell["lso"], cell["hw"]) == (0, 3) and "LSO 0 (open txn)" in cell["text"]
    not_blank(page.screenshot(path=tmp_path / "open-transaction.png"))
    producer.commit_transaction()
    producer.close(timeout=5)
    wait_until(lambda: not rows(), 30, 0.2, "the committed transaction to leave the page")
    cell = {c["partition"]: c for c in page.evaluate(LSO_CELLS)}["payments-1"]
    assert (cell["lso"], cell["hw"]) == (4, 4) and "LSO 4" in cell["text"]
    assert not page.evaluate("document.getElementById('no-transactions').hidden")
    assert console_messages == [], console_messages
