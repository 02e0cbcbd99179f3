"""``kafkasim dump-log`` and transactions, as kafka-dump-log.sh prints them: a transaction's
batches say ``isTransactional: true``, its marker ``isControl: true`` with one record line
``endTxnMarker: COMMIT|ABORT coordinatorEpoch: N`` (no key or payload); and
``--transaction-log-decoder`` decodes ``__transaction_state`` records as Kafka's
``TransactionLog.formatRecordKeyAndValue``."""

from __future__ import annotations

import json
import os
import re

import pytest

from kafkasim.broker import Broker
from kafkasim.cli import main
from kafkasim.clock import MockClock
from kafkasim.protocol.txn_log import TRANSACTION_STATE_TOPIC, partition_for_transactional_id
from kafkasim.records import record_batch as rb

T0 = 1_700_000_000_000


def segment(data, topic, partition):
    d = os.path.join(data, f"{topic}-{partition}")
    return os.path.join(d, sorted(f for f in os.listdir(d) if f.endswith(".log"))[0])


def batch(pid, epoch, values):
    return rb.encode_batch(0, [(i, T0 + i, b"k", v, ()) for i, v in enumerate(values)], producer_id=pid,
                           producer_epoch=epoch, base_sequence=0, attributes=rb.ATTR_TRANSACTIONAL)


@pytest.fixture
def data(tmp_path):
    """pay-tx: a committed transaction on orders-0 and orders-1 (timeout 30 s), then an aborted
    one on orders-0, all at clock T0."""
    path = str(tmp_path / "data")
    with Broker(path, clock=MockClock(T0)) as b:
        b.create_topic("orders", 2)
        pid, epoch = b.init_transactional_producer_id("pay-tx", 30_000)
        b.add_partitions_to_txn("pay-tx", pid, epoch, [("orders", 1), ("orders", 0)])
        b.produce("orders", 0, batch(pid, epoch, [b"a", b"b"]))
        b.end_txn("pay-tx", pid, epoch, commit=True)
        pid, epoch = b.init_transactional_producer_id("pay-tx", 30_000)
        b.add_partitions_to_txn("pay-tx", pid, epoch, [("orders", 0)])
        b.produce("orders", 0, batch(pid, epoch, [b"c"]))
        b.end_txn("pay-tx", pid, epoch, commit=False)
    return path


def test_markers_are_printed_as_kafka_dump_log_prints_them(data, capsys):
    """A guard: dump-log printed markers this way before the transactions CLI; these are the
    lines Kafka's DumpLogSegments prints for a transaction's batches and markers."""
    assert main(["dump-log", segment(data, "orders", 0), "--print-data-log"]) == 0
    lines = capsys.readouterr().out.splitlines()
    batches = [line for line in lines if line.startswith("baseOffset:")]
    flags = [re.search(r"isTransactional: (\w+) isControl: (\w+)", line).groups() for line in batches]
    assert flags == [("true", "false"), ("true", "true"), ("true", "false"), ("true", "true")]
    markers = [line for line in lines if "endTxnMarker" in line]
    assert [re.sub(r"CreateTime: \d+ ", "", m) for m in markers] == [
        "| offset: 2 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0",
        "| offset: 4 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 0"]
    assert "| offset: 0 CreateTime: 1700000000000 keySize: 1 valueSize: 1 sequence: 0 headerKeys: [] key: k payload: a" \
        in lines
    # orders-1 took part in the committed transaction without data: its marker alone
    main(["dump-log", segment(data, "orders", 1), "--deep-iteration"])
    out = capsys.readouterr().out
    assert "isTransactional: true isControl: true" in out and "endTxnMarker: COMMIT coordinatorEpoch: 0" in out


def test_transaction_log_decoder_prints_each_state_change(data, capsys):
    seg = segment(data, TRANSACTION_STATE_TOPIC, partition_for_transactional_id("pay-tx"))
    assert main(["dump-log", seg, "--transaction-log-decoder"]) == 0
    payloads = [line.split(" key: ", 1)[1] for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    key = "transaction_metadata::transactionalId=pay-tx payload: "
    assert all(p.startswith(key) for p in payloads)
    states = [re.sub(r"txnLastUpdateTimestamp=\d+", "txnLastUpdateTimestamp=T", p[len(key):]) for p in payloads]
    assert states == [
        "producerId:0,producerEpoch:0,state=Empty,partitions=[],txnLastUpdateTimestamp=T,txnTimeoutMs=30000",
        "producerId:0,producerEpoch:0,state=Ongoing,partitions=[orders-0,orders-1],txnLastUpdateTimestamp=T,"
        "txnTimeoutMs=30000",
        "producerId:0,producerEpoch:0,state=PrepareCommit,partitions=[orders-0,orders-1],"
        "txnLastUpdateTimestamp=T,txnTimeoutMs=30000",
        "producerId:0,producerEpoch:0,state=CompleteCommit,partitions=[],txnLastUpdateTimestamp=T,txnTimeoutMs=30000",
        "producerId:0,producerEpoch:1,state=Empty,partitions=[],txnLastUpdateTimestamp=T,txnTimeoutMs=30000",
        "producerId:0,producerEpoch:1,state=Ongoing,partitions=[orders-0],txnLastUpdateTimestamp=T,txnTimeoutMs=30000",
        "producerId:0,producerEpoch:1,state=PrepareAbort,partitions=[orders-0],txnLastUpdateTimestamp=T,"
        "txnTimeoutMs=30000",
        "producerId:0,producerEpoch:1,state=CompleteAbort,partitions=[],txnLastUpdateTimestamp=T,txnTimeoutMs=30000"]
    assert all(f"txnLastUpdateTimestamp={T0}," in p for p in payloads)
    main(["dump-log", seg, "--transaction-log-decoder", "--json"])
    first = json.loads(capsys.readouterr().out)[0]["records"][0]
    assert first["key"] == "transaction_metadata::transactionalId=pay-tx" and first["value"].endswith("txnTimeoutMs=30000")


def test_the_two_decoders_together_are_refused(data, capsys):
    seg = segment(data, TRANSACTION_STATE_TOPIC, partition_for_transactional_id("pay-tx"))
    assert main(["dump-log", seg, "--transaction-log-decoder", "--offsets-decoder"]) == 1
    assert "--offsets-decoder and --transaction-log-decoder cannot be used together" in capsys.readouterr().err
