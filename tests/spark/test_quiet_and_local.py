"""A local audit is quiet, binds only loopback, and rejects bad input before Spark starts."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock

from .procs import listening as _listening, tree as _tree

pytestmark = pytest.mark.spark


def _write(d):
    with Broker(d, clock=MockClock(1_700_000_000_000)) as b:
        b.create_topic("orders", 2)
        b.append_records("orders", 0, [(1_700_000_000_000 + i, b"k%d" % i, b"v", ()) for i in range(50)])


@pytest.mark.slow
def test_a_local_audit_prints_no_spark_noise_and_listens_only_on_loopback(tmp_path):
    d = str(tmp_path / "data")
    _write(d)
    proc = subprocess.Popen([sys.executable, "-m", "kafkasim", "audit", "all", "--data-dir", d],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                            env={k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"})
    seen: set[str] = set()
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        seen |= _listening(_tree(proc.pid))
        time.sleep(0.3)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 3), err
    assert "skew audit: 50 records over 2 partitions" in out.decode()
    assert "audit all: ordering" in out.decode()
    assert err.decode() == ""                       # no JVM, log4j or Spark lines
    assert seen, "the audit's JVM never listened (py4j at least should)"
    assert seen <= {"127.0.0.1", "::1"}, seen


@pytest.mark.parametrize("argv,message", [
    (["--data-dir", "{tmp}/nope"], "data dir {tmp}/nope does not exist"),
    (["--data-dir", "{tmp}/data", "--topic", "nope"], "no such topic(s) nope"),
    (["--data-dir", "{tmp}"], "holds no kafkasim topics"),
])
@pytest.mark.parametrize("job", ["all", "skew", "ordering", "lag"])
def test_a_bad_data_dir_or_topic_fails_before_spark_starts(tmp_path, job, argv, message):
    _write(str(tmp_path / "data"))
    argv = [a.format(tmp=tmp_path) for a in argv]
    script = ("import sys, time; t = time.monotonic(); from kafkasim.cli import main; "
              f"rc = main(['audit', {job!r}, *{argv!r}]); "
              "ctx = sys.modules.get('pyspark.core.context'); "
              "print(rc, bool(ctx and ctx.SparkContext._gateway), round(time.monotonic() - t, 2))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    rc, jvm_started, seconds = out.stdout.split()
    assert rc == "1" and jvm_started == "False"          # Spark's JVM never started
    assert message.format(tmp=tmp_path) in out.stderr
    assert float(seconds) < 2.0
