"""Kafka v2 record batches ⟷ kafkasim: round trips (hypothesis), batches built by real
clients' own batch builders (aiokafka, kafka-python), and hostile bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kafkasim.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from kafkasim.records import record_batch as rb
from kafkasim.server import kafka_records as kr

CODECS = [kr.COMPRESSION_NONE, kr.COMPRESSION_GZIP, kr.COMPRESSION_SNAPPY, kr.COMPRESSION_LZ4,
          kr.COMPRESSION_ZSTD]

blobs = st.one_of(st.none(), st.binary(max_size=64))
headers = st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3).map(tuple)


@st.composite
def record_lists(draw):
    n = draw(st.integers(1, 20))
    deltas = sorted(draw(st.sets(st.integers(0, 200), min_size=n, max_size=n)))
    base_ts = draw(st.integers(0, 2**41))
    return [(d, base_ts + draw(st.integers(-1000, 10**6)), draw(blobs), draw(blobs), draw(headers))
            for d in deltas]


@settings(max_examples=150, deadline=None)
@given(record_lists(), st.sampled_from(CODECS), st.integers(0, 2**40),
       st.sampled_from([(-1, -1, -1), (7, 0, 0), (123456, 3, 2**30)]))
def test_encode_decode_round_trip(records, codec, base_offset, producer):
    pid, epoch, seq = producer
    data = kr.encode_batch(base_offset, records, producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq, compression=codec)
    (batch,) = kr.decode_batches(data)
    assert batch.records == [(d, ts, k, v, tuple(h)) for d, ts, k, v, h in records]
    assert (batch.base_offset, batch.producer_id, batch.producer_epoch, batch.base_sequence) == \
        (base_offset, pid, epoch, seq)
    assert batch.compression == codec


@settings(max_examples=100, deadline=None)
@given(record_lists(), st.sampled_from([(-1, -1, -1), (9, 1, 40)]), st.integers(-1, 2**31 - 1))
def test_to_kafkasim_and_back_through_encode_stored(records, producer, leader_epoch):
    """Kafka batch → kafkasim batch (what the broker stores, stamped by the leader) → Kafka
    batch (what Fetch returns): the same records and the same header fields."""
    records = [r for r in records if r[1] >= 0]
    if not records:
        return
    pid, epoch, seq = producer
    (batch,) = kr.decode_batches(kr.encode_batch(0, records, producer_id=pid, producer_epoch=epoch,
                                                 base_sequence=seq))
    stored = rb.set_base_offset(kr.to_kafkasim(batch), 100, leader_epoch)
    header = rb.decode_header(stored)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (pid, epoch, seq)
    (again,) = kr.decode_batches(kr.encode_stored_batches([(header, stored)], 2**62))
    assert again.records == [(d, ts, k, v, tuple(h)) for d, ts, k, v, h in records]
    assert (again.base_offset, again.partition_leader_epoch, again.last_offset_delta, again.producer_id,
            again.producer_epoch, again.base_sequence, again.max_timestamp) == \
        (100, leader_epoch, header.last_offset_delta, pid, epoch, seq, header.max_timestamp)


def test_encode_stored_keeps_log_append_time_and_stops_below_the_high_watermark():
    stored = rb.encode_batch(10, [(0, 5, b"a", b"1", ()), (1, 6, b"b", b"2", ()), (2, 7, b"c", b"3", ())],
                             partition_leader_epoch=4, attributes=rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND)
    h = rb.decode_header(stored)
    (whole,) = kr.decode_batches(kr.encode_stored_batches([(h, stored)], 13))
    assert whole.attributes & 0x08 and whole.max_timestamp == h.max_timestamp and len(whole.records) == 3
    (cut,) = kr.decode_batches(kr.encode_stored_batches([(h, stored)], 12))
    assert [r[0] for r in cut.records] == [0, 1] and cut.last_offset_delta == 1 and cut.partition_leader_epoch == 4


@pytest.mark.parametrize("codec", CODECS)
def test_decodes_a_batch_built_by_aiokafka(codec):
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0,
                                        producer_id=42, producer_epoch=1, base_sequence=10,
                                        batch_size=1 << 20)
    for i in range(5):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i if i else None,
                       value=b"v" * i, headers=[("h", b"%d" % i), ("n", None)])
    (batch,) = kr.decode_batches(bytes(builder.build()))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 1, 10)
    assert batch.records == [(i, 1_700_000_000_000 + i, b"k%d" % i if i else None, b"v" * i,
                              (("h", b"%d" % i), ("n", None))) for i in range(5)]


@pytest.mark.parametrize("codec", [kr.COMPRESSION_NONE, kr.COMPRESSION_GZIP])
def test_kafka_python_reads_what_we_encode_and_we_read_what_it_builds(codec):
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=1000 + i, key=b"k", value=b"v%d" % i, headers=[("x", b"y")])
    (batch,) = kr.decode_batches(bytes(builder.build()))
    assert [r[3] for r in batch.records] == [b"v0", b"v1", b"v2"]

    ours = kr.encode_batch(7, [(0, 5, b"a", b"b", (("k", b"v"),)), (2, 9, None, None, ())])
    theirs = DefaultRecordBatch(bytearray(ours))
    assert theirs.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs] == \
        [(7, 5, b"a", b"b", [("k", b"v")]), (9, 9, None, None, [])]


def test_xerial_framed_snappy_is_decoded():
    import struct

    import cramjam

    body_batch = kr.encode_batch(0, [(0, 1, b"k", b"v" * 100, ())], compression=kr.COMPRESSION_SNAPPY)
    raw_payload = bytes(cramjam.snappy.decompress_raw(body_batch[kr.HEADER_SIZE:]))
    block = bytes(cramjam.snappy.compress_raw(raw_payload))
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    records = [(0, 1, b"k", b"v" * 100, ())]
    batch = _rebuild(body_batch, framed)
    assert kr.decode_batches(batch)[0].records == records


def _rebuild(batch: bytes, new_payload: bytes) -> bytes:
    """``batch`` with its records section replaced (length and CRC-32C fixed up)."""
    import struct

    import crc32c

    out = bytearray(batch[:kr.HEADER_SIZE] + new_payload)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def test_rejects_what_kafkasim_cannot_store():
    txn = bytearray(kr.encode_batch(0, [(0, 1, b"k", b"v", ())], attributes=kr.ATTR_TRANSACTIONAL))
    with pytest.raises(InvalidRecordError, match="transactional"):
        kr.decode_batches(bytes(txn))
    with pytest.raises(InvalidRecordError):
        kr.decode_batches(b"")


def test_crc_and_magic_are_checked():
    good = kr.encode_batch(0, [(0, 1, b"k", b"v", ())])
    flipped = bytearray(good)
    flipped[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC-32C"):
        kr.decode_batches(bytes(flipped))
    old = bytearray(good)
    old[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        kr.decode_batches(bytes(old))


def test_decompression_bomb_is_refused():
    bomb = kr.encode_batch(0, [(0, 1, None, b"\0" * 200_000, ())], compression=kr.COMPRESSION_GZIP)
    with pytest.raises(CorruptRecordError, match="inflates past"):
        kr.decode_batches(bomb, max_uncompressed=10_000)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_hostile_bytes_raise_only_corrupt_or_invalid(data):
    """Mutated, truncated or random bytes never raise anything but our record errors (a
    mutated timestamp is Kafka's INVALID_TIMESTAMP, by the one record rule)."""
    codec = data.draw(st.sampled_from(CODECS))
    good = kr.encode_batch(0, [(0, 1, b"key", b"value" * 5, (("h", b"x"),)), (1, 2, None, b"", ())],
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
        if kind == "fix-crc" and len(buf) > kr.HEADER_SIZE:   # get past the CRC to the record parser
            buf = _rebuild(bytes(buf[:kr.HEADER_SIZE]), bytes(buf[kr.HEADER_SIZE:]))
        buf = bytes(buf)
    try:
        for batch in kr.decode_batches(buf):
            kr.to_kafkasim(batch)
    except (CorruptRecordError, InvalidRecordError, InvalidTimestampError):
        pass


@given(record_lists(), st.data())
@settings(max_examples=200, deadline=None)
def test_fast_record_decoder_agrees_with_the_careful_one(records, data):
    """The fast path either returns exactly what the careful reader returns or defers
    (None), on good payloads and on payloads with a byte flipped."""
    from kafkasim.server.kafka_records import HEADER_SIZE, _decode_records_checked, _decode_records_fast

    batch = kr.encode_batch(0, records)
    (decoded,) = kr.decode_batches(batch)
    payload = batch[HEADER_SIZE:]
    last, base_ts = decoded.last_offset_delta, decoded.base_timestamp
    fast = _decode_records_fast(payload, len(records), last, base_ts)
    if fast is not None:
        assert fast == _decode_records_checked(payload, len(records), last, base_ts, "t")
    if payload:
        i = data.draw(st.integers(0, len(payload) - 1))
        bad = payload[:i] + bytes([payload[i] ^ data.draw(st.integers(1, 255))]) + payload[i + 1:]
        fast = _decode_records_fast(bad, len(records), last, base_ts)
        if fast is not None:
            assert fast == _decode_records_checked(bad, len(records), last, base_ts, "t")
