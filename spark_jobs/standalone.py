"""A real standalone Spark cluster on this machine: Spark's own Master and Workers, from the installed pyspark.

``kafkasim spark cluster start --workers 2 --data-dir D`` runs :func:`start`::

    spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 7077 --webui-port 8080
    spark-class org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores 1 --memory 1g \\
        --work-dir D/spark/work/worker-1 --webui-port 0 spark://127.0.0.1:7077      (once per worker)

(ports and sizes are options), all bound to 127.0.0.1 (``SPARK_LOCAL_IP``), logging through
``log4j2-quiet.properties`` (``SPARK_DAEMON_JAVA_OPTS``) into ``D/spark/logs``, each Worker's
work dir (``SPARK_WORKER_DIR``: its executors' stdout/stderr and the files they fetch)
under ``D/spark/work`` — never the default one inside site-packages. It returns when the
Master's JSON (``http://127.0.0.1:8080/json``) lists every Worker ALIVE. The processes
are recorded in ``D/spark/cluster.json``; :func:`stop` ends the Workers (and their
executors), then the Master.

Then ``kafkasim audit all --master spark://127.0.0.1:7077`` runs there: the driver is the
audit's own process, the executors are JVMs the Workers start, each with its own Python
workers, importing kafkasim from the package zip (``session.build_session`` adds it with
``addPyFile``). ``kafkasim spark start --master spark://127.0.0.1:7077`` attaches the Spark
Connect server to it instead of ``local[*]``.

:func:`master_json` and :func:`worker_json` read Spark's own status pages (the Master's
workers and applications; a Worker's executors): what the tests assert from.
Thread-safety: one command at a time per data dir.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from typing import Optional

from kafkasim.errors import IllegalStateError, InvalidArgumentError
from kafkasim.spark_jobs import daemons
from kafkasim.spark_jobs.session import LOG4J2_CONFIG

__all__ = ["start", "stop", "status", "master_json", "worker_json", "worker_webuis", "executors_of", "STATE", "DEFAULT_PORT", "DEFAULT_WEBUI_PORT"]

STATE = "cluster"
"""The state file's name: ``<data dir>/spark/cluster.json``."""
DEFAULT_PORT = 7077
"""The standalone Master's default port (``SPARK_MASTER_PORT``)."""
DEFAULT_WEBUI_PORT = 8080
"""The standalone Master's default web UI port (``SPARK_MASTER_WEBUI_PORT``)."""
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def _get_json(url: str, timeout: float = 2.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as r:   # noqa: S310  (a loopback status page)
        return json.load(r)


def master_json(state: dict) -> dict:
    """The Master's ``/json`` status (``workers``, ``aliveworkers``, ``activeapps``, ``completedapps``)."""
    return _get_json(f"{state['webui']}/json/")


def worker_json(webui: str) -> dict:
    """A Worker's ``/json`` status (``executors``, ``finishedexecutors``: ``id``, ``appid``, ...)."""
    return _get_json(f"{webui.rstrip('/')}/json/")


def _alive_workers(state: dict) -> int:
    try:
        return int(master_json(state).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


def status(data_dir: str) -> dict:
    """``{"running", "master_url", "webui", "workers": [...], ...}`` of the recorded cluster
    (``alive_workers`` as the Master counts them)."""
    state = daemons.read_state(data_dir, STATE)
    if state is None:
        return {"running": False, "data_dir": os.path.abspath(data_dir)}
    running = daemons.alive(state["master"])
    return dict(state, running=running, alive_workers=_alive_workers(state) if running else 0,
                data_dir=os.path.abspath(data_dir))


def start(data_dir: str, *, workers: int = 2, cores: int = 1, memory: str = "1g", port: int = DEFAULT_PORT,
          webui_port: int = DEFAULT_WEBUI_PORT, timeout: float = 120.0) -> dict:
    """Start a Master and ``workers`` Workers for ``data_dir``; wait until all are ALIVE;
    return :func:`status`. ``IllegalStateError`` when one already runs or a port is taken."""
    if workers < 1:
        raise InvalidArgumentError(f"--workers must be at least 1, got {workers}")
    if cores < 1:
        raise InvalidArgumentError(f"--cores must be at least 1, got {cores}")
    current = status(data_dir)
    if current["running"]:
        raise IllegalStateError(f"a standalone cluster already runs for {data_dir} at {current['master_url']}; "
                                "kafkasim spark cluster stop first")
    for what, p in (("--port", port), ("--webui-port", webui_port)):
        if not 0 < p < 65536:
            raise InvalidArgumentError(f"{what} must be 1..65535, got {p}")
        if daemons.port_open(daemons.LOOPBACK, p):
            raise IllegalStateError(f"port {p} on {daemons.LOOPBACK} is already in use (choose another with {what})")
    base = daemons.state_dir(data_dir)
    quiet = f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG}"
    spark_class = os.path.join(daemons.spark_home(), "bin", "spark-class")
    master_url = f"spark://{daemons.LOOPBACK}:{port}"
    state = {"master_url": master_url, "webui": f"http://{daemons.LOOPBACK}:{webui_port}", "workers": [],
             "started_ms": int(time.time() * 1000)}
    env = daemons.spark_env(data_dir, SPARK_DAEMON_JAVA_OPTS=quiet, SPARK_MASTER_HOST=daemons.LOOPBACK)
    master = daemons.launch([spark_class, MASTER_CLASS, "--host", daemons.LOOPBACK, "--port", str(port),
                             "--webui-port", str(webui_port)], env, os.path.join(base, "logs", "master.log"),
                            cwd=os.path.join(base, "work"))
    state["master"] = daemons.public(master)
    started = [master]
    try:
        daemons.wait_until(lambda: daemons.port_open(daemons.LOOPBACK, port) and _answers(state), [master],
                           f"the standalone Master ({master_url})", timeout)
        for i in range(1, workers + 1):
            work = os.path.join(base, "work", f"worker-{i}")
            os.makedirs(work, exist_ok=True)
            w = daemons.launch([spark_class, WORKER_CLASS, "--host", daemons.LOOPBACK, "--cores", str(cores),
                                "--memory", memory, "--work-dir", work, "--webui-port", "0", master_url],
                               daemons.spark_env(data_dir, SPARK_DAEMON_JAVA_OPTS=quiet, SPARK_WORKER_DIR=work),
                               os.path.join(base, "logs", f"worker-{i}.log"), cwd=work)
            started.append(w)
            state["workers"].append(dict(daemons.public(w), work_dir=work))
        daemons.write_state(data_dir, STATE, state)
        daemons.wait_until(lambda: _alive_workers(state) >= workers, started,
                           f"{workers} standalone Worker(s) registering with {master_url}", timeout)
    except BaseException:
        for p in reversed(started):
            daemons.stop(p)
        daemons.remove_state(data_dir, STATE)
        raise
    return status(data_dir)


def _answers(state: dict) -> bool:
    try:
        master_json(state)
        return True
    except (OSError, ValueError):
        return False


def stop(data_dir: str) -> dict:
    """End the recorded Workers (with their executors) and Master; forget them.
    ``{"stopped": bool, "pids": [...]}``."""
    state = daemons.read_state(data_dir, STATE)
    if state is None:
        return {"stopped": False, "pids": []}
    procs = [*state.get("workers", []), state["master"]]
    was = any(daemons.alive(p) for p in procs)
    for p in procs:
        daemons.stop(p)
    daemons.remove_state(data_dir, STATE)
    return {"stopped": was, "pids": [p["pid"] for p in procs]}


def worker_webuis(data_dir: str) -> list[str]:
    """The web UI address of each Worker, as the Master lists them (ALIVE ones)."""
    state = daemons.read_state(data_dir, STATE)
    if state is None:
        return []
    return [w["webuiaddress"] for w in master_json(state).get("workers", []) if w.get("state") == "ALIVE"]


def executors_of(data_dir: str, app_id: Optional[str] = None) -> list[dict]:
    """Every executor the Workers ran or run (``finishedexecutors`` and ``executors`` of each
    Worker's ``/json``), each with the ``worker`` (its id) it ran on; only ``app_id``'s if given."""
    out = []
    for url in worker_webuis(data_dir):
        w = worker_json(url)
        for e in [*w.get("executors", []), *w.get("finishedexecutors", [])]:
            if app_id is None or e.get("appid") == app_id:
                out.append(dict(e, worker=w.get("id")))
    return out
