"""``kafkasim consume --isolation-level`` (kafka-console-consumer's option): read_committed
shows only committed transactional records, read_uncommitted (the default) every record;
no transaction marker is ever printed. On a data dir and against ``kafkasim serve``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafkasim.broker import Broker
from kafkasim.cli import main
from kafkasim.records import record_batch as rb
from tests.server.conftest import start_server

T0 = 1_700_000_000_000


def batch(pid, epoch, seq, values):
    return rb.encode_batch(0, [(i, T0 + i, None, v, ()) for i, v in enumerate(values)], producer_id=pid,
                           producer_epoch=epoch, base_sequence=seq, attributes=rb.ATTR_TRANSACTIONAL)


def make_data(path) -> str:
    """Topic t: plain p0; committed c0 c1; aborted a0; plain p1; open o0 (still Ongoing)."""
    with Broker(path) as b:
        b.create_topic("t", 1)
        b.append_records("t", 0, [(T0, None, b"p0", ())])
        for tid, values, commit in (("tc", [b"c0", b"c1"], True), ("ta", [b"a0"], False)):
            pid, epoch = b.init_transactional_producer_id(tid)
            b.add_partitions_to_txn(tid, pid, epoch, [("t", 0)])
            b.produce("t", 0, batch(pid, epoch, 0, values))
            b.end_txn(tid, pid, epoch, commit)
        b.append_records("t", 0, [(T0, None, b"p1", ())])
        pid, epoch = b.init_transactional_producer_id("to")
        b.add_partitions_to_txn("to", pid, epoch, [("t", 0)])
        b.produce("t", 0, batch(pid, epoch, 0, [b"o0"]))
    return str(path)


@pytest.fixture
def data(tmp_path):
    return make_data(tmp_path / "data")


def consume(capsys, data, *extra):
    rc = main(["consume", "t", "--from-beginning", "--timeout-ms", "1500", "--data-dir", data, *extra])
    out = capsys.readouterr()
    return rc, out.out.splitlines(), out.err


def test_read_committed_reads_only_committed_records_up_to_the_open_transaction(data, capsys):
    rc, lines, err = consume(capsys, data, "--isolation-level", "read_committed")
    assert rc == 0 and lines == ["p0", "c0", "c1", "p1"]          # a0 aborted; o0 open (the LSO stops there)
    assert "Processed a total of 4 messages" in err


def test_read_uncommitted_is_the_default_and_reads_every_record(data, capsys):
    rc, lines, _ = consume(capsys, data)
    assert rc == 0 and lines == ["p0", "c0", "c1", "a0", "p1", "o0"]
    assert consume(capsys, data, "--isolation-level", "read_uncommitted")[1] == lines


def test_an_unknown_isolation_level_is_kafkas_config_error(data, capsys):
    rc, lines, err = consume(capsys, data, "--isolation-level", "committed")
    assert rc == 1 and lines == []
    assert "Invalid value committed for configuration isolation.level: String must be one of: " \
           "read_committed, read_uncommitted" in err


@pytest.mark.slow
def test_isolation_level_against_kafkasim_serve(tmp_path):
    served = start_server(make_data(tmp_path / "data"))

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "kafkasim", "consume", "t", "--from-beginning", "--timeout-ms",
                               "3000", "--bootstrap-server", served.bootstrap, *extra],
                              capture_output=True, text=True, timeout=60)
    try:
        committed = run("--isolation-level", "read_committed")
        every = run()
    finally:
        served.stop()
    assert committed.returncode == 0 and committed.stdout.splitlines() == ["p0", "c0", "c1", "p1"], committed.stderr
    assert every.returncode == 0 and every.stdout.splitlines() == ["p0", "c0", "c1", "a0", "p1", "o0"], every.stderr
