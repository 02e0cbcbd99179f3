"""Broker lifecycle: calls after close, and the periodic maintenance (LogCleaner, flush.ms)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import (
    BrokerNotAvailableError, CoordinatorNotAvailableError, IllegalStateError,
    InvalidConfigurationError,
)
from kafkasim.records.record_batch import encode_batch

T0 = 1_700_000_000_000


def batch(n, ts):
    return encode_batch(0, [(i, ts, b"k%d" % i, b"v" * 20, ()) for i in range(n)])


def flushed_up_to(log) -> int:
    """The next offset recorded in the partition's recovery point (storage/FORMAT.md §4), or -1."""
    path = os.path.join(log.directory, "recovery-point")
    if not os.path.exists(path):
        return -1
    with open(path) as f:
        return int(f.read().split()[0])


def cleaner_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kafkasim-log-cleaner" and t.is_alive()]


# ------------------------------------------------------------------ calls after close()

CLOSED_CALLS = {
    "describe_topic": lambda b: b.describe_topic("t"),
    "list_topics": lambda b: b.list_topics(),
    "partition_count": lambda b: b.partition_count("t"),
    "topic_config": lambda b: b.topic_config("t"),
    "create_topic": lambda b: b.create_topic("u"),
    "delete_topic": lambda b: b.delete_topic("t"),
    "create_partitions": lambda b: b.create_partitions("t", 3),
    "alter_topic_configs": lambda b: b.alter_topic_configs("t", {"retention.ms": "1"}),
    "produce": lambda b: b.produce("t", 0, batch(1, T0)),
    "fetch": lambda b: b.fetch("t", 0, 0),
    "fetch_columns": lambda b: b.fetch_columns("t", 0, 0),
    "list_offsets": lambda b: b.list_offsets("t", 0, -1),
    "log": lambda b: b.log("t", 0),
    "partitions": lambda b: b.partitions(),
    "init_producer_id": lambda b: b.init_producer_id(),
    "flush": lambda b: b.flush(),
    "run_log_maintenance": lambda b: b.run_log_maintenance(),
    "tick": lambda b: b.tick(),
}


@pytest.mark.parametrize("call", sorted(CLOSED_CALLS))
def test_every_call_on_a_closed_broker_raises_broker_not_available(tmp_path, call):
    b = Broker(tmp_path / "data", clock=MockClock(T0))
    b.create_topic("t", partitions=2)
    b.close()
    with pytest.raises(BrokerNotAvailableError, match="is closed") as e:
        CLOSED_CALLS[call](b)
    assert str(tmp_path / "data") in str(e.value)          # names the data dir
    assert isinstance(e.value, IllegalStateError)           # what create_topic raised before
    assert e.value.errno == 8                               # Kafka's BROKER_NOT_AVAILABLE


def test_group_calls_on_a_closed_broker_still_say_coordinator_not_available(tmp_path):
    b = Broker(tmp_path / "data", clock=MockClock(T0))
    b.close()
    with pytest.raises(CoordinatorNotAvailableError):
        b.list_groups()
    b.close()                                               # close stays idempotent


# ------------------------------------------------------------------ broker configs

SHARE_GROUP_DEFAULTS = {
    # share groups (KIP-932): Kafka's ShareGroupConfig / GroupCoordinatorConfig defaults
    "group.share.record.lock.duration.ms": 30_000, "group.share.min.record.lock.duration.ms": 15_000,
    "group.share.max.record.lock.duration.ms": 60_000, "group.share.delivery.count.limit": 5,
    "group.share.partition.max.record.locks": 2_000, "group.share.max.share.sessions": 2_000,
    "share.coordinator.state.topic.num.partitions": 50, "group.share.max.size": 200,
    "group.share.session.timeout.ms": 45_000, "group.share.min.session.timeout.ms": 45_000,
    "group.share.max.session.timeout.ms": 60_000, "group.share.heartbeat.interval.ms": 5_000,
    "group.share.min.heartbeat.interval.ms": 5_000, "group.share.max.heartbeat.interval.ms": 15_000,
    "group.share.assignors": "simple", "share.auto.offset.reset": "latest", "share.record.lock.duration.ms": None,
    "share.isolation.level": "read_uncommitted",
}


def test_broker_configs_use_kafka_names_defaults_and_validation(tmp_path):
    with Broker(tmp_path / "a", clock=MockClock(T0)) as b:
        assert b.broker_config == {"log.cleaner.enable": True, "log.retention.check.interval.ms": 300_000,
                                   "replica.lag.time.max.ms": 30_000, "auto.leader.rebalance.enable": True,
                                   "leader.imbalance.check.interval.seconds": 300,
                                   "leader.imbalance.per.broker.percentage": 10,
                                   "auto.create.topics.enable": True, "num.partitions": 1,
                                   "default.replication.factor": 1,
                                   "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10_000,
                                   "transaction.max.timeout.ms": 900_000,
                                   "transaction.remove.expired.transaction.cleanup.interval.ms": 3_600_000,
                                   "transactional.id.expiration.ms": 604_800_000,
                                   # Kafka 4's group coordinator: both protocols, KIP-848's defaults
                                   "group.coordinator.rebalance.protocols": "classic,consumer",
                                   "group.consumer.session.timeout.ms": 45_000,
                                   "group.consumer.min.session.timeout.ms": 45_000,
                                   "group.consumer.max.session.timeout.ms": 60_000,
                                   "group.consumer.heartbeat.interval.ms": 5_000,
                                   "group.consumer.min.heartbeat.interval.ms": 5_000,
                                   "group.consumer.max.heartbeat.interval.ms": 15_000,
                                   "group.consumer.max.size": 2**31 - 1,
                                   "group.consumer.assignors": "uniform,range",
                                   "group.consumer.migration.policy": "bidirectional",
                                   **SHARE_GROUP_DEFAULTS}
    with pytest.raises(InvalidConfigurationError,
                       match=r"Unrecognized broker config 'log\.cleaner\.enabled' "
                             r"\(did you mean 'log\.cleaner\.enable'\?\)"):
        Broker(tmp_path / "b", broker_configs={"log.cleaner.enabled": True})
    with pytest.raises(InvalidConfigurationError,
                       match="Invalid value 0 for configuration log.retention.check.interval.ms: "
                             "Value must be at least 1"):
        Broker(tmp_path / "c", broker_configs={"log.retention.check.interval.ms": 0})
    assert os.listdir(tmp_path) == ["a"]                    # validated before touching the disk


# ------------------------------------------------------------------ maintenance under a MockClock

def _retention_topic(b: Broker, clock: MockClock) -> None:
    b.create_topic("events", configs={"segment.bytes": "200", "retention.ms": "1000"})
    for _ in range(5):                                      # one batch per segment
        b.produce("events", 0, batch(3, clock.now_ms()))


def test_mock_clock_maintenance_runs_only_when_the_simulation_ticks(tmp_path):
    clock = MockClock(T0)
    with Broker(tmp_path / "data", clock=clock,
                broker_configs={"log.retention.check.interval.ms": 10_000}) as b:
        assert not cleaner_threads()                        # nothing acts on its own
        _retention_topic(b, clock)
        segments = b.describe_topic("events")["partitions"][0]["segments"]
        assert segments == 5
        clock.advance(5_000)                                # retention breached, check not due
        assert b.tick() is None
        time.sleep(0.05)
        assert b.describe_topic("events")["partitions"][0]["log_start_offset"] == 0
        clock.advance(5_000)                                # 10 s since open: one pass is due
        done = b.tick()
        assert done["segments_deleted"] == segments - 1     # every closed segment aged out
        assert b.describe_topic("events")["partitions"][0]["log_start_offset"] == 12
        assert b.tick() is None                             # the next pass is 10 s away
        assert b.log_cleaner.passes == 1


def test_flush_ms_is_enforced_on_an_idle_partition_by_the_maintenance_pass(tmp_path):
    clock = MockClock(T0)
    with Broker(tmp_path / "data", clock=clock,
                broker_configs={"log.retention.check.interval.ms": 1_000}) as b:
        b.create_topic("idle", configs={"flush.ms": "500"})
        log = b.log("idle", 0)
        before = flushed_up_to(log)
        b.produce("idle", 0, batch(2, clock.now_ms()))      # then nothing more arrives
        clock.advance(1_000)
        assert b.tick()["flushes"] == 1                     # older than flush.ms: fsynced
        assert flushed_up_to(log) == 2 != before
        clock.advance(1_000)
        assert b.tick()["flushes"] == 0                     # nothing unflushed is left


def test_log_cleaner_enable_false_turns_maintenance_off(tmp_path):
    clock = MockClock(T0)
    with Broker(tmp_path / "data", clock=clock, broker_configs={"log.cleaner.enable": "false"}) as b:
        _retention_topic(b, clock)
        clock.advance(600_000)
        assert b.log_cleaner is None and b.tick() is None
        assert b.describe_topic("events")["partitions"][0]["log_start_offset"] == 0
        assert b.run_log_maintenance()["segments_deleted"] == 4   # the manual pass still works


# ------------------------------------------------------------------ maintenance on a real clock

def test_real_clock_cleaner_thread_flushes_idle_data_and_stops_at_close(tmp_path):
    b = Broker(tmp_path / "data", broker_configs={"log.retention.check.interval.ms": 20})
    try:
        assert b.log_cleaner.running
        b.create_topic("idle", configs={"flush.ms": "30"})
        log = b.log("idle", 0)
        b.produce("idle", 0, batch(3, int(time.time() * 1000)))
        deadline = time.monotonic() + 10
        while flushed_up_to(log) != 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert flushed_up_to(log) == 3                      # no append came: the thread flushed
        assert b.log_cleaner.passes > 0 and not b.log_cleaner.errors
    finally:
        b.close()
    assert not b.log_cleaner.running                        # shut down by close()
