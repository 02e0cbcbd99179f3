"""``kafkasim transactions`` on a data dir, as kafka-transactions.sh: Kafka's columns and
tab-separated padding, a hanging transaction found and aborted by its start offset (or by
producer id, epoch and coordinator epoch), and Kafka's messages and exit code 1 for bad input.

A hanging transaction is made as it happens in Kafka: a transactional batch is in the log
but no marker will ever follow, because the coordinator does not know its producer (written
to the partition's log directly, as a leader that lost the coordinator's marker would have it).
"""

from __future__ import annotations

import json
import os

import pytest

from kafkasim.broker import Broker
from kafkasim.cli import main
from kafkasim.records import record_batch as rb

T0 = 1_700_000_000_000
HANGING_PID = 999


def batch(pid, epoch, seq, n=2):
    return rb.encode_batch(0, [(i, T0 + i, b"k", b"v%d" % i, ()) for i in range(n)], producer_id=pid,
                           producer_epoch=epoch, base_sequence=seq, attributes=rb.ATTR_TRANSACTIONAL)


@pytest.fixture
def data(tmp_path):
    """Topic t (2 partitions): tx1 Ongoing on t-0 (offsets 0-1), and producer 999's hanging
    transaction on t-0 from offset 2 (3 records)."""
    path = str(tmp_path / "data")
    with Broker(path) as b:
        b.create_topic("t", 2)
        pid, epoch = b.init_transactional_producer_id("tx1", 900_000)
        b.add_partitions_to_txn("tx1", pid, epoch, [("t", 0)])
        b.produce("t", 0, batch(pid, epoch, 0))
        b.log("t", 0).append_batch(batch(HANGING_PID, 3, 0, 3), in_transaction=True)
    return path


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("\t")[:-1]]


def test_list_and_describe_print_kafkas_columns(data, capsys):
    rc, out, _ = run(capsys, "transactions", "list", "--data-dir", data)
    lines = out.splitlines()
    assert rc == 0 and cells(lines[0]) == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert cells(lines[1]) == ["tx1", "0", "0", "Ongoing"] and len(lines) == 2
    assert lines[0].index("Coordinator") == lines[1].index("0")          # padded to the widest cell
    rc, out, _ = run(capsys, "transactions", "describe", "--transactional-id", "tx1", "--data-dir", data)
    head, row = (cells(line) for line in out.splitlines())
    assert head[:5] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState"]
    d = dict(zip(head, row))
    assert (d["TransactionState"], d["TransactionTimeoutMs"], d["TopicPartitions"]) == ("Ongoing", "900000", "t-0")
    assert int(d["TransactionDurationMs"]) >= 0


def test_describe_producers_shows_each_producers_state(data, capsys):
    rc, out, _ = run(capsys, "transactions", "describe-producers", "--topic", "t", "--partition", "0",
                     "--data-dir", data)
    rows = [cells(line) for line in out.splitlines()]
    assert rc == 0 and rows[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                                   "LastTimestamp", "CurrentTransactionStartOffset"]
    assert rows[1:] == [["0", "0", "-1", "1", str(T0 + 1), "0"],
                        [str(HANGING_PID), "3", "-1", "2", str(T0 + 2), "2"]]
    rc, out, _ = run(capsys, "transactions", "describe-producers", "--topic", "t", "--partition", "1",
                     "--data-dir", data, "--json")
    assert rc == 0 and json.loads(out) == []


def test_find_hanging_then_abort_by_start_offset(data, capsys):
    """tx1's open transaction is expected to finish (its coordinator lists t-0); producer 999's
    is hanging. After the abort, nothing hangs and read_committed reads past it."""
    rc, out, _ = run(capsys, "transactions", "find-hanging", "--topic", "t", "--data-dir", data, "--json")
    (row,) = json.loads(out)
    assert rc == 0 and (row["topic"], row["partition"], row["producer_id"], row["start_offset"]) == \
        ("t", 0, HANGING_PID, 2)
    assert row["coordinator_epoch"] == -1 and row["duration_min"] > 15
    rc, out, _ = run(capsys, "transactions", "find-hanging", "--broker-id", "0", "--data-dir", data)
    assert rc == 0 and cells(out.splitlines()[1])[:6] == ["t", "0", str(HANGING_PID), "3", "-1", "2"]

    rc, out, err = run(capsys, "transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "2",
                       "--data-dir", data)
    assert (rc, out, err) == (0, "", "")
    rc, out, _ = run(capsys, "transactions", "find-hanging", "--topic", "t", "--partition", "0",
                     "--data-dir", data, "--json")
    assert json.loads(out) == []
    with Broker(data) as b:
        (marker_h, raw), = [x for x in b.log("t", 0).read_batches(5) if x[0].base_offset == 5]
        assert marker_h.attributes & rb.ATTR_CONTROL and marker_h.producer_id == HANGING_PID
        states = {s.producer_id: s for s in b.describe_producers("t", 0)}
        assert states[HANGING_PID].current_txn_start_offset == -1 and states[HANGING_PID].coordinator_epoch == 0
        assert [(a.producer_id, a.first_offset) for a in b.log("t", 0).collect_aborted_txns(0, 10)] == \
            [(HANGING_PID, 2)]


def test_abort_by_producer_id_epoch_and_coordinator_epoch(data, capsys):
    rc, _, err = run(capsys, "transactions", "abort", "--topic", "t", "--partition", "0", "--producer-id",
                     str(HANGING_PID), "--producer-epoch", "3", "--coordinator-epoch", "-1", "--data-dir", data,
                     "--json")
    assert rc == 0 and err == ""
    with Broker(data) as b:
        assert {s.producer_id: s.current_txn_start_offset for s in b.describe_producers("t", 0)} == \
            {0: 0, HANGING_PID: -1}
    # an older producer epoch is fenced, as Kafka's partition leader fences it
    rc, _, err = run(capsys, "transactions", "abort", "--topic", "t", "--partition", "0", "--producer-id",
                     str(HANGING_PID), "--producer-epoch", "2", "--coordinator-epoch", "0", "--data-dir", data)
    assert rc == 1 and err.startswith(
        f"Failed to abort transaction AbortTransactionSpec(topicPartition=t-0, producerId={HANGING_PID}, "
        f"producerEpoch=2, coordinatorEpoch=0): Epoch of producer {HANGING_PID}")


@pytest.mark.parametrize("argv,message", [
    (["describe", "--transactional-id", "nosuch"],
     "Failed to describe transaction state of transactional-id `nosuch`: "),
    (["describe-producers", "--topic", "t", "--partition", "7"],
     "Failed to describe producers for partition t-7 on leader: "),
    (["describe-producers", "--topic", "nosuch", "--partition", "0"],
     "Failed to describe producers for partition nosuch-0 on leader: "),
    (["describe-producers", "--topic", "t", "--partition", "0", "--broker-id", "5"],
     "Failed to describe producers for partition t-0 on broker 5: "),
    (["abort", "--topic", "t", "--partition", "0"],
     "The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or above) "
     "or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)\n"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "999"],
     "Missing required argument --producer-epoch\n"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "999", "--producer-epoch", "3"],
     "Missing required argument --coordinator-epoch\n"),
    (["abort", "--topic", "t", "--partition", "0", "--start-offset", "1"],
     "Could not find any open transactions starting at offset 1 on partition t-0\n"),
    (["find-hanging"],
     "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search\n"),
    (["find-hanging", "--broker-id", "0", "--partition", "0"],
     "The --partition argument requires --topic to be provided\n"),
], ids=["unknown-id", "missing-partition", "unknown-topic", "no-such-replica", "abort-unnamed",
        "abort-no-epoch", "abort-no-coordinator-epoch", "abort-no-txn-there", "hanging-unscoped",
        "hanging-partition-no-topic"])
def test_bad_input_gets_kafkas_message_and_exit_1(data, capsys, argv, message):
    rc, out, err = run(capsys, "transactions", *argv, "--data-dir", data)
    assert rc == 1 and out == ""
    assert err.startswith(message) if message.endswith(": ") else err == message
    if message.endswith(": "):
        assert err.endswith(". Enable debug logging for additional detail.\n")


def test_missing_required_option_is_a_usage_error(data, capsys):
    with pytest.raises(SystemExit) as e:
        main(["transactions", "describe-producers", "--topic", "t", "--data-dir", data])
    assert e.value.code == 2 and "--partition" in capsys.readouterr().err


def test_list_on_a_data_dir_without_transactions_creates_nothing(tmp_path, capsys):
    """ListTransactions does not create __transaction_state (Kafka creates it on FindCoordinator)."""
    path = str(tmp_path / "plain")
    with Broker(path) as b:
        b.create_topic("t", 1)
    rc, out, _ = run(capsys, "transactions", "list", "--data-dir", path, "--json")
    assert rc == 0 and json.loads(out) == []
    rc, out, _ = run(capsys, "transactions", "find-hanging", "--topic", "t", "--data-dir", path)
    assert rc == 0 and out.splitlines()[0].startswith("Topic\tPartition\t")
    assert not [d for d in os.listdir(path) if d.startswith("__transaction_state")]
