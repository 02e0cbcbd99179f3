"""What a Produce request's records meet at ``kafkasim serve`` (Kafka record batch v2, kept
as sent): batches built by another client's batch builder are accepted and read back;
malformed ones are answered with Kafka's error codes and leave nothing in the log.

- CORRUPT_MESSAGE (2): a header cut short, an unknown magic, a length past the end, a CRC
  that does not match, records that do not parse;
- INVALID_RECORD (87): no batch at all; control batches (only the broker writes them);
- TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53): a transactional batch in a request without a
  transactional id (KafkaApis' check; transactional produce itself: test_transactions_wire.py);
- hostile bytes (mutated, truncated, random) get an error code, never a dropped connection,
  and the server keeps answering.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkasim.errors import (
    CorruptRecordError, InvalidRecordError, InvalidTimestampError, TransactionalIdAuthorizationFailedError,
)
from kafkasim.records import record_batch as rb
from tests.server import raw
from tests.server.conftest import start_server

pytestmark = pytest.mark.slow

CODECS = [0, 1, 2, 3, 4]          # none, gzip, snappy, lz4, zstd
CORRUPT, INVALID = CorruptRecordError.errno, InvalidRecordError.errno
TXN_ID_AUTH_FAILED = TransactionalIdAuthorizationFailedError.errno
T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = start_server(tmp_path_factory.mktemp("produce-checks") / "data")
    with raw.connect(s.host, s.port) as sock:
        for topic in ("checks", "built", "hostile"):
            raw.call(sock, 3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
    yield s
    s.stop()


@pytest.fixture(scope="module")
def sock(served):
    with raw.connect(served.host, served.port) as s:
        yield s


def produce(sock, topic: str, records: bytes):
    answer = raw.call(sock, 0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return answer.responses[0].partition_responses[0]


def log_end(sock, topic: str) -> int:
    answer = raw.call(sock, 2, 6, {"replica_id": -1, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return answer.topics[0].partitions[0].offset


def fetch_records(sock, topic: str, offset: int) -> bytes:
    answer = raw.call(sock, 1, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    p = answer.responses[0].partitions[0]
    assert p.error_code == 0
    return p.records


def rebuilt(batch: bytes, **fields) -> bytes:
    """``batch`` with header fields replaced (``attributes``, ``magic``) and its CRC-32C redone."""
    out = bytearray(batch)
    if "magic" in fields:
        out[16] = fields["magic"]
    if "attributes" in fields:
        struct.pack_into(">h", out, 21, fields["attributes"])
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


GOOD = rb.encode_batch(0, [(0, T0, b"k", b"v", (("h", b"1"),))])


@pytest.mark.parametrize("what, records, code", [
    ("no batch", b"", INVALID),
    ("a header cut short", GOOD[:40], CORRUPT),
    ("a batch cut short", GOOD[:-1], CORRUPT),
    ("a length past the end", GOOD[:8] + struct.pack(">i", len(GOOD)) + GOOD[12:], CORRUPT),
    ("a length below the header", GOOD[:8] + struct.pack(">i", 10) + GOOD[12:], CORRUPT),
    ("a CRC that does not match", GOOD[:-1] + bytes([GOOD[-1] ^ 1]), CORRUPT),
    ("magic 1", rebuilt(GOOD, magic=1), CORRUPT),
    ("a second batch cut short", GOOD + GOOD[:30], CORRUPT),
    # KafkaApis.handleProduceRequest: a transactional batch needs the request's transactional id
    ("a transactional batch", rebuilt(GOOD, attributes=0x10), TXN_ID_AUTH_FAILED),
    ("a control batch", rebuilt(GOOD, attributes=0x20), INVALID),
    # Kafka's ProduceRequest.validateRecords (v3+): exactly one batch per partition
    ("two whole batches", GOOD + GOOD, INVALID),
])
def test_malformed_records_are_answered_with_kafkas_error_code(sock, what, records, code):
    before = log_end(sock, "checks")
    row = produce(sock, "checks", records)
    assert int(row.error_code) == code, (what, row)
    assert row.base_offset == -1
    assert log_end(sock, "checks") == before, f"{what}: something was appended"
    assert int(produce(sock, "checks", GOOD).error_code) == 0      # the connection still serves


def test_zstd_before_produce_v7_is_unsupported_compression_type(sock):
    zstd = rb.encode_batch(0, [(0, T0, b"k", b"v" * 40, ())], compression=4)
    before = log_end(sock, "checks")
    for version, code in [(6, 76), (7, 0)]:
        answer = raw.call(sock, 0, version, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": "checks", "partition_data": [{"index": 0, "records": zstd}]}]})
        assert int(answer.responses[0].partition_responses[0].error_code) == code, version
    assert log_end(sock, "checks") == before + 1


@pytest.mark.parametrize("codec", CODECS)
def test_a_batch_built_by_aiokafka_is_stored_as_built_and_read_back(served, sock, codec):
    """aiokafka's own builder (idempotent producer fields, headers with a null value, a null
    key): accepted, fetched back byte for byte but the base offset and leader epoch, and
    read by kafkasim's reader (RemoteBroker.fetch) as built."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    from kafkasim.server.remote import RemoteBroker

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i in range(5):
        builder.append(i, timestamp=T0 + i, key=b"k%d" % i if i else None, value=b"v" * (10 * i),
                       headers=[("h", b"%d" % i), ("n", None)])
    built = bytes(builder.build())
    start = log_end(sock, "built")
    row = produce(sock, "built", built)
    assert (int(row.error_code), row.base_offset) == (0, start)
    fetched = fetch_records(sock, "built", start)
    assert fetched[8:12] + fetched[16:] == built[8:12] + built[16:]
    assert struct.unpack_from(">q", fetched, 0)[0] == start

    broker = RemoteBroker(served.host, served.port)
    try:
        got = broker.fetch("built", 0, start).records
    finally:
        broker.close()
    assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in got] == [
        (start + i, T0 + i, b"k%d" % i if i else None, b"v" * (10 * i), (("h", b"%d" % i), ("n", None)))
        for i in range(5)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_hostile_bytes_get_an_error_code_and_the_server_keeps_answering(sock, data):
    """Mutated (CRC left wrong, or redone so the records parser sees them), truncated or
    random records: the answer is success or one of Kafka's record errors, on the same
    connection, and whatever was accepted reads back."""
    codec = data.draw(st.sampled_from(CODECS))
    good = rb.encode_batch(0, [(0, T0, b"key", b"value" * 5, (("h", b"x"),)), (1, T0 + 1, None, b"", ())],
                           compression=codec)
    kind = data.draw(st.sampled_from(["truncate", "flip", "random", "fix-crc"]))
    if kind == "truncate":
        buf = good[:data.draw(st.integers(0, len(good) - 1))]
    elif kind == "random":
        buf = data.draw(st.binary(max_size=200))
    else:
        buf = bytearray(good)
        for _ in range(data.draw(st.integers(1, 4))):
            buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
        if kind == "fix-crc" and len(buf) > 21:
            struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
        buf = bytes(buf)
    row = produce(sock, "hostile", buf)
    assert int(row.error_code) in (0, CORRUPT, INVALID, InvalidTimestampError.errno, TXN_ID_AUTH_FAILED), row
    if int(row.error_code) == 0:
        assert fetch_records(sock, "hostile", row.base_offset)


def test_log_append_time_is_stamped_in_the_header_and_every_reader_sees_it(served, sock):
    """message.timestamp.type=LogAppendTime: the broker sets the timestamp-type bit and
    max_timestamp (and the CRC, as Kafka's setMaxTimestamp does); the Produce answer's
    log_append_time is that timestamp, and kafka-python's batch reader, RemoteBroker.fetch
    and RemoteBroker.fetch_columns all give it as every record's timestamp."""
    from kafka.record.default_records import DefaultRecordBatch

    from kafkasim.server.remote import RemoteBroker

    broker = RemoteBroker(served.host, served.port)
    try:
        broker.create_topic("appended", 1, 1, {"message.timestamp.type": "LogAppendTime"})
        row = produce(sock, "appended", rb.encode_batch(0, [(0, 5, b"a", b"1", ()), (1, 6, b"b", b"2", ())]))
        assert int(row.error_code) == 0
        append_time = int(row.log_append_time.timestamp() * 1000)
        assert append_time > T0
        fetched = fetch_records(sock, "appended", 0)
        theirs = DefaultRecordBatch(bytearray(fetched))
        assert theirs.validate_crc() and theirs.timestamp_type == 1
        assert [(r.offset, r.timestamp, r.value) for r in theirs] == [(0, append_time, b"1"), (1, append_time, b"2")]
        assert [(r.offset, r.timestamp) for r in broker.fetch("appended", 0, 1).records] == [(1, append_time)]
        cols = broker.fetch_columns("appended", 0, 0).columns
        assert (cols.offsets, cols.timestamps, cols.values) == ([0, 1], [append_time] * 2, [b"1", b"2"])
    finally:
        broker.close()
