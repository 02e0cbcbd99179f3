"""A warm client for the audits: ``kafkasim audit ...`` runs in a fork of a process that has
pyspark's Spark Connect client already imported.

A warm audit's own Python start was its largest fixed cost: pyspark's Connect client imports
pandas, pyarrow and gRPC whether the audit uses them or not, 0.8 s on a quiet 2-core machine
and 1.4 s under load (measured: the same ``audit skew`` on a warm server took 3.1–4.0 s as a
CLI process and 1.7–2.3 s in a process that had imported them, same server, same minutes).
``kafkasim spark start`` therefore also starts :func:`serve` for the data dir: one Python
process that imports :data:`PRELOAD` and listens on ``<data dir>/spark/client.sock`` (a Unix
``SOCK_SEQPACKET`` socket, mode 0600: this user's only). ``kafkasim audit ...`` on that data
dir (without ``--master``) hands it the command (:func:`delegate`): its arguments, working
directory and environment, and its stdin, stdout and stderr themselves (``SCM_RIGHTS``). The
warm client forks; the child takes those descriptors as 0, 1 and 2 and runs ``kafkasim.cli.main``
on the arguments, exactly as the CLI process would have, and sends back its exit code, which
the CLI process exits with. Output goes straight to the user's terminal or files; Ctrl-C (and
SIGTERM) at the CLI is passed to the child, which prints its one line and exits 130 as any
command does.

Fork safety: the warm client never opens a gRPC channel or starts a thread before it forks
(the imports alone do neither); each child opens its own session. Children are reaped by the
kernel (``SIGCHLD`` ignored in the warm client, set back to default in the child, whose audits
wait for their own subprocesses). ``kafkasim spark stop`` ends it with the server (its process
group: the children too). Code is what it imported at start: restart it (``spark stop``,
``spark start``) after upgrading kafkasim. Each request is logged to
``<data dir>/spark/logs/client.log``.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import sys
import time
import traceback
from typing import Callable, Optional, Sequence

from kafkasim.spark_jobs import daemons
from kafkasim.spark_jobs.connect import client_socket as socket_path

__all__ = ["serve", "delegate", "launch", "PRELOAD", "INSIDE"]

_ENTRY = ("import sys; from kafkasim.cli import main; from kafkasim.cli.warm_client import serve; "
          "serve(sys.argv[1], main)")
"""The warm client's command line (``python -c``): it runs ``kafkasim.cli.main``, which this
module is given rather than imports (the CLI package imports this module)."""

PRELOAD = ("pyspark.sql.connect.session", "pyarrow", "pandas", "kafkasim.cli.audit", "kafkasim.spark_jobs.audit_all",
           "kafkasim.spark_jobs.skew", "kafkasim.spark_jobs.ordering", "kafkasim.spark_jobs.lag",
           "kafkasim.spark_jobs.transactions", "kafkasim.spark_jobs.watch", "kafkasim.spark_jobs.connect")
"""What the warm client imports once: pyspark's Connect client and every audit's module."""
INSIDE = "KAFKASIM_WARM_CLIENT_CHILD"
"""Set in a child's environment: the command runs here, it is not handed on again."""
_MAX_REQUEST = 1 << 20


def launch(data_dir: str, timeout: float = 60.0) -> dict:
    """Start :func:`serve` for ``data_dir`` as a process of its own (its own session, log in
    ``<data dir>/spark/logs/client.log``); return it as recorded (``daemons.public``) once it
    answers on its socket."""
    base = daemons.state_dir(data_dir)
    path = socket_path(data_dir)
    proc = daemons.launch([sys.executable, "-c", _ENTRY, os.path.abspath(data_dir)],
                          dict(os.environ), os.path.join(base, "logs", "client.log"), cwd=os.path.join(base, "work"))
    try:
        daemons.wait_until(lambda: _answers(path), [proc], "the audits' warm client", timeout)
    except BaseException:
        daemons.stop(proc)
        raise
    return daemons.public(proc)


def _answers(path: str) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            s.connect(path)
            s.send(b"{}")           # a ping: no descriptors, answered by closing
        return True
    except OSError:
        return False


def serve(data_dir: str, run: Callable[[list], int]) -> None:
    """The warm client's loop (never returns; SIGTERM ends it): each request forks a child
    that calls ``run(argv)`` (``kafkasim.cli.main``)."""
    for name in PRELOAD:
        importlib.import_module(name)
    path = socket_path(data_dir)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)       # the kernel reaps the children
    print(f"warm client for {data_dir}: ready on {path}", flush=True)
    while True:
        conn, _ = listener.accept()
        try:
            msg, fds, _, _ = socket.recv_fds(conn, _MAX_REQUEST, 3)
        except OSError:
            conn.close()
            continue
        if len(fds) != 3:               # a ping, or a request without its descriptors
            for fd in fds:
                os.close(fd)
            conn.close()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            _child(conn, msg, fds, run)     # never returns
        for fd in fds:
            os.close(fd)
        conn.close()
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid {pid}: kafkasim {' '.join(_argv_of(msg))}", flush=True)


def _argv_of(msg: bytes) -> list:
    try:
        return list(json.loads(msg)["argv"])
    except (ValueError, KeyError, TypeError):
        return ["?"]


def _child(conn: socket.socket, msg: bytes, fds: list, run: Callable[[list], int]) -> None:
    code = 1
    try:
        req = json.loads(msg)
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(req["env"])
        os.environ[INSIDE] = "1"
        os.chdir(req["cwd"])
        conn.send(json.dumps({"pid": os.getpid()}).encode())
        sys.argv = ["kafkasim", *req["argv"]]
        code = run(req["argv"])
    except SystemExit as exc:           # argparse's usage errors, --help
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:               # noqa: BLE001  (reported, then the child ends)
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        try:
            conn.send(json.dumps({"exit": code}).encode())
        except OSError:
            pass
        os._exit(code)


def delegate(data_dir: str, argv: Sequence[str]) -> Optional[int]:
    """Run ``kafkasim argv`` in ``data_dir``'s warm client and return its exit code; None
    when no warm client answers there (the caller runs the command itself)."""
    if os.environ.get(INSIDE) or not os.path.isdir(data_dir):
        return None
    path = socket_path(data_dir)
    if not os.path.exists(path):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        return None
    request = json.dumps({"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        socket.send_fds(conn, [request], [0, 1, 2])
        first = conn.recv(4096)
    except OSError:
        conn.close()
        return None
    if not first:                       # it closed before forking: run here instead
        conn.close()
        return None
    child = json.loads(first)["pid"]
    passed = {}

    def pass_on(signum, _frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            passed[sig] = signal.signal(sig, pass_on)
        except ValueError:              # not the main thread: signals stay as they are
            pass
    try:
        while True:
            try:
                answer = conn.recv(4096)
            except InterruptedError:
                continue
            if not answer:
                print(f"kafkasim {argv[0] if argv else ''}: the warm client's worker (pid {child}) ended "
                      f"without an exit code", file=sys.stderr)
                return 1
            return int(json.loads(answer)["exit"])
    finally:
        for sig, handler in passed.items():
            signal.signal(sig, handler)
        conn.close()
