"""What a CLI command leaves behind and how it ends: nothing outside the data dir (no
``.hypothesis/`` in the user's folder: the test-only hypothesis never loads in the
product, and a command on a data dir no server serves never imports the wire stack), and
Ctrl-C is one line on stderr with exit code 130, never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HYPOTHESIS", "KAFKASIM_DATA_DIR"))}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _kafkasim(cwd, *args, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkasim", *args], cwd=cwd, input=stdin,
                          capture_output=True, timeout=120, env=_env())


def test_commands_leave_the_working_folder_empty(tmp_path):
    cwd = tmp_path / "empty"
    cwd.mkdir()
    data = str(tmp_path / "data")
    runs = [
        ("topics", "create", "orders", "--partitions", "2", "--data-dir", data),
        ("topics", "list", "--data-dir", data),
        ("topics", "describe", "orders", "--data-dir", data),
        ("produce", "orders", "--property", "parse.key=true", "--property", "key.separator=:",
         "--data-dir", data),
        ("consume", "orders", "--group", "billing", "--from-beginning", "--max-messages", "2",
         "--data-dir", data),
        ("groups", "describe", "billing", "--data-dir", data),
        ("get-offsets", "--data-dir", data),
        ("partition", "merchant_1", "--partitions", "6"),
        ("scenario", "list"),
    ]
    for args in runs:
        done = _kafkasim(cwd, *args, stdin=b"merchant_1:a\nmerchant_2:b\n")
        assert done.returncode == 0, (args, done.stderr.decode())
        assert os.listdir(cwd) == [], f"kafkasim {' '.join(args)} left {os.listdir(cwd)} in its folder"


@pytest.mark.parametrize("code", [
    # the CLI and an embedded group round trip (the coordinator decodes the consumer protocol with kio)
    "import kafkasim.cli, kafkasim.coordinator.rebalance; kafkasim.cli.build_parser()",
    # the whole wire stack, as `kafkasim serve` and a command talking to one import it
    "import kafkasim.server.codec, kafkasim.server.server, kafkasim.server.remote, kafkasim.server.runner",
])
def test_the_product_never_imports_hypothesis(tmp_path, code):
    check = code + "; import sys; assert 'hypothesis' not in sys.modules, 'hypothesis was imported'"
    done = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=_env())
    assert done.returncode == 0, done.stderr
    assert os.listdir(tmp_path) == []


def test_a_command_on_an_unserved_data_dir_never_imports_the_wire_stack(tmp_path):
    data = tmp_path / "data"
    assert _kafkasim(tmp_path, "topics", "create", "t", "--data-dir", str(data)).returncode == 0
    code = ("import sys; from kafkasim.cli import main; rc = main(['topics', 'list', '--data-dir', %r]); "
            "loaded = sorted(m for m in sys.modules if m.startswith(('kio', 'kafkasim.server.remote', "
            "'kafkasim.server.codec'))); assert rc == 0 and not loaded, loaded" % str(data))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    assert done.returncode == 0, done.stderr


def _sigint_default() -> None:
    """In the child: SIGINT back to its default, so Python installs its Ctrl-C handler. A test
    run started as a background job (CI's, or `make test &`) inherits SIGINT ignored, and
    Python then leaves it ignored, as a program started that way should."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(proc: subprocess.Popen, *, after: float) -> tuple[int, str, float]:
    time.sleep(after)
    assert proc.poll() is None, "the command ended before Ctrl-C"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err.decode(), time.monotonic() - t0


def _assert_one_line(err: str, command: str) -> None:
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines() == [f"kafkasim {command}: interrupted (Ctrl-C)"], err


def test_ctrl_c_while_produce_waits_on_stdin_is_one_line_and_exit_130(tmp_path):
    data = str(tmp_path / "data")
    assert _kafkasim(tmp_path, "topics", "create", "t", "--data-dir", data).returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "kafkasim", "produce", "t", "--data-dir", data],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
                            preexec_fn=_sigint_default)
    proc.stdin.write(b"first\n")
    proc.stdin.flush()
    rc, err, _ = _interrupt(proc, after=3)
    assert rc == 130
    _assert_one_line(err, "produce")
    # the line read before Ctrl-C was sent and written (the producer is closed on the way out)
    done = _kafkasim(tmp_path, "get-offsets", "--data-dir", data)
    assert done.stdout.decode().strip() == "t:0:1"


def test_ctrl_c_in_scenario_run_is_one_line_and_exit_130(tmp_path):
    # 200 trials per event: about half a minute of work, so the lab is surely running at Ctrl-C
    proc = subprocess.Popen([sys.executable, "-m", "kafkasim", "scenario", "run", "rebalance-protocols",
                             "--param", "trials=200", "--data-dir", str(tmp_path / "data")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
                            preexec_fn=_sigint_default)
    # the lab has started (it made its data dir) before Ctrl-C: a SIGINT during Python's own
    # start-up, before kafkasim runs at all, is Python's to handle, not the CLI's
    deadline = time.monotonic() + 60
    while not (tmp_path / "data").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the lab did not start"
        time.sleep(0.05)
    rc, err, _ = _interrupt(proc, after=0.5)
    assert rc == 130
    _assert_one_line(err, "scenario")


def _java_children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if "java" in line]


@pytest.mark.slow
def test_ctrl_c_in_audit_all_ends_the_jvm_at_once(tmp_path):
    from kafkasim.broker import Broker

    data = tmp_path / "data"
    with Broker(data) as b:
        b.create_topic("orders", 3)
        for p in range(3):
            b.append_records("orders", p, [(1000 + i, f"k{i}".encode(), b"v", ()) for i in range(2000)])
    proc = subprocess.Popen([sys.executable, "-m", "kafkasim", "audit", "all", "--data-dir", str(data)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    deadline = time.monotonic() + 240
    while not _java_children(proc.pid):       # Spark's driver JVM is up
        assert proc.poll() is None and time.monotonic() < deadline, "audit ended before its JVM started"
        time.sleep(0.2)
    jvm = _java_children(proc.pid)
    rc, err, took = _interrupt(proc, after=8)       # in session start-up or in the audit itself
    assert rc == 130
    _assert_one_line(err, "audit")
    assert took < 5, f"audit all took {took:.1f} s to exit after Ctrl-C"
    for pid in jvm:                              # no JVM left behind
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"


def test_py4j_tracebacks_of_an_interrupted_call_are_not_printed():
    """What a CI run caught once: Ctrl-C lands in a py4j call after the JVM has gone, py4j logs
    the KeyboardInterrupt on root (which runs ``basicConfig``), then closes the connection and
    logs the BrokenPipeError on ``py4j.clientserver``. Both go through py4j's real code here,
    in a child so the logging set-up stays there; a record of another logger still prints."""
    code = """
import collections, logging, socket
from py4j.clientserver import ClientServerConnection, JavaClient
from kafkasim.spark_jobs.session import quiet_interrupts
quiet_interrupts()
def interrupted(command):
    raise KeyboardInterrupt
conn = object.__new__(ClientServerConnection)
conn.is_connected, conn.stream, conn.send_command = True, None, interrupted
server = socket.create_server(("127.0.0.1", 0))
conn.socket = socket.create_connection(server.getsockname())
conn.socket.shutdown(socket.SHUT_WR)            # as if the JVM were gone: sendall raises BrokenPipeError
client = object.__new__(JavaClient)
client.deque, client._get_connection = collections.deque(), lambda: conn
try:
    client.send_command("c\\n")
except KeyboardInterrupt:
    pass
conn.close = lambda *a: None                    # what __del__ calls on this half-built connection
logging.getLogger("kafkasim.audit").error("still printed")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines() == ["ERROR:kafkasim.audit:still printed"], done.stderr
