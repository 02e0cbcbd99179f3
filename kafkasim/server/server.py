"""The network edge: an asyncio TCP server speaking Kafka's wire protocol over a Broker.

One frame is ``int32 size`` + request header + body. For each connection, requests are
read and answered one at a time, in order (Kafka mutes a connection while its request is
in flight, so responses always come back in request order). Per frame:

1. the size is checked *before* the frame is read: a size below a header or above
   ``max_request_bytes`` (Kafka's ``socket.request.max.bytes``, 104857600) closes the
   connection, as Kafka does;
2. api key and version are peeked; an unknown key or unserved version closes the
   connection — except ApiVersions, which gets Kafka's answer for that case (a v0
   response with UNSUPPORTED_VERSION and the versions served) so the client can retry;
3. the frame is parsed into a typed request (:mod:`kafkasim.server.codec`, kio); a frame
   that does not parse closes the connection and reaches nothing else;
4. when fault rules are installed (``self.faults``, :mod:`kafkasim.faults`; the check is one
   attribute read while none is), they are asked once what to do to the request: drop the
   connection before or after applying it, answer it with an error (the whole request, or
   some of its partitions, which are then not applied), wait before answering, or throttle
   (:meth:`KafkaServer._faulted`, shapes in :mod:`kafkasim.server.fault_answers`); each
   fault is counted in /metrics and noted for the live view (``fault_log``);
5. the API's handler (:mod:`kafkasim.server.api`'s table) makes its broker calls and
   returns the response, which is encoded for the request's version and written.

On a served cluster there is one KafkaServer per broker (:mod:`kafkasim.server.listeners`),
each given its ``broker_id``, the cluster's :class:`~kafkasim.server.topology.Topology` and
the wakers all of them share; :meth:`pause` (the broker was stopped or isolated) closes the
listening socket and drops every connection, :meth:`resume` binds the same port again.

A handler that raises something unexpected is logged and its connection closed; the
server itself never stops on a request. Malformed input never reaches the broker, so it
can never write anything.

Thread-safety: the server runs on one event loop thread; broker calls run on a
``ThreadPoolExecutor`` (the broker is thread-safe). :meth:`KafkaServer.close` must be
awaited on the loop. The server does not own the broker: whoever opened it closes it
(:func:`kafkasim.server.runner.serve` does, after the server).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from kafkasim.errors import UnsupportedVersionError
from kafkasim.faults import DROP_AFTER, DROP_BEFORE, FaultDecision, Faults
from kafkasim.server import apis_admin, fault_answers
from kafkasim.server import codec
from kafkasim.server.api import Context, Node, RefusalLog, ServerOptions, Waker
from kafkasim.server.fault_events import fault_actions
from kafkasim.server.fetch_session import FetchSessionCache
from kafkasim.server.share_session import ShareSessionCache
from kafkasim.server.dispatch import APIS

__all__ = ["KafkaServer", "DEFAULT_MAX_REQUEST_BYTES", "DEFAULT_PORT"]

log = logging.getLogger("kafkasim.server")

DEFAULT_MAX_REQUEST_BYTES = 104_857_600   # socket.request.max.bytes
DEFAULT_PORT = 9092
_SIZE = struct.Struct(">i")
_MIN_FRAME = 8                            # api key, api version, correlation id
_STREAM_LIMIT = 1 << 20
"""Each connection's read buffer limit (asyncio's default is 64 KiB): the buffer stops the
socket's reads above twice the limit and resumes them below it, two ``epoll_ctl`` calls and
a few Python frames each time, and a producer's 100 KB request crossed 128 KiB every time.
Nothing is read by line, so the limit only bounds what a connection buffers ahead."""


class _CloseConnection(Exception):
    """The connection must be closed (the reason was logged)."""


class KafkaServer:
    """Serves one broker on one listener address.

    Example::

        server = KafkaServer(broker, "127.0.0.1", 0)
        host, port = await server.start()      # port 0: the OS picks a free one
        ...
        await server.close()
    """

    def __init__(self, broker, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
                 options: Optional[ServerOptions] = None,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 workers: int = 8, advertised_host: Optional[str] = None, metrics=None,
                 broker_id: Optional[int] = None, topology=None,
                 wakers: Optional[tuple[Waker, Waker]] = None, positions=None,
                 faults: Optional[Faults] = None, fault_log=None) -> None:
        self.broker = broker
        self.faults = faults if faults is not None else Faults(known_apis=(a.name for a in APIS.values()))
        """The fault rules (:mod:`kafkasim.faults`) this listener applies; a served cluster's
        listeners share one."""
        self.fault_log = fault_log        # kafkasim.server.fault_events.FaultEventsFile, or None
        self.positions = positions        # kafkasim.server.positions.FetchPositions, or None
        self.host, self.port = host, port
        self.options = options or ServerOptions()
        self.max_request_bytes = max_request_bytes
        self._advertised_host = advertised_host
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kafkasim-serve")
        self._server: Optional[asyncio.base_events.Server] = None
        self._connections: set[asyncio.Task] = set()
        self._ctx: Optional[Context] = None
        self.metrics = metrics            # kafkasim.server.metrics.ServerMetrics, or None
        self.broker_id = getattr(broker, "broker_id", 0) if broker_id is None else broker_id
        self.topology = topology
        self._wakers = wakers or (Waker(), Waker())
        self.refusals = RefusalLog()
        self._trailing_seen: set = set()   # client ids whose trailing bytes were logged (bounded)

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    async def start(self) -> tuple[str, int]:
        """Bind and start accepting; returns the bound ``(host, port)``."""
        self._server = await asyncio.start_server(self._on_connection, self.host, self.port,
                                                  reuse_address=True, limit=_STREAM_LIMIT)
        self.host, self.port = self._server.sockets[0].getsockname()[:2]
        node = Node(self.broker_id, self._advertised_host or self.host, self.port)
        self._ctx = Context(self.broker, node, self.options, self._executor, metrics=self.metrics,
                            data_waker=self._wakers[0], group_waker=self._wakers[1],
                            topology=self.topology, refusals=self.refusals, positions=self.positions,
                            faults=self.faults,
                            fetch_sessions=FetchSessionCache(self.options.fetch_session_cache_slots),
                            share_sessions=ShareSessionCache())
        log.info("broker %d listening on %s:%d", self.broker_id, self.host, self.port)
        return self.host, self.port

    def wake_fetches(self) -> None:
        """Wake the long-polling fetches to look again (something outside a request moved a
        high watermark or a last stable offset, e.g. a timed-out transaction's abort)."""
        self._wakers[0].notify()

    @property
    def listening(self) -> bool:
        return self._server is not None

    async def pause(self) -> None:
        """Stop accepting and drop every connection (the broker went down); the port is
        bound again by :meth:`resume`."""
        await self._stop_listening()
        if self._ctx is not None:
            self._ctx.fetch_sessions.clear()     # a restarted Kafka broker has no fetch sessions either
        log.info("broker %d stopped listening on %s:%d", self.broker_id, self.host, self.port)

    async def resume(self) -> None:
        """Listen again on the same port (the broker came back)."""
        if self._server is None:
            self._server = await asyncio.start_server(self._on_connection, self.host, self.port,
                                                      reuse_address=True, limit=_STREAM_LIMIT)
            log.info("broker %d listening again on %s:%d", self.broker_id, self.host, self.port)

    async def close(self) -> None:
        """Stop accepting, drop every connection (pending long polls are cancelled) and
        wait for in-flight broker calls to return."""
        await self._stop_listening()
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown, True)

    async def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    # ------------------------------------------------------------ connections

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        try:
            await self._serve(reader, writer, peer)
        except (_CloseConnection, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection %s: unexpected error; closing it", peer)
        finally:
            self._connections.discard(task)
            writer.close()
            try:
                await writer.wait_closed()
            except (Exception, asyncio.CancelledError):
                pass

    async def _serve(self, reader, writer, peer) -> None:
        ctx = dataclasses.replace(
            self._ctx, alive=lambda: not (reader.at_eof() or writer.is_closing()),
            client_host=f"/{peer[0]}" if isinstance(peer, tuple) and peer else None)
        while True:
            try:
                head = await reader.readexactly(_SIZE.size)
            except asyncio.IncompleteReadError:
                return  # the client closed the connection between requests
            (size,) = _SIZE.unpack(head)
            if size < _MIN_FRAME or size > self.max_request_bytes:
                self.refusals.refused(None, "a request", f"a frame of {size} bytes (limit "
                                      f"{self.max_request_bytes}, minimum {_MIN_FRAME}); closing", peer)
                raise _CloseConnection
            frame = await reader.readexactly(size)
            response = await self.handle_frame(frame, peer, ctx)
            if response is not None:
                writer.write(response)
                await writer.drain()
            if ctx.mute_ms:                     # throttled: the channel stays muted (KIP-219)
                mute, ctx.mute_ms = ctx.mute_ms, 0
                await asyncio.sleep(mute / 1000)

    async def handle_frame(self, frame: bytes, peer=None, ctx: Optional[Context] = None) -> Optional[bytes]:
        """The response frame for one request frame (None: no response); raises
        :class:`_CloseConnection` when the connection must be closed."""
        try:
            api_key, version, correlation_id = codec.peek(frame)
        except codec.MalformedRequest:
            raise _CloseConnection from None
        entry = APIS.get(api_key)
        if entry is None:
            self.refusals.refused(codec.peek_client_id(frame), f"API key {api_key}",
                                  "kafkasim does not serve this API (docs/server.md lists what it "
                                  "serves); closing, as Kafka does", peer)
            raise _CloseConnection
        if not entry.min_version <= version <= entry.max_version:
            if api_key == codec.API_VERSIONS_KEY:
                return self._unsupported_api_versions(correlation_id)
            self.refusals.refused(codec.peek_client_id(frame), f"{entry.name} v{version}",
                                  f"version not served (v{entry.min_version}-v{entry.max_version}); closing",
                                  peer)
            raise _CloseConnection
        log.debug("connection %s: %s v%d (correlation id %d)", peer, entry.name, version, correlation_id)
        try:
            request = codec.decode_request(frame, api_key, version)
        except codec.MalformedRequest as exc:
            self.refusals.refused(codec.peek_client_id(frame), f"{entry.name} v{version}",
                                  f"malformed request ({exc}); closing", peer)
            raise _CloseConnection from None
        if request.trailing:
            self._log_trailing(request, entry.name, peer)
        ctx = ctx or self._ctx
        ctx.client_id, ctx.api_name = request.client_id, entry.name
        started = time.perf_counter()
        faults = ctx.faults
        if faults is not None and faults.active:        # idle: one attribute read
            decision = faults.decide(self.broker_id, entry.name, request.client_id,
                                     fault_answers.request_partitions(api_key, entry.name, request))
            if decision is not None:
                return await self._faulted(entry, request, ctx, decision, peer, started)
        try:
            result = await entry.handler(ctx, request)
            if result is None:
                out = None
            else:
                out = codec.encode_result(api_key, version, correlation_id, result)
            if ctx.metrics is not None:
                ctx.metrics.request(entry.name, time.perf_counter() - started)
            return out
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("connection %s: %s v%d failed; closing", peer, entry.name, version)
            raise _CloseConnection from None

    async def _faulted(self, entry, request, ctx: Context, decision: FaultDecision, peer,
                       started: float) -> Optional[bytes]:
        """Answer ``request`` as the fault rules decided (:mod:`kafkasim.faults`; the shapes are
        :mod:`kafkasim.server.fault_answers`'): drop before applying it, answer a whole-request
        error without applying it, or apply it without the partitions that fail (their rows
        are merged into the answer); then drop the connection (``after``), wait the latency,
        and put the throttle into ``throttle_time_ms``, muting the connection that long after
        the answer (Kafka's broker since KIP-219: the answer goes at once, the channel waits)."""
        api_key, version = request.api_key, request.api_version
        self._count_faults(ctx, entry.name, decision)
        if decision.drop == DROP_BEFORE:
            if decision.latency_ms:
                await asyncio.sleep(decision.latency_ms / 1000)
            log.debug("connection %s: %s v%d dropped before it was applied (fault rules %s)", peer,
                      entry.name, version, decision.rule_ids)
            raise _CloseConnection
        errors = decision.partition_errors
        try:
            if decision.error is not None:
                result = fault_answers.error_answer(api_key, entry.name, request, decision.error)
            elif errors:
                rest = fault_answers.without(api_key, entry.name, request, errors)
                if rest is None:          # every partition fails: nothing left to apply
                    result = fault_answers.partition_errors_answer(api_key, entry.name, request, errors)
                else:
                    result = await entry.handler(ctx, rest)
                    if result is not None:
                        result = fault_answers.merge(api_key, entry.name, request, result, errors)
            else:
                result = await entry.handler(ctx, request)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("connection %s: %s v%d failed; closing", peer, entry.name, version)
            raise _CloseConnection from None
        if decision.drop == DROP_AFTER:
            if decision.latency_ms:
                await asyncio.sleep(decision.latency_ms / 1000)
            log.debug("connection %s: %s v%d applied, then dropped unanswered (fault rules %s)", peer,
                      entry.name, version, decision.rule_ids)
            raise _CloseConnection
        if entry.name == "Produce" and request.body.acks == 0:
            if decision.error is not None or errors:
                # Kafka closes the connection of an acks=0 produce that failed: the client's
                # only way to learn of it (KafkaApis.handleProduceRequest)
                raise _CloseConnection
            return None
        if result is None:
            return None
        if decision.latency_ms:
            await asyncio.sleep(decision.latency_ms / 1000)
        if decision.throttle_ms:
            result = {**result, "throttle_time": decision.throttle_ms}
            ctx.mute_ms = decision.throttle_ms
        out = codec.encode_result(api_key, version, request.correlation_id, result)
        if ctx.metrics is not None:
            ctx.metrics.request(entry.name, time.perf_counter() - started)
        return out

    def _count_faults(self, ctx: Context, api_name: str, decision: FaultDecision) -> None:
        """The decision's actions into /metrics and the live view's fault events file."""
        if ctx.metrics is not None:
            for action in fault_actions(decision):
                ctx.metrics.fault(api_name, action, self.broker_id)
        if self.fault_log is not None:
            self.fault_log.noted(ctx.faults)

    def _log_trailing(self, request, api_name: str, peer) -> None:
        """Bytes after a request body are ignored, as Kafka ignores them (librdkafka >= 2.12
        sends 3 with Metadata v9+); logged once per client id, at DEBUG."""
        if request.client_id in self._trailing_seen or len(self._trailing_seen) >= 1024:
            return
        self._trailing_seen.add(request.client_id)
        log.debug("connection %s: client %r sent %d bytes after the body of %s v%d; ignored, "
                  "as Kafka ignores them (logged once per client)", peer, request.client_id,
                  request.trailing, api_name, request.api_version)

    @staticmethod
    def _unsupported_api_versions(correlation_id: int) -> bytes:
        body = codec.build(codec.response_class(codec.API_VERSIONS_KEY, 0), {
            "error_code": UnsupportedVersionError.errno,
            "api_keys": apis_admin.advertised_versions()})
        return codec.encode_response(codec.API_VERSIONS_KEY, 0, correlation_id, body)
