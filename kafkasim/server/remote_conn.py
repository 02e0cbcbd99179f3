"""The connection under :class:`kafkasim.server.remote.RemoteBroker`: one blocking TCP socket,
ApiVersions negotiation, framed request/response exchanges with the server's codec, and the
translation of error codes into the classes of :mod:`kafkasim.errors`.

On a served cluster (Metadata lists more than one broker) the calls that must reach a
partition's leader (Produce, Fetch, ListOffsets) go through :meth:`RemoteConnection._leader_call`:
it asks Metadata for the partition's leader and sends the request on a connection to that
broker (one kept per broker), as a Kafka client does.

Thread-safety: one re-entrant lock serialises the exchanges (see the ``remote`` module).
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
from typing import Optional

from kafkasim.clock import SystemClock
from kafkasim.errors import (
    IllegalStateError, NetworkError, UnsupportedVersionError, for_code,
)
from kafkasim.server import codec


__all__ = ["RemoteConnection", "CLIENT_VERSIONS"]

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
RESOURCE_TOPIC = 2
SOURCE_DYNAMIC_TOPIC = 1
OP_SET, OP_DELETE = 0, 1
REQUEST_TIMEOUT_S = 30.0
HOLD_MARGIN_S = 30.0        # a held JoinGroup/SyncGroup: the rebalance timeout plus this
_SIZE = struct.Struct(">i")
_MAX_RESPONSE = 1 << 30

CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    0: (3, 9), 1: (4, 12), 2: (1, 7), 3: (1, 12), 8: (2, 9), 9: (1, 7), 11: (1, 7), 12: (0, 4),
    13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 18: (0, 3), 19: (2, 7), 20: (1, 6), 22: (0, 4),
    32: (1, 4), 35: (1, 4), 37: (0, 3), 42: (0, 2), 44: (0, 1),
    21: (0, 2), 43: (1, 2), 45: (0, 1), 46: (0, 0), 47: (0, 0),
    27: (1, 1), 61: (0, 0), 65: (0, 0), 66: (0, 1), 57: (1, 2), 68: (1, 1), 69: (0, 1),
    76: (1, 1), 77: (1, 1), 78: (1, 1), 79: (1, 1), 90: (0, 1), 91: (0, 0), 92: (0, 0),
}
"""The versions this client can write and read, per API key (the server's choice is intersected)."""


def _code(value) -> int:
    return int(value)


def _message(cls: type, message: Optional[str], context: str) -> str:
    """The server's message without its ``ClassName: `` prefix, else the class's
    description with ``context``."""
    if message:
        prefix = f"{cls.__name__}: "
        return message[len(prefix):] if message.startswith(prefix) else message
    return f"{cls.description} ({context})" if context else cls.description


def _raise(code, message: Optional[str] = None, context: str = "") -> None:
    code = _code(code)
    if code:
        cls = for_code(code)
        raise cls(_message(cls, message, context))


def _config_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _version() -> str:
    try:
        from kafkasim import __version__
        return str(__version__)
    except Exception:       # pragma: no cover - a broken install still connects
        return "unknown"


class RemoteConnection:
    """One connection to a Kafka-protocol server; the base of :class:`RemoteBroker`."""

    def __init__(self, host: str, port: int, *, client_id: str = "kafkasim-cli",
                 timeout_s: float = REQUEST_TIMEOUT_S, connect_timeout_s: float = 5.0,
                 data_dir: Optional[str] = None) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.data_dir = data_dir
        self.clock = SystemClock()
        self.broker_id = 0
        self.cluster_id: Optional[str] = None
        self._lock = threading.RLock()
        self._sock: Optional[socket.socket] = None
        self._versions: dict[int, int] = {}
        self._correlation = itertools.count(1)
        self._closed = False
        self._multi = False                 # Metadata lists several brokers: route by leader
        self._peers: dict[tuple[str, int], "RemoteConnection"] = {}
        with self._lock:
            self._connect()

    # ------------------------------------------------------------------ connection

    def __repr__(self) -> str:
        return f"RemoteBroker({self.host}:{self.port})"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def _connect(self) -> None:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_s)
        except OSError as exc:
            raise NetworkError(f"cannot connect to a Kafka server at {self.bootstrap}: "
                               f"{exc.strerror or exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._versions = {}
        answer = self._exchange(18, 3, {"client_software_name": "kafkasim",
                                        "client_software_version": _version()})
        if _code(answer.error_code) == UnsupportedVersionError.errno:
            answer = self._exchange(18, 0, {})
        _raise(answer.error_code, None, "ApiVersions")
        for k in answer.api_keys:
            ours = CLIENT_VERSIONS.get(k.api_key)
            if ours is None:
                continue
            low, high = max(ours[0], k.min_version), min(ours[1], k.max_version)
            if low <= high:
                self._versions[k.api_key] = high
        meta = self._call(3, {"topics": [], "allow_auto_topic_creation": False})
        self.cluster_id = getattr(meta, "cluster_id", None)
        if meta.brokers:
            self.broker_id = meta.brokers[0].node_id
        self._multi = len(meta.brokers) > 1

    def _drop(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def _recv_exact(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:])
            if k == 0:
                raise ConnectionError("the server closed the connection")
            got += k
        return buf

    def _exchange(self, api_key: int, version: int, data: dict, *, client_id: Optional[str] = None,
                  timeout: Optional[float] = None, expect_response: bool = True):
        """One request/response on the open connection (lock held by the caller)."""
        body = codec.build(codec.request_class(api_key, version), data)
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        frame = codec.encode_request(api_key, version, correlation_id,
                                     client_id or self.client_id, body)
        name = type(body).__name__.removesuffix("Request")
        try:
            self._sock.settimeout(timeout or self.timeout_s)
            self._sock.sendall(frame)
            if not expect_response:
                return None
            (size,) = _SIZE.unpack(self._recv_exact(_SIZE.size))
            if not 0 < size <= _MAX_RESPONSE:
                raise ConnectionError(f"response of {size} bytes")
            payload = bytes(self._recv_exact(size))
        except (OSError, ConnectionError) as exc:
            self._drop()
            raise NetworkError(f"{name} v{version} to {self.bootstrap}: "
                               f"{type(exc).__name__}: {exc}") from exc
        try:
            got, response = codec.decode_response(api_key, version, payload)
        except codec.MalformedRequest as exc:
            self._drop()
            raise NetworkError(f"{name} v{version} from {self.bootstrap}: unreadable response: {exc}") from exc
        if got != correlation_id:
            self._drop()
            raise NetworkError(f"{name} v{version} from {self.bootstrap}: correlation id {got}, "
                               f"expected {correlation_id}")
        return response

    def _call(self, api_key: int, data: dict, **kw):
        """Send one request at the negotiated version and return the typed response."""
        with self._lock:
            if self._closed:
                raise IllegalStateError(f"{self!r} is closed")
            if self._sock is None:
                self._connect()
            version = self._versions.get(api_key)
            if version is None:
                raise UnsupportedVersionError(
                    f"the server at {self.bootstrap} serves no version of API {api_key} that kafkasim "
                    f"speaks ({CLIENT_VERSIONS.get(api_key)})")
            return self._exchange(api_key, version, data, **kw)

    def version_of(self, api_key: int) -> Optional[int]:
        """The negotiated version of ``api_key`` (None: not served)."""
        return self._versions.get(api_key)

    def _leader_call(self, topic: str, partitions: list[int], api_key: int, build, **kw) -> list:
        """``build(partitions) -> request`` sent to each partition's leader; the answers.

        On one broker: one request here. On a served cluster: one request per leader, on a
        connection to it (a partition without a leader goes here, and gets the server's error)."""
        with self._lock:
            if not self._multi:
                return [self._call(api_key, build(partitions), **kw)]
            meta = self._call(3, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
            nodes = {b.node_id: (b.host, b.port) for b in meta.brokers}
            leaders = {p.partition_index: p.leader_id for t in meta.topics if t.name == topic
                       for p in t.partitions}
            groups: dict[tuple[str, int], list[int]] = {}
            for p in partitions:
                groups.setdefault(nodes.get(leaders.get(p, -1), (self.host, self.port)), []).append(p)
            return [self._peer(addr)._call(api_key, build(ps), **kw) for addr, ps in groups.items()]

    def _peer(self, addr: tuple[str, int]) -> "RemoteConnection":
        if addr == (self.host, self.port):
            return self
        conn = self._peers.get(addr)
        if conn is None or conn._closed:
            conn = self._peers[addr] = RemoteConnection(
                addr[0], addr[1], client_id=self.client_id, timeout_s=self.timeout_s,
                connect_timeout_s=self.connect_timeout_s)
        return conn

    def close(self) -> None:
        """Close the connection (and those to the other brokers of a cluster). Idempotent."""
        with self._lock:
            self._closed = True
            self._drop()
            peers, self._peers = list(self._peers.values()), {}
        for conn in peers:
            conn.close()

    def __enter__(self) -> "RemoteConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
