"""Fault and admin calls on a served cluster, from another process: the control directory.

While ``kafkasim serve`` serves a cluster it holds the data dir's lock, so ``kafkasim
cluster stop-broker 1`` cannot open the cluster itself. Instead it drops a request file
into ``<data_dir>/.server-control/`` and the server, which looks there on every tick
(:mod:`kafkasim.server.listeners`, every 100 ms), runs the call on its in-process cluster
and writes the answer next to it. Kafka has no wire API to stop a broker, so this is a
kafkasim-only side channel; it never leaves the data dir, and only the calls in
:data:`METHODS` are accepted.

- request ``<id>.req.json``: ``{"method": "stop_broker", "args": [1]}``, written to a
  temporary name and renamed, so the server sees all of it or nothing;
- answer ``<id>.resp.json``: ``{"result": ...}`` or ``{"error": "InvalidArgumentError",
  "message": "..."}``, written the same way; the client removes it after reading.

:class:`ServedCluster` is the client: the same method names as
:class:`~kafkasim.broker.cluster.Cluster` for the calls it forwards, and a context manager
like it, so the ``kafkasim cluster`` commands use either unchanged. Its errors are the
server's (the kafkasim class named in the answer); no answer within ``timeout`` seconds is
a :class:`~kafkasim.errors.RequestTimedOutError`.

Thread-safety: :func:`serve_requests` runs on one thread (the server's tick); a
ServedCluster is used by one thread.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from typing import Any, Optional

from kafkasim import errors
from kafkasim.errors import InvalidArgumentError, KafkaSimError, RequestTimedOutError
from kafkasim.server.address import read_address

__all__ = ["CONTROL_DIR", "METHODS", "ServedCluster", "served_cluster", "serve_requests", "remove_control_dir"]

log = logging.getLogger("kafkasim.server")

CONTROL_DIR = ".server-control"
METHODS = frozenset({"describe_cluster", "stop_broker", "start_broker", "isolate", "heal", "slow",
                     "elect_leaders", "fill_disk", "clear_disk"})


def _write_json(path: str, value: Any) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(value, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def serve_requests(data_dir: str, cluster) -> int:
    """Run every pending request in ``data_dir``'s control directory; returns how many."""
    folder = os.path.join(data_dir, CONTROL_DIR)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".req.json"))
    except FileNotFoundError:
        return 0
    for name in names:
        path = os.path.join(folder, name)
        try:
            with open(path) as f:
                request = json.load(f)
            method, args = request["method"], list(request.get("args", []))
            if method not in METHODS:
                raise InvalidArgumentError(f"control request {method!r}: not one of {sorted(METHODS)}")
            answer = {"result": getattr(cluster, method)(*args)}
        except KafkaSimError as exc:
            answer = {"error": type(exc).__name__, "message": str(exc)}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            answer = {"error": "InvalidArgumentError", "message": f"bad control request {name}: {exc}"}
        log.info("control request %s: %s", name, "ok" if "result" in answer else answer["message"])
        try:
            _write_json(path[:-len(".req.json")] + ".resp.json", answer)
        finally:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    return len(names)


def remove_control_dir(data_dir: str) -> None:
    """Remove the control directory and what is left in it (the server is stopping: a
    request still there will never be answered; its client times out)."""
    folder = os.path.join(data_dir, CONTROL_DIR)
    try:
        for name in os.listdir(folder):
            if name.endswith(".json") or name.endswith(".tmp"):
                os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    except OSError:
        pass


def served_cluster(data_dir: str) -> Optional["ServedCluster"]:
    """A :class:`ServedCluster` when a running ``kafkasim serve`` serves a cluster in
    ``data_dir`` (its address file lists brokers and its process is alive), else None."""
    info = read_address(data_dir)
    if info is None or not isinstance(info.get("brokers"), list):
        return None
    pid = info.get("pid")
    if isinstance(pid, int):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
    return ServedCluster(data_dir)


class ServedCluster:
    """The cluster a running server holds, called through the control directory."""

    def __init__(self, data_dir: str, timeout: float = 15.0) -> None:
        self.data_dir = data_dir
        self.timeout = timeout

    def _call(self, method: str, *args) -> Any:
        folder = os.path.join(self.data_dir, CONTROL_DIR)
        os.makedirs(folder, exist_ok=True)
        rid = f"{time.time_ns()}-{uuid.uuid4().hex[:8]}"
        request = os.path.join(folder, f"{rid}.req.json")
        response = os.path.join(folder, f"{rid}.resp.json")
        _write_json(request, {"method": method, "args": list(args)})
        deadline = time.monotonic() + self.timeout
        while not os.path.exists(response):
            if time.monotonic() > deadline:
                try:
                    os.unlink(request)
                except FileNotFoundError:
                    pass
                raise RequestTimedOutError(f"the server serving {self.data_dir} did not answer "
                                           f"{method} within {self.timeout:g} s")
            time.sleep(0.02)
        with open(response) as f:
            answer = json.load(f)
        os.unlink(response)
        if "error" in answer:
            cls = getattr(errors, str(answer["error"]), None)
            if not (isinstance(cls, type) and issubclass(cls, KafkaSimError)):
                cls = KafkaSimError
            raise cls(answer.get("message", ""))
        return answer["result"]

    def describe_cluster(self) -> dict:
        d = self._call("describe_cluster")
        for p in d.get("partitions", []):       # JSON made the broker ids strings
            p["log_end_offsets"] = {int(b): v for b, v in p.get("log_end_offsets", {}).items()}
        return d

    def stop_broker(self, broker_id: int) -> None:
        self._call("stop_broker", broker_id)

    def start_broker(self, broker_id: int) -> None:
        self._call("start_broker", broker_id)

    def isolate(self, broker_id: int, from_: str = "both") -> None:
        self._call("isolate", broker_id, from_)

    def fill_disk(self, broker_id: int) -> None:
        self._call("fill_disk", broker_id)

    def clear_disk(self, broker_id: int) -> None:
        self._call("clear_disk", broker_id)

    def heal(self, broker_id: int) -> None:
        self._call("heal", broker_id)

    def slow(self, broker_id: int, delay_ms: int) -> None:
        self._call("slow", broker_id, delay_ms)

    def elect_leaders(self) -> list:
        return self._call("elect_leaders")

    def close(self) -> None:
        pass

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        raise InvalidArgumentError(f"{name} is not available while 'kafkasim serve' serves {self.data_dir}: "
                                   "stop the server first")

    def __enter__(self) -> "ServedCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
