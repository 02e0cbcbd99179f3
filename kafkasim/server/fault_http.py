"""The fault control endpoint over HTTP (``kafkasim serve --control-port P``), and its client.

A JSON API over one :class:`~kafkasim.faults.Faults`, so a test in any language can script
faults on a running server (what kcl #65 asks of franz-go's kfake). Its OpenAPI 3 document is
the file ``fault_api.openapi.json`` beside this module, served at ``GET /openapi.json``:

======  ====================  =====================================================================
method  path                  answer
======  ====================  =====================================================================
GET     /faults               200 ``{"rules": [rule, ...]}`` (each with ``hits`` and ``expired``)
POST    /faults               201 + the rule (``Location: /faults/{id}``); body: the fields of
                              :meth:`Faults.add`, ``error`` a Kafka name or code
DELETE  /faults               200 ``{"removed": n}``
GET     /faults/{id}          200 the rule; 404 when no rule has that id
DELETE  /faults/{id}          200 the removed rule; 404 when no rule has that id
GET     /openapi.json         200 the OpenAPI document
======  ====================  =====================================================================

A malformed request is a 400 ``{"error": "InvalidArgumentError", "field": "...", "message":
"..."}`` naming the field at fault (``field`` null when no one field is: a body that is not a
JSON object, a rule that does nothing); another method on a served path is a 405 with an
``Allow`` header; any other path a 404. The request body is checked exactly as the document
describes it (an unknown field, a ``null``, a lower-case error name are refused), then by
:meth:`Faults.add`.

Loopback only: :class:`FaultHttpServer` refuses a host that is not a loopback address
unless ``allow_remote=True`` (``--allow-remote-control``), since whoever reaches the
endpoint can break the server's answers. Kafka has no such endpoint; it is kafkasim's.

:class:`FaultHttpClient` calls it with the method names of
:class:`~kafkasim.server.control.ServedServer` (``fault_add``, ``fault_list``, ``fault_remove``,
``fault_clear``), so the ``kafkasim fault`` commands use either.

Thread-safety: the server answers each request on its own thread (``ThreadingHTTPServer``);
Faults has its own lock. A client is used by one thread.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import socket
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable, Optional

from kafkasim import errors
from kafkasim.errors import KAFKA_ERROR_NAMES, InvalidArgumentError, KafkaSimError, RequestTimedOutError
from kafkasim.faults import Faults

__all__ = ["FaultHttpServer", "FaultHttpClient", "OPENAPI_FILE", "openapi_document", "rule_arguments",
           "rule_json", "is_loopback", "check_control_address", "RULE_FIELDS"]

log = logging.getLogger("kafkasim.server")

OPENAPI_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fault_api.openapi.json")
MAX_BODY_BYTES = 65536
MAX_MS = 3_600_000

RULE_FIELDS = ("api", "error", "count", "topic", "partition", "broker", "client_id", "latency_ms",
               "latency_jitter_ms", "drop", "probability", "throttle_ms", "duration_ms")
"""The fields of a rule a client sets: :meth:`Faults.add`'s keyword arguments."""

_INT_MIN = {"count": 1, "partition": 0, "broker": 0, "duration_ms": 1,
            "latency_ms": 0, "latency_jitter_ms": 0, "throttle_ms": 0}
_MS_FIELDS = ("latency_ms", "latency_jitter_ms", "throttle_ms")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_control_address(host: str, port: int, allow_remote: bool = False) -> None:
    """InvalidArgumentError naming the value when the endpoint may not listen on ``host:port``:
    a host that is not a loopback address without ``allow_remote``, a port outside 0-65535."""
    if not isinstance(host, str) or not host:
        raise InvalidArgumentError(f"control host {host!r}: expected a host name or address, e.g. 127.0.0.1")
    if not is_loopback(host) and not allow_remote:
        raise InvalidArgumentError(
            f"control host {host!r} is not a loopback address: whoever reaches the fault control endpoint "
            "can break this server's answers; bind it anyway with --allow-remote-control")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise InvalidArgumentError(f"control port {port!r}: outside 0-65535")


def openapi_document(brokers: Optional[Iterable[int]] = None) -> dict:
    """The endpoint's OpenAPI document (the package's ``fault_api.openapi.json``); with
    ``brokers`` (a served cluster's ids) a rule's ``broker`` is one of them."""
    with open(OPENAPI_FILE, encoding="utf-8") as f:
        doc = json.load(f)
    if brokers is not None:
        doc["components"]["schemas"]["FaultRuleInput"]["properties"]["broker"]["enum"] = sorted(brokers)
    return doc


def _bad(field: Optional[str], message: str) -> InvalidArgumentError:
    exc = InvalidArgumentError(message)
    exc.field = field         # the request field at fault, for the 400's body
    return exc


def field_of(exc: InvalidArgumentError) -> Optional[str]:
    """The rule field an error is about: the one it was raised for, or the one its message
    starts with (``count must be ...``, :func:`kafkasim.arguments.bad_arg`'s form)."""
    field = getattr(exc, "field", None)
    if field is not None:
        return field
    m = re.match(r"(\w+) must be", str(exc))
    if m and m.group(1) in RULE_FIELDS + ("rule_id",):
        return m.group(1)
    return "drop" if "(drop)" in str(exc) else None


def rule_arguments(body: Any, *, apis: Optional[Iterable[str]] = None,
                   brokers: Optional[Iterable[int]] = None) -> dict:
    """A JSON rule (the document's ``FaultRuleInput``) as :meth:`Faults.add`'s keyword
    arguments; InvalidArgumentError whose ``field`` names the field at fault otherwise."""
    if not isinstance(body, dict):
        raise _bad(None, f"the body must be a JSON object with the rule's fields, got {type(body).__name__}")
    out: dict = {}
    for name, value in body.items():
        if name not in RULE_FIELDS:
            raise _bad(name, f"{name}: not a rule field (one of {', '.join(RULE_FIELDS)})")
        if isinstance(value, float) and value.is_integer() and (name in _INT_MIN or name == "error"):
            value = int(value)      # JSON's 3.0 is the integer 3
        if name in _INT_MIN:
            if not isinstance(value, int) or isinstance(value, bool) or value < _INT_MIN[name] \
                    or (name in _MS_FIELDS and value > MAX_MS):
                what = f"from {_INT_MIN[name]} to {MAX_MS}" if name in _MS_FIELDS else f">= {_INT_MIN[name]}"
                raise _bad(name, f"{name} must be an integer {what}, got {value!r:.80}")
        elif name in ("api", "topic", "client_id"):
            if not isinstance(value, str) or not value:
                raise _bad(name, f"{name} must be a non-empty string, got {value!r:.80}")
        elif name == "drop":
            if value not in ("before", "after"):
                raise _bad(name, f"drop must be 'before' or 'after', got {value!r:.80}")
        elif name == "probability":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise _bad(name, f"probability must be a number in (0, 1], got {value!r:.80}")
        elif name == "error":
            known = (isinstance(value, int) and not isinstance(value, bool) and value in KAFKA_ERROR_NAMES) or \
                    (isinstance(value, str) and value in KAFKA_ERROR_NAMES.values())
            if not known or value in (0, "NONE"):
                raise _bad(name, f"error must be a Kafka error name such as NOT_LEADER_OR_FOLLOWER or its "
                                 f"code, got {value!r:.80}")
        out[name] = value
    if apis is not None and "api" in out and out["api"] not in set(apis):
        raise _bad("api", f"api must be an API name the server serves, got {out['api']!r:.80}")
    if brokers is not None and "broker" in out and out["broker"] not in set(brokers):
        raise _bad("broker", f"broker must be one of the brokers {sorted(brokers)}, got {out['broker']!r}")
    if "drop" in out and "error" in out:
        raise _bad("drop", "a rule either drops the connection (drop) or answers an error (error), not both")
    if "error" not in out and "drop" not in out and not any(out.get(n) for n in _MS_FIELDS):
        raise _bad(None, "a rule must do something: give error, drop, latency_ms, latency_jitter_ms or throttle_ms")
    return out


def rule_json(faults: Faults, rule_id: int) -> dict:
    """One installed rule as the document's ``FaultRule`` (with ``expired``); InvalidArgumentError
    naming ``rule_id`` when no rule has it."""
    for r in faults.to_json():
        if r["rule_id"] == rule_id:
            return r
    raise _bad("rule_id", f"rule_id must be the id of an installed rule, got {rule_id!r}")


class _Answer(Exception):
    """An HTTP answer other than 2xx, raised by a route."""

    def __init__(self, status: int, error: str, field: Optional[str], message: str,
                 headers: Optional[dict] = None) -> None:
        super().__init__(message)
        self.status, self.body, self.headers = status, {"error": error, "field": field, "message": message}, headers


class FaultHttpServer:
    """Serves the endpoint over ``faults`` on ``host:port`` (port 0: a free one), on a thread
    of its own; see the module docstring. ``brokers``: a served cluster's broker ids (a rule's
    ``broker`` must be one), None for one broker."""

    def __init__(self, faults: Faults, host: str = "127.0.0.1", port: int = 0, *,
                 allow_remote: bool = False, brokers: Optional[Iterable[int]] = None,
                 apis: Optional[Iterable[str]] = None) -> None:
        check_control_address(host, port, allow_remote)
        self.faults = faults
        self.brokers = sorted(brokers) if brokers is not None else None
        self.apis = frozenset(apis) if apis is not None else None
        self._requested = (host, port)
        self._http: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self.host: Optional[str] = None
        self.port: Optional[int] = None

    def start(self) -> tuple[str, int]:
        """Bind and serve; returns the bound ``(host, port)``. OSError when it cannot bind."""
        host, port = self._requested
        handler = type("_Handler", (_Handler,), {"control": self})
        server_class = _Server6 if ":" in host else _Server
        self._http = server_class((host.strip("[]"), port), handler)
        self.host, self.port = self._http.server_address[:2]
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.1,),   # close within 0.1 s
                                        name="kafkasim-fault-control", daemon=True)
        self._thread.start()
        log.info("fault control on http://%s:%d/faults", self.host, self.port)
        return self.host, self.port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            http.shutdown()
            http.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> "FaultHttpServer":
        if self._http is None:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ routes

    def route(self, method: str, path: str, body: Optional[bytes]) -> tuple[int, Any, dict]:
        """``(status, JSON value, headers)`` for one request (raises :class:`_Answer`)."""
        path = path.split("?", 1)[0].split("#", 1)[0]
        if path == "/faults":
            allowed = ("GET", "POST", "DELETE")
        elif path.startswith("/faults/") and "/" not in path[len("/faults/"):] and path != "/faults/":
            allowed = ("GET", "DELETE")
        elif path == "/openapi.json":
            allowed = ("GET",)
        else:
            raise _Answer(404, "NotFound", None, f"no such path {path!r}: the endpoint serves /faults, "
                          "/faults/{rule_id} and /openapi.json")
        if method not in allowed:
            raise _Answer(405, "MethodNotAllowed", None, f"{method} {path}: not allowed (allowed: "
                          f"{', '.join(allowed)})", {"Allow": ", ".join(allowed)})
        if path == "/openapi.json":
            return 200, openapi_document(self.brokers), {}
        if path == "/faults":
            if method == "GET":
                return 200, {"rules": self.faults.to_json()}, {}
            if method == "DELETE":
                return 200, {"removed": self.faults.clear()}, {}
            try:
                value = json.loads(body or b"")
            except ValueError as exc:
                raise _Answer(400, "InvalidArgumentError", None, f"the body is not JSON: {exc}") from None
            try:
                rule = self.faults.add(**rule_arguments(value, apis=self.apis, brokers=self.brokers))
            except InvalidArgumentError as exc:
                raise _Answer(400, type(exc).__name__, field_of(exc), str(exc)) from None
            return 201, rule_json(self.faults, rule.rule_id), {"Location": f"/faults/{rule.rule_id}"}
        text = path[len("/faults/"):]
        if not re.fullmatch(r"\+?[0-9]+", text) or int(text[:100]) < 1:
            raise _Answer(400, "InvalidArgumentError", "rule_id",
                          f"rule_id must be a rule's id (an integer >= 1), got {text[:80]!r}")
        rule_id = int(text[:100]) if len(text) <= 100 else -1       # longer: no rule has it (a 404)
        try:
            found = rule_json(self.faults, rule_id)
            if method == "DELETE":
                self.faults.remove(rule_id)
        except InvalidArgumentError as exc:
            raise _Answer(404, type(exc).__name__, "rule_id", str(exc)) from None
        return 200, found, {}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    """Every method goes to :meth:`FaultHttpServer.route` (so an unserved one is a 405, not
    http.server's 501); one request per connection."""

    control: FaultHttpServer
    server_version = "kafkasim-fault-control"

    def __getattr__(self, name: str):
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    def _dispatch(self) -> None:
        headers: dict = {}
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length < 0 or length > MAX_BODY_BYTES:
                raise _Answer(400, "InvalidArgumentError", None,
                              f"the body must be at most {MAX_BODY_BYTES} bytes, got Content-Length {length}")
            body = self.rfile.read(length) if length else b""
            status, value, headers = self.control.route(self.command, self.path, body)
        except _Answer as answer:
            status, value, headers = answer.status, answer.body, answer.headers or {}
        except ValueError:
            status, value = 400, {"error": "InvalidArgumentError", "field": None,
                                  "message": f"bad Content-Length {self.headers.get('Content-Length')!r}"}
        except Exception as exc:        # a bug: answer 500 rather than hang the client
            log.exception("fault control: %s %s failed", self.command, self.path)
            status, value = 500, {"error": type(exc).__name__, "field": None, "message": str(exc)}
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, text in headers.items():
            self.send_header(name, text)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:
        log.debug("fault control: " + format, *args)


class FaultHttpClient:
    """Calls a fault control endpoint at ``url`` (``http://127.0.0.1:P``); errors are the
    server's (the kafkasim class its 4xx names), a refused connection an
    InvalidArgumentError naming the URL, no answer in ``timeout`` s RequestTimedOutError."""

    def __init__(self, url: str, timeout: float = 15.0) -> None:
        if not re.match(r"https?://[^/]+", url or ""):
            raise InvalidArgumentError(f"control URL {url!r}: expected http://HOST:PORT, e.g. http://127.0.0.1:9309")
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"} if data else {})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # loopback: never a proxy
        try:
            with opener.open(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read())
            except ValueError:
                answer = {}
            cls = getattr(errors, str(answer.get("error")), None)
            if not (isinstance(cls, type) and issubclass(cls, KafkaSimError)):
                cls = KafkaSimError
            raise cls(answer.get("message") or f"{method} {self.url}{path}: HTTP {exc.code}") from None
        except socket.timeout as exc:
            raise RequestTimedOutError(f"the fault control endpoint {self.url} did not answer {method} {path} "
                                       f"within {self.timeout:g} s") from exc
        except urllib.error.URLError as exc:
            raise InvalidArgumentError(f"cannot reach the fault control endpoint {self.url}: {exc.reason} "
                                       "(is 'kafkasim serve --control-port' running there?)") from exc

    def fault_add(self, **rule) -> dict:
        return self._call("POST", "/faults", rule)

    def fault_list(self) -> list:
        return self._call("GET", "/faults")["rules"]

    def fault_remove(self, rule_id: int) -> dict:
        return self._call("DELETE", f"/faults/{int(rule_id)}")

    def fault_clear(self) -> int:
        return self._call("DELETE", "/faults")["removed"]

    def close(self) -> None:
        pass

    def __enter__(self) -> "FaultHttpClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
