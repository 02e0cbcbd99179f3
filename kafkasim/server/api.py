"""The dispatch table: one small handler per API key, and what every handler is given.

A handler is ``async def handler(ctx: Context, req: codec.Request) -> dict | None``: it
reads the typed request (a kio dataclass, ``req.body``), makes one or a few calls into the
broker API through :meth:`Context.call`, and returns the response as a plain dict in the
shape of the newest served version (:func:`kafkasim.server.codec.build` fits it to the
version asked for). ``None`` means "send no response" (Produce with ``acks=0``).

:data:`APIS` maps each API key to :class:`Api` (its versions and handler); ApiVersions
advertises exactly this table, so what is served and what is advertised cannot drift.
Handlers register with :func:`api` in the ``kafkasim.server.apis_*`` modules.

Errors: a kafkasim exception becomes its Kafka code through :func:`error_code`, which
reads the ``errno`` each class of :mod:`kafkasim.errors` carries — there is no second table.

Thread-safety: the table is filled at import time and only read afterwards. A
:class:`Context` and its :class:`Waker` s belong to the server's event loop thread; the
broker calls made through :meth:`Context.call` run on the executor's threads (the broker
is thread-safe).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional

from kafkasim.errors import (
    BrokerResponseError, InvalidRequestError, KafkaSimError, UnknownServerError,
)

__all__ = ["Api", "APIS", "api", "Context", "Node", "RefusalLog", "ServerOptions", "Waker", "error_code",
           "error_message"]

log = logging.getLogger("kafkasim.server")

Handler = Callable[["Context", Any], Awaitable[Optional[dict]]]


@dataclass(frozen=True)
class Api:
    """One served API: its key, name, inclusive version range and handler."""

    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler


APIS: dict[int, Api] = {}


def api(key: int, name: str, min_version: int, max_version: int):
    """Register the decorated coroutine as the handler of ``key`` for these versions."""
    def register(fn: Handler) -> Handler:
        if key in APIS:
            raise AssertionError(f"API key {key} registered twice")
        APIS[key] = Api(key, name, min_version, max_version, fn)
        return fn
    return register


@dataclass(frozen=True)
class Node:
    """The address clients are told to connect to (Metadata, FindCoordinator)."""

    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class ServerOptions:
    """Broker-side settings that Kafka keeps in server.properties and the server needs."""

    cluster_id: str = "kafkasim-cluster"
    replica_selector: Optional[str] = None  # replica.selector.class: None (leader only) or "rack"
    fetch_session_cache_slots: int = 1000  # max.incremental.fetch.session.cache.slots (0: no sessions)


def error_code(exc: BaseException) -> int:
    """Kafka's error code for ``exc``: the ``errno`` of our hierarchy; a kafkasim error
    without one (bad argument) is INVALID_REQUEST; anything else UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, BrokerResponseError):
        return exc.errno
    if isinstance(exc, KafkaSimError):
        return InvalidRequestError.errno
    return UnknownServerError.errno


def error_message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if isinstance(exc, KafkaSimError) else "unexpected server error"


class RefusalLog:
    """Every request the server refuses, logged at WARNING with the client id, the API and
    the reason, at most once per (client id, API, reason) every ``interval_s`` seconds;
    the lines held back meanwhile are counted into the next one. A refusal is a request
    answered with INVALID_REQUEST or a transactional refusal, or one that closed its
    connection (unknown API, unserved version, malformed or oversized frame).

    Thread-safe (a lock; the table is bounded to ``max_keys`` entries, oldest dropped).
    """

    def __init__(self, interval_s: float = 10.0, max_keys: int = 1024,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s, self.max_keys, self._clock = interval_s, max_keys, clock
        self._last: dict[tuple, list] = {}      # key -> [last logged at, held back since]
        self._lock = threading.Lock()
        self.total = 0

    def refused(self, client_id: Optional[str], api_name: str, reason: str, peer=None) -> None:
        key = (client_id, api_name, reason)
        now = self._clock()
        with self._lock:
            self.total += 1
            entry = self._last.get(key)
            if entry is not None and now - entry[0] < self.interval_s:
                entry[1] += 1
                return
            held = entry[1] if entry is not None else 0
            self._last.pop(key, None)
            self._last[key] = [now, 0]
            while len(self._last) > self.max_keys:
                self._last.pop(next(iter(self._last)))
        more = f" (and {held} more like it)" if held else ""
        log.warning("refused %s from client %r%s: %s%s", api_name, client_id,
                    f" at {peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else "",
                    reason, more)


class Waker:
    """Wakes every coroutine waiting on it (a broadcast, like Kafka's purgatory check-and-complete).

    ``notify()`` after a change (records appended, a group moved); ``await wait(t)`` returns
    after the next notify or ``t`` seconds. Loop-thread only.
    """

    def __init__(self) -> None:
        self._future: Optional[asyncio.Future] = None

    def notify(self) -> None:
        fut, self._future = self._future, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def wait(self, timeout: float) -> None:
        if timeout <= 0:
            return
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._future), timeout)
        except asyncio.TimeoutError:
            pass


@dataclass
class Context:
    """What a handler may use: the broker, this node's address, options, two wakers, and
    whether the client is still connected."""

    broker: Any
    node: Node
    options: ServerOptions
    executor: Optional[Executor] = None
    data_waker: Waker = field(default_factory=Waker)
    group_waker: Waker = field(default_factory=Waker)
    alive: Callable[[], bool] = lambda: True
    """False once the requesting client has gone: a held request (long poll, pending join)
    stops waiting. The server gives each connection its own copy of the context."""
    metrics: Any = None
    """The server's :class:`~kafkasim.server.metrics.ServerMetrics`, or None (metrics off)."""
    client_host: Optional[str] = None
    """The connection's peer address as Kafka shows it (``/127.0.0.1``): JoinGroup records
    it for DescribeGroups. None outside a connection."""
    fetch_sessions: Any = None
    """This listener's :class:`~kafkasim.server.fetch_session.FetchSessionCache` (KIP-227), or
    None (every Fetch is answered sessionless). Shared by the listener's connections."""
    share_sessions: Any = None
    """This listener's :class:`~kafkasim.server.share_session.ShareSessionCache` (KIP-932's share
    sessions), or None (ShareFetch and ShareAcknowledge answer SHARE_SESSION_NOT_FOUND)."""
    topology: Any = None
    """A served cluster's :class:`~kafkasim.server.topology.Topology` (every broker's address,
    rack and state), or None for one plain broker. With it, ``node`` is the broker this
    listener is, and Produce/Fetch/ListOffsets check that it leads the partition."""
    refusals: RefusalLog = field(default_factory=RefusalLog)
    """Where refused requests are logged (one per server, shared by its connections)."""
    client_id: Optional[str] = None
    """The client id of the request being handled (set per request by the server)."""
    api_name: str = ""
    """The name of the API being handled (set per request by the server)."""
    positions: Any = None
    """The server's :class:`~kafkasim.server.positions.FetchPositions` (the last fetch offset
    per client, for the live view), or None."""
    faults: Any = None
    """The server's :class:`~kafkasim.faults.Faults` (the installed fault rules), or None."""
    mute_ms: int = 0
    """Set by a throttling fault: the connection reads no request for this long after the
    answer is written (KIP-219's muted channel); reset by the server once it has waited."""

    def refused(self, reason: str) -> None:
        """Log that this request is being refused (rate-limited, see :class:`RefusalLog`)."""
        self.refusals.refused(self.client_id, self.api_name, reason)

    @property
    def node_id(self) -> Optional[int]:
        """The broker id to address broker calls to (None for one plain broker)."""
        return self.node.node_id if self.topology is not None else None

    async def call(self, fn: Callable, *args, **kwargs):
        """Run one (blocking) broker call on the executor and return its result."""
        loop = asyncio.get_running_loop()
        if kwargs:
            return await loop.run_in_executor(self.executor, lambda: fn(*args, **kwargs))
        return await loop.run_in_executor(self.executor, fn, *args)

    async def attempt(self, fn: Callable, *args, **kwargs) -> tuple[Any, int, Optional[str]]:
        """:meth:`call`, with a failure turned into ``(None, code, message)``; success is
        ``(result, 0, None)``. Unexpected exceptions are logged with their traceback."""
        try:
            return await self.call(fn, *args, **kwargs), 0, None
        except Exception as exc:
            if not isinstance(exc, KafkaSimError):
                log.exception("unexpected error in %s", getattr(fn, "__name__", fn))
            code = error_code(exc)
            if code == InvalidRequestError.errno:
                self.refused(error_message(exc))
            return None, code, error_message(exc)
