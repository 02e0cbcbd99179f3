"""Consumer API against a real broker: manual assignment, positions, resets, commits, config."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkasim.broker import Broker
from kafkasim.consumer import Consumer, ConsumerRebalanceListener, MemberState
from kafkasim.errors import (
    CommitFailedError, IllegalStateError, InvalidConfigurationError, NoOffsetForPartitionError,
    OffsetOutOfRangeError, RebalanceInProgressError, UnknownTopicOrPartitionError,
)
from kafkasim.types import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
def broker(tmp_path, clock):
    b = Broker(tmp_path / "data", clock=clock)
    b.create_topic("t", 2)
    for p in range(2):
        b.append_records("t", p, [(clock.now_ms() + i, f"k{i}".encode(), f"v{p}-{i}".encode(),
                                   (("h", b"x"),)) for i in range(10)])
    yield b
    b.close()


def drain(c, polls=50):
    out = []
    for _ in range(polls):
        for tp, recs in c.poll().items():
            out.extend(recs)
    return out




def test_manual_assign_reads_every_record_in_order_without_a_group(broker):
    c = Consumer(broker, auto_offset_reset="earliest")
    c.assign([T0, T1])
    recs = drain(c)
    for p in (0, 1):
        mine = [r for r in recs if r.partition == p]
        assert [r.offset for r in mine] == list(range(10))
        assert mine[3].value == f"v{p}-3".encode() and mine[3].key == b"k3"
        assert mine[0].headers == (("h", b"x"),) and mine[0].topic == "t"
    assert c.assignment() == {T0, T1}
    with pytest.raises(IllegalStateError):
        c.commit()
    with pytest.raises(IllegalStateError):
        c.subscribe(["t"])


def test_max_records_and_positions(broker):
    c = Consumer(broker, auto_offset_reset="earliest", max_poll_records=3)
    c.assign([T0])
    batch = c.poll()
    assert [r.offset for r in batch[T0]] == [0, 1, 2]
    assert c.position(T0) == 3
    assert sum(len(v) for v in c.poll(max_records=5).values()) == 5
    assert c.position(T0) == 8


def test_latest_reset_starts_at_the_end(broker, clock):
    c = Consumer(broker, auto_offset_reset="latest")
    c.assign([T0])
    assert c.poll() == {}
    assert c.position(T0) == 10
    broker.append_records("t", 0, [(clock.now_ms(), None, b"new", ())])
    assert [r.value for r in c.poll()[T0]] == [b"new"]


def test_reset_none_without_committed_offset_raises(broker, clock):
    c = Consumer(broker, "t", group_id="g", auto_offset_reset="none")
    with pytest.raises(NoOffsetForPartitionError, match="t-"):
        for _ in range(100):
            clock.advance(100)
            c.poll()


def test_reset_policy_applies_only_without_a_committed_offset(broker, clock):
    broker.offset_commit("g", "", -1, {T0: OffsetAndMetadata(7), T1: OffsetAndMetadata(2)})
    c = Consumer(broker, "t", group_id="g", auto_offset_reset="none", enable_auto_commit=False)
    recs = []
    for _ in range(60):
        clock.advance(100)
        for tp, rs in c.poll().items():
            recs.extend((tp.partition, r.offset) for r in rs)
    assert sorted(recs) == [(0, o) for o in range(7, 10)] + [(1, o) for o in range(2, 10)]
    assert c.committed(T0) == 7


def test_seek_seek_to_beginning_end(broker):
    c = Consumer(broker, auto_offset_reset="earliest")
    c.assign([T0, T1])
    c.seek(T0, 5)
    first = c.poll(max_records=1)
    assert first[T0][0].offset == 5
    c.seek_to_end(T0)
    assert c.position(T0) == 10
    c.seek_to_beginning()
    assert c.position(T0) == 0 and c.position(T1) == 0
    with pytest.raises(IllegalStateError):
        c.seek(TopicPartition("t", 9), 0)


def test_pause_and_resume(broker):
    c = Consumer(broker, auto_offset_reset="earliest")
    c.assign([T0, T1])
    c.pause(T0)
    assert c.paused() == {T0}
    assert {r.partition for r in drain(c)} == {1}
    c.resume(T0)
    assert {r.partition for r in drain(c)} == {0}


def test_end_offsets_and_offsets_for_times(broker, clock):
    c = Consumer(broker)
    assert c.end_offsets([T0, T1]) == {T0: 10, T1: 10}
    assert c.beginning_offsets([T0]) == {T0: 0}
    base = 1_700_000_000_000
    assert c.offsets_for_times({T0: base + 4}) == {T0: OffsetAndTimestamp(4, base + 4, -1)}
    assert c.offsets_for_times({T0: base + 100}) == {T0: None}
    assert c.partitions_for_topic("t") == {0, 1}
    assert c.partitions_for_topic("nope") is None


def test_manual_commit_and_explicit_offsets(broker, clock):
    c = Consumer(broker, "t", group_id="g", auto_offset_reset="earliest", enable_auto_commit=False)
    recs = []
    for _ in range(60):
        clock.advance(100)
        recs += [r for rs in c.poll().values() for r in rs]
    assert len(recs) == 20
    c.commit()
    assert broker.offset_fetch("g") == {T0: OffsetAndMetadata(10), T1: OffsetAndMetadata(10)}
    c.commit({T0: OffsetAndMetadata(3, "why")})
    assert broker.offset_fetch("g")[T0] == OffsetAndMetadata(3, "why")
    outcome = []
    c.commit_async({T1: 4}, callback=lambda offsets, exc: outcome.append((offsets, exc)))
    assert outcome == [({T1: 4}, None)] and c.committed(T1) == 4


def test_auto_commit_every_interval(broker, clock):
    c = Consumer(broker, "t", group_id="g", auto_offset_reset="earliest",
                 auto_commit_interval_ms=5_000)
    for _ in range(30):                                   # 3 s: joined and read, nothing committed
        clock.advance(100)
        c.poll()
    assert broker.offset_fetch("g") == {}
    for _ in range(30):
        clock.advance(100)
        c.poll()
    assert broker.offset_fetch("g") == {T0: OffsetAndMetadata(10), T1: OffsetAndMetadata(10)}


def test_close_leaves_the_group_but_a_static_member_does_not(broker, clock):
    for instance, members_after in ((None, 0), ("host-1", 1)):
        gid = f"g-{instance}"
        c = Consumer(broker, "t", group_id=gid, group_instance_id=instance)
        for _ in range(40):
            clock.advance(100)
            c.poll()
        assert len(broker.describe_group(gid)["members"]) == 1
        c.close()
        assert len(broker.describe_group(gid)["members"]) == members_after
        with pytest.raises(IllegalStateError):
            c.poll()


def test_eager_listener_revokes_everything_before_rejoining(broker, clock):
    events = []

    class L(ConsumerRebalanceListener):
        def on_partitions_revoked(self, tps):
            events.append(("revoked", tuple(tps)))

        def on_partitions_assigned(self, tps):
            events.append(("assigned", tuple(tps)))

    a = Consumer(broker, group_id="g", client_id="a")
    a.subscribe(["t"], listener=L())
    for _ in range(40):
        clock.advance(100)
        a.poll()
    b = Consumer(broker, "t", group_id="g", client_id="b")
    for _ in range(80):
        clock.advance(100)
        a.poll()
        b.poll()
    assert a.rebalance_protocol == "eager"
    assert events == [("assigned", (T0, T1)), ("revoked", (T0, T1)), ("assigned", (T0,))]
    assert b.assignment() == {T1}


def test_commit_inside_on_partitions_revoked_commits_positions(broker, clock):
    class CommitOnRevoke(ConsumerRebalanceListener):
        def on_partitions_revoked(self, tps):
            c.commit()

    c = Consumer(broker, group_id="g", client_id="a", auto_offset_reset="earliest",
                 enable_auto_commit=False)
    c.subscribe(["t"], listener=CommitOnRevoke())
    got = 0
    for _ in range(40):
        clock.advance(100)
        got += sum(len(v) for v in c.poll().values())
    assert got == 20 and broker.offset_fetch("g") == {}
    other = Consumer(broker, "t", group_id="g", client_id="b")
    for _ in range(50):                                   # the rebalance revokes a's partitions
        clock.advance(100)
        c.poll()
        other.poll()
    assert broker.offset_fetch("g") == {T0: OffsetAndMetadata(10), T1: OffsetAndMetadata(10)}


def test_commit_after_leaving_fails(broker, clock):
    c = Consumer(broker, "t", group_id="g", enable_auto_commit=False)
    for _ in range(40):
        clock.advance(100)
        c.poll()
    c.unsubscribe()
    c.subscribe(["t"])
    with pytest.raises(CommitFailedError):
        c.commit({T0: 1})


def test_iteration_stops_after_consumer_timeout(broker):
    c = Consumer(broker, auto_offset_reset="earliest", consumer_timeout_ms=500)
    c.assign([T0])
    assert [r.offset for r in c] == list(range(10))


def test_deserializers(broker):
    c = Consumer(broker, auto_offset_reset="earliest", key_deserializer=bytes.decode,
                 value_deserializer=lambda b: b.upper())
    c.assign([T0])
    r = c.poll(max_records=1)[T0][0]
    assert (r.key, r.value) == ("k0", b"V0-0")


@pytest.mark.parametrize("config, match", [
    ({"bogus": 1}, "bogus"),
    ({"auto_offset_reset": "smallest"}, "smallest"),
    ({"max_poll_records": 0}, "max_poll_records"),
    ({"heartbeat_interval_ms": 50_000}, "heartbeat_interval_ms"),
    ({"group_id": "g", "partition_assignment_strategy": ["nope"]}, "nope"),
])
def test_bad_configs_are_rejected(broker, config, match):
    with pytest.raises(InvalidConfigurationError, match=match):
        Consumer(broker, **config)


def test_kafka_defaults(broker):
    c = Consumer(broker, group_id="g")
    cfg = c.config
    assert (cfg["session_timeout_ms"], cfg["heartbeat_interval_ms"], cfg["max_poll_interval_ms"],
            cfg["max_poll_records"], cfg["auto_offset_reset"], cfg["enable_auto_commit"],
            cfg["auto_commit_interval_ms"]) == (45_000, 3_000, 300_000, 500, "latest", True, 5_000)
    assert cfg["partition_assignment_strategy"] == ["range", "cooperative-sticky"]
    assert c.rebalance_protocol == "eager"          # range supports only eager


def test_unknown_topic_in_manual_assignment_fails(broker):
    c = Consumer(broker, auto_offset_reset="earliest")
    c.assign([TopicPartition("nope", 0)])
    with pytest.raises(UnknownTopicOrPartitionError):
        c.poll()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 7), min_size=1, max_size=12), seeks=st.lists(st.integers(0, 9), max_size=3))
def test_poll_returns_each_record_once_in_order(broker, sizes, seeks):
    """Whatever max_records sequence is used, polling until nothing is left returns every
    record from each partition's start position exactly once, in offset order, with the
    key and value the fixture appended, and no poll returns more than its max_records."""
    c = Consumer(broker, auto_offset_reset="earliest")
    c.assign([T0, T1])
    for s in seeks:
        c.seek(T1, s)
    start1 = seeks[-1] if seeks else 0
    want = {0: list(range(10)), 1: list(range(start1, 10))}   # the fixture appends offsets 0-9 per partition
    got = {0: [], 1: []}
    for i in range(200):                   # 20 records need at most 20 non-empty polls
        n = sizes[i % len(sizes)]
        batch = c.poll(max_records=n)
        assert sum(len(v) for v in batch.values()) <= n
        for tp, recs in batch.items():
            got[tp.partition].extend(r.offset for r in recs)
            assert all((r.key, r.value) == (f"k{r.offset}".encode(), f"v{tp.partition}-{r.offset}".encode())
                       for r in recs)
        if got == want:
            break
    assert got == want
    assert c.poll() == {}                  # and nothing is returned twice


def test_commit_while_rebalancing_raises_rebalance_in_progress(broker, clock):
    """As Kafka's ConsumerCoordinator: only a Stable member commits; mid-rebalance the
    commit fails with the retriable RebalanceInProgressError, not CommitFailedError."""
    a = Consumer(broker, "t", group_id="g", client_id="a", enable_auto_commit=False,
                 partition_assignment_strategy=["cooperative-sticky"])
    for _ in range(40):
        clock.advance(100)
        a.poll()
    assert a.assignment() == {T0, T1}
    b = Consumer(broker, "t", group_id="g", client_id="b",
                 partition_assignment_strategy=["cooperative-sticky"])
    b.poll()                                              # b's join starts a rebalance
    clock.advance(3_000)
    a.poll()                                              # heartbeat: rebalance; a rejoins (pending)
    a.poll()
    assert a.member_state == MemberState.PREPARING_REBALANCE and T0 in a.assignment()   # still owns it
    with pytest.raises(RebalanceInProgressError):
        a.commit({T0: 1})
    for _ in range(40):
        clock.advance(100)
        a.poll()
        b.poll()
    a.commit({T0: 1})                                     # Stable again: the retry succeeds
    assert a.committed(T0) == 1


@pytest.mark.parametrize("reset, expected", [("earliest", 0), ("latest", 10)])
def test_out_of_range_position_is_reset_by_policy(broker, reset, expected):
    c = Consumer(broker, auto_offset_reset=reset)
    c.assign([T0])
    c.seek(T0, 500)                                       # beyond the log end
    recs = c.poll().get(T0, [])
    assert c.position(T0) == 10
    assert [r.offset for r in recs] == list(range(expected, 10))


def test_out_of_range_with_reset_none_raises(broker):
    c = Consumer(broker, auto_offset_reset="none")
    c.assign([T0])
    c.seek(T0, 500)
    with pytest.raises(OffsetOutOfRangeError, match="500"):
        c.poll()
