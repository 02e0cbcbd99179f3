"""Long-running Spark processes kafkasim starts for a data dir: launch, record, probe, stop.

The Spark Connect server (:mod:`kafkasim.spark_jobs.connect`) and a standalone Master with
its Workers (:mod:`kafkasim.spark_jobs.standalone`) are JVMs started from the installed
pyspark (``bin/spark-submit``, ``bin/spark-class``). Each is launched here:

- in a session of its own (``setsid``), so a Ctrl-C at the terminal that started it does
  not reach it, and :func:`stop` can end the JVM *and everything it started* (its Python
  workers, a Worker's executors) by process group;
- bound to loopback (``SPARK_LOCAL_IP=127.0.0.1``: the block manager, the web UIs and the
  RPC endpoints of a standalone daemon bind it);
- with its stdout and stderr in a log file under ``<data dir>/spark/logs`` and
  ``SPARK_LOG_DIR``, ``SPARK_CONF_DIR`` (empty unless the user puts a ``spark-defaults.conf``
  there), ``SPARK_WORKER_DIR`` and ``spark.local.dir`` under ``<data dir>/spark``: nothing is
  written into site-packages or the current directory;
- logging through ``log4j2-quiet.properties`` (errors only).

What was started is recorded as JSON in ``<data dir>/spark/<name>.json`` (written
atomically); :func:`alive` checks a recorded pid is still that process (its start time
in ``/proc`` matches), so a recycled pid is never signalled.

Thread-safety: none needed (one CLI command at a time per data dir).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Callable, Optional, Sequence

from kafkasim.errors import IllegalStateError, InvalidArgumentError, KafkaTimeoutError

__all__ = ["spark_home", "state_dir", "read_state", "write_state", "remove_state", "launch", "alive",
           "stop", "port_open", "free_port", "wait_until", "spark_env", "LOOPBACK", "log_tail", "public"]

LOOPBACK = "127.0.0.1"


def spark_home() -> str:
    """The installed pyspark's folder: Spark's home (``bin/``, ``jars/``, ``sbin/``)."""
    import pyspark
    return os.path.dirname(os.path.abspath(pyspark.__file__))


def state_dir(data_dir: str) -> str:
    """``<data dir>/spark``: the state files, logs, work and local dirs of the Spark processes."""
    return os.path.join(os.path.abspath(data_dir), "spark")


def _state_path(data_dir: str, name: str) -> str:
    return os.path.join(state_dir(data_dir), f"{name}.json")


def read_state(data_dir: str, name: str) -> Optional[dict]:
    """The recorded ``name`` state of ``data_dir``, or None."""
    try:
        with open(_state_path(data_dir, name), encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"cannot read {_state_path(data_dir, name)}: {exc}") from exc


def write_state(data_dir: str, name: str, state: dict) -> None:
    path = _state_path(data_dir, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def remove_state(data_dir: str, name: str) -> None:
    try:
        os.unlink(_state_path(data_dir, name))
    except FileNotFoundError:
        pass


def _start_ticks(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def alive(proc: Optional[dict]) -> bool:
    """Whether the recorded process (``{"pid", "start_ticks"}``) still runs (not a zombie)."""
    if not proc:
        return False
    pid = proc["pid"]
    if _start_ticks(pid) != proc.get("start_ticks"):
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def spark_env(data_dir: str, **extra: str) -> dict[str, str]:
    """The environment of a Spark process for ``data_dir`` (see the module docstring)."""
    base = state_dir(data_dir)
    conf_dir = os.path.join(base, "conf")
    os.makedirs(conf_dir, exist_ok=True)
    env = dict(os.environ)
    env.pop("SPARK_REMOTE", None)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.update({"SPARK_HOME": spark_home(), "SPARK_LOCAL_IP": LOOPBACK, "SPARK_LOG_DIR": os.path.join(base, "logs"),
                "SPARK_CONF_DIR": conf_dir, "SPARK_PID_DIR": base, "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable})
    env.update(extra)
    return env


def launch(cmd: Sequence[str], env: dict[str, str], log_path: str, cwd: str) -> dict:
    """Start ``cmd`` in its own session with output to ``log_path``; ``{"pid", "start_ticks", "log"}``."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    os.makedirs(cwd, exist_ok=True)
    with open(log_path, "ab") as log, open(os.devnull, "rb") as null:
        proc = subprocess.Popen(list(cmd), stdin=null, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True)
    return {"pid": proc.pid, "start_ticks": _start_ticks(proc.pid), "log": log_path, "_popen": proc}


def _group_members(pgid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and (fields[0] != "Z" or _threads_left(entry)):
                out.append(int(entry))
    return out


def _threads_left(pid: str) -> bool:
    """Whether a zombie group leader still has threads exiting: a JVM's main thread is a
    zombie before its other threads (which hold its listening sockets) are gone."""
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def stop(proc: Optional[dict], timeout: float = 15.0) -> None:
    """End the recorded process and its process group (what it started): SIGTERM, then
    SIGKILL after ``timeout`` s; returns when none of the group is left."""
    if not proc:
        return
    popen = proc.get("_popen")
    if alive(proc):
        pgid = proc["pid"]          # launched with start_new_session: its pid is its group's id
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _group_members(pgid) and time.monotonic() < deadline:
            if popen is not None:
                popen.poll()        # reap our own child, so it does not linger as a zombie
            time.sleep(0.1)
        if _group_members(pgid):
            _signal_group(pgid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while _group_members(pgid) and time.monotonic() < deadline:
                if popen is not None:
                    popen.poll()
                time.sleep(0.1)
    if popen is not None:
        try:
            popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def log_tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def wait_until(ready: Callable[[], bool], procs: Sequence[dict], what: str, timeout: float) -> None:
    """Poll ``ready`` until true; raise ``IllegalStateError`` when one of ``procs`` exits
    first, ``KafkaTimeoutError`` when ``timeout`` s pass (each with the log's tail)."""
    deadline = time.monotonic() + timeout
    while True:
        if ready():
            return
        for p in procs:
            popen = p.get("_popen")
            if popen is not None and popen.poll() is not None:
                raise IllegalStateError(f"{what} exited with code {popen.returncode} before it was ready; "
                                        f"{p['log']} ends:\n{log_tail(p['log'])}")
        if time.monotonic() > deadline:
            raise KafkaTimeoutError(f"{what} was not ready after {timeout:.0f} s; see {procs[0]['log']}:\n"
                                    f"{log_tail(procs[0]['log'])}")
        time.sleep(0.2)


def public(proc: dict) -> dict:
    """``proc`` without the in-memory handle (what goes into the state file)."""
    return {k: v for k, v in proc.items() if not k.startswith("_")}
