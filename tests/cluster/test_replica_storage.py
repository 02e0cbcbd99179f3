"""Storage for replication: the leader-epoch checkpoint, follower appends, truncation."""

from __future__ import annotations

import pytest

from kafkasim.config import LogConfig
from kafkasim.errors import IllegalStateError, KafkaStorageError
from kafkasim.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCache
from kafkasim.storage.log import Log

from tests.cluster.conftest import records_of


def test_epoch_cache_answers_offsets_for_leader_epoch_and_survives_reopen(tmp_path):
    c = LeaderEpochCache(str(tmp_path))
    c.assign(0, 0)
    c.assign(0, 5)          # same epoch again: no new entry
    c.assign(2, 10)
    c.assign(5, 30)
    assert c.entries == [(0, 0), (2, 10), (5, 30)]
    assert c.end_offset_for(5, 42) == (5, 42)          # the latest epoch ends at the log end
    assert c.end_offset_for(2, 42) == (2, 30)
    assert c.end_offset_for(3, 42) == (2, 30)          # unknown epoch: the largest below it
    assert c.end_offset_for(6, 42) == (-1, -1)         # newer than anything known
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n3\n0 0\n2 10\n5 30\n"
    again = LeaderEpochCache(str(tmp_path))
    assert again.entries == c.entries
    again.truncate_from_end(10)
    assert LeaderEpochCache(str(tmp_path)).entries == [(0, 0)]


def test_a_malformed_epoch_checkpoint_names_the_file(tmp_path):
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n2\n3 10\n1 20\n")
    with pytest.raises(KafkaStorageError, match="leader-epoch-checkpoint.*not increasing"):
        LeaderEpochCache(str(tmp_path))


def _fill(log: Log, n: int, per_batch: int = 3) -> None:
    for i in range(0, n, per_batch):
        log.append([(1000 + j, b"k%d" % j, b"v" * 50, ()) for j in range(i, min(n, i + per_batch))])


@pytest.mark.parametrize("segment_bytes", [1 << 20, 400])
def test_truncate_to_drops_whole_batches_from_the_offset_and_appends_go_on(tmp_path, clock, segment_bytes):
    cfg = LogConfig.from_overrides({"segment.bytes": segment_bytes})
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    _fill(log, 30)
    assert log.truncate_to(12) == 12
    assert [o for o, _ in records_of(log)] == list(range(12))
    assert log.truncate_to(10) == 9                    # 10 is inside batch 9..11: the batch goes whole
    assert log.append([(5, b"x", b"y", ())]).base_offset == 9
    log.close()
    reopened = Log(str(tmp_path / "t-0"), cfg, clock)
    assert records_of(reopened)[-1] == (9, b"x") and reopened.log_end_offset == 10
    reopened.close()


def test_truncate_below_the_log_start_restarts_the_log_there(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), LogConfig(), clock)
    _fill(log, 6)
    assert log.truncate_to(0) == 0
    assert log.log_end_offset == 0 and records_of(log) == []
    log.close()


def test_a_follower_copies_the_leaders_batches_at_their_offsets(tmp_path, clock):
    cfg = LogConfig.from_overrides({"message.timestamp.type": "LogAppendTime"})
    leader = Log(str(tmp_path / "a" / "t-0"), cfg, clock)
    follower = Log(str(tmp_path / "b" / "t-0"), cfg, clock)
    _fill(leader, 9)
    clock.advance(5000)                         # a re-stamp would show as a new timestamp
    for _, raw in leader.read_batches(0):
        follower.append_replica_batch(raw)
    assert [(r.offset, r.key, r.timestamp) for r in follower.read(0)] == \
        [(r.offset, r.key, r.timestamp) for r in leader.read(0)]
    (_, raw), = leader.read_batches(3)[:1]
    with pytest.raises(IllegalStateError, match="not the log end offset 9"):
        follower.append_replica_batch(raw)       # offset 3 again: never written twice
    leader.close()
    follower.close()


def test_restart_at_empties_the_log_and_starts_it_at_the_offset(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), LogConfig(), clock)
    _fill(log, 6)
    assert log.restart_at(100) == 100
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.append([(5, b"x", b"y", ())]).base_offset == 100
    log.close()


def test_a_follower_behind_the_leaders_log_start_restarts_there(cluster):
    cluster.create_topic("t", 1, 3, {"segment.bytes": "300", "retention.bytes": "300"})
    leader = cluster.leader_for("t", 0)
    f = (leader + 1) % 3
    cluster.stop_broker(f)
    for i in range(30):
        cluster.append_records("t", 0, [(1000, b"k%d" % i, b"v" * 40, ())])
    cluster.run_log_maintenance()
    start = cluster.list_offsets("t", 0, -2)[0]
    assert start > 0
    cluster.start_broker(f)
    r = cluster._partitions[("t", 0)].hosted[f].log
    assert (r.log_start_offset, r.log_end_offset) == (start, 30)
    assert f in cluster.describe_cluster()["partitions"][0]["isr"]
