"""``kafkasim transactions`` against ``kafkasim serve``, and the two APIs it needs on the wire:
DescribeProducers (61) and WriteTxnMarkers (27).

A confluent-kafka transactional producer keeps a transaction open; producer 999's
transaction on the same partition hangs (its batch is in the log, its coordinator is gone).
Over the wire: describe-producers lists both, find-hanging finds only 999's, abort writes its
ABORT marker, and a read_committed consumer then reads the committed records past it.
"""

from __future__ import annotations

import json
import time

import pytest

from kafkasim.broker import Broker
from kafkasim.cli import main
from kafkasim.records import record_batch as rb
from tests.server import raw

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000
HANGING_PID = 999


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def served(tmp_path, serve_process):
    data = tmp_path / "data"
    with Broker(data) as b:
        b.create_topic("t", 1)
        hanging = rb.encode_batch(0, [(i, T0 + i, None, b"h%d" % i, ()) for i in range(3)], producer_id=HANGING_PID,
                                  producer_epoch=3, base_sequence=0, attributes=rb.ATTR_TRANSACTIONAL)
        b.log("t", 0).append_batch(hanging, in_transaction=True)       # offsets 0-2, no marker will come
    return serve_process(data)


def _read_committed(bootstrap: str, expect: int, timeout: float = 15) -> list:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{time.monotonic_ns()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition("t", 0, 0)])
    values, deadline, extra = [], time.monotonic() + timeout, None
    while time.monotonic() < deadline and (extra is None or time.monotonic() < extra):
        m = c.poll(0.2)
        if m is not None and not m.error():
            values.append(m.value())
        if len(values) >= expect and extra is None:
            extra = time.monotonic() + 1.0
    c.close()
    return values


def test_transactions_cli_finds_and_aborts_a_hanging_transaction_over_the_wire(served, capsys):
    from confluent_kafka import Producer
    boot = ["--bootstrap-server", served.bootstrap]
    p = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "live-tx", "linger.ms": 5})
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(2):
        p.produce("t", value=b"c%d" % i, partition=0)
    p.flush(15)                                                  # offsets 3-4, transaction open

    rc, out, _ = run(capsys, "transactions", "list", *boot, "--json")
    assert rc == 0 and [(r["transactional_id"], r["transaction_state"]) for r in json.loads(out)] == \
        [("live-tx", "Ongoing")]
    rc, out, _ = run(capsys, "transactions", "describe-producers", "--topic", "t", "--partition", "0", *boot,
                     "--json")
    rows = {r["producer_id"]: r for r in json.loads(out)}
    assert rc == 0 and rows[HANGING_PID]["current_transaction_start_offset"] == 0
    live = next(pid for pid in rows if pid != HANGING_PID)
    assert rows[live]["current_transaction_start_offset"] == 3 and rows[live]["last_sequence"] == 1
    rc, out, _ = run(capsys, "transactions", "find-hanging", "--topic", "t", *boot, "--json")
    assert rc == 0 and [(r["producer_id"], r["start_offset"]) for r in json.loads(out)] == [(HANGING_PID, 0)]

    rc, _, err = run(capsys, "transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "0",
                     *boot)
    assert (rc, err) == (0, "")
    p.commit_transaction(15)
    assert _read_committed(served.bootstrap, 2) == [b"c0", b"c1"]      # 999's records aborted, skipped

    rc, out, err = run(capsys, "transactions", "describe", "--transactional-id", "nosuch", *boot)
    assert rc == 1 and err.startswith("Failed to describe transaction state of transactional-id `nosuch`: ")


def test_describe_producers_and_write_txn_markers_answer_as_kafka(served):
    with raw.connect(served.host, served.port) as sock:
        r = raw.call(sock, 61, 0, {"topics": [{"name": "t", "partition_indexes": [0, 5]}]})
        ok, missing = r.topics[0].partitions
        assert int(ok.error_code) == 0
        assert [(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp, s.coordinator_epoch,
                 s.current_txn_start_offset) for s in ok.active_producers] == [(HANGING_PID, 3, 2, T0 + 2, -1, 0)]
        assert int(missing.error_code) == 3 and missing.active_producers == ()

        def marker(epoch, coordinator_epoch, partitions=(0,)):
            r = raw.call(sock, 27, 1, {"markers": [{
                "producer_id": HANGING_PID, "producer_epoch": epoch, "transaction_result": False,
                "coordinator_epoch": coordinator_epoch, "topics": [{"name": "t", "partition_indexes": list(partitions)}]}]})
            return [int(x.error_code) for x in r.markers[0].topics[0].partitions]

        assert marker(2, 0) == [47]                  # INVALID_PRODUCER_EPOCH: older than the producer's
        assert marker(3, 5, (0, 9)) == [0, 3]        # written; partition 9: UNKNOWN_TOPIC_OR_PARTITION
        assert marker(3, 4) == [52]                  # TRANSACTION_COORDINATOR_FENCED: epoch 4 < 5
        r = raw.call(sock, 61, 0, {"topics": [{"name": "t", "partition_indexes": [0]}]})
        (s,) = r.topics[0].partitions[0].active_producers
        assert (s.coordinator_epoch, s.current_txn_start_offset) == (5, -1)
