"""The live view draws a share group (KIP-932) in headless Chromium.

Deterministic: the test's own in-process Broker (on a MockClock) writes the data dir; three
members join with ``share_group_heartbeat`` and fetch, acknowledge and release with
``share_fetch``/``share_acknowledge``; ``kafkasim view`` (a process) reads the files. The page
draws an edge from every member to every partition it is assigned (a partition shared by
several members has several, and its bar is sliced in their colours), each partition's
in-flight records and redeliveries, the group's redeliveries counter, and each member's
share-partitions; a release and a new delivery raise the counts live, and a member leaving
takes its edges with it.
"""

from __future__ import annotations

import io
import os

import pytest

from kafkasim.broker import Broker
from kafkasim.protocol.share_group import ACKNOWLEDGE_ACCEPT, ACKNOWLEDGE_RELEASE, AcknowledgementBatch
from kafkasim.types import TopicPartition
from tests.server.conftest import wait_until
from tests.view.test_browser import not_blank

pytestmark = pytest.mark.slow

J0 = TopicPartition("jobs", 0)
CELLS = """Object.fromEntries([...document.querySelectorAll('[data-partition]')].map(g => {
  const bar = g.querySelector('rect').getBoundingClientRect();   // the cell: the bar's full height
  return [+g.dataset.partition.split('-').pop(), {sharers: g.dataset.sharers, inFlight: g.dataset.inFlight,
          redeliveries: g.dataset.redeliveries, spso: g.dataset.spso, text: g.textContent,
          bars: g.querySelectorAll('rect.owner-bar').length,
          x: Math.round(bar.left) + 8, y0: Math.round(bar.top) + 1, y1: Math.round(bar.bottom) - 1}];
}))"""
EDGES = "[...document.querySelectorAll('path[data-edge]')].map(p => p.dataset.edge).sort()"
MEMBERS = """Object.fromEntries([...document.querySelectorAll('[data-member]')].map(g =>
  [g.dataset.clientId, g.textContent]))"""


def ack(first, last, kind):
    return AcknowledgementBatch(first, last, (kind,))


def share_cells(page) -> dict:
    """partition -> what its cell says (data attributes, text, where its bar is)."""
    return {int(p): c for p, c in (page.evaluate(CELLS) or {}).items()}


def bar_colours(png: bytes, x: int, y0: int, y1: int) -> set:
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    return {img.getpixel((x, y)) for y in range(y0, y1)}


def test_the_page_draws_a_share_group_with_in_flight_records_and_redeliveries(tmp_path, clock, view_process, page,
                                                                              console_messages):
    data = tmp_path / "data"
    broker = Broker(data, clock=clock, broker_configs={"share.auto.offset.reset": "earliest"})
    try:
        broker.create_topic("jobs", 2)
        for p in (0, 1):
            broker.append_records("jobs", p, [(clock.now_ms(), f"k{i}".encode(), b"v", ()) for i in range(10)])
        for n in "abc":
            broker.share_group_heartbeat("workers", f"member-{n}", 0, subscribed_topic_names=["jobs"], client_id=n)
        (truth,) = broker.share_group_describe(["workers"])
        for m in truth["members"]:              # every member at the group epoch
            broker.share_group_heartbeat("workers", m["member_id"], m["member_epoch"], client_id=m["client_id"])
        (truth,) = broker.share_group_describe(["workers"])
        assigned = {m["member_id"]: {p for _, _, ps in m["assignment"] for p in ps} for m in truth["members"]}
        want_edges = sorted(f"jobs-{p}>{mid}" for mid, ps in assigned.items() for p in ps)
        on_p0 = sorted(mid for mid, ps in assigned.items() if 0 in ps)
        fetcher = on_p0[0]
        other = next(mid for mid in sorted(assigned) if mid != fetcher)
        got = broker.share_fetch("workers", fetcher, [J0], max_records=10)
        assert [(a.first_offset, a.last_offset) for a in got[J0].acquired] == [(0, 9)]
        broker.share_acknowledge("workers", fetcher, {J0: [ack(0, 2, ACKNOWLEDGE_ACCEPT), ack(3, 3, ACKNOWLEDGE_RELEASE)]})
        again = broker.share_fetch("workers", other, [J0])
        assert [(a.first_offset, a.delivery_count) for a in again[J0].acquired] == [(3, 2)]

        page.goto(view_process(data))
        wait_until(lambda: share_cells(page).get(0, {}).get("redeliveries") == "1", 30, 0.2,
                   "the page to draw jobs-0's redelivery")
        cells = share_cells(page)
        assert page.evaluate(EDGES) == want_edges            # one edge per member and partition it is assigned
        assert len(want_edges) > 2                           # three members on two partitions: one is shared
        for p in (0, 1):
            mine = [mid for mid, ps in assigned.items() if p in ps]
            assert cells[p]["bars"] == len(mine) and len(cells[p]["sharers"].split(",")) == len(mine)
        assert (cells[0]["inFlight"], cells[0]["spso"]) == ("7", "3")     # 3..9: 3 redelivered, 4..9 held
        assert "in flight 7 · redeliveries 1" in cells[0]["text"]
        assert cells[1]["inFlight"] == "" and "not fetched yet" in cells[1]["text"]
        counter = page.evaluate("document.getElementById('share-redeliveries').dataset.redeliveries")
        assert counter == "1"
        assert page.evaluate("document.getElementById('group').selectedOptions[0].textContent") == "workers (share)"
        assert "share group workers · Stable" == page.evaluate("document.getElementById('group-title').textContent")
        epoch = truth["group_epoch"]
        assert page.evaluate("document.getElementById('group-protocol').textContent") == \
            f"share · simple · epoch {epoch} (target {epoch})"
        members = page.evaluate(MEMBERS)
        for m in truth["members"]:
            assert f"epoch {m['member_epoch']} / group epoch {epoch}" in members[m["client_id"]]
            if 0 in assigned[m["member_id"]]:
                assert "P0: SPSO 3 · in flight 7 · redelivered 1" in members[m["client_id"]]
        shot = page.screenshot(path=tmp_path / "share-group.png")
        not_blank(shot)
        shared = next(p for p in (0, 1) if cells[p]["bars"] >= 2)
        c = cells[shared]
        assert len(bar_colours(shot, c["x"], c["y0"], c["y1"])) >= 2, "a shared partition's bar is not sliced"
        if os.environ.get("KAFKASIM_VIEW_DOCS_IMG"):        # how docs/img/view-share-group.png is made
            from PIL import Image

            Image.open(io.BytesIO(shot)).crop((500, 272, 1175, 545)).save(os.environ["KAFKASIM_VIEW_DOCS_IMG"],
                                                                          optimize=True)

        broker.share_acknowledge("workers", other, {J0: [ack(3, 3, ACKNOWLEDGE_RELEASE)]})   # released again,
        broker.share_fetch("workers", fetcher, [J0])                                     # its third delivery
        wait_until(lambda: share_cells(page)[0]["redeliveries"] == "2", 30, 0.2, "the page to count it")
        assert page.evaluate("document.getElementById('share-redeliveries').dataset.redeliveries") == "2"

        leaver = next(m for m in truth["members"] if m["member_id"] != fetcher)
        broker.share_group_heartbeat("workers", leaver["member_id"], -1)
        wait_until(lambda: not any(e.endswith(">" + leaver["member_id"]) for e in page.evaluate(EDGES)), 30, 0.2,
                   "the leaver's edges to go")
        assert leaver["client_id"] not in page.evaluate(MEMBERS)
        assert console_messages == [], console_messages
    finally:
        broker.close()
