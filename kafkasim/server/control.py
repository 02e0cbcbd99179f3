"""Calls on a running ``kafkasim serve`` from another process: the control directory.

While ``kafkasim serve`` serves a data dir it holds the data dir's lock, so ``kafkasim
cluster stop-broker 1`` cannot open the cluster itself, and the fault rules of ``kafkasim
fault add`` live in the server's memory. Instead a command drops a request file into
``<data_dir>/.server-control/`` and the server, which looks there on every tick (a served
cluster in :mod:`kafkasim.server.listeners`, one broker in :mod:`kafkasim.server.runner`,
every 100 ms), runs the call and writes the answer next to it. Kafka has no wire API to stop
a broker or to script faults, so this is a kafkasim-only side channel; it never leaves the
data dir, and only these calls are accepted:

- :data:`METHODS`, on the served :class:`~kafkasim.broker.cluster.Cluster` (a server of one
  broker refuses them, naming the call);
- :data:`FAULT_METHODS`, on the server's :class:`~kafkasim.faults.Faults` (either kind of
  server): ``fault_add`` (keyword arguments: :meth:`Faults.add`'s), ``fault_list``,
  ``fault_remove`` (a rule id), ``fault_clear``. Rules come back as JSON (the ``FaultRule``
  of :mod:`kafkasim.server.fault_http`'s OpenAPI document).

- request ``<id>.req.json``: ``{"method": "stop_broker", "args": [1]}`` (and ``"kwargs":
  {...}`` for ``fault_add``), written to a temporary name and renamed, so the server sees
  all of it or nothing;
- answer ``<id>.resp.json``: ``{"result": ...}`` or ``{"error": "InvalidArgumentError",
  "message": "..."}``, written the same way; the client removes it after reading.

:class:`ServedServer` is the client of any served data dir (the fault calls);
:class:`ServedCluster` adds the same method names as
:class:`~kafkasim.broker.cluster.Cluster` for the calls it forwards, and is a context manager
like it, so the ``kafkasim cluster`` commands use either unchanged. Their errors are the
server's (the kafkasim class named in the answer); no answer within ``timeout`` seconds is
a :class:`~kafkasim.errors.RequestTimedOutError`.

Thread-safety: :func:`serve_requests` runs on one thread (the server's tick); a
ServedServer is used by one thread.
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
from kafkasim.server.address import ADDRESS_FILE, read_address
from kafkasim.server.fault_http import RULE_FIELDS, FaultHttpClient, is_loopback, rule_json

__all__ = ["CONTROL_DIR", "METHODS", "FAULT_METHODS", "ServedServer", "ServedCluster", "served_server",
           "served_cluster", "has_requests", "serve_requests", "remove_control_dir", "fault_control"]

log = logging.getLogger("kafkasim.server")

CONTROL_DIR = ".server-control"
METHODS = frozenset({"describe_cluster", "stop_broker", "start_broker", "isolate", "heal", "slow",
                     "elect_leaders", "fill_disk", "clear_disk"})
FAULT_METHODS = frozenset({"fault_add", "fault_list", "fault_remove", "fault_clear"})


def _write_json(path: str, value: Any) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(value, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def has_requests(data_dir: str) -> bool:
    """Whether a request waits in ``data_dir``'s control directory: one ``listdir``, cheap
    enough for the event loop's thread, so an idle server's 100 ms tick hands nothing to a
    worker thread."""
    try:
        return any(n.endswith(".req.json") for n in os.listdir(os.path.join(data_dir, CONTROL_DIR)))
    except FileNotFoundError:
        return False


def serve_requests(data_dir: str, cluster, faults=None) -> int:
    """Run every pending request in ``data_dir``'s control directory on ``cluster`` (None for
    a server of one broker) and ``faults`` (the server's rules); returns how many."""
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
            kwargs = dict(request.get("kwargs", {}))
            if method in FAULT_METHODS:
                answer = {"result": _fault_call(faults, method, args, kwargs)}
            elif method not in METHODS:
                raise InvalidArgumentError(f"control request {method!r}: not one of "
                                           f"{sorted(METHODS | FAULT_METHODS)}")
            elif cluster is None:
                raise InvalidArgumentError(f"{method}: this server serves one broker, not a cluster "
                                           "(serve a cluster with 'kafkasim serve --brokers 0,1,2')")
            else:
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


def _fault_call(faults, method: str, args: list, kwargs: dict):
    """One fault call on the server's rules; the result as JSON."""
    if faults is None:
        raise InvalidArgumentError(f"{method}: this server holds no fault rules")
    if method == "fault_add":
        unknown = sorted(set(kwargs) - set(RULE_FIELDS))
        if args or unknown:
            raise InvalidArgumentError(f"fault_add: {unknown[0] if unknown else 'args'}: not a rule field "
                                       f"(one of {', '.join(RULE_FIELDS)})")
        return rule_json(faults, faults.add(**kwargs).rule_id)
    if kwargs:
        raise InvalidArgumentError(f"{method}: takes no keyword arguments")
    if method == "fault_list":
        return faults.to_json()
    if method == "fault_clear":
        return faults.clear()
    (rule_id,) = args
    removed = rule_json(faults, rule_id)
    faults.remove(rule_id)
    return removed


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


def _served_info(data_dir: str) -> Optional[dict]:
    """The address file when a live ``kafkasim serve`` process wrote it, else None."""
    info = read_address(data_dir)
    if info is None:
        return None
    pid = info.get("pid")
    if isinstance(pid, int):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
    return info


def served_server(data_dir: str) -> Optional["ServedServer"]:
    """A :class:`ServedServer` (a :class:`ServedCluster` for a cluster) when a running
    ``kafkasim serve`` serves ``data_dir`` (its address file is there and its process is
    alive), else None."""
    info = _served_info(data_dir)
    if info is None:
        return None
    return ServedCluster(data_dir) if isinstance(info.get("brokers"), list) else ServedServer(data_dir)


def served_cluster(data_dir: str) -> Optional["ServedCluster"]:
    """A :class:`ServedCluster` when a running ``kafkasim serve`` serves a cluster in
    ``data_dir`` (its address file lists brokers and its process is alive), else None."""
    served = served_server(data_dir)
    return served if isinstance(served, ServedCluster) else None


def fault_control(data_dir: str, *, bootstrap: Optional[str] = None, control_url: Optional[str] = None):
    """Whom to ask for a running server's fault rules: a :class:`FaultHttpClient` of
    ``control_url``; else, with ``bootstrap`` (``HOST:PORT``), the server on ``data_dir`` when
    its address file lists that listener (Kafka's protocol cannot say where a control endpoint
    is, so a server elsewhere needs ``control_url``); else the :class:`ServedServer` of
    ``data_dir``. InvalidArgumentError naming the data dir or the address when none is running."""
    if control_url:
        return FaultHttpClient(control_url)
    served = served_server(data_dir)
    if bootstrap:
        host, _, port = bootstrap.strip().rpartition(":")
        listeners = []
        info = _served_info(data_dir) if served is not None else None
        if info is not None:
            listeners = [(info.get("host"), info.get("port"))] + [
                (b.get("host"), b.get("port")) for b in info.get("brokers") or [] if isinstance(b, dict)]
        host = host.strip("[]")
        if not any(str(p) == port and (h == host or (is_loopback(str(h)) and is_loopback(host)))
                   for h, p in listeners):
            raise InvalidArgumentError(
                f"--bootstrap-server {bootstrap}: no running 'kafkasim serve' on data dir {data_dir} listens there, "
                "and Kafka's protocol cannot say where a server's fault control endpoint is: give --control-url "
                "http://HOST:P (the server's 'kafkasim serve --control-port P') or the server's --data-dir")
    if served is None:
        raise InvalidArgumentError(
            f"no 'kafkasim serve' is running on data dir {data_dir} (no live {ADDRESS_FILE} "
            f"there): fault rules live in a running server; start one with 'kafkasim serve --data-dir {data_dir}', "
            "or give --control-url for one elsewhere")
    return served


class ServedServer:
    """The server running on a data dir, called through the control directory: its fault
    rules (the method names of :class:`~kafkasim.server.fault_http.FaultHttpClient`)."""

    def __init__(self, data_dir: str, timeout: float = 15.0) -> None:
        self.data_dir = data_dir
        self.timeout = timeout

    def _call(self, method: str, *args) -> Any:
        return self._call_kw(method, {}, *args)

    def _call_kw(self, method: str, kwargs: dict, *args) -> Any:
        folder = os.path.join(self.data_dir, CONTROL_DIR)
        os.makedirs(folder, exist_ok=True)
        rid = f"{time.time_ns()}-{uuid.uuid4().hex[:8]}"
        request = os.path.join(folder, f"{rid}.req.json")
        response = os.path.join(folder, f"{rid}.resp.json")
        _write_json(request, {"method": method, "args": list(args), **({"kwargs": kwargs} if kwargs else {})})
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

    def fault_add(self, **rule) -> dict:
        """Install a rule (:meth:`Faults.add`'s keyword arguments); returns it as JSON."""
        return self._call_kw("fault_add", rule)

    def fault_list(self) -> list:
        return self._call("fault_list")

    def fault_remove(self, rule_id: int) -> dict:
        return self._call("fault_remove", rule_id)

    def fault_clear(self) -> int:
        return self._call("fault_clear")

    def close(self) -> None:
        pass

    def __enter__(self) -> "ServedServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ServedCluster(ServedServer):
    """The cluster a running server holds, called through the control directory."""

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

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        raise InvalidArgumentError(f"{name} is not available while 'kafkasim serve' serves {self.data_dir}: "
                                   "stop the server first")
