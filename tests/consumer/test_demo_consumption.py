"""The demo's group processes exactly what was sent before it scales out: its settle
loop polls with ``update_offsets=False``, which must not consume (kafka-python's)."""

from __future__ import annotations

import os

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.demo import run_demo
from kafkasim.demo.story import GROUP, TOPIC


def _timestamps(broker: Broker, partition: int) -> list[int]:
    """Every record's timestamp in offset order, read back from the broker's log."""
    out, offset = [], 0
    while True:
        got = broker.fetch(TOPIC, partition, offset)
        out += [(r.offset, r.timestamp) for r in got.records]
        if got.next_offset >= got.log_end_offset:
            break
        offset = got.next_offset
    assert [o for o, _ in out] == list(range(len(out)))   # the demo's topic is never compacted
    return [t for _, t in out]


def test_demo_group_processes_and_commits_every_record_sent(tmp_path):
    """Checked against the shop's log, not the demo's own tally. The story (kafkasim/demo/story.py)
    sends int(2,000 * 0.7) = 1,400 records to partitions 0-5, lets group billing consume and
    commit, then advances its clock by 300,000 ms before growing the topic to 8 partitions and
    sending the rest. So in the log the first phase is every record stamped before the one
    timestamp gap of at least 300 s, and billing's committed offset of each partition 0-5 must be
    exactly that partition's count of first-phase records: every one processed and committed,
    none of the later ones (the group had stopped by then)."""
    summary = run_demo(str(tmp_path / "demo"), records=2_000, spark=False, echo=None)
    with Broker(os.path.join(tmp_path, "demo", "shop"), clock=MockClock(0)) as b:
        stamps = {p: _timestamps(b, p) for p in range(8)}
        committed = {tp.partition: om.offset for tp, om in b.offset_fetch(GROUP).items() if tp.topic == TOPIC}
    ordered = sorted({t for ts in stamps.values() for t in ts})
    gaps = [(later - earlier, later) for earlier, later in zip(ordered, ordered[1:]) if later - earlier >= 300_000]
    assert len(gaps) == 1, gaps                       # the one jump between the two phases
    second_phase_from = gaps[0][1]
    first_phase = {p: sum(t < second_phase_from for t in ts) for p, ts in stamps.items()}
    assert sum(first_phase.values()) == 1_400 and first_phase[6] == first_phase[7] == 0
    assert all(all(t < second_phase_from for t in stamps[p][:first_phase[p]]) for p in range(6))
    assert committed == {p: first_phase[p] for p in range(6)}
    assert summary["consumed"] == 1_400
