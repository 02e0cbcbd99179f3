"""The CLI against a served cluster whose every broker is stopped: what a Kafka user would
see (no leader, LEADER_NOT_AVAILABLE), never the data dir's lock the server holds."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _cli(data_dir, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkasim", "--data-dir", str(data_dir), *args],
                          input=stdin, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_with_every_broker_stopped_produce_and_consume_say_no_leader(serve_process, tmp_path):
    served = serve_process(tmp_path / "lab", "--brokers", "0:r1,1:r2,2:r3")
    assert _cli(served.data_dir, "topics", "create", "t", "--partitions", "3").returncode == 0
    for b in (0, 1, 2):
        done = _cli(served.data_dir, "cluster", "stop-broker", str(b))
        assert done.returncode == 0, done.stderr
    for args, stdin in ((("produce", "t"), "x\n"), (("consume", "t", "--max-messages", "1"), "")):
        done = _cli(served.data_dir, *args, stdin=stdin)
        assert done.returncode == 1
        err = done.stderr
        assert "lock" not in err and "KafkaStorageError" not in err, err
        assert f"kafkasim {args[0]}: LeaderNotAvailableError:" in err and "LEADER_NOT_AVAILABLE" in err, err
        assert "every broker is stopped" in err and "kafkasim cluster start-broker" in err, err
    # a broker back: the same commands work again
    assert _cli(served.data_dir, "cluster", "start-broker", "1").returncode == 0
