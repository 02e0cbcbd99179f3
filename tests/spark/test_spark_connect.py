"""``kafkasim spark start|stop|status``: audits on a warm Spark Connect server give the cold
reports, print nothing but the report, start no JVM of their own, and ``stop`` leaves no
process behind. One server for the module (a real ``SparkConnectServer`` JVM)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.spark_jobs import audit_all, skew
from kafkasim.spark_jobs import daemons
from kafkasim.spark_jobs.watch import changes

from . import logs
from .procs import cmdlines_with, listening, tree

pytestmark = pytest.mark.spark


def _cli(*argv: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ if env is None else env)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    return subprocess.run([sys.executable, "-m", "kafkasim", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _env_without_remote() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_GATEWAY_PORT")}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A data dir with ordering faults and a Spark Connect server started on it by the CLI."""
    d = str(tmp_path_factory.mktemp("connect") / "data")
    logs.write_mixed_clients(d)
    port = daemons.free_port()
    out = _cli("spark", "start", "--data-dir", d, "--port", str(port), "--warm-up", "1", "--json",
               env=_env_without_remote())
    assert out.returncode == 0, out.stderr
    state = json.loads(out.stdout)
    yield {"data_dir": d, "port": port, "url": state["url"], "state": state}
    _cli("spark", "stop", "--data-dir", d, env=_env_without_remote())


def _comparable(rep: dict) -> dict:
    rep = dict(rep)
    rep.pop("timings_s", None)
    return rep


@pytest.mark.slow
def test_start_records_a_loopback_server_and_status_reports_it(server):
    state = server["state"]
    assert state["running"] and state["url"] == f"sc://127.0.0.1:{server['port']}"
    assert state["master"] == "local[*]"
    assert len(state["warm_up_s"]) == 1             # one `audit all` ran on the server before start returned
    recorded = json.load(open(os.path.join(server["data_dir"], "spark", "connect.json")))
    assert recorded["server"]["pid"] == state["server"]["pid"]
    status = _cli("spark", "status", "--data-dir", server["data_dir"], "--json", env=_env_without_remote())
    assert status.returncode == 0 and json.loads(status.stdout)["connect"]["running"] is True
    assert json.loads(status.stdout)["connect"]["client_running"] is True
    text = _cli("spark", "status", "--data-dir", server["data_dir"], env=_env_without_remote()).stdout
    assert f"warm client: running (pid {state['client']['pid']})" in text, text
    # the server JVM and everything it started listen on loopback only; its log is in the data dir
    addrs = listening(tree(state["server"]["pid"]))
    assert addrs and addrs <= {"127.0.0.1", "::1"}, addrs
    assert state["server"]["log"].startswith(os.path.join(server["data_dir"], "spark", "logs"))
    # the audits' warm client runs beside it, on a socket only this user can open
    assert daemons.alive(state["client"])
    sock = os.path.join(server["data_dir"], "spark", "client.sock")
    assert stat.S_ISSOCK(os.stat(sock).st_mode) and stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    # a second start on the same data dir is refused, naming the running server
    again = _cli("spark", "start", "--data-dir", server["data_dir"], "--port", str(daemons.free_port()),
                 env=_env_without_remote())
    assert again.returncode == 1 and server["url"] in again.stderr


@pytest.mark.slow
def test_a_warm_audit_all_gives_the_cold_report_quietly_without_a_jvm_of_its_own(server, spark, tmp_path):
    d = server["data_dir"]
    cold_json, warm_json = tmp_path / "cold.json", tmp_path / "warm.json"
    audit_all.main(["--data-dir", d, "--json", str(cold_json)], spark=spark)
    proc = subprocess.Popen([sys.executable, "-m", "kafkasim", "audit", "all", "--data-dir", d,
                             "--json", str(warm_json)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env_without_remote(), cwd=tmp_path)
    children: set[str] = set()
    while proc.poll() is None:
        for pid in tree(proc.pid) - {proc.pid}:
            try:
                children.add(open(f"/proc/{pid}/comm").read().strip())
            except OSError:
                pass
        time.sleep(0.1)
    out, err = proc.communicate()
    assert proc.returncode == 3, err          # the mixed clients fail the ordering audit, as cold
    assert err.decode() == ""                 # no JVM, gRPC or Spark line
    assert "java" not in children             # the server ran it: no JVM of its own
    assert "audit all: ordering failed" in out.decode()
    assert _comparable(json.loads(warm_json.read_text())) == _comparable(json.loads(cold_json.read_text()))


@pytest.mark.slow
def test_spark_remote_points_a_skew_audit_at_the_server_with_the_cold_report(server, spark, tmp_path):
    copy = str(tmp_path / "copy")          # no server recorded in this data dir: $SPARK_REMOTE says where
    shutil.copytree(server["data_dir"], copy, ignore=shutil.ignore_patterns("spark"))
    cold_json, warm_json = tmp_path / "cold.json", tmp_path / "warm.json"
    skew.main(["--data-dir", copy, "--json", str(cold_json)], spark=spark)
    out = _cli("audit", "skew", "--data-dir", copy, "--json", str(warm_json),
               env=dict(_env_without_remote(), SPARK_REMOTE=server["url"]))
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert json.loads(warm_json.read_text()) == json.loads(cold_json.read_text())


@pytest.mark.slow
def test_an_audit_runs_in_a_fork_of_the_warm_client_and_ctrl_c_ends_it_with_one_line(server, tmp_path):
    d = server["data_dir"]
    log = os.path.join(d, "spark", "logs", "client.log")
    before = open(log).read().count("kafkasim audit")
    out = _cli("audit", "skew", "--data-dir", d, "--json", str(tmp_path / "skew.json"), env=_env_without_remote())
    assert out.returncode == 0 and out.stderr == "", out.stderr[-2000:]
    assert "skew audit:" in out.stdout                          # its stdout reached ours
    assert json.loads((tmp_path / "skew.json").read_text())["records"] > 0
    lines = open(log).read().splitlines()
    assert sum("kafkasim audit" in line for line in lines) == before + 1
    assert lines[-1].endswith(f"kafkasim audit skew --data-dir {d} --json {tmp_path / 'skew.json'}")
    # the same audit run here, not handed on: the same report
    here = _cli("audit", "skew", "--data-dir", d, "--json", str(tmp_path / "here.json"),
                env=dict(_env_without_remote(), KAFKASIM_WARM_CLIENT_CHILD="1"))
    assert here.returncode == 0, here.stderr[-2000:]
    assert json.loads((tmp_path / "here.json").read_text()) == json.loads((tmp_path / "skew.json").read_text())
    # Ctrl-C at the CLI reaches the child: one line, exit 130, and no child left behind
    proc = subprocess.Popen([sys.executable, "-m", "kafkasim", "audit", "all", "--data-dir", d],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env_without_remote(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while open(log).read().count("kafkasim audit") < before + 2:
        assert proc.poll() is None and time.monotonic() < deadline, "the audit was not handed to the warm client"
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.decode().splitlines() == ["kafkasim audit: interrupted (Ctrl-C)"], err
    client = server["state"]["client"]["pid"]
    deadline = time.monotonic() + 10
    while tree(client) - {client} and time.monotonic() < deadline:
        time.sleep(0.1)
    assert tree(client) == {client}


_ATTACH = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote(sys.argv[1] + "/;session_id=" + sys.argv[2]).create()
print(spark.conf.get("spark.sql.adaptive.enabled"))
spark.stop()       # releases it: as the server closing an idle session
"""

_OPEN_FOR_A_LARGE_INPUT = """
import argparse, sys
from kafkasim.spark_jobs import common, connect
args = argparse.Namespace(master=None, remote=sys.argv[1], data_dir=sys.argv[2])
spark = common.open_spark(args, input_bytes=common.LOCAL_SCAN_BYTES + 1)
print(spark.conf.get("spark.sql.adaptive.enabled"), spark.conf.get("spark.sql.codegen.wholeStage"))
connect.end(spark)
"""


@pytest.mark.slow
def test_audits_resume_the_data_dirs_warm_session_and_replace_a_closed_one(server, tmp_path):
    d, url = server["data_dir"], server["url"]
    slot = os.path.join(d, "spark", "sessions", f"127.0.0.1_{server['port']}", "0")
    first = _cli("audit", "skew", "--data-dir", d, "--json", str(tmp_path / "1.json"), env=_env_without_remote())
    assert first.returncode == 0, first.stderr
    sid = open(slot).read()
    # the session outlived the audit, with the small-input settings the audit gave it
    attach = subprocess.run([sys.executable, "-c", _ATTACH, url, sid], capture_output=True, text=True,
                            timeout=120, env=_env_without_remote())
    assert attach.returncode == 0 and attach.stdout.split() == ["false"], attach.stderr[-2000:]
    # released on the server: the next audit gets a new session in the same slot, and the same report
    second = _cli("audit", "skew", "--data-dir", d, "--json", str(tmp_path / "2.json"), env=_env_without_remote())
    assert second.returncode == 0 and second.stderr == "", second.stderr[-2000:]
    assert open(slot).read() != sid
    assert json.loads((tmp_path / "2.json").read_text()) == json.loads((tmp_path / "1.json").read_text())
    # a large input in that warm session: the small-input settings are unset, not inherited
    large = subprocess.run([sys.executable, "-c", _OPEN_FOR_A_LARGE_INPUT, url, d], capture_output=True,
                           text=True, timeout=120, env=_env_without_remote())
    assert large.returncode == 0 and large.stdout.split() == ["true", "true"], large.stderr[-2000:]


_DATA_SOURCE_UNDER_CONNECT = """
import json, sys
from kafkasim.spark_jobs import common, connect
from kafkasim.spark_jobs.partials import Spec
spark = connect.session(sys.argv[1])
spec = Spec(window_ms=60_000, sequence="header").to_json()
def rows(**kw):
    df = common.read_log(spark, sys.argv[2], ["orders"], mode="partials", partials=spec, **kw)
    return sorted(json.dumps(r.asDict(), sort_keys=True, default=repr) for r in df.collect())
on_server = rows(local_max_bytes=0)      # the kafkasim data source, in the server's Python workers
in_client = rows()                       # the same reader function, in this process
print(json.dumps({"rows": len(on_server), "equal": on_server == in_client}))
spark.stop()
"""


@pytest.mark.slow
def test_the_data_source_aggregates_in_the_servers_python_workers_as_in_the_client(server):
    out = subprocess.run([sys.executable, "-c", _DATA_SOURCE_UNDER_CONNECT, server["url"], server["data_dir"]],
                         capture_output=True, text=True, timeout=600, env=_env_without_remote())
    assert out.returncode == 0 and out.stderr == "", out.stderr[-3000:]
    got = json.loads(out.stdout)
    assert got["rows"] > 0 and got["equal"] is True


@pytest.mark.slow
def test_audit_watch_reruns_when_the_log_grows_and_prints_what_changed(server, tmp_path):
    d = str(tmp_path / "data")
    with Broker(d, clock=MockClock(logs.START_MS)) as b:
        b.create_topic("orders", 2)
        b.append_records("orders", 0, [(logs.START_MS + i, b"k%d" % i, b"v", ()) for i in range(30)])
    proc = subprocess.Popen([sys.executable, "-m", "kafkasim", "audit", "watch", "--data-dir", d,
                             "--remote", server["url"], "--interval", "600", "--max-runs", "2", "--json", "-"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env_without_remote())
    try:
        first = json.loads(proc.stdout.readline())
        assert first == {"run": 1, "changes": [], "verdict": first["verdict"], "records": 30}
        with Broker(d, clock=MockClock(logs.START_MS + 1000)) as b:       # the log grows: a run long before 600 s
            b.append_records("orders", 1, [(logs.START_MS + 1000 + i, b"k%d" % i, b"v", ()) for i in range(20)])
        second = json.loads(proc.stdout.readline())
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and err == "", err
    assert second["run"] == 2 and second["records"] == 50
    assert "records: 30 -> 50 (+20)" in second["changes"]


def test_changes_names_what_moved_between_two_reports():
    base = {"verdict": "ok",
            "skew": {"records": 100, "verdict": "ok", "max_over_avg": 1.1, "violations": {"max_over_avg": 0},
                     "hot_keys": [{"key": "a"}], "corrupt_batches": []},
            "ordering": {"verdict": "ok", "violations": {"duplicate": 0}, "corrupt_batches": []},
            "lag": {"verdict": "ok", "total_lag_records": 5, "violations": {}, "corrupt_batches": []},
            "transactions": {"verdict": "ok", "violations": {}, "corrupt_batches": []}}
    assert changes(base, json.loads(json.dumps(base))) == []
    moved = json.loads(json.dumps(base))
    moved["skew"].update(records=160, max_over_avg=1.5, verdict="failed", violations={"max_over_avg": 1},
                         hot_keys=[{"key": "b"}], corrupt_batches=[{"segment": "x"}])
    moved["lag"]["total_lag_records"] = 0
    moved["verdict"] = "failed"
    assert changes(base, moved) == [
        "records: 100 -> 160 (+60)", "skew: ok -> failed", "skew max_over_avg: 0 -> 1 (+1)",
        "corrupt batches: 0 -> 1", "skew max/avg: 1.100 -> 1.500", "hottest keys: b", "lag: 5 -> 0 records",
        "audit all: ok -> failed"]


@pytest.mark.parametrize("argv,message", [
    (["audit", "skew", "--remote", "http://127.0.0.1:1"], "not a Spark Connect URL: 'http://127.0.0.1:1'"),
    (["audit", "watch", "--interval", "0"], "--interval must be > 0 seconds, got 0.0"),
    (["spark", "start", "--data-dir", "{tmp}/nope"], "data dir {tmp}/nope does not exist"),
    (["spark", "start", "--warm-up", "-1"], "--warm-up must be >= 0 runs, got -1"),
])
def test_bad_spark_arguments_fail_naming_the_value(tmp_path, argv, message):
    with Broker(str(tmp_path / "data"), clock=MockClock(logs.START_MS)) as b:
        b.create_topic("orders", 1)
    argv = [a.format(tmp=tmp_path) for a in argv]
    if "--data-dir" not in argv:
        argv += ["--data-dir", str(tmp_path / "data")]
    out = _cli(*argv, env=_env_without_remote(), timeout=60)
    assert out.returncode == 1, out.stderr
    assert message.format(tmp=tmp_path) in out.stderr


def test_stop_without_a_server_says_so(tmp_path):
    os.makedirs(tmp_path / "data")
    out = _cli("spark", "stop", "--data-dir", str(tmp_path / "data"), "--json", env=_env_without_remote(), timeout=60)
    assert out.returncode == 0 and json.loads(out.stdout) == {"stopped": False, "pid": None}


@pytest.mark.slow
def test_stop_leaves_no_process_behind(server):
    """Last in the module: it stops the module's server."""
    d = server["data_dir"]
    pid = server["state"]["server"]["pid"]
    before = tree(pid)
    assert len(before) >= 1 and cmdlines_with(os.path.join(d, "spark"))
    out = _cli("spark", "stop", "--data-dir", d, "--json", env=_env_without_remote())
    assert out.returncode == 0 and json.loads(out.stdout) == {"stopped": True, "pid": pid}
    # at once: a JVM's main thread turns zombie before the threads holding its sockets are gone
    from kafkasim.spark_jobs.connect import parse_url
    from kafkasim.spark_jobs.daemons import port_open
    assert not port_open(*parse_url(server["state"]["url"])), "stop returned while the server still listened"
    alive = {p for p in before if os.path.exists(f"/proc/{p}") and
             open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"}
    assert alive == set()
    assert cmdlines_with(os.path.join(d, "spark")) == {}      # nothing launched for this data dir runs
    client = server["state"]["client"]["pid"]                   # nor the warm client, nor its socket
    assert not os.path.exists(f"/proc/{client}") or open(f"/proc/{client}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    assert not os.path.exists(os.path.join(d, "spark", "client.sock"))
    assert not os.path.exists(os.path.join(d, "spark", "connect.json"))
    status = json.loads(_cli("spark", "status", "--data-dir", d, "--json", env=_env_without_remote()).stdout)
    assert status["connect"]["running"] is False
