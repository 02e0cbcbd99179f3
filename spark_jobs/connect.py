"""A warm Spark for the audits: a Spark Connect server per data dir, and the thin clients that use it.

``kafkasim spark start --data-dir D`` runs :func:`start`: Spark's own
``org.apache.spark.sql.connect.service.SparkConnectServer`` (the ``spark-connect_2.13`` jar the
pip pyspark ships), launched with the installed ``bin/spark-submit`` as::

    spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer \\
        --master 'local[*]' --conf spark.connect.grpc.binding.address=127.0.0.1 \\
        --conf spark.connect.grpc.binding.port=15002 --conf spark.driver.host=127.0.0.1 ...

bound to 127.0.0.1 (gRPC, driver, block manager; the UI off unless asked, then on
127.0.0.1), quiet (``log4j2-quiet.properties``; output in ``D/spark/logs/connect.log``),
its local and work dirs under ``D/spark`` (:mod:`kafkasim.spark_jobs.daemons`). Its address
and pid are recorded in ``D/spark/connect.json``; ``kafkasim spark stop`` ends it and
every process it started (its Python workers).

:func:`remote_url` picks the server an audit uses: ``--remote sc://HOST:PORT``, else
Spark's own ``SPARK_REMOTE``, else the live server recorded in the data dir, else none
(a local session starts, as before). :func:`session` opens a Spark Connect session on it,
registers the ``kafkasim`` data source (a Connect session's registrations are its own), and
when the server's master is not in-process (a standalone or other cluster) ships the
package zip of :mod:`kafkasim.spark_jobs.package` with ``addArtifacts(pyfile=True)``, as
``--py-files`` does for ``spark-submit``. The audits then run the same job code, through
the same DataFrame API (``common.is_connect`` covers the few places that read the
SparkContext).

The server JVM runs with the JIT's first tier only (``-XX:TieredStopAtLevel=1``): its work is
many short queries whose planning dominates, and C2 takes many runs to pay off. Measured on
a 2-record log at load 4–5 on 2 shared cores: the two warm-up ``audit all`` runs took
21.8 s and 6.5 s against 26.8 s and 9.0 s with the default tiers, and the skew audits after
them 5.6, 4.7, 3.6 s against 5.6, 5.7, 4.9 s.

Spark Connect's default port is 15002 (``spark.connect.grpc.binding.port``). Thread-safety:
one command at a time per data dir.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Optional

from kafkasim.errors import IllegalStateError, InvalidArgumentError
from kafkasim.spark_jobs import daemons, session_pool
from kafkasim.spark_jobs.session import LOG4J2_CONFIG, in_process_master

__all__ = ["start", "stop", "status", "client_socket", "record_client", "remote_url", "session", "end", "parse_url", "DEFAULT_PORT", "SERVER_CLASS", "STATE"]

DEFAULT_PORT = 15002
"""``spark.connect.grpc.binding.port``'s default."""
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
STATE = "connect"
"""The state file's name: ``<data dir>/spark/connect.json``."""


def parse_url(url: str) -> tuple[str, int]:
    """``sc://HOST[:PORT][/;params]`` → (host, port); the port defaults to 15002."""
    if not url.startswith("sc://"):
        raise InvalidArgumentError(f"not a Spark Connect URL: {url!r} (expected sc://HOST:PORT)")
    hostport = url[5:].split("/", 1)[0].split(";", 1)[0]
    host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    if not host:
        raise InvalidArgumentError(f"no host in Spark Connect URL {url!r}")
    try:
        return host, int(port) if port else DEFAULT_PORT
    except ValueError:
        raise InvalidArgumentError(f"bad port {port!r} in Spark Connect URL {url!r}") from None


def status(data_dir: str) -> dict:
    """``{"running": bool, "url", "pid", "master", "log", "client_running": bool, ...}`` of the
    recorded server and its warm client
    (``running`` false and no ``url`` when none was started; a recorded server that died is
    reported with ``running`` false)."""
    state = daemons.read_state(data_dir, STATE)
    if state is None:
        return {"running": False, "data_dir": os.path.abspath(data_dir)}
    host, port = parse_url(state["url"])
    running = daemons.alive(state["server"]) and daemons.port_open(host, port)
    client = state.get("client")
    return dict(state, running=running, data_dir=os.path.abspath(data_dir),
                client_running=client is not None and daemons.alive(client))


def start(data_dir: str, *, port: int = DEFAULT_PORT, master: str = "local[*]", ui: bool = False,
          ui_port: int = 4040, driver_memory: str = "1g", conf: Optional[dict] = None,
          timeout: float = 120.0) -> dict:
    """Start the server for ``data_dir`` and wait until it answers; return :func:`status`.

    Raises ``IllegalStateError`` when one is already running for this data dir, or the
    port is taken, or the JVM exits before it listens; ``KafkaTimeoutError`` after
    ``timeout`` s."""
    current = status(data_dir)
    if current["running"]:
        raise IllegalStateError(f"a Spark Connect server already runs for {data_dir} at {current['url']} "
                                f"(pid {current['server']['pid']}); kafkasim spark stop first")
    if not 0 < port < 65536:
        raise InvalidArgumentError(f"port must be 1..65535, got {port}")
    if daemons.port_open(daemons.LOOPBACK, port):
        raise IllegalStateError(f"port {port} on {daemons.LOOPBACK} is already in use (choose another with --port)")
    base = daemons.state_dir(data_dir)
    home = daemons.spark_home()
    settings = {
        "spark.connect.grpc.binding.address": daemons.LOOPBACK,
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": daemons.LOOPBACK, "spark.driver.bindAddress": daemons.LOOPBACK,
        "spark.ui.enabled": "true" if ui else "false", "spark.ui.port": str(ui_port),
        "spark.ui.showConsoleProgress": "false",
        "spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable,
        "spark.sql.session.timeZone": "UTC", "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.local.dir": os.path.join(base, "local"),
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG} -XX:TieredStopAtLevel=1",
        "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG}",
    }
    if master.startswith("local") and not master.startswith("local-cluster"):
        settings["spark.default.parallelism"] = str(_local_cores(master))
    settings.update(conf or {})
    cmd = [os.path.join(home, "bin", "spark-submit"), "--class", SERVER_CLASS, "--name", "kafkasim Spark Connect",
           "--master", master, "--driver-memory", driver_memory]
    for k, v in settings.items():
        cmd += ["--conf", f"{k}={v}"]
    os.makedirs(settings["spark.local.dir"], exist_ok=True)
    proc = daemons.launch(cmd, daemons.spark_env(data_dir), os.path.join(base, "logs", "connect.log"),
                          cwd=os.path.join(base, "work"))
    url = f"sc://{daemons.LOOPBACK}:{port}"
    try:
        daemons.wait_until(lambda: daemons.port_open(daemons.LOOPBACK, port), [proc],
                           f"the Spark Connect server ({url})", timeout)
    except BaseException:
        daemons.stop(proc)
        raise
    state = {"url": url, "master": master, "server": daemons.public(proc), "ui": f"http://{daemons.LOOPBACK}:{ui_port}"
             if ui else None, "started_ms": int(time.time() * 1000)}
    daemons.write_state(data_dir, STATE, state)
    return status(data_dir)


def _local_cores(master: str) -> int:
    inside = master[master.find("[") + 1:master.find("]")] if "[" in master else "1"
    inside = inside.split(",")[0]
    return (os.cpu_count() or 1) if inside == "*" else int(inside)


def client_socket(data_dir: str) -> str:
    """``<data dir>/spark/client.sock``: where the audits' warm client listens."""
    return os.path.join(daemons.state_dir(data_dir), "client.sock")


def record_client(data_dir: str, client: dict) -> dict:
    """Record the audits' warm client (``kafkasim.cli.warm_client``) with the server, so
    :func:`stop` ends it too; returns :func:`status`."""
    state = daemons.read_state(data_dir, STATE)
    if state is None:
        raise IllegalStateError(f"no Spark Connect server is recorded for {data_dir}")
    daemons.write_state(data_dir, STATE, dict(state, client=client))
    return status(data_dir)


def stop(data_dir: str) -> dict:
    """End the recorded server, its warm client, and all they started; forget them.
    ``{"stopped": bool, "pid"}``."""
    state = daemons.read_state(data_dir, STATE)
    if state is None:
        return {"stopped": False, "pid": None}
    was = daemons.alive(state["server"])
    daemons.stop(state.get("client"))
    try:
        os.unlink(client_socket(data_dir))
    except FileNotFoundError:
        pass
    daemons.stop(state["server"])
    daemons.remove_state(data_dir, STATE)
    return {"stopped": was, "pid": state["server"]["pid"]}


def remote_url(remote: Optional[str], data_dir: Optional[str]) -> Optional[str]:
    """The Spark Connect server an audit should use (see the module docstring), or None."""
    if remote:
        parse_url(remote)
        return remote
    if os.environ.get("SPARK_REMOTE"):
        return os.environ["SPARK_REMOTE"]
    if data_dir and "://" not in data_dir and os.path.isdir(data_dir):
        s = status(data_dir)
        if s["running"]:
            return s["url"]
    return None


_SLOTS: dict = {}
"""``id(session)`` → its ``session_pool.Slot``, for :func:`end`."""


def session(url: str, *, ship_package: Optional[bool] = None, data_dir: Optional[str] = None):
    """A Spark Connect session on ``url`` with the ``kafkasim`` data source registered and,
    for a server whose tasks do not run in its own JVM (or with ``ship_package=True``), the
    package zip added as a Python artifact.

    With ``data_dir``, the session is one of that data dir's warm sessions on this server
    (:mod:`kafkasim.spark_jobs.session_pool`) when a slot is free: end it with :func:`end`,
    which keeps it open on the server for the next audit."""
    host, port = parse_url(url)
    if not daemons.port_open(host, port, timeout=2.0):
        raise IllegalStateError(f"no Spark Connect server answers at {url} (kafkasim spark start, or check --remote)")
    slot = None if "session_id=" in url else session_pool.take(data_dir, host, port)   # the user's own session wins
    try:
        spark = _registered(url, slot)
    except Exception as exc:        # noqa: BLE001  (pyspark's gRPC errors have no common kafkasim type)
        if slot is None or "SESSION_CLOSED" not in str(exc):
            if slot is not None:
                slot.release()
            raise
        slot.renew()                # the server closed this slot's session (idle timeout): a new one
        spark = _registered(url, slot)
    if slot is not None:        # stop() closes our channel only: the session stays warm
        _SLOTS[id(spark)] = slot
    if ship_package is None:
        ship_package = not in_process_master(spark)
    if ship_package:
        from kafkasim.spark_jobs.package import build_zip
        with tempfile.TemporaryDirectory(prefix="kafkasim-jobs-") as tmp:
            spark.addArtifacts(build_zip(os.path.join(tmp, "kafkasim-jobs.zip")), pyfile=True)
    return spark


def _registered(url: str, slot):
    """A session on ``url`` (the slot's session id, if any) with the data source registered:
    the registration is the session's first round trip."""
    from pyspark.sql import SparkSession
    from kafkasim.spark_jobs.datasource import register
    if slot is None:
        spark = SparkSession.builder.remote(url).getOrCreate()
    else:
        joined = f"{url};" if "/;" in url else f"{url.rstrip('/')}/;"
        spark = SparkSession.builder.remote(f"{joined}session_id={slot.session_id}").create()
        spark.release_session_on_close = False
    try:
        register(spark)
    except BaseException:
        spark.stop()        # no longer this process's active session (pyspark's functions ask it)
        raise
    return spark


def end(spark) -> None:
    """Stop ``spark`` (any session): a warm session from :func:`session` closes only its
    client and frees its slot, the server keeps the session for the next audit."""
    slot = _SLOTS.pop(id(spark), None)
    try:
        spark.stop()
    finally:
        if slot is not None:
            slot.release()
