"""Leader epochs on the wire, on a served 3-broker cluster after two leader changes: what
OffsetForLeaderEpoch (KIP-320) answers, the current_leader_epoch checks (FENCED_LEADER_EPOCH,
UNKNOWN_LEADER_EPOCH), and the epochs Metadata, ListOffsets and fetched batches carry.

The partition's history (epoch: offsets): 0: 0-1 (first leader), 1: 2-4 (after it stopped),
2: 5 (after the second leader stopped). Kafka's LeaderEpochFileCache answers an epoch with the
start offset of the next higher epoch, the log end offset for the current epoch, and
UNDEFINED (-1, -1) for an epoch newer than any it knows.
"""

from __future__ import annotations

import pytest

from kafkasim.errors import (
    FencedLeaderEpochError, NotLeaderOrFollowerError, UnknownLeaderEpochError, UnknownTopicOrPartitionError,
)
from kafkasim.records import record_batch as rb
from tests.server import raw
from tests.server.test_cluster_serve import BROKERS, _create, _listeners

TOPIC = "e"
T0 = 1_700_000_000_000


def _produce(sock, timestamps: list[int]) -> None:
    batch = rb.encode_batch(0, [(i, ts, b"k", b"v%d" % ts, ()) for i, ts in enumerate(timestamps)])
    answer = raw.call(sock, 0, 9, {"acks": -1, "timeout": 10_000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
    assert answer.responses[0].partition_responses[0].error_code == 0


def _end_offsets(sock, *asks: tuple[int, int], topic: str = TOPIC) -> list[tuple[int, int, int]]:
    """OffsetForLeaderEpoch v4 for ``(leader_epoch, current_leader_epoch)`` pairs, one
    request per pair: ``[(error_code, leader_epoch, end_offset)]``."""
    out = []
    for i, (epoch, current) in enumerate(asks):
        answer = raw.call(sock, 23, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]}, correlation_id=10 + i)
        (p,) = answer.topics[0].partitions
        out.append((int(p.error_code), p.leader_epoch, p.end_offset))
    return out


def _fetch(sock, offset: int, current_epoch: int):
    answer = raw.call(sock, 1, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": TOPIC, "partitions": [{
            "partition": 0, "current_leader_epoch": current_epoch, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    return answer.responses[0].partitions[0]


def _list_offset(sock, timestamp: int, current_epoch: int = -1):
    answer = raw.call(sock, 2, 6, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
        {"partition_index": 0, "current_leader_epoch": current_epoch, "timestamp": timestamp}]}]})
    p = answer.topics[0].partitions[0]
    return int(p.error_code), p.offset, p.leader_epoch


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """A served cluster whose partition ``e-0`` went through epochs 0, 1 and 2."""
    from kafkasim.server.control import ServedCluster
    from tests.server.conftest import start_server

    served = start_server(tmp_path_factory.mktemp("epochs") / "lab", "--brokers", BROKERS)
    try:
        _create(served, TOPIC, 1, 3)
        control = ServedCluster(served.data_dir)
        listeners = _listeners(served)

        def leader() -> int:
            (part,) = [p for p in control.describe_cluster()["partitions"] if p["topic"] == TOPIC]
            return part["leader"]

        first = leader()
        with raw.connect(*listeners[first]) as sock:
            _produce(sock, [T0, T0 + 1])                          # epoch 0: offsets 0-1
        control.stop_broker(first)
        second = leader()
        with raw.connect(*listeners[second]) as sock:
            _produce(sock, [T0 + 2])                              # epoch 1: offsets 2-4
            _produce(sock, [T0 + 3, T0 + 4])
        control.start_broker(first)
        control.stop_broker(second)
        third = leader()
        with raw.connect(*listeners[third]) as sock:
            _produce(sock, [T0 + 5])                              # epoch 2: offset 5
        followers = [b for b in listeners if b not in (third, second)]
        yield {"served": served, "control": control, "listeners": listeners, "leader": third,
               "follower": followers[0]}
    finally:
        served.stop()


def test_offset_for_leader_epoch_answers_the_end_of_each_epoch(history):
    with raw.connect(*history["listeners"][history["leader"]]) as sock:
        assert _end_offsets(sock, (0, -1), (1, -1), (2, -1), (3, -1)) == [
            (0, 0, 2),      # epoch 0 ends where epoch 1 starts
            (0, 1, 5),      # epoch 1 ends where epoch 2 starts
            (0, 2, 6),      # the current epoch: the log end offset
            (0, -1, -1),    # newer than any known epoch: UNDEFINED, no error
        ]
        assert _end_offsets(sock, (1, 2)) == [(0, 1, 5)]         # the client's current epoch matches
        assert _end_offsets(sock, (1, 1)) == [(FencedLeaderEpochError.errno, -1, -1)]
        assert _end_offsets(sock, (1, 3)) == [(UnknownLeaderEpochError.errno, -1, -1)]
        assert _end_offsets(sock, (0, -1), topic="nosuch") == [(UnknownTopicOrPartitionError.errno, -1, -1)]


def test_offset_for_leader_epoch_is_answered_by_the_leader_only(history):
    with raw.connect(*history["listeners"][history["follower"]]) as sock:
        assert _end_offsets(sock, (1, -1), (1, 2)) == [(NotLeaderOrFollowerError.errno, -1, -1)] * 2
        # Kafka checks the client's epoch before leadership: a stale one is fenced first
        assert _end_offsets(sock, (1, 1)) == [(FencedLeaderEpochError.errno, -1, -1)]


def test_fetched_batches_carry_the_epoch_the_leader_stamped(history):
    with raw.connect(*history["listeners"][history["leader"]]) as sock:
        p = _fetch(sock, 0, 2)
        assert p.error_code == 0 and p.high_watermark == 6
        assert [(h.base_offset, h.partition_leader_epoch, len(recs)) for h, recs in raw.batches(p.records)] == [
            (0, 0, 2), (2, 1, 1), (3, 1, 2), (5, 2, 1)]            # the producer's batches, as stored
        assert _fetch(sock, 0, 1).error_code == FencedLeaderEpochError.errno
        assert _fetch(sock, 0, 3).error_code == UnknownLeaderEpochError.errno
        assert _fetch(sock, 0, -1).error_code == 0               # -1: no check


def test_metadata_and_list_offsets_report_leader_epochs(history):
    with raw.connect(*history["listeners"][history["leader"]]) as sock:
        md = raw.call(sock, 3, 12, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False})
        assert md.topics[0].partitions[0].leader_epoch == 2
        assert _list_offset(sock, -1) == (0, 6, 2)                # latest: the current epoch
        assert _list_offset(sock, -2) == (0, 0, 0)                # earliest: the first epoch's
        assert _list_offset(sock, T0 + 3) == (0, 3, 1)            # by time: the batch's epoch
        assert _list_offset(sock, T0 + 99) == (0, -1, -1)
        assert _list_offset(sock, -1, 1)[0] == FencedLeaderEpochError.errno
        assert _list_offset(sock, -1, 3)[0] == UnknownLeaderEpochError.errno
