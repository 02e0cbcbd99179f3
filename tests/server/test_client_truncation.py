"""Real consumers find a truncated log after an unclean election (KIP-320), as against Kafka.

A partition with replicas [A, B] and ``unclean.leader.election.enable``: B stops, A takes
five more records (offsets 5-9, epoch 0) that only it holds, every consumer reads all ten;
then A stops and B comes back and is elected unclean (epoch 2), without offsets 5-9, and
takes three new records (5-7). A consumer positioned at 10 (epoch 0) sees the new leader
epoch in Metadata and asks the new leader with OffsetForLeaderEpoch where epoch 0 ends: 5,
below its position, so the log it read was truncated there. What each client then does
(read in their sources):

- kafka-python 3.0.12 (``Fetcher._handle_offset_for_leader_epoch_response``): with a reset
  policy it seeks to the end offset (5) and reads the new records; with
  ``auto_offset_reset='none'`` ``poll()`` raises ``LogTruncationError`` naming the offset.
- confluent-kafka 2.16.1 / librdkafka (``rd_kafka_toppar_handle_OffsetForLeaderEpoch``): with
  ``auto.offset.reset`` set it seeks to the end offset (5); with ``error`` the consumer gets
  an ``_AUTO_OFFSET_RESET`` error event "Partition log truncation detected at offset 10
  (leader epoch 0): broker end offset is 5 (offset leader epoch 0). Reset to INVALID."

Without validation a consumer at 10 would get OFFSET_OUT_OF_RANGE from the new leader
(its log ends at 8) and reset to the beginning, reading offsets 0-4 again.
"""

from __future__ import annotations

import time

import pytest

from kafkasim.records import record_batch as rb
from tests.server import raw
from tests.server.test_cluster_serve import BROKERS, _bootstrap, _create, _listeners

pytestmark = pytest.mark.slow

TOPIC = "u"


def _produce(sock, values: list[bytes]) -> None:
    batch = rb.encode_batch(0, [(i, 1_700_000_000_000 + i, b"k", v, ()) for i, v in enumerate(values)])
    answer = raw.call(sock, 0, 9, {"acks": -1, "timeout": 10_000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
    assert answer.responses[0].partition_responses[0].error_code == 0


class _Confluent:
    def __init__(self, bootstrap: str, reset: str) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"unused-{reset}",
                           "enable.auto.commit": False, "auto.offset.reset": reset,
                           "topic.metadata.refresh.interval.ms": 500, "fetch.wait.max.ms": 100})
        self.c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])

    def poll(self, want: int, timeout: float = 60):
        """``(records [(offset, value)], errors [KafkaError])`` until ``want`` records or an error."""
        got, errors = [], []
        deadline = time.monotonic() + timeout
        while len(got) < want and not errors and time.monotonic() < deadline:
            for m in self.c.consume(10, 0.2):
                if m.error():
                    errors.append(m.error())
                else:
                    got.append((m.offset(), m.value()))
        return got, errors

    def close(self) -> None:
        self.c.close()


class _KafkaPython:
    def __init__(self, bootstrap: str, reset: str) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False,
                               auto_offset_reset=reset, metadata_max_age_ms=500, fetch_max_wait_ms=100,
                               request_timeout_ms=10_000, retry_backoff_ms=100)
        tp = TopicPartition(TOPIC, 0)
        self.c.assign([tp])
        self.c.seek_to_beginning(tp)

    def poll(self, want: int, timeout: float = 60):
        got, errors = [], []
        deadline = time.monotonic() + timeout
        while len(got) < want and not errors and time.monotonic() < deadline:
            try:
                for records in self.c.poll(timeout_ms=200).values():
                    got.extend((r.offset, r.value) for r in records)
            except Exception as exc:            # LogTruncationError with auto_offset_reset='none'
                errors.append(exc)
        return got, errors

    def close(self) -> None:
        self.c.close()


def test_consumers_validate_positions_and_rewind_to_where_an_unclean_election_truncated(serve_process, tmp_path):
    from confluent_kafka import KafkaError
    from kafka.errors import LogTruncationError

    from kafkasim.server.control import ServedCluster

    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    _create(served, TOPIC, 1, 2, {"unclean.leader.election.enable": "true"})
    control = ServedCluster(served.data_dir)
    listeners = _listeners(served)
    (part,) = [p for p in control.describe_cluster()["partitions"] if p["topic"] == TOPIC]
    a = part["leader"]
    b = next(x for x in part["replicas"] if x != a)

    with raw.connect(*listeners[a]) as sock:
        _produce(sock, [b"before-%d" % i for i in range(5)])     # on A and B: offsets 0-4
        control.stop_broker(b)
        _produce(sock, [b"diverged-%d" % i for i in range(5)])   # on A only: offsets 5-9, epoch 0

    bootstrap = _bootstrap(served)
    consumers = {"confluent earliest": _Confluent(bootstrap, "earliest"),
                 "confluent error": _Confluent(bootstrap, "error"),
                 "kafka-python earliest": _KafkaPython(bootstrap, "earliest"),
                 "kafka-python none": _KafkaPython(bootstrap, "none")}
    try:
        for name, c in consumers.items():
            got, errors = c.poll(10)
            assert not errors and [o for o, _ in got] == list(range(10)), (name, got, errors)

        control.stop_broker(a)                                   # no live ISR member: offline
        control.start_broker(b)                                  # B elected unclean, epoch 2, without 5-9
        (part,) = [p for p in control.describe_cluster()["partitions"] if p["topic"] == TOPIC]
        assert part["leader"] == b and part["leader_epoch"] == 2
        with raw.connect(*listeners[b]) as sock:
            _produce(sock, [b"after-%d" % i for i in range(3)])  # offsets 5-7, epoch 2

        after = [(5, b"after-0"), (6, b"after-1"), (7, b"after-2")]
        for name in ("confluent earliest", "kafka-python earliest"):
            got, errors = consumers[name].poll(3)
            assert not errors and got == after, (name, got, errors)   # rewound to epoch 0's end, 5

        got, errors = consumers["confluent error"].poll(1)
        assert not got and [e.code() for e in errors] == [KafkaError._AUTO_OFFSET_RESET], errors
        assert errors[0].str().startswith("Partition log truncation detected at offset 10 (leader epoch 0): "
                                          "broker end offset is 5 (offset leader epoch 0). Reset to INVALID.")

        got, errors = consumers["kafka-python none"].poll(1)
        assert not got and len(errors) == 1 and isinstance(errors[0], LogTruncationError), errors
        (divergent,) = errors[0].divergent_offsets.values()
        assert divergent.offset == 5 and divergent.leader_epoch == 0
    finally:
        for c in consumers.values():
            c.close()
