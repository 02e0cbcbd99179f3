"""``kafkasim serve`` as a command: clean shutdown on Ctrl-C, the address file, clear errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.server import raw


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkasim", "serve", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_ctrl_c_shuts_down_cleanly(tmp_path, serve_process):
    """SIGINT: exit 0, address file gone, data dir lock released, records flushed."""
    from kafkasim.broker import Broker

    data = tmp_path / "data"
    served = serve_process(data)
    info = json.loads((data / ".server.json").read_text())
    assert (info["host"], info["port"], info["pid"]) == (served.host, served.port, served.proc.pid)
    with raw.connect(served.host, served.port) as sock:
        from tests.server.test_protocol import BATCH

        raw.call(sock, 3, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
        response = raw.call(sock, 0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": BATCH}]}]})
        assert response.responses[0].partition_responses[0].base_offset == 0
    served.proc.send_signal(signal.SIGINT)
    assert served.proc.wait(30) == 0
    assert not os.path.exists(data / ".server.json")
    with Broker(data) as broker:          # the lock is free and the record is there
        assert [r.value for r in broker.fetch("t", 0, 0).records] == [b"v"]


def test_produce_with_acks_0_gets_no_response(server):
    from tests.server.test_protocol import BATCH, minimal_request

    with raw.connect(server.host, server.port) as sock:
        raw.call(sock, 3, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
        sock.sendall(raw.request_frame(0, 9, 41, {"acks": 0, "timeout": 5000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": BATCH}]}]}))
        sock.sendall(raw.request_frame(18, 3, 42, minimal_request(18, 3)))
        corr, _ = raw.read_response(sock, 18, 3)   # the first answer is ApiVersions'
        assert corr == 42
        listed = raw.call(sock, 2, 6, {"replica_id": -1, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        assert listed.topics[0].partitions[0].offset == 1   # but the record was written


@pytest.mark.parametrize("listen,message", [
    ("nonsense", "expected HOST:PORT"),
    ("127.0.0.1:http", "is not a number"),
    ("127.0.0.1:70000", "outside 0-65535"),
])
def test_bad_listen_is_a_clear_error_and_creates_nothing(tmp_path, listen, message):
    result = _run("--data-dir", str(tmp_path / "d"), "--listen", listen)
    assert result.returncode == 1 and message in result.stderr
    assert not (tmp_path / "d").exists()


def test_second_server_on_the_same_data_dir_or_port_is_refused(tmp_path, server):
    same_dir = _run("--data-dir", server.data_dir, "--listen", "127.0.0.1:0")
    assert same_dir.returncode == 1 and "lock" in same_dir.stderr
    same_port = _run("--data-dir", str(tmp_path / "other"), "--listen", server.bootstrap)
    assert same_port.returncode == 1 and "cannot listen" in same_port.stderr
    assert not (tmp_path / "other" / ".server.json").exists()


def test_serve_says_when_it_creates_a_new_empty_data_dir(tmp_path, serve_process):
    fresh = serve_process(tmp_path / "typo-dir")
    fresh.stop()
    assert "kafkasim serve: created a new empty data dir" in fresh.log_text()
    again = serve_process(tmp_path / "typo-dir")      # it exists now: nothing to say
    again.stop()
    assert "created a new empty data dir" not in again.log_text()
