"""How kafkasim starts Spark: the one place a SparkSession is configured.

``build_session()`` returns a SparkSession whose workers run ``sys.executable``
(``spark.pyspark.python``), with the kafkasim data source registered, and which is
**quiet and local-only by default** on a ``local[...]`` master, and on a standalone master
on this machine's loopback (``spark://127.0.0.1:PORT``, ``kafkasim spark cluster start``):

- everything binds 127.0.0.1 (``spark.driver.host``/``bindAddress`` and
  ``SPARK_LOCAL_IP`` for the block manager), so an audit never listens on an external
  interface, and the Spark UI stays off unless ``ui=True``;
- the driver JVM logs only errors (``log4j2-quiet.properties`` beside this file) and its
  start-up chatter (``Using incubator modules``, the native-library and log-level
  notices) is filtered from its stderr; anything else the JVM prints still reaches the
  user's stderr. ``verbose=True`` keeps Spark's own logging and output untouched.

:func:`stop_now` ends a session at once on Ctrl-C: it kills the driver JVM this process
launched (what ``SparkSession.stop`` would wait for: running tasks, shutdown hooks),
so an interrupted audit exits in well under a second instead of about 8 s.

On any cluster master the package zip (``package.build_zip``) is added with ``addPyFile``,
so executors import kafkasim from it as under ``spark-submit --py-files``. Under
``spark-submit`` (``master=None``) or a remote cluster master, Spark's own launch and the
cluster's settings apply. A Spark Connect session (``kafkasim.spark_jobs.connect``) has no
SparkContext: :func:`master_of` and :func:`default_parallelism` read what the jobs need
through its conf. Not thread-safe to call concurrently (SparkSession.builder is
global).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from typing import Mapping, Optional, Sequence

__all__ = ["build_session", "stop_now", "plain_ctrl_c", "quiet_interrupts", "LOG4J2_CONFIG", "NOISE",
           "is_connect", "master_of", "in_process_master", "default_parallelism"]

LOG4J2_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2-quiet.properties")

# Lines the JVM prints on every start that tell a user nothing about their audit.
NOISE = re.compile(
    r"WARNING: Using incubator modules|NativeCodeLoader|Setting default log level|"
    r"To adjust logging level|resolves to a loopback address|Set SPARK_LOCAL_IP|"
    r"^\s*$")


def _forward_stderr(stream) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        if not NOISE.search(line):
            sys.stderr.write(line)
            sys.stderr.flush()


def _start_quiet_gateway(conf_pairs: dict) -> None:
    """Launch the py4j JVM ourselves with its stderr piped through the noise filter."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return                                        # a JVM is already there (tests, spark-submit)
    conf = SparkConf(loadDefaults=False)
    for k, v in conf_pairs.items():
        conf.set(k, v)
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=_forward_stderr, args=(gateway.proc.stderr,), name="spark-stderr",
                     daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def build_session(app_name: str = "kafkasim", master: Optional[str] = "local[*]",
                  extra_conf: Optional[Mapping[str, str]] = None, *, verbose: bool = False,
                  ui: bool = False, jvm_options: Sequence[str] = ()):
    """Build (or get) a SparkSession configured for kafkasim jobs (see the module docstring).

    ``master=None`` leaves the master to ``spark-submit``. ``jvm_options``: extra options of
    the driver JVM on a ``local[...]`` master (``spark.driver.extraJavaOptions``; they apply
    only when this call starts the JVM).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    local = bool(master) and master.startswith("local")
    loopback = local or bool(master) and _loopback_master(master)
    conf = {"spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
            "spark.sql.session.timeZone": "UTC",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.execution.arrow.pyspark.enabled": "true"}
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                     "spark.ui.enabled": "true" if ui else "false"})
        java = list(jvm_options) + ([] if verbose else [f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG}"])
        if java:
            conf["spark.driver.extraJavaOptions"] = " ".join(java)
        if not local and not verbose:
            conf["spark.executor.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG}"
    conf.update(extra_conf or {})
    if loopback and not verbose:
        _start_quiet_gateway(dict(conf, **{"spark.master": master, "spark.app.name": app_name}))
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for k, v in conf.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    from kafkasim.spark_jobs.datasource import register
    register(session)
    if master and not local:        # a cluster's executors import kafkasim from the package zip
        _add_package(session)
    return session


def _loopback_master(master: str) -> bool:
    """Whether ``master`` is a standalone master on this machine's loopback (``spark://127.0.0.1:7077``):
    the driver then binds loopback too, as in local mode."""
    hosts = [h.rsplit(":", 1)[0] for h in master[len("spark://"):].split(",")] if master.startswith("spark://") else []
    return bool(hosts) and all(h in ("127.0.0.1", "localhost") for h in hosts)


def _add_package(session) -> None:
    """Ship the package zip (``package.build_zip``) to the executors, as ``--py-files`` does."""
    import tempfile
    from kafkasim.spark_jobs.package import build_zip
    folder = tempfile.mkdtemp(prefix="kafkasim-jobs-")     # SparkContext.stop removes its copies; this is ours
    session.sparkContext.addPyFile(build_zip(os.path.join(folder, "kafkasim-jobs.zip")))
    import atexit
    import shutil
    atexit.register(shutil.rmtree, folder, True)


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (a thin client of a server: no
    ``sparkContext``, the conf read over gRPC)."""
    from pyspark.sql.utils import is_remote
    return is_remote() or type(spark).__module__.startswith("pyspark.sql.connect")


def master_of(spark) -> str:
    """The session's master URL (``spark.master``; through the server under Spark Connect)."""
    if is_connect(spark):
        return spark.conf.get("spark.master", "local[*]")
    return spark.sparkContext.master


def in_process_master(spark) -> bool:
    """Whether the session's tasks run inside its driver JVM (``local[...]``, not
    ``local-cluster``): then a small local log is read by the driver (:func:`read_log`)."""
    master = master_of(spark)
    return master.startswith("local") and not master.startswith("local-cluster")


def default_parallelism(spark) -> int:
    """``sparkContext.defaultParallelism``; under Spark Connect (no SparkContext) the
    server's ``spark.default.parallelism`` (``kafkasim spark start`` sets it), else the
    ``N`` of a ``local[N]`` master (``*``: this machine's cores), else 2 (Spark's floor on
    a cluster)."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    given = spark.conf.get("spark.default.parallelism", None)
    if given:
        return int(given)
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master_of(spark))
    if m:
        return (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))
    return 1 if master_of(spark) == "local" else 2


def plain_ctrl_c() -> None:
    """Make Ctrl-C a plain ``KeyboardInterrupt`` again in a process that will end Spark with
    :func:`stop_now`. pyspark's SIGINT handler calls ``cancelAllJobs`` through py4j from
    inside whatever py4j call the main thread is in, which fails and logs a traceback; the
    jobs die with the JVM anyway. Only from the main thread (signals are its business)."""
    import signal

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


class _NoPy4JTracebacks:
    """A logger filter for the tracebacks py4j logs when Ctrl-C crosses one of its calls.
    py4j logs "KeyboardInterrupt while sending command." on the *root* logger (which, with no
    handler yet, also runs ``logging.basicConfig``), then closes the connection and logs
    "Exception occurred while shutting down connection" on ``py4j.clientserver`` when the
    JVM is already gone; pyspark's own SIGINT handler calling into py4j in the middle of a
    call does the same. The failure they describe reaches the caller as an exception anyway
    (py4j returns an error answer), so nothing is lost. A logger's filters see only the
    records logged *to* it, so one is installed on root and on each py4j logger; records of
    other loggers, and root records from anywhere but py4j's files, pass."""

    def filter(self, record) -> bool:
        return f"{os.sep}py4j{os.sep}" not in (record.pathname or "")


_PY4J_LOGGERS = ("", "py4j", "py4j.clientserver", "py4j.java_gateway")


def quiet_interrupts() -> None:
    """Install :class:`_NoPy4JTracebacks` on root and py4j's loggers (once each)."""
    import logging

    for name in _PY4J_LOGGERS:
        log = logging.getLogger(name)
        if not any(isinstance(f, _NoPy4JTracebacks) for f in log.filters):
            log.addFilter(_NoPy4JTracebacks())


def stop_now(session) -> None:
    """End ``session`` at once (Ctrl-C): kill the driver JVM when this process launched it
    (a local master), else cancel its jobs and stop it. Never raises, and nothing is logged
    afterwards: the caller is already on its way out with the interrupt, and the threads
    still waiting on the JVM (the audits, pyspark's accumulator server) only fail."""
    import logging

    try:
        if is_connect(session):       # a thin client: interrupt our operations, release the server's session
            session.interruptAll()
            session.stop()
            return
        from pyspark import SparkContext

        sc = session.sparkContext
        proc = getattr(SparkContext._gateway, "proc", None)
        if proc is None or proc.poll() is not None:
            sc.cancelAllJobs()
            session.stop()
            return
        server = getattr(sc, "_accumulatorServer", None)    # pyspark's own: SparkContext.stop does this
        if server is not None:
            server.handle_error = lambda *a: None
            server.shutdown()
        logging.disable(logging.CRITICAL)   # py4j logs every call the dead JVM no longer answers
        proc.kill()                 # the JVM and with it its Python workers (their stdin closes)
        proc.wait(timeout=5)
    except BaseException:               # noqa: BLE001  (a second Ctrl-C, a dead gateway: we are leaving)
        pass
