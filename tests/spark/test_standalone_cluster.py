"""``kafkasim spark cluster start --workers 2``: Spark's own standalone Master and two Workers
from the installed pyspark, on 127.0.0.1. ``audit all --master spark://...`` on the demo's
data dir gives local mode's report, its executors are separate JVMs under separate Workers
(Spark's own executor lists say so) with their own Python workers, nothing is printed but
the report, and ``cluster stop`` leaves no process. One cluster for the module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from kafkasim.demo import run_demo
from kafkasim.spark_jobs import audit_all, daemons, standalone

from .procs import cmdlines_with, listening, tree

pytestmark = pytest.mark.spark


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_GATEWAY_PORT")}


def _cli(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkasim", *argv], capture_output=True, text=True,
                          timeout=timeout, env=_env())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The demo's data dirs (no audits run), and a Master with 2 Workers recorded in its shop data dir."""
    root = tmp_path_factory.mktemp("standalone")
    run_demo(str(root / "demo"), seed=3, records=300, spark=False, echo=None)
    d = str(root / "demo" / "shop")
    port, webui = daemons.free_port(), daemons.free_port()
    out = _cli("spark", "cluster", "start", "--workers", "2", "--data-dir", d, "--port", str(port),
               "--webui-port", str(webui), "--memory", "1g", "--json")
    assert out.returncode == 0, out.stderr
    yield {"data_dir": d, "state": json.loads(out.stdout), "root": root}
    _cli("spark", "cluster", "stop", "--data-dir", d)


def _comparable(rep: dict) -> dict:
    rep = dict(rep)
    rep.pop("timings_s")
    return rep


def _python_workers_by_worker(worker_pids: list[int]) -> dict[int, set[int]]:
    """Per Worker JVM: the pids of Python processes running under it (under its executors)."""
    out = {}
    for w in worker_pids:
        found = set()
        for pid in tree(w) - {w}:
            try:
                comm = open(f"/proc/{pid}/comm").read().strip()
            except OSError:
                continue
            if comm.startswith("python"):
                found.add(pid)
        out[w] = found
    return out


@pytest.mark.slow
def test_audit_all_on_two_standalone_workers_gives_the_local_report(cluster, spark, tmp_path):
    d, state = cluster["data_dir"], cluster["state"]
    assert state["running"] and state["alive_workers"] == 2
    assert state["master_url"].startswith("spark://127.0.0.1:")
    workers = [w["pid"] for w in state["workers"]]
    for w in state["workers"]:      # the Workers' work dirs are in the data dir, not in site-packages
        assert w["work_dir"].startswith(os.path.join(d, "spark", "work"))
    local_json, cluster_json = tmp_path / "local.json", tmp_path / "cluster.json"
    audit_all.main(["--data-dir", d, "--json", str(local_json)], spark=spark)

    proc = subprocess.Popen([sys.executable, "-m", "kafkasim", "audit", "all", "--data-dir", d,
                             "--master", state["master_url"], "--json", str(cluster_json)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=tmp_path)
    python_under: dict[int, set[int]] = {w: set() for w in workers}
    seen: set[str] = set()
    deadline = time.monotonic() + 900
    while proc.poll() is None and time.monotonic() < deadline:
        for w, pids in _python_workers_by_worker(workers).items():
            python_under[w] |= pids
        seen |= listening(tree(proc.pid) | {p for w in workers for p in tree(w)})
        time.sleep(0.2)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err.decode()[-3000:]     # the librdkafka-style producer fails ordering
    assert err.decode() == ""                               # no JVM, log4j or Spark line
    assert seen and seen <= {"127.0.0.1", "::1"}, seen
    assert _comparable(json.loads(cluster_json.read_text())) == _comparable(json.loads(local_json.read_text()))

    # Spark's own executor lists: the Master's completed application, and each Worker's executors of it
    master = standalone.master_json(state)
    (app,) = [a for a in master["completedapps"] + master["activeapps"] if a["name"] == "kafkasim-audit"]
    executors = standalone.executors_of(d, app["id"])
    assert len({e["worker"] for e in executors}) == 2, executors     # one on each Worker
    for e in executors:                                              # each ran in its own work dir
        assert os.path.isdir(os.path.join(d, "spark", "work", "worker-1", app["id"], str(e["id"]))) or \
            os.path.isdir(os.path.join(d, "spark", "work", "worker-2", app["id"], str(e["id"])))
    # and each Worker's executor JVM ran Python workers of its own
    assert all(python_under[w] for w in workers), python_under


@pytest.mark.slow
def test_spark_connect_attached_to_the_master_runs_a_skew_audit_on_the_workers(cluster, spark, tmp_path):
    """``kafkasim spark start --master spark://...``: the server is an application of the
    standalone Master (the package zip shipped to it), and a skew audit through it gives the
    local report, run by executors on the Workers."""
    d, state = cluster["data_dir"], cluster["state"]
    local_json, warm_json = tmp_path / "local.json", tmp_path / "warm.json"
    from kafkasim.spark_jobs import skew
    skew.main(["--data-dir", d, "--json", str(local_json)], spark=spark)
    port = daemons.free_port()
    started = _cli("spark", "start", "--data-dir", d, "--master", state["master_url"], "--port", str(port),
                   "--warm-up", "0", "--json")
    assert started.returncode == 0, started.stderr[-3000:]
    try:
        out = _cli("audit", "skew", "--data-dir", d, "--json", str(warm_json), timeout=600)
        assert out.returncode in (0, 3) and out.stderr == "", out.stderr[-3000:]
        assert json.loads(warm_json.read_text()) == json.loads(local_json.read_text())
        master = standalone.master_json(state)
        (app,) = [a for a in master["activeapps"] if a["name"] == "kafkasim Spark Connect"]
        assert len({e["worker"] for e in standalone.executors_of(d, app["id"])}) == 2
    finally:
        stopped = _cli("spark", "stop", "--data-dir", d, "--json")
    assert stopped.returncode == 0 and json.loads(stopped.stdout)["stopped"] is True


@pytest.mark.slow
def test_cluster_stop_leaves_no_process_behind(cluster):
    """Last in the module: it stops the module's cluster."""
    d, state = cluster["data_dir"], cluster["state"]
    pids = [state["master"]["pid"], *(w["pid"] for w in state["workers"])]
    before = set().union(*(tree(p) for p in pids))
    assert cmdlines_with(os.path.join(d, "spark"))
    out = _cli("spark", "cluster", "stop", "--data-dir", d, "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["stopped"] is True
    left = {p for p in before if os.path.exists(f"/proc/{p}")
            and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"}
    assert left == set()
    assert cmdlines_with(os.path.join(d, "spark")) == {}
    assert json.loads(_cli("spark", "cluster", "status", "--data-dir", d, "--json").stdout)["cluster"]["running"] is False
