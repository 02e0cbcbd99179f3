"""The live view draws a consumer group (KIP-848) reconciling, in headless Chromium.

Deterministic: the test's own in-process Broker (on a MockClock) writes the data dir and
its real in-process ``Consumer(group_protocol="consumer")`` members are stepped one heartbeat
at a time; ``kafkasim view`` (a process) reads the files. Mid-reconciliation, the page shows
the group's protocol, assignor and epochs, each member's epoch against the group epoch, the
partition b still owns but must give to c striped in b's colour and labelled "revoking", and
c's two partitions labelled "pending"; once b and c heartbeat, none of it is left.
"""

from __future__ import annotations

import io
import os

import pytest

from kafkasim.broker import Broker
from kafkasim.consumer import Consumer
from tests.server.conftest import wait_until
from tests.view.test_browser import cells, not_blank

pytestmark = pytest.mark.slow

HB = 5_000
TOPIC, N = "orders", 6

RECON = """[...document.querySelectorAll('[data-partition]')].map(g => {
  const cell = g.querySelector('rect:not(.owner-bar)').getBoundingClientRect();
  return {partition: +g.dataset.partition.split('-').pop(), owner: g.dataset.owner, revoking: g.dataset.revoking,
          pending: g.dataset.pending, from: g.dataset.pendingFrom, text: g.textContent,
          fill: g.querySelector('rect:not(.owner-bar)').getAttribute('fill'),
          dash: g.querySelector('rect:not(.owner-bar)').getAttribute('stroke-dasharray'),
          // a stretch of the cell's first line between its texts (the records count, the label)
          x0: Math.round(cell.left) + 140, x1: Math.round(cell.right) - 95, y: Math.round(cell.top) + 8};
})"""
MEMBERS = """[...document.querySelectorAll('[data-member]')].map(g => ({client: g.dataset.clientId,
  epoch: g.dataset.memberEpoch, text: g.textContent}))"""


def member(broker, clock, name):
    return Consumer(broker, TOPIC, group_id="g", group_protocol="consumer", client_id=name, seed=1,
                    clock=clock, enable_auto_commit=False)


def row_colours(png: bytes, x0: int, x1: int, y: int) -> set:
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    return {img.getpixel((x, y)) for x in range(x0, x1)}


def recon(page) -> dict:
    return {c["partition"]: c for c in page.evaluate(RECON) or []}


def test_the_page_draws_a_consumer_group_reconciling(tmp_path, clock, view_process, page, console_messages):
    data = tmp_path / "data"
    broker = Broker(data, clock=clock)
    try:
        broker.create_topic(TOPIC, N)
        for p in range(N):
            broker.append_records(TOPIC, p, [(clock.now_ms(), None, b"v%d" % i, ()) for i in range(3)])
        a, b = member(broker, clock, "a"), member(broker, clock, "b")
        for _ in range(4):
            a.poll()
            b.poll()
            clock.advance(HB)
        c = member(broker, clock, "c")
        c.poll()                       # c joins: the new target gives it one partition of a's, one of b's
        clock.advance(HB)
        a.poll()                       # a releases its one; b has not heartbeated yet
        truth = {m["client_id"]: m for m in broker.describe_group("g")["members"]}
        (held,) = {tp.partition for tp in truth["b"]["assignment"]} - {
            tp.partition for tp in truth["b"]["target_assignment"]}
        (freed,) = {tp.partition for tp in truth["c"]["target_assignment"]} - {held}

        page.goto(view_process(data))
        wait_until(lambda: recon(page).get(held, {}).get("revoking", "").startswith("c "), 30, 0.2,
                   "the page to draw b's partition being revoked towards c")
        cellmap = recon(page)
        assert cellmap[held]["owner"].startswith("b ") and "revoking → c" in cellmap[held]["text"]
        assert cellmap[held]["fill"].startswith("url(#stripes-") and cellmap[held]["dash"]
        assert cellmap[held]["pending"].startswith("c ") and cellmap[held]["from"].startswith("b ")
        assert cellmap[freed]["owner"] == "" and cellmap[freed]["pending"].startswith("c ")
        assert cellmap[freed]["from"] == "" and "pending → c" in cellmap[freed]["text"] and cellmap[freed]["dash"]
        others = [p for p in range(N) if p not in (held, freed)]
        assert all(not cellmap[p]["revoking"] and not cellmap[p]["pending"] and not cellmap[p]["dash"] for p in others)

        title = page.evaluate("document.getElementById('group-protocol').textContent")
        assert title == "consumer protocol · uniform · epoch 3 (target 3)"
        assert "Reconciling" in page.evaluate("document.getElementById('group-title').textContent")
        assert page.evaluate("document.getElementById('group').selectedOptions[0].textContent") == "g (consumer)"
        rows = {m["client"]: m for m in page.evaluate(MEMBERS)}
        assert "epoch 2 / group epoch 3" in rows["b"]["text"] and f"revoking P{held} → c" in rows["b"]["text"]
        assert "epoch 3 / group epoch 3" in rows["a"]["text"]
        assert f"pending P{held}: held by b" in rows["c"]["text"]
        assert f"pending P{freed}: at its next heartbeat" in rows["c"]["text"]

        shot = page.screenshot(path=tmp_path / "consumer-group-reconciling.png")
        not_blank(shot)
        h = cellmap[held]
        assert len(row_colours(shot, h["x0"], h["x1"], h["y"])) >= 2, "the revoking partition is not striped"
        k = cellmap[others[0]]
        assert len(row_colours(shot, k["x0"], k["x1"], k["y"])) == 1, "an owned partition is drawn plain"
        if os.environ.get("KAFKASIM_VIEW_DOCS_IMG"):        # how docs/img/view-consumer-group.png is made
            from PIL import Image

            Image.open(io.BytesIO(shot)).crop((505, 240, 1185, 585)).save(os.environ["KAFKASIM_VIEW_DOCS_IMG"],
                                                                          optimize=True)

        b.poll()                       # b revokes and acknowledges
        c.poll()                       # c takes both
        wait_until(lambda: all(not x["revoking"] and not x["pending"] for x in recon(page).values()), 30, 0.2,
                   "the reconciliation to finish on the page")
        assert {p for p, x in cells(page).items() if x["owner"].startswith("c ")} == {held, freed}
        assert "consumer protocol · uniform · epoch 3 (target 3)" == page.evaluate(
            "document.getElementById('group-protocol').textContent")
        assert "Stable" in page.evaluate("document.getElementById('group-title').textContent")
        assert "target assignment epoch 3" in page.evaluate("document.getElementById('rebalances').textContent")
        assert console_messages == [], console_messages
    finally:
        broker.close()
