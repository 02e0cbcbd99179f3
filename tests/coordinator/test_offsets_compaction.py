"""Committed offsets survive compaction of ``__consumer_offsets`` plus a restart: the replay
steps over the gaps compaction leaves (one commit of several partitions is one batch, so a
batch can keep only its head) and reaches the log end."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.types import OffsetAndMetadata, TopicPartition

T0 = 1_700_000_000_000
PARTITIONS = range(4)

# One offset commit: a group and {partition of "t": offset}; it is one batch in __consumer_offsets.
_commit = st.tuples(st.sampled_from(["g1", "g1", "g1", "g2"]),
                    st.dictionaries(st.sampled_from(PARTITIONS), st.integers(0, 50), min_size=1))


@st.composite
def _gap_block(draw):
    """The compaction-gap shape: one commit of a head partition plus tail partitions (one batch),
    then enough commits overwriting every tail partition to close the batch's segment. Compaction
    then keeps that batch's head record only, and since every batch after it in its segment is
    superseded too, the batch ends its segment with its last offsets missing: a gap that a replay
    must step over to find the later commits.

    Why enough: a one-partition commit batch is about 140 bytes, so a 1000-byte segment holds at
    most 7 batches after the shaped one, and 8 overwrites put the latest value of every tail
    partition in a later segment, where the replay must read it."""
    group = draw(st.sampled_from(["g1", "g2"]))
    head = draw(st.sampled_from(PARTITIONS))
    tails = draw(st.lists(st.sampled_from([p for p in PARTITIONS if p != head]), min_size=1, max_size=3,
                          unique=True))
    offsets = st.integers(0, 50)
    shaped = {head: draw(offsets), **{p: draw(offsets) for p in tails}}     # dict order = record order
    overwrites = draw(st.lists(st.fixed_dictionaries({p: offsets for p in tails}), min_size=8, max_size=14))
    return [(group, shaped)] + [(group, o) for o in overwrites]


@st.composite
def _commits(draw):
    """Random commits with one to three gap blocks at random places among them: every example
    has the gap shape, and random commits before, between and after it."""
    blocks = draw(st.lists(_gap_block(), min_size=1, max_size=3))
    out = draw(st.lists(_commit, max_size=20))
    for block in blocks:
        at = draw(st.integers(0, len(out)))
        out[at:at] = block
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(commits=_commits())
def test_committed_offsets_survive_compaction_and_restart(tmp_path_factory, commits):
    d = tmp_path_factory.mktemp("o")
    clock = MockClock(T0)
    final = {}
    with Broker(d, clock=clock) as b:
        b.create_topic("t", 4)
        for p in PARTITIONS:
            b.append_records("t", p, [(T0, b"k", b"v", ())] * 51)
        b.offset_commit("g0", "", -1, {TopicPartition("t", 0): OffsetAndMetadata(0)})   # creates the topic
        final[("g0", 0)] = 0
        # small segments on the offsets topic so compaction really rewrites batches
        b.alter_topic_configs("__consumer_offsets", {"segment.bytes": "1000", "min.cleanable.dirty.ratio": "0.01"})
        for g, offsets in commits:      # one commit of several partitions is one batch
            b.offset_commit(g, "", -1, {TopicPartition("t", p): OffsetAndMetadata(o) for p, o in offsets.items()})
            final.update({(g, p): o for p, o in offsets.items()})
            clock.advance(1)
        b.run_log_maintenance()
    with Broker(d, clock=clock) as b:
        got = {(g, tp.partition): om.offset
               for g in ("g0", "g1", "g2", "g3") for tp, om in b.offset_fetch(g).items()}
    assert got == final


def test_a_commit_compacted_to_its_first_partition_keeps_the_rest_after_restart(tmp_path):
    """One commit of t-0 and t-1 is one batch; later commits overwrite t-1 only, so
    compaction keeps just the batch's head. Replaying the offsets topic on restart must
    step over that gap and still find the later commits (t-1 = 31, t-2 = 7)."""
    clock = MockClock(T0)
    tp = [TopicPartition("t", p) for p in range(3)]
    with Broker(tmp_path / "d", clock=clock) as b:
        b.create_topic("t", 3)
        for p in range(3):
            b.append_records("t", p, [(T0, b"k", b"v", ())] * 40)
        b.offset_commit("g1", "", -1, {tp[0]: OffsetAndMetadata(0)})
        b.alter_topic_configs("__consumer_offsets", {"segment.bytes": "1000", "min.cleanable.dirty.ratio": "0.01"})
        b.offset_commit("g1", "", -1, {tp[0]: OffsetAndMetadata(1), tp[1]: OffsetAndMetadata(1)})
        for i in range(30):
            b.offset_commit("g1", "", -1, {tp[1]: OffsetAndMetadata(2 + i)})
            clock.advance(1)
        b.offset_commit("g1", "", -1, {tp[2]: OffsetAndMetadata(7)})
        b.run_log_maintenance()
    with Broker(tmp_path / "d", clock=clock) as b:
        assert {t.partition: om.offset for t, om in b.offset_fetch("g1").items()} == {0: 1, 1: 31, 2: 7}
