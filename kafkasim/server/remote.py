"""A broker over the wire: the :class:`~kafkasim.broker.Broker` API, spoken to ``kafkasim serve``.

While ``kafkasim serve`` holds a data dir (and its lock), every other ``kafkasim`` command
reaches the data through the server instead of opening the data dir itself.
:class:`RemoteBroker` has the methods the CLI, :class:`~kafkasim.producer.Producer`,
:class:`~kafkasim.consumer.Consumer` and :mod:`kafkasim.admin` call on a ``Broker``
(broker/API.md), each made of one or a few Kafka requests on one blocking TCP connection,
encoded and decoded with the server's own codec (kio, generated from Kafka's schemas):

=====================================  =================================================
Broker call                            Kafka requests
=====================================  =================================================
create_topic / delete_topic            CreateTopics / DeleteTopics, then describe_topic
create_partitions                      CreatePartitions, then describe_topic
alter_topic_configs                    IncrementalAlterConfigs (SET, DELETE), then describe_topic
list_topics / partition_count          Metadata (never auto-creates)
describe_topic                         Metadata, ListOffsets (earliest, latest),
                                       DescribeConfigs (overrides), DescribeLogDirs (sizes)
topic_config                           DescribeConfigs (every effective config)
produce                                Produce (the kafkasim batch re-encoded as a v2 batch,
                                       producer id, epoch and base sequence kept)
fetch / fetch_columns                  Fetch (no wait: ``max_wait`` 0), v2 batches decoded
list_offsets / init_producer_id        ListOffsets / InitProducerId
join_group / sync_group / heartbeat /  JoinGroup / SyncGroup / Heartbeat / LeaveGroup
leave_group                            (subscriptions and assignments as the consumer
                                       protocol's bytes, :mod:`kafkasim.server.consumer_protocol`)
offset_commit / offset_fetch           OffsetCommit / OffsetFetch
list_groups / describe_group /         ListGroups / DescribeGroups + OffsetFetch + ListOffsets
delete_group                           / DeleteGroups
=====================================  =================================================

Versions are negotiated: the connection starts with ApiVersions and each request uses the
newest version both sides serve (:data:`CLIENT_VERSIONS`). Errors come back as the class
of :mod:`kafkasim.errors` that the response's error code names (``errors.for_code``), with
the server's message when the response carries one, so a command fails the same way in
both modes. A connection that breaks raises :class:`~kafkasim.errors.NetworkError`; the
next call reconnects.

What a remote broker cannot do like an embedded one (docs/differences.md): ``flush()``
does not fsync the server's logs (the server flushes by its own policy and on shutdown);
``log()``, ``tick()`` and ``run_log_maintenance()`` are in-process only; the replication
factor reported is the replica count; a group's generation and leader are not in
DescribeGroups (None); a partition's segment count is read from the log dir the server
reports when that directory is on this machine (else None).

:func:`open_broker` picks the mode: ``bootstrap`` given → remote; else the data dir's
address file (``.server.json``, :mod:`kafkasim.server.address`) names a server that answers
→ remote; a stale file → a one-line notice and the embedded broker (which then removes
the file, once its lock proves no server holds the data dir); no file → embedded.

Thread-safety: one lock serialises the request/response exchanges of a RemoteBroker, so
the producer's sender thread and the consumer's heartbeat thread can share it.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import threading
from typing import Any, Callable, Iterable, Mapping, Optional

from kafkasim.clock import SystemClock
from kafkasim.errors import (
    GroupIdNotFoundError, IllegalStateError, InvalidArgumentError, InvalidConfigurationError,
    NetworkError, NonEmptyGroupError, UnknownTopicOrPartitionError, UnsupportedVersionError, for_code,
)
from kafkasim.protocol.group import COMPLETE, JoinResult, SyncResult
from kafkasim.server import codec
from kafkasim.server.address import read_address, remove_address
from kafkasim.types import OffsetAndMetadata, Record, TopicPartition

__all__ = ["RemoteBroker", "open_broker", "parse_bootstrap", "server_for", "CLIENT_VERSIONS"]

EARLIEST, LATEST = -2, -1
RESOURCE_TOPIC = 2
SOURCE_DYNAMIC_TOPIC = 1
OP_SET, OP_DELETE = 0, 1
REQUEST_TIMEOUT_S = 30.0
HOLD_MARGIN_S = 30.0        # a held JoinGroup/SyncGroup: the rebalance timeout plus this
_SIZE = struct.Struct(">i")
_MAX_RESPONSE = 1 << 30

CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    0: (3, 9), 1: (4, 12), 2: (1, 6), 3: (1, 12), 8: (2, 8), 9: (1, 7), 11: (1, 7), 12: (0, 4),
    13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 4), 18: (0, 3), 19: (2, 7), 20: (1, 6), 22: (0, 4),
    32: (1, 4), 35: (1, 4), 37: (0, 3), 42: (0, 2), 44: (0, 1),
}
"""The versions this client can write and read, per API key (the server's choice is intersected)."""


def parse_bootstrap(text: str) -> tuple[str, int]:
    """``"127.0.0.1:9092"`` (or the first of a comma-separated list) → ``(host, port)``."""
    first = text.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise InvalidArgumentError(f"--bootstrap-server {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9092")
    return host, int(port)


def _answers(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def server_for(data_dir: str) -> tuple[Optional[dict], bool]:
    """``(address file content or None, whether a server answers there)``."""
    info = read_address(data_dir)
    if info is None:
        return None, False
    return info, _answers(info["host"], info["port"])


def open_broker(data_dir: Optional[str], *, bootstrap: Optional[str] = None,
                notice: Optional[Callable[[str], None]] = None, client_id: str = "kafkasim-cli"):
    """The broker a command should use (see the module docstring): a :class:`RemoteBroker`
    when ``bootstrap`` is given or ``data_dir``'s address file names a live server, else an
    embedded :class:`kafkasim.broker.Broker` over ``data_dir``."""
    if bootstrap:
        host, port = parse_bootstrap(bootstrap)
        return RemoteBroker(host, port, client_id=client_id)
    if data_dir is None:
        raise InvalidArgumentError("give a data dir or --bootstrap-server")
    info, live = server_for(data_dir)
    if info is not None and live:
        return RemoteBroker(info["host"], info["port"], client_id=client_id, data_dir=data_dir)
    from kafkasim.broker import Broker

    if info is not None and notice is not None:
        notice(f"no server answers at {info['host']}:{info['port']} (stale "
               f"{os.path.join(data_dir, '.server.json')}, pid {info.get('pid', '?')}); "
               f"opening the data dir directly")
    broker = Broker(data_dir)
    if info is not None:
        remove_address(broker.data_dir)     # we hold the lock: no server serves this dir
    return broker


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


class RemoteBroker:
    """The Broker API over one connection to a Kafka-protocol server (see the module docstring).

    Example::

        with RemoteBroker("127.0.0.1", 9092) as b:        # doctest: +SKIP
            b.create_topic("orders", 3)
            b.list_offsets("orders", 0, -1)
    """

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

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self._lock:
            self._closed = True
            self._drop()

    def __enter__(self) -> "RemoteBroker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def flush(self) -> None:
        """No-op: the server flushes its logs by its own policy and when it stops."""

    def tick(self) -> None:
        """No-op: maintenance runs in the server."""
        return None

    def log(self, topic: str, partition: int):
        raise IllegalStateError("Broker.log() is in-process only: the log lives in the server process")

    def run_log_maintenance(self):
        raise IllegalStateError("run_log_maintenance() is in-process only: the server runs its own maintenance")

    # ------------------------------------------------------------------ metadata and topics

    def _metadata(self, names: Optional[list[str]]):
        topics = None if names is None else [{"name": n} for n in names]
        return self._call(3, {"topics": topics, "allow_auto_topic_creation": False})

    def _topic_meta(self, name: str):
        meta = self._metadata([name])
        for t in meta.topics:
            if t.name == name:
                if _code(t.error_code) == UnknownTopicOrPartitionError.errno:
                    raise UnknownTopicOrPartitionError(f"Unknown topic: {name!r}")
                _raise(t.error_code, None, f"topic {name!r}")
                return t
        raise UnknownTopicOrPartitionError(f"Unknown topic: {name!r}")

    def list_topics(self, include_internal: bool = False) -> list[str]:
        meta = self._metadata(None)
        return sorted(t.name for t in meta.topics
                      if not _code(t.error_code) and (include_internal or not t.is_internal))

    def partition_count(self, topic: str) -> int:
        return len(self._topic_meta(topic).partitions)

    def partitions(self) -> list[TopicPartition]:
        meta = self._metadata(None)
        return sorted(TopicPartition(t.name, p.partition_index) for t in meta.topics
                      if not _code(t.error_code) for p in t.partitions)

    def _config_rows(self, name: str):
        answer = self._call(32, {"resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": name,
                                                "configuration_keys": None}],
                                 "include_synonyms": False, "include_documentation": False})
        r = answer.results[0]
        if _code(r.error_code) == UnknownTopicOrPartitionError.errno:
            raise UnknownTopicOrPartitionError(f"Unknown topic: {name!r}")
        _raise(r.error_code, r.error_message, f"configs of topic {name!r}")
        return r.configs

    def topic_config(self, topic: str):
        """The effective :class:`~kafkasim.config.LogConfig` of ``topic`` (DescribeConfigs)."""
        from kafkasim.config import LogConfig

        return LogConfig.from_overrides({c.name: c.value for c in self._config_rows(topic)
                                         if c.value is not None})

    def _overrides(self, name: str) -> dict:
        from kafkasim.config import LogConfig

        raw = {c.name: c.value for c in self._config_rows(name)
               if _code(c.config_source) == SOURCE_DYNAMIC_TOPIC and c.value is not None}
        kafka = LogConfig.from_overrides(raw).to_kafka()   # the broker's canonical values
        return {k: kafka.get(k, v) for k, v in raw.items()}

    def _log_sizes(self, name: str, partitions: list[int]) -> tuple[Optional[str], dict[int, int]]:
        """``(log dir, {partition: bytes})`` from DescribeLogDirs (``(None, {})`` if not served)."""
        if 35 not in self._versions:
            return None, {}
        answer = self._call(35, {"topics": [{"topic": name, "partitions": partitions}]})
        sizes: dict[int, int] = {}
        log_dir = None
        for result in answer.results:
            if _code(result.error_code):
                continue
            log_dir = result.log_dir
            for t in result.topics:
                if t.name == name:
                    for p in t.partitions:
                        sizes[p.partition_index] = p.partition_size
        return log_dir, sizes

    def describe_topic(self, name: str) -> dict:
        """The embedded broker's description, from Metadata, ListOffsets, DescribeConfigs
        and DescribeLogDirs (see the module docstring for what differs)."""
        from kafkasim.storage.layout import list_segments, partition_dir_name

        t = self._topic_meta(name)
        parts = sorted(t.partitions, key=lambda p: p.partition_index)
        ids = [p.partition_index for p in parts]
        starts = self._list_offsets_many(name, ids, EARLIEST)
        ends = self._list_offsets_many(name, ids, LATEST)
        configs = self._overrides(name)
        log_dir, sizes = self._log_sizes(name, ids)
        out = []
        for p in parts:
            i = p.partition_index
            segments = None
            if log_dir and os.path.isdir(log_dir):
                path = os.path.join(log_dir, partition_dir_name(name, i))
                if os.path.isdir(path):
                    segments = len(list_segments(path))
            out.append({"partition": i, "leader": p.leader_id, "replicas": list(p.replica_nodes),
                        "isr": list(p.isr_nodes), "log_start_offset": starts[i][0],
                        "log_end_offset": ends[i][0], "high_watermark": ends[i][0],
                        "size_bytes": sizes.get(i), "segments": segments})
        return {"name": t.name, "topic_id": t.topic_id.hex if t.topic_id else None,
                "internal": bool(t.is_internal),
                "replication_factor": len(parts[0].replica_nodes) if parts else 0,
                "configs": configs, "partitions": out}

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: Optional[Mapping[str, Any]] = None) -> dict:
        answer = self._call(19, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": replication_factor,
            "assignments": [], "configs": [{"name": k, "value": _config_text(v)}
                                           for k, v in (configs or {}).items()]}],
            "timeout": int(self.timeout_s * 1000), "validate_only": False})
        r = answer.topics[0]
        _raise(r.error_code, r.error_message, f"topic {name!r}")
        return self.describe_topic(name)

    def delete_topic(self, name: str) -> None:
        if self._versions.get(20, 0) >= 6:
            answer = self._call(20, {"topics": [{"name": name, "topic_id": None}], "timeout": 30_000})
        else:
            answer = self._call(20, {"topic_names": [name], "timeout": 30_000})
        r = answer.responses[0]
        if _code(r.error_code) == UnknownTopicOrPartitionError.errno and not getattr(r, "error_message", None):
            raise UnknownTopicOrPartitionError(f"Unknown topic: {name!r}")
        _raise(r.error_code, getattr(r, "error_message", None), f"topic {name!r}")

    def create_partitions(self, name: str, total_count: int) -> dict:
        answer = self._call(37, {"topics": [{"name": name, "count": total_count, "assignments": None}],
                                 "timeout": 30_000, "validate_only": False})
        r = answer.results[0]
        _raise(r.error_code, r.error_message, f"topic {name!r}")
        return self.describe_topic(name)

    def alter_topic_configs(self, name: str, configs: Mapping[str, Any]) -> dict:
        """Set overrides; a value of None removes one (IncrementalAlterConfigs SET/DELETE)."""
        answer = self._call(44, {"resources": [{
            "resource_type": RESOURCE_TOPIC, "resource_name": name,
            "configs": [{"name": k, "config_operation": OP_DELETE if v is None else OP_SET,
                         "value": None if v is None else _config_text(v)} for k, v in configs.items()]}],
            "validate_only": False})
        r = answer.responses[0]
        _raise(r.error_code, r.error_message, f"topic {name!r}")
        return self.describe_topic(name)

    # ------------------------------------------------------------------ data

    def produce(self, topic: str, partition: int, batch: bytes, acks: int | str = 1):
        """Append one kafkasim batch: re-encoded as a Kafka v2 batch (producer id, epoch, base
        sequence, offset deltas and timestamps kept) in one Produce request."""
        from kafkasim.broker import ProduceResult
        from kafkasim.errors import InvalidRequiredAcksError
        from kafkasim.records import record_batch as rb
        from kafkasim.server import kafka_records

        if acks not in (0, 1, -1, "all", "0", "1", "-1"):
            raise InvalidRequiredAcksError(f"acks must be 0, 1, -1 or 'all', got {acks!r}")
        acks = -1 if acks == "all" else int(acks)
        h = rb.decode_header(batch, 0, where=f"produce to {topic}-{partition}")
        rows = rb.decode_records(batch, 0, h, where=f"produce to {topic}-{partition}")
        records = [(d, h.base_timestamp + ts, k, v, tuple(tuple(x) for x in (hs or ())))
                   for d, ts, k, v, hs in rows]
        wire = kafka_records.encode_batch(
            0, records, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence, attributes=h.attributes & kafka_records.ATTR_TIMESTAMP_TYPE,
            last_offset_delta=h.last_offset_delta)
        answer = self._call(0, {"transactional_id": None, "acks": acks, "timeout": int(self.timeout_s * 1000),
                                "topic_data": [{"name": topic, "partition_data": [
                                    {"index": partition, "records": wire}]}]},
                            expect_response=acks != 0)
        if answer is None:
            return ProduceResult(-1, -1, -1, False)
        p = answer.responses[0].partition_responses[0]
        _raise(p.error_code, getattr(p, "error_message", None), f"produce to {topic}-{partition}")
        append_time = codec.ms(p.log_append_time) if p.log_append_time is not None else -1
        return ProduceResult(p.base_offset, append_time, getattr(p, "log_start_offset", -1), False)

    def append_records(self, topic: str, partition: int, records, **producer):
        from kafkasim.records import record_batch as rb

        recs = [(i, ts, k, v, h or ()) for i, (ts, k, v, h) in enumerate(records)]
        return self.produce(topic, partition, rb.encode_batch(0, recs, **producer))

    def init_producer_id(self) -> tuple[int, int]:
        answer = self._call(22, {"transactional_id": None, "transaction_timeout": 60_000,
                                 "producer_id": -1, "producer_epoch": -1})
        _raise(answer.error_code, None, "InitProducerId")
        return answer.producer_id, answer.producer_epoch

    def _fetch_records(self, topic: str, partition: int, offset: int, max_bytes: int):
        from kafkasim.server import kafka_records

        answer = self._call(1, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": max(1, max_bytes),
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": max(1, max_bytes)}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        _raise(answer.error_code, None, "Fetch")
        p = answer.responses[0].partitions[0]
        code = _code(p.error_code)
        if code:
            from kafkasim.errors import OffsetOutOfRangeError

            if code == OffsetOutOfRangeError.errno:
                raise OffsetOutOfRangeError(
                    f"Fetch offset {offset} is out of range for partition {topic}-{partition} "
                    f"(log start {p.log_start_offset}, log end {p.high_watermark})")
            _raise(code, None, f"{topic}-{partition}")
        records = []
        if p.records:
            for b in kafka_records.decode_batches(p.records, where=f"fetch from {topic}-{partition}"):
                for delta, ts, key, value, headers in b.records:
                    off = b.base_offset + delta
                    if off < offset:
                        continue
                    seq = b.base_sequence + delta if b.base_sequence >= 0 else -1
                    records.append(Record(off, ts, key, value, headers, b.producer_id, b.producer_epoch, seq))
        return records, p.high_watermark, p.log_start_offset

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1_048_576):
        from kafkasim.broker import FetchResult

        records, hw, start = self._fetch_records(topic, partition, offset, max_bytes)
        return FetchResult(records, hw, start, hw)

    def fetch_columns(self, topic: str, partition: int, offset: int, max_bytes: int = 1_048_576):
        from kafkasim.broker import ColumnFetchResult
        from kafkasim.storage.fetch import RecordColumns

        records, hw, start = self._fetch_records(topic, partition, offset, max_bytes)
        cols = RecordColumns([r.offset for r in records], [r.timestamp for r in records],
                             [r.key for r in records], [r.value for r in records],
                             [r.headers for r in records])
        return ColumnFetchResult(cols, hw, start, hw)

    def _list_offsets_many(self, topic: str, partitions: Iterable[int], timestamp: int) -> dict:
        partitions = list(partitions)
        if not partitions:
            return {}
        answer = self._call(2, {"replica_id": -1, "isolation_level": 0, "topics": [{
            "name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                           "timestamp": timestamp} for p in partitions]}]})
        out = {}
        for t in answer.topics:
            for p in t.partitions:
                if _code(p.error_code) == UnknownTopicOrPartitionError.errno:
                    self._topic_meta(topic)      # the embedded broker's message for a missing topic
                    raise UnknownTopicOrPartitionError(
                        f"This server does not host this topic-partition: {topic}-{p.partition_index}")
                _raise(p.error_code, None, f"{topic}-{p.partition_index}")
                out[p.partition_index] = (p.offset, p.timestamp)
        return out

    def list_offsets(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        if not isinstance(timestamp, int) or timestamp < EARLIEST:
            raise InvalidConfigurationError(
                f"list_offsets timestamp must be -2 (earliest), -1 (latest) or >= 0, got {timestamp!r}")
        return self._list_offsets_many(topic, [partition], timestamp)[partition]

    # ------------------------------------------------------------------ groups

    def join_group(self, group_id: str, member_id: str = "", *, protocols, protocol_type: str = "consumer",
                   session_timeout_ms: int = 45_000, rebalance_timeout_ms: int = 300_000,
                   group_instance_id: Optional[str] = None, client_id: str = "",
                   client_host: Optional[str] = None) -> JoinResult:
        """JoinGroup, held by the server until the rebalance completes: always COMPLETE."""
        from kafkasim.server.consumer_protocol import decode_subscription, encode_subscription

        wire = [{"name": name, "metadata": meta if isinstance(meta, (bytes, bytearray))
                 else encode_subscription(meta)} for name, meta in protocols]
        answer = self._call(11, {"group_id": group_id, "session_timeout": session_timeout_ms,
                                 "rebalance_timeout": rebalance_timeout_ms, "member_id": member_id,
                                 "group_instance_id": group_instance_id, "protocol_type": protocol_type,
                                 "protocols": wire},
                            client_id=client_id or None,
                            timeout=rebalance_timeout_ms / 1000 + HOLD_MARGIN_S)
        _raise(answer.error_code, None, f"group {group_id!r}")
        consumer = protocol_type == "consumer"
        members = tuple((m.member_id, m.group_instance_id,
                         decode_subscription(m.metadata) if consumer else bytes(m.metadata))
                        for m in answer.members)
        return JoinResult(COMPLETE, answer.member_id, answer.generation_id, answer.protocol_name,
                          answer.leader or None, members)

    def sync_group(self, group_id: str, member_id: str, generation_id: int,
                   assignments: Optional[dict] = None, *, group_instance_id: Optional[str] = None) -> SyncResult:
        """SyncGroup, held by the server until the leader's assignment arrives."""
        from kafkasim.server.consumer_protocol import decode_assignment, encode_assignment

        wire = [{"member_id": m, "assignment": encode_assignment(tps)} for m, tps in (assignments or {}).items()]
        answer = self._call(14, {"group_id": group_id, "generation_id": generation_id, "member_id": member_id,
                                 "group_instance_id": group_instance_id, "protocol_type": "consumer",
                                 "protocol_name": None, "assignments": wire},
                            timeout=300 + HOLD_MARGIN_S)
        _raise(answer.error_code, None, f"group {group_id!r}")
        assignment = decode_assignment(answer.assignment) if answer.assignment else []
        return SyncResult(COMPLETE, tuple(assignment), getattr(answer, "protocol_name", None), generation_id)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, *,
                  group_instance_id: Optional[str] = None) -> None:
        answer = self._call(12, {"group_id": group_id, "generation_id": generation_id,
                                 "member_id": member_id, "group_instance_id": group_instance_id})
        _raise(answer.error_code, None, f"group {group_id!r}, member {member_id!r}")

    def leave_group(self, group_id: str, member_id: str = "", *,
                    group_instance_id: Optional[str] = None) -> None:
        if self._versions.get(13, 0) >= 3:
            answer = self._call(13, {"group_id": group_id, "members": [
                {"member_id": member_id, "group_instance_id": group_instance_id, "reason": None}]})
            _raise(answer.error_code, None, f"group {group_id!r}")
            for m in answer.members:
                _raise(m.error_code, None, f"group {group_id!r}, member {m.member_id!r}")
        else:
            answer = self._call(13, {"group_id": group_id, "member_id": member_id})
            _raise(answer.error_code, None, f"group {group_id!r}, member {member_id!r}")

    def offset_commit(self, group_id: str, member_id: str, generation_id: int, offsets: dict, *,
                      group_instance_id: Optional[str] = None) -> None:
        by_topic: dict[str, list] = {}
        for tp, om in sorted(offsets.items()):
            om = om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(*om) \
                if isinstance(om, tuple) else OffsetAndMetadata(int(om))
            by_topic.setdefault(tp[0], []).append(
                {"partition_index": tp[1], "committed_offset": om.offset,
                 "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata})
        answer = self._call(8, {"group_id": group_id, "generation_id_or_member_epoch": generation_id,
                                "member_id": member_id, "group_instance_id": group_instance_id,
                                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        for t in answer.topics:
            for p in t.partitions:
                if _code(p.error_code) == UnknownTopicOrPartitionError.errno:
                    raise UnknownTopicOrPartitionError(
                        f"This server does not host this topic-partition: {t.name}-{p.partition_index}")
                _raise(p.error_code, None, f"group {group_id!r}, {t.name}-{p.partition_index}")

    def offset_fetch(self, group_id: str, partitions=None) -> dict:
        topics = None
        if partitions is not None:
            by_topic: dict[str, list] = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
            if not topics:
                return {}
        answer = self._call(9, {"group_id": group_id, "topics": topics, "require_stable": False})
        _raise(answer.error_code, None, f"group {group_id!r}")
        out = {}
        for t in answer.topics:
            for p in t.partitions:
                if _code(p.error_code) or p.committed_offset < 0:
                    continue
                out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, p.metadata or "", getattr(p, "committed_leader_epoch", -1))
        return dict(sorted(out.items()))

    def list_groups(self) -> list[dict]:
        answer = self._call(16, {"states_filter": []})
        _raise(answer.error_code, None, "ListGroups")
        return sorted(({"group_id": g.group_id, "protocol_type": g.protocol_type,
                        "state": getattr(g, "group_state", "") or ""} for g in answer.groups),
                      key=lambda g: g["group_id"])

    def describe_group(self, group_id: str) -> dict:
        """The embedded broker's description from DescribeGroups, OffsetFetch and ListOffsets
        (``generation`` and ``leader`` are not on the wire: None)."""
        from kafkasim.server.consumer_protocol import decode_assignment

        answer = self._call(15, {"groups": [group_id], "include_authorized_operations": False})
        g = answer.groups[0]
        _raise(g.error_code, None, f"group {group_id!r}")
        state = g.group_state or "Dead"
        consumer = g.protocol_type == "consumer"
        members = [{"member_id": m.member_id, "group_instance_id": getattr(m, "group_instance_id", None),
                    "client_id": m.client_id, "client_host": m.client_host or None,
                    "assignment": decode_assignment(m.member_assignment)
                    if consumer and m.member_assignment else []}
                   for m in g.members]
        offsets = {} if state == "Dead" else self.offset_fetch(group_id)
        desc = {"group_id": group_id, "state": state, "protocol_type": g.protocol_type or "",
                "protocol": g.protocol_data or None, "generation": None if state != "Dead" else -1,
                "leader": None, "members": members, "offsets": offsets}
        owners = {tuple(tp): m["member_id"] for m in members for tp in m["assignment"]}
        wanted = sorted(set(offsets) | {TopicPartition(*tp) for tp in owners})
        ends: dict[TopicPartition, Optional[int]] = {}
        for topic in sorted({tp.topic for tp in wanted}):
            ps = [tp.partition for tp in wanted if tp.topic == topic]
            try:
                got = self._list_offsets_many(topic, ps, LATEST)
            except UnknownTopicOrPartitionError:
                got = {}
            for p in ps:
                ends[TopicPartition(topic, p)] = got[p][0] if p in got else None
        rows = []
        for tp in wanted:
            om = offsets.get(tp)
            committed = None if om is None else om.offset
            leo = ends.get(tp)
            rows.append({"topic": tp.topic, "partition": tp.partition, "committed": committed,
                         "log_end_offset": leo, "member_id": owners.get(tuple(tp)),
                         "lag": None if committed is None or leo is None else max(0, leo - committed)})
        desc["partitions"] = rows
        return desc

    def describe_groups(self, group_ids) -> list[dict]:
        return [self.describe_group(g) for g in group_ids]

    def delete_group(self, group_id: str) -> None:
        answer = self._call(42, {"groups_names": [group_id]})
        r = answer.results[0]
        code = _code(r.error_code)
        if code == GroupIdNotFoundError.errno:
            raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
        if code == NonEmptyGroupError.errno:
            raise NonEmptyGroupError(f"group {group_id!r} has active members")
        _raise(code, None, f"group {group_id!r}")


def _version() -> str:
    try:
        from kafkasim import __version__
        return str(__version__)
    except Exception:       # pragma: no cover - a broken install still connects
        return "unknown"
