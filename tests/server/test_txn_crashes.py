"""Crashes in the middle of a transaction (issue 23), with real clients and real processes
against ``kafkasim serve``:

- a transactional producer (confluent-kafka, in its own process) is SIGKILLed mid-transaction:
  after its ``transaction.timeout.ms`` the coordinator aborts it (checked every
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms``, set with ``--override``),
  the LSO moves up to the high watermark, read_committed consumers never see its records and
  read_uncommitted ones do;
- the served broker dies after PrepareCommit is persisted to ``__transaction_state`` and
  before all the markers are written (``KAFKASIM_CRASH_POINT``, the test hook of
  ``kafkasim serve``: the process ends with ``os._exit`` at that point, as a SIGKILL would
  leave it): restarted, it writes every COMMIT marker, read_committed consumers see every
  record and DescribeTransactions answers CompleteCommit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from kafkasim.records import record_batch as rb
from kafkasim.records.control import read_control_batch
from tests.server import raw
from tests.server.conftest import start_server, wait_until

pytestmark = pytest.mark.slow

TOPIC = "payments"
PARTITIONS = 3


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(15)


def _latest(host: str, port: int, isolation: int) -> list[int]:
    """ListOffsets LATEST of every partition: the LSO for read_committed (1), the high
    watermark for read_uncommitted (0)."""
    with raw.connect(host, port) as sock:
        r = raw.call(sock, 2, 5, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                           for p in range(PARTITIONS)]}]})
    return [p.offset for p in sorted(r.topics[0].partitions, key=lambda p: p.partition_index)]


def _state(host: str, port: int, tid: str) -> str:
    with raw.connect(host, port) as sock:
        return raw.call(sock, 65, 0, {"transactional_ids": [tid]}).transaction_states[0].transaction_state


def _consume(bootstrap: str, isolation: str, expect: int, timeout: float = 20) -> list[tuple[int, bytes]]:
    """``(partition, value)`` of everything a fresh confluent-kafka consumer reads from every
    partition, waiting until ``expect`` arrived, then 1.5 s more so extra records would show."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"crash-{isolation}-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got, deadline, extra = [], time.monotonic() + timeout, None
    while time.monotonic() < deadline and (extra is None or time.monotonic() < extra):
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.partition(), m.value()))
        if len(got) >= expect and extra is None:
            extra = time.monotonic() + 1.5
    c.close()
    return got


_CHILD = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    bootstrap, tid, timeout_ms, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": timeout_ms, "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(n):
        p.produce("payments", value=b"doomed-%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    print("flushed", flush=True)
    time.sleep(600)                                  # never commits: the test SIGKILLs it here
""")


def test_a_sigkilled_transactional_producer_is_aborted_after_its_timeout(tmp_path):
    served = start_server(tmp_path / "data",
                          "--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=500")
    child = None
    try:
        _create(served.bootstrap, TOPIC, PARTITIONS)
        child = subprocess.Popen([sys.executable, "-c", _CHILD, served.bootstrap, "doomed", "6000", "30"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = child.stdout.readline()
        assert line.strip() == "flushed", f"producer child failed: {line!r} {child.stderr.read()[-2000:]!r}"
        child.send_signal(signal.SIGKILL)                # mid-transaction: no commit, no abort, no goodbye
        child.wait(10)
        # right after the kill the transaction is still open: read_committed is held back
        assert _latest(served.host, served.port, 0) == [10, 10, 10]
        assert _latest(served.host, served.port, 1) == [0, 0, 0]
        assert _state(served.host, served.port, "doomed") == "Ongoing"
        # the timeout (6 s from AddPartitionsToTxn) aborts it: an ABORT marker on every partition
        wait_until(lambda: _state(served.host, served.port, "doomed") == "CompleteAbort", 30,
                   what="the coordinator to abort the timed-out transaction")
        assert _latest(served.host, served.port, 1) == _latest(served.host, served.port, 0) == [11, 11, 11]

        # a live producer's committed transaction after it
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "alive", "linger.ms": 5})
        p.init_transactions(15)
        p.begin_transaction()
        for i in range(6):
            p.produce(TOPIC, value=b"ok-%d" % i, partition=i % 3)
        p.commit_transaction(15)

        committed = _consume(served.bootstrap, "read_committed", 6)
        assert sorted(committed) == sorted((i % 3, b"ok-%d" % i) for i in range(6))
        uncommitted = _consume(served.bootstrap, "read_uncommitted", 36)
        assert sorted(uncommitted) == sorted([(i % 3, b"doomed-%d" % i) for i in range(30)]
                                             + [(i % 3, b"ok-%d" % i) for i in range(6)])
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(10)
        served.stop()


def _control_markers(data_dir) -> list[list[tuple[str, int]]]:
    """Every partition's control batches, ``(COMMIT|ABORT, producer id)``, read from the files."""
    from kafkasim.broker import Broker
    out = []
    with Broker(data_dir) as b:
        for p in range(PARTITIONS):
            marks = []
            for h, buf in b.fetch_batches(TOPIC, p, 0, isolation_level=0).batches:
                if h.attributes & rb.ATTR_CONTROL:
                    marks.append(("COMMIT" if read_control_batch(buf, 0, h)[0].is_commit else "ABORT",
                                  h.producer_id))
            out.append(marks)
    return out


@pytest.mark.parametrize("point", ["txn.after_prepare_commit", "txn.after_first_commit_marker"])
def test_a_broker_killed_between_prepare_commit_and_the_markers_commits_after_restart(tmp_path, point):
    from confluent_kafka import KafkaException, Producer

    data = tmp_path / "data"
    served = start_server(data)                       # first a clean server: the topic
    try:
        _create(served.bootstrap, TOPIC, PARTITIONS)
    finally:
        assert served.stop() == 0
    os.environ["KAFKASIM_CRASH_POINT"] = point       # the next server dies at that point
    try:
        served = start_server(data)
    finally:
        del os.environ["KAFKASIM_CRASH_POINT"]
    try:
        p = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "tx-crash", "linger.ms": 5,
                      "reconnect.backoff.max.ms": 500})
        p.init_transactions(15)
        p.begin_transaction()
        for i in range(9):
            p.produce(TOPIC, value=b"c-%d" % i, partition=i % 3)
        assert p.flush(15) == 0
        with pytest.raises(KafkaException):
            p.commit_transaction(5)                   # the broker dies while answering EndTxn
        assert served.proc.wait(15) == 70              # os._exit at the crash point, not a clean stop
        assert f"crash point {point} reached" in served.log_text()
    finally:
        served.stop()
    marks = _control_markers(data)
    assert marks == ([[], [], []] if point == "txn.after_prepare_commit" else [[("COMMIT", marks[0][0][1])], [], []])

    served = start_server(data)                       # restarted: no crash point
    try:
        wait_until(lambda: _state(served.host, served.port, "tx-crash") == "CompleteCommit", 20,
                   what="the restarted coordinator to complete the prepared commit")
        hw = _latest(served.host, served.port, 0)
        assert _latest(served.host, served.port, 1) == hw
        committed = _consume(served.bootstrap, "read_committed", 9)
        assert sorted(committed) == sorted((i % 3, b"c-%d" % i) for i in range(9))
    finally:
        assert served.stop() == 0
    marks = _control_markers(data)
    pid = marks[0][-1][1]
    assert all(m and m[-1] == ("COMMIT", pid) for m in marks), marks
    assert all(kind == "COMMIT" for m in marks for kind, _ in m), marks


def test_an_unknown_crash_point_is_refused_at_start(tmp_path):
    env = dict(os.environ, KAFKASIM_CRASH_POINT="txn.after_nothing")
    r = subprocess.run([sys.executable, "-m", "kafkasim", "serve", "--data-dir", str(tmp_path / "data"),
                        "--listen", "127.0.0.1:0"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "KAFKASIM_CRASH_POINT='txn.after_nothing'" in r.stderr and "txn.after_prepare_commit" in r.stderr
    assert not (tmp_path / "data").exists()              # refused before anything was opened
