"""The one record rule (kafkasim.records.validation) where records enter the log: Log.append and
a produced batch (storage/validation.py). Nothing of the wrong type reaches a segment, with
or without the C codec (hardening issue, case 3)."""

from __future__ import annotations

import pytest

from kafkasim.config import LogConfig
from kafkasim.errors import InvalidRecordError, InvalidTimestampError
from kafkasim.records import record_batch as rb
from kafkasim.records import validation as rv
from kafkasim.storage.log import Log

T0 = 1_700_000_000_000


@pytest.fixture
def log(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), LogConfig(), clock)
    yield log
    log.close()


@pytest.mark.parametrize("records,error,message", [
    ([(T0, "k", b"v", ())], InvalidRecordError, "record 0: key must be bytes or None, got str"),
    ([(T0, b"k", bytearray(b"v"), ())], InvalidRecordError, "record 0: value must be bytes or None, got bytearray"),
    ([(T0, b"k", b"v", ()), (T0, b"k", b"v", [(b"hk", b"v")])], InvalidRecordError,
     "record 1: header 0: key must be str, got bytes"),
    ([(T0, b"k", b"v", [("h", "v")])], InvalidRecordError, "record 0: header 'h': value must be bytes or None"),
    ([(T0, b"k", b"v", "h=v")], InvalidRecordError, "headers must be a sequence of (str, bytes) pairs"),
    ([(2**63, b"k", b"v", ())], InvalidTimestampError, "record 0: Invalid timestamp: 9223372036854775808"),
    ([(T0, b"k", b"v", ()), (-3, b"k", b"v", ())], InvalidTimestampError, "negative timestamp -3 at offset delta 1"),
])
@pytest.mark.parametrize("codec", ["c", "pure"])
def test_log_append_refuses_what_breaks_the_format(log, monkeypatch, codec, records, error, message):
    if codec == "pure":
        monkeypatch.setattr(rb, "_codec", None)
    elif not rb.C_CODEC:
        pytest.skip("C codec not built")
    with pytest.raises(error) as e:
        log.append(records)
    assert message in str(e.value)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_log_append_takes_any_iterable_of_records_and_refuses_a_non_sequence(log):
    log.append(r for r in [(T0, b"k", b"v", None), (T0 + 1, None, b"w", [("h", None)])])
    assert [(r.key, r.headers) for r in log.read(0)] == [(b"k", ()), (None, (("h", None),))]
    with pytest.raises(InvalidRecordError, match="records must be a sequence"):
        log.append(5)
    with pytest.raises(InvalidRecordError, match=r"records must be \(timestamp_ms: int, key, value, headers\)"):
        log.append(["abcd"])


def test_encode_batch_names_the_record_and_field_it_cannot_encode():
    with pytest.raises(InvalidRecordError, match="record at offset delta 1: header 'h': value must be bytes or None"):
        rb.encode_batch(0, [(0, T0, b"k", b"v", ()), (1, T0 + 1, b"k", b"v", (("h", "x"),))])


def test_append_batch_refuses_a_produced_batch_whose_records_are_not_numbered_0_to_n_1(log):
    # Kafka's LogValidator: a produced batch's record count must equal its offset range
    gappy = rb.encode_batch(0, [(0, T0, b"a", b"1", ()), (3, T0 + 5, b"b", b"2", ())], last_offset_delta=4)
    with pytest.raises(InvalidRecordError, match="2 records for an offset range of 5"):
        log.append_batch(gappy)
    assert log.log_end_offset == 0


def test_well_formed_batch_decodes_and_sizes_follow_the_producer():
    recs = [(0, T0, None, None, ()), (1, T0 - 5, b"k", b"v" * 10, (("h", b"x"), ("n", None)))]
    batch = rb.encode_batch(0, recs)
    h = rb.decode_header(batch)
    assert rb.decode_columns(batch, 0, h)[2:4] == ((None, b"k"), (None, b"v" * 10))
    assert rv.record_size(b"k", b"v" * 10, (("h", b"x"), ("n", None))) == rv.RECORD_OVERHEAD + 1 + 10 + 2 + 1
    pair = ["h", b"x"]
    headers, size = rv.check_headers([pair])
    pair[1] = "changed later"
    assert (headers, size) == ((("h", b"x"),), 2)


@pytest.mark.parametrize("topic_codec, sent, stored", [
    ("producer", 0, 0), ("producer", 3, 3),          # the default keeps the producer's codec
    ("gzip", 0, 1), ("zstd", 2, 4), ("lz4", 3, 3),   # another codec: re-encoded, as Kafka's LogValidator
    ("uncompressed", 4, 0),
])
def test_compression_type_keeps_or_reencodes_the_batch_as_kafka_does(tmp_path, clock, topic_codec, sent, stored):
    log = Log(str(tmp_path / "c-0"), LogConfig.from_overrides({"compression.type": topic_codec}), clock)
    recs = [(i, T0 + i, b"k%d" % i, b"value-%d" % i * 20, (("h", b"x"),)) for i in range(5)]
    batch = rb.encode_batch(0, recs, producer_id=7, producer_epoch=1, base_sequence=3, compression=sent)
    h = log.append_batch(batch)
    (got, raw), = log.read_batches(0)
    assert got.attributes & rb.ATTR_COMPRESSION_MASK == stored == h.attributes & rb.ATTR_COMPRESSION_MASK
    if stored == sent:
        assert raw[16:] == batch[16:]        # the bytes as sent, past base offset and leader epoch
    assert (got.producer_id, got.producer_epoch, got.base_sequence, got.record_count) == (7, 1, 3, 5)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence) for r in log.read(0)] == \
        [(d, ts, k, v, hd, 3 + d) for d, ts, k, v, hd in recs]
    log.close()


def test_log_append_time_rewrites_only_the_header(tmp_path, clock):
    log = Log(str(tmp_path / "l-0"), LogConfig.from_overrides({"message.timestamp.type": "LogAppendTime"}), clock)
    batch = rb.encode_batch(0, [(0, 5, b"k", b"v", ()), (1, 9, b"k", b"w", ())])
    log.append_batch(batch)
    (h, raw), = log.read_batches(0)
    assert h.attributes & rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND and h.max_timestamp == clock.now_ms()
    assert raw[61:] == batch[61:] and raw[27:35] == batch[27:35]   # records and base timestamp untouched
    rb.verify(raw, 0, h)                                           # the CRC recomputed
    assert [r.timestamp for r in log.read(0)] == [clock.now_ms()] * 2
    log.close()
