"""The address file: ``<data_dir>/.server.json`` says which server is serving a data dir.

``kafkasim serve`` writes it once it listens and removes it on a clean shutdown
(:mod:`kafkasim.server.runner`); every other ``kafkasim`` command reads it to decide
whether to talk to that server over the wire (:mod:`kafkasim.server.remote`) or to open
the data dir itself. Content: ``{"host", "port", "pid", "started_ms"}``, ``"metrics_port"`` when the server
serves ``/metrics`` and ``"control_url"`` (``http://127.0.0.1:P``) when it serves the fault
control endpoint (``--control-port``, :mod:`kafkasim.server.fault_http`); a served cluster adds ``"brokers": [{"id", "host", "port", "rack"}, ...]``
(one listener per broker; "host"/"port" are the first's).

Writes are atomic (temporary name, fsync, rename, fsync of the directory), so a reader
sees the whole file or none. A file left behind by a server that died is *stale*: nobody
listens at its address; :func:`server_for` tells (it tries to connect), and
:func:`kafkasim.server.routing.open_broker` acts on it. Importing this module is cheap
(json, os and socket only: no wire protocol). Thread-safety: plain functions.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Optional

from kafkasim.errors import KafkaStorageError

__all__ = ["ADDRESS_FILE", "read_address", "write_address", "remove_address", "server_for",
           "server_process_alive"]

ADDRESS_FILE = ".server.json"


def write_address(data_dir: str, host: str, port: int, *, metrics_port: Optional[int] = None,
                  brokers: Optional[list] = None, control_url: Optional[str] = None) -> str:
    """Atomically write the address file; returns its path."""
    path = os.path.join(data_dir, ADDRESS_FILE)
    tmp = path + ".tmp"
    info = {"host": host, "port": port, "pid": os.getpid(), "started_ms": int(time.time() * 1000)}
    if metrics_port is not None:
        info["metrics_port"] = metrics_port
    if brokers is not None:
        info["brokers"] = brokers
    if control_url is not None:
        info["control_url"] = control_url
    data = json.dumps(info).encode()
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(data_dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise KafkaStorageError(f"cannot write the server address file {path}: {exc}") from exc
    return path


def read_address(data_dir: str) -> Optional[dict]:
    """The address file's content, or None when no server is announced for ``data_dir``
    (no file, or one that does not parse as ``{"host": str, "port": int, ...}``)."""
    try:
        with open(os.path.join(data_dir, ADDRESS_FILE), "rb") as f:
            info = json.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("host"), str) \
            or not isinstance(info.get("port"), int):
        return None
    return info


def remove_address(data_dir: str) -> None:
    for name in (ADDRESS_FILE, ADDRESS_FILE + ".tmp"):
        try:
            os.unlink(os.path.join(data_dir, name))
        except FileNotFoundError:
            pass


def _answers(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def server_for(data_dir: str) -> tuple[Optional[dict], bool]:
    """``(address file content or None, whether a server answers there)``. For a served
    cluster the first broker whose listener answers is chosen ("host"/"port" set to it), so
    commands still reach the server while some brokers are stopped."""
    info = read_address(data_dir)
    if info is None:
        return None, False
    for b in info.get("brokers") or []:
        if isinstance(b, dict) and isinstance(b.get("host"), str) and isinstance(b.get("port"), int) \
                and _answers(b["host"], b["port"]):
            return {**info, "host": b["host"], "port": b["port"]}, True
    return info, _answers(info["host"], info["port"])


def server_process_alive(info: dict) -> bool:
    """Whether the process an address file names (its ``pid``) still runs on this machine."""
    pid = info.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:       # it runs, as another user
        return True
    return True
