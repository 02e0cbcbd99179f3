"""Bytes are kept (issue 22): a batch a real client sends through ``kafkasim serve`` is
stored as sent, and a fetch returns the stored bytes.

A recording proxy on 127.0.0.1 sits between the client and the server. It forwards every
frame unchanged except Metadata and FindCoordinator responses, whose broker address it
points at itself (so the client keeps talking through it), and it records each Produce
request's ``records`` and each Fetch response's ``records`` (parsed with kafkasim's own
protocol codec). For confluent-kafka and kafka-python, uncompressed and with each codec:

- every batch the client sent is in the segment file byte for byte, except ``baseOffset``
  (bytes 0..8, the offset the broker assigned) and ``partitionLeaderEpoch`` (bytes 12..16),
  which Kafka's CRC does not cover; the CRC is the client's and checks out;
- every Fetch response's records are the segment file's bytes from the batch they start at.

And the records go into a Fetch response frame with one copy.

kafka-python compresses with its own codecs (python-snappy, lz4, zstandard: the dev extras
install them).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import struct
import threading
import time
import tracemalloc

import crc32c
import pytest

from kafkasim.server import codec
from tests.server.conftest import start_server, wait_until

pytestmark = pytest.mark.slow

PRODUCE, FETCH, METADATA, FIND_COORDINATOR = 0, 1, 3, 10
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CALLS, PER_CALL = 2, 3          # produce calls per case, records per call (one batch each)


# ---------------------------------------------------------------- the recording proxy

def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def _read_frame(sock: socket.socket) -> bytes | None:
    size = _recv_exactly(sock, 4)
    if size is None:
        return None
    return _recv_exactly(sock, struct.unpack(">i", size)[0])


class RecordingProxy:
    """A TCP proxy to one Kafka listener that records produced and fetched records.

    ``produced``: ``(topic, partition, records bytes)`` of each Produce request;
    ``fetched``: ``(topic, partition, records bytes)`` of each Fetch response partition.
    Thread-safe: one lock guards both lists and the in-flight request table."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.lock = threading.Lock()
        self.produced: list[tuple[str, int, bytes]] = []
        self.fetched: list[tuple[str, int, bytes]] = []
        self.errors: list[BaseException] = []
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()
        with self.lock:
            for s in self.sockets:
                try:
                    s.close()
                except OSError:
                    pass

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self.lock:
                self.sockets += [client, server]
            inflight: dict[int, tuple[int, int]] = {}
            threading.Thread(target=self._requests, args=(client, server, inflight), daemon=True).start()
            threading.Thread(target=self._responses, args=(server, client, inflight), daemon=True).start()

    def _requests(self, client, server, inflight) -> None:
        try:
            while (frame := _read_frame(client)) is not None:
                api_key, version, corr = codec.peek(frame)
                if api_key == PRODUCE:
                    body = codec.decode_request(frame, api_key, version).body
                    with self.lock:
                        self.produced += [(t.name, p.index, bytes(p.records or b""))
                                          for t in body.topic_data for p in t.partition_data]
                with self.lock:
                    inflight[corr] = (api_key, version)
                server.sendall(struct.pack(">i", len(frame)) + frame)
        except OSError:
            pass
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            _shut(server)

    def _responses(self, server, client, inflight) -> None:
        try:
            while (frame := _read_frame(server)) is not None:
                (corr,) = struct.unpack_from(">i", frame, 0)
                with self.lock:
                    api_key, version = inflight.pop(corr)
                out = struct.pack(">i", len(frame)) + frame
                if api_key in (METADATA, FIND_COORDINATOR):
                    _, body = codec.decode_response(api_key, version, frame)
                    out = codec.encode_response(api_key, version, corr, self._readdress(body))
                elif api_key == FETCH:
                    _, body = codec.decode_response(api_key, version, frame)
                    with self.lock:
                        self.fetched += [(t.topic, p.partition_index, bytes(p.records))
                                         for t in body.responses for p in t.partitions if p.records]
                client.sendall(out)
        except OSError:
            pass
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            _shut(client)

    def _readdress(self, obj):
        """``obj`` with every ``host``/``port`` pair naming the upstream pointed at the proxy."""
        if isinstance(obj, tuple):
            new = tuple(self._readdress(x) for x in obj)
            return obj if all(a is b for a, b in zip(new, obj)) else new
        if not dataclasses.is_dataclass(obj):
            return obj
        changes = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            new = self._readdress(value)
            if new is not value:
                changes[f.name] = new
        if getattr(obj, "port", None) == self.upstream[1] and hasattr(obj, "host"):
            changes["port"] = type(obj.port)(self.port)
        return dataclasses.replace(obj, **changes) if changes else obj


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


# ---------------------------------------------------------------- batches, independently of kafkasim

_HEADER = struct.Struct(">qiibIhiqqqhii")     # Kafka's 61-byte v2 batch header


def split_batches(buf: bytes) -> list[bytes]:
    """The batches laid back to back in ``buf``, by their length fields (whole ones only)."""
    out, pos = [], 0
    while pos + 12 <= len(buf):
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        if pos + 12 + length > len(buf):
            break
        out.append(buf[pos:pos + 12 + length])
        pos += 12 + length
    return out


def header(batch: bytes) -> dict:
    names = ("base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
             "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
             "base_sequence", "record_count")
    return dict(zip(names, _HEADER.unpack_from(batch, 0)))


def segment_bytes(data_dir: str, topic: str, partition: int = 0) -> bytes:
    from kafkasim.storage.layout import list_segments, partition_dir_name

    segments = list_segments(os.path.join(data_dir, partition_dir_name(topic, partition)))
    assert len(segments) == 1, segments
    with open(segments[0][1], "rb") as f:
        return f.read()


# ---------------------------------------------------------------- clients

def _value(call: int, i: int) -> bytes:
    return b"value-%d-%d-" % (call, i) + b"compressible " * 30   # worth compressing, for every codec


def _records(call: int):
    """``(key, value, headers)`` of one produce call: a null key and a header in each."""
    return [(None if i == 0 else b"key-%d" % i, _value(call, i), [("h", b"%d" % i)] if i == 1 else [])
            for i in range(PER_CALL)]


def produce_confluent(bootstrap: str, topic: str, compression: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression,
                         "linger.ms": 1000, "enable.idempotence": True})
    errors = []
    for call in range(CALLS):
        for key, value, headers in _records(call):
            producer.produce(topic, value=value, key=key, headers=headers, partition=0,
                             on_delivery=lambda err, _msg: err and errors.append(err))
        assert producer.flush(15) == 0
    assert not errors, errors


def produce_kafka_python(bootstrap: str, topic: str, compression: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=1000,
                             compression_type=None if compression == "none" else compression)
    try:
        for call in range(CALLS):
            futures = [producer.send(topic, key=key, value=value, headers=headers, partition=0)
                       for key, value, headers in _records(call)]
            producer.flush(15)
            for f in futures:
                f.get(timeout=15)
    finally:
        producer.close(5)


def consume_confluent(bootstrap: str, topic: str, n: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(values) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                values.append(msg.value())
    finally:
        consumer.close()
    return values


# ---------------------------------------------------------------- the test

@pytest.fixture(scope="module")
def served(tmp_path_factory):
    served = start_server(tmp_path_factory.mktemp("kept") / "data")
    proxy = RecordingProxy(served.host, served.port)
    yield served, proxy
    proxy.close()
    served.stop(timeout=10)


@pytest.mark.parametrize("compression", list(CODECS))
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_batches_are_stored_as_sent_and_fetched_as_stored(served, client, compression):
    server, proxy = served
    topic = f"kept-{client}-{compression}"
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()

    produce = produce_confluent if client == "confluent-kafka" else produce_kafka_python
    produce(proxy.bootstrap, topic, compression)

    # what the client sent: one batch per produce call, with the codec asked for
    with proxy.lock:
        blobs = [records for t, p, records in proxy.produced if t == topic]
    sent = list(dict.fromkeys(b for blob in blobs for b in split_batches(blob)))   # a retry sends one twice
    assert len(sent) == CALLS, [header(b) for b in sent]
    for batch in sent:
        h = header(batch)
        assert (h["magic"], h["attributes"] & 0x07, h["record_count"]) == (2, CODECS[compression], PER_CALL), h

    # what the server stored: the same bytes but baseOffset and partitionLeaderEpoch
    stored_file = segment_bytes(server.data_dir, topic)
    stored = split_batches(stored_file)
    assert sum(map(len, stored)) == len(stored_file)
    assert len(stored) == len(sent), [header(b) for b in stored]
    for i, (s, got) in enumerate(zip(sent, stored)):
        assert header(got)["base_offset"] == i * PER_CALL
        assert got[8:12] == s[8:12], f"batch {i}: batchLength changed"
        assert got[16:] == s[16:], f"batch {i}: stored bytes differ from the bytes sent ({header(got)} vs {header(s)})"
        assert header(got)["crc"] == crc32c.crc32c(got[21:]), f"batch {i}: CRC-32C does not check out"

    # what a fetch returns: the stored bytes, from the batch it starts at
    values = consume_confluent(proxy.bootstrap, topic, CALLS * PER_CALL)
    assert values == [_value(c, i) for c in range(CALLS) for i in range(PER_CALL)]
    starts, pos = {}, 0
    for b in stored:
        starts[header(b)["base_offset"]] = pos
        pos += len(b)
    wait_until(lambda: any(t == topic for t, _, _ in proxy.fetched), 5, 0.05, "a recorded fetch")
    with proxy.lock:
        fetched = [records for t, p, records in proxy.fetched if t == topic]
    for records in fetched:
        start = starts[header(records)["base_offset"]]
        assert records == stored_file[start:start + len(records)], "a fetch returned other bytes than the stored ones"
    assert not proxy.errors, proxy.errors


def test_a_fetch_response_frame_copies_its_records_once():
    """The records read from the segments go into the response frame with one copy (the
    join of what kio writes), not two (into a buffer, then out of it)."""
    records = os.urandom(4 << 20)
    body = codec.build(codec.response_class(1, 12), {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 1, "last_stable_offset": 1, "log_start_offset": 0,
         "records": records}]}]})
    tracemalloc.start()
    try:
        frame = codec.encode_response(1, 12, 7, body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(records) < peak < 1.5 * len(records), f"{peak} bytes allocated for {len(records)} bytes of records"
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    correlation_id, decoded = codec.decode_response(1, 12, frame[4:])
    assert correlation_id == 7 and decoded.responses[0].partitions[0].records == records
