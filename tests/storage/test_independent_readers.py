"""Independent readers agree (issue 22, "Done when"): every segment file kafkasim writes is read
by kafka-python's and aiokafka's own v2 batch readers, and they see what kafkasim's reader sees.

The readers, none of which shares code with kafkasim:

- kafka-python: ``kafka.record.memory_records.MemoryRecords`` → ``DefaultRecordBatch``;
- aiokafka as its consumer's fetcher reads a fetch response: ``aiokafka.record.memory_records.MemoryRecords``
  (its Cython ``_crecords`` build when installed, as here);
- aiokafka's pure-Python ``_DefaultRecordBatchPy`` (what aiokafka uses without its extension).

For every batch of every ``.log`` file: the CRC validates in each reader, and the batch fields
(base offset, last offset delta, producer id/epoch, base sequence, codec, timestamp type,
max timestamp) and every record (offset, timestamp, key, value, headers, sequence) equal
what :func:`kafkasim.records.record_batch.iter_records` returns; the records of all segments
equal what ``Broker.fetch`` returns from the log start to the log end, and (where the test
knows them) what was sent. The writers: the in-process ``Producer`` (each compression codec,
idempotent or not, headers with null values, null keys and values), the console producer
(``kafkasim produce``, line and JSON input), a compacted topic after ``run_log_maintenance()``
(batches with gaps), and a LogAppendTime topic (each reader reports the append time).
"""

from __future__ import annotations

import io
import random
import struct
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.producer import Producer
from kafkasim.records import record_batch as rb
from kafkasim.records.framing import batch_crc

kafka_memory_records = pytest.importorskip("kafka.record.memory_records")
aiokafka_memory_records = pytest.importorskip("aiokafka.record.memory_records")
aiokafka_default_records = pytest.importorskip("aiokafka.record.default_records")

T0 = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {name: i for i, name in enumerate(CODECS)}


# ------------------------------------------------------------------ the readers, normalized

class Batch(NamedTuple):
    """One batch as a reader sees it."""

    base_offset: int
    last_offset_delta: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    compression: int
    log_append_time: bool
    max_timestamp: int
    crc_valid: bool
    records: list   # (offset, timestamp, key, value, headers, sequence)


def _sequence(base_sequence: int, base_offset: int, offset: int) -> int:
    """A record's sequence as Kafka's DefaultRecordBatch derives it (no per-record field on disk):
    base sequence + offset delta, wrapping past Int.MAX_VALUE; -1 without a base sequence."""
    if base_sequence < 0:
        return -1
    return (base_sequence + offset - base_offset) % 2**31


def _from_client_batch(b) -> Batch:
    """A kafka-python or aiokafka DefaultRecordBatch, normalized (the CRC checked before the
    records are read: both readers decompress in place)."""
    crc_valid = b.validate_crc()
    records = [(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers),
                _sequence(b.base_sequence, b.base_offset, r.offset)) for r in b]
    return Batch(b.base_offset, b.last_offset_delta, b.producer_id, b.producer_epoch, b.base_sequence,
                 b.compression_type, b.timestamp_type == 1, b.max_timestamp, crc_valid, records)


def _walk(memory_records) -> list:
    out = []
    while memory_records.has_next():
        batch = memory_records.next_batch()
        assert batch.magic == 2
        out.append(_from_client_batch(batch))
    return out


def read_kafka_python(data: bytes) -> list:
    return _walk(kafka_memory_records.MemoryRecords(data))


def read_aiokafka(data: bytes) -> list:
    return _walk(aiokafka_memory_records.MemoryRecords(data))


def read_aiokafka_pure(data: bytes) -> list:
    out, pos = [], 0
    while pos < len(data):   # batches back to back: 8-byte base offset, then the int32 length of the rest
        end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append(_from_client_batch(aiokafka_default_records._DefaultRecordBatchPy(memoryview(data)[pos:end])))
        pos = end
    return out


READERS = {"kafka-python": read_kafka_python, "aiokafka": read_aiokafka, "aiokafka-pure": read_aiokafka_pure}


def read_kafkasim(data: bytes) -> list:
    """The same normalized view from kafkasim's own reader (CRC checked by iter_batches)."""
    out = []
    for pos, h in rb.iter_batches(data, where="segment"):
        records = []
        for r in rb.iter_records(data, pos, h, where="segment"):
            assert (r.producer_id, r.producer_epoch) == (h.producer_id, h.producer_epoch)
            records.append((r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence))
        out.append(Batch(h.base_offset, h.last_offset_delta, h.producer_id, h.producer_epoch, h.base_sequence,
                         h.attributes & rb.ATTR_COMPRESSION_MASK,
                         bool(h.attributes & rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND), h.max_timestamp,
                         batch_crc(data, pos) == h.crc, records))
    return out


def test_the_fetch_path_reader_is_aiokafkas_extension():
    """What aiokafka's Fetcher uses here is its Cython reader; the pure one is tested beside it."""
    assert aiokafka_memory_records.MemoryRecords.__module__.startswith("aiokafka.record._crecords")
    assert aiokafka_default_records.DefaultRecordBatch is not aiokafka_default_records._DefaultRecordBatchPy


# ------------------------------------------------------------------ the comparison


def segments(data_dir: Path, topic: str, partition: int) -> list[Path]:
    files = sorted((data_dir / f"{topic}-{partition}").glob("*.log"))
    assert files, f"no segment of {topic}-{partition} in {data_dir}"
    return files


def fetch_all(broker, topic: str, partition: int) -> list:
    """Every record of the partition through Broker.fetch, stepping over compaction gaps."""
    out = []
    offset = broker.list_offsets(topic, partition, -2)[0]
    end = broker.list_offsets(topic, partition, -1)[0]
    while offset < end:
        res = broker.fetch(topic, partition, offset)
        out += [(r.offset, r.timestamp, r.key, r.value, r.headers, r.producer_id, r.producer_epoch, r.sequence)
                for r in res.records]
        assert res.next_offset > offset
        offset = res.next_offset
    return out


def assert_readers_agree(data_dir: Path, topic: str, partition: int, fetched: list) -> list:
    """Read every segment of ``topic-partition`` with every reader; all must equal kafkasim's
    reading, every CRC must validate, and the records must be ``fetched`` (Broker.fetch's).
    Returns kafkasim's batches, in order."""
    batches = []
    for path in segments(data_dir, topic, partition):
        data = path.read_bytes()
        ours = read_kafkasim(data)
        assert all(b.crc_valid for b in ours)
        for name, reader in READERS.items():
            theirs = reader(data)
            assert all(b.crc_valid for b in theirs), f"{name}: CRC does not validate in {path.name}"
            assert len(theirs) == len(ours), f"{name}: {len(theirs)} batches in {path.name}, kafkasim {len(ours)}"
            for i, (t, o) in enumerate(zip(theirs, ours)):
                assert t == o, f"{name}: batch {i} of {path.name} differs"
        batches += ours
    flat = [(off, ts, k, v, h, b.producer_id, b.producer_epoch, seq)
            for b in batches for off, ts, k, v, h, seq in b.records]
    assert flat == fetched
    return batches


def test_a_flipped_byte_fails_every_readers_crc(tmp_path):
    """The control: the CRC check each reader does is a real one."""
    clock = MockClock(T0)
    with Broker(tmp_path / "d", clock=clock) as b:
        b.create_topic("t", 1)
        b.append_records("t", 0, [(T0, b"k", b"value", (("h", b"x"),))])
    data = bytearray(segments(tmp_path / "d", "t", 0)[0].read_bytes())
    assert all(reader(bytes(data))[0].crc_valid for reader in READERS.values())
    data[-3] ^= 0x20   # inside the value
    for name, reader in READERS.items():
        assert reader(bytes(data))[0].crc_valid is False, name


# ------------------------------------------------------------------ what the in-process Producer writes


def _sends(n: int) -> list:
    """``(partition, timestamp, key, value, headers)`` with null keys, null values, empty
    values, headers with null values and non-ASCII keys, timestamps going back and forth
    (negative deltas within a batch) and values of 9,000 random bytes."""
    out = []
    for i in range(n):
        key = None if i % 4 == 0 else b"key-%d" % (i % 7)
        value = None if i % 5 == 3 else (b"" if i % 11 == 0 else b"value-%d" % i * (1 + i % 3))
        if i in (17, 18, 40, 41):   # two per partition: over 8 KiB (3-byte varint lengths), and segments roll
            value = random.Random(i).randbytes(9_000)
        headers = [(), [("trace", b"t%d" % i)], [("é-ключ", None), ("", b""), ("n", None)],
                   [("h%d" % j, None if j % 2 else b"x" * j) for j in range(5)]][i % 4]
        ts = T0 - 50_000 + 1_000 * i - (30_000 if i % 5 == 2 else 0)
        out.append((i % 2, ts, key, value, headers))
    return out


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("compression", CODECS)
def test_in_process_producer_segments_read_alike(tmp_path, compression, idempotent):
    clock = MockClock(T0)
    data_dir = tmp_path / "d"
    sends = _sends(60)
    with Broker(data_dir, clock=clock) as b:
        b.create_topic("t", 2, configs={"segment.bytes": "12000"})
        p = Producer(b, compression_type=None if compression == "none" else compression,
                     enable_idempotence=idempotent, batch_size=700, linger_ms=60_000, acks="all")
        futures = [p.send("t", value=v, key=k, headers=h, partition=part, timestamp_ms=ts)
                   for part, ts, k, v, h in sends]
        p.close()
        metas = [f.get(timeout=10) for f in futures]
        fetched = {part: fetch_all(b, "t", part) for part in (0, 1)}
    for part in (0, 1):
        batches = assert_readers_agree(data_dir, "t", part, fetched[part])
        # what was sent, at the offsets the producer was told
        sent = [(m.offset, ts, k, v, tuple(tuple(x) for x in h))
                for m, (pt, ts, k, v, h) in zip(metas, sends) if pt == part]
        assert [r[:5] for r in fetched[part]] == sent
        # the premises: several batches and segments, the codec and the producer fields as configured
        assert len(batches) > 3 and max(len(bt.records) for bt in batches) > 3
        assert any(r[1] < bt.records[0][1] for bt in batches for r in bt.records)   # negative timestamp deltas
        assert len(segments(data_dir, "t", part)) > 1
        assert {bt.compression for bt in batches} == {CODEC_IDS[compression]}
        assert not any(bt.log_append_time for bt in batches)
        if idempotent:
            pids = {(bt.producer_id, bt.producer_epoch) for bt in batches}
            assert len(pids) == 1 and min(pids)[0] >= 0
            seqs = [r[-1] for r in fetched[part]]
            assert seqs == list(range(len(seqs)))           # one sequence per record, from 0
        else:
            assert {(bt.producer_id, bt.base_sequence) for bt in batches} == {(-1, -1)}


def test_appended_records_with_a_wrapping_sequence_read_alike(tmp_path):
    """Broker.append_records with explicit producer fields (a base sequence near Int.MAX_VALUE
    wraps inside the batch, as Kafka's DefaultRecordBatch.incrementSequence)."""
    clock = MockClock(T0)
    data_dir = tmp_path / "d"
    with Broker(data_dir, clock=clock) as b:
        b.create_topic("t", 1)
        pid, epoch = b.init_producer_id()
        recs = [(T0 + i, None if i % 2 else b"k", b"v%d" % i, (("h", None),) if i % 3 else ()) for i in range(5)]
        b.append_records("t", 0, recs, producer_id=pid, producer_epoch=epoch, base_sequence=0)
        b.append_records("t", 0, recs, producer_id=pid, producer_epoch=epoch, base_sequence=5)
        pid2, _ = b.init_producer_id()
        b.append_records("t", 0, recs, producer_id=pid2, producer_epoch=7, base_sequence=2**31 - 3)
        fetched = fetch_all(b, "t", 0)
    batches = assert_readers_agree(data_dir, "t", 0, fetched)
    assert [r[-1] for r in batches[2].records] == [2**31 - 3, 2**31 - 2, 2**31 - 1, 0, 1]
    assert [r[-3:] for r in fetched[:10]] == [(pid, epoch, s) for s in range(10)]


# ------------------------------------------------------------------ what the console producer writes


def _console_produce(monkeypatch, capsys, data_dir: Path, lines: str, *args: str) -> None:
    from kafkasim.cli import main

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines.encode("utf-8"))))
    rc = main(["produce", "t", "--data-dir", str(data_dir), *args])
    out, err = capsys.readouterr()
    assert rc == 0, err


def test_console_producer_segments_read_alike(tmp_path, monkeypatch, capsys):
    data_dir = tmp_path / "d"
    with Broker(data_dir) as b:
        b.create_topic("t", 1, configs={"segment.bytes": "1024"})
    line_input = "".join(
        f"{'trace:t%d,é:<null>,empty:' % i if i % 3 else '<null>'}\t{'<null>' if i % 4 == 0 else 'key%d' % i}\t"
        f"{'<null>' if i % 5 == 4 else 'value %d ünïcode' % i}\n" for i in range(40))
    _console_produce(monkeypatch, capsys, data_dir, line_input,
                     "--property", "parse.key=true", "--property", "parse.headers=true",
                     "--property", "null.marker=<null>", "--producer-property", "batch.size=300")
    json_input = "".join(
        f'{{"key": {"null" if i % 3 == 0 else chr(34) + "j%d" % i + chr(34)}, '
        f'"value": {"null" if i % 7 == 6 else chr(34) + "json %d" % i + chr(34)}, '
        f'"headers": {{"a": "x", "nul": null}}, "timestamp": {T0 + 1000 * i - (5000 if i % 4 == 3 else 0)}}}\n'
        for i in range(30))
    _console_produce(monkeypatch, capsys, data_dir, json_input, "--input-format", "json",
                     "--producer-property", "compression.type=zstd", "--producer-property", "enable.idempotence=true",
                     "--producer-property", "batch.size=300")
    with Broker(data_dir) as b:
        fetched = fetch_all(b, "t", 0)
    batches = assert_readers_agree(data_dir, "t", 0, fetched)

    expected_lines = []
    for i in range(40):
        headers = (("trace", b"t%d" % i), ("é", None), ("empty", b"")) if i % 3 else ()
        expected_lines.append((None if i % 4 == 0 else b"key%d" % i,
                               None if i % 5 == 4 else f"value {i} ünïcode".encode(), headers))
    expected_json = [(None if i % 3 == 0 else b"j%d" % i, None if i % 7 == 6 else b"json %d" % i,
                      (("a", b"x"), ("nul", None))) for i in range(30)]
    assert [(r[2], r[3], r[4]) for r in fetched] == expected_lines + expected_json
    assert [r[0] for r in fetched] == list(range(70))
    assert [r[1] for r in fetched[40:]] == [T0 + 1000 * i - (5000 if i % 4 == 3 else 0) for i in range(30)]
    # premises: both runs wrote several batches; the second compressed and idempotent
    first, second = [bt for bt in batches if bt.base_offset < 40], [bt for bt in batches if bt.base_offset >= 40]
    assert len(first) > 2 and len(second) > 2
    assert {bt.compression for bt in first} == {0} and {bt.compression for bt in second} == {4}
    pids = [{bt.producer_id for bt in run} for run in (first, second)]   # idempotent: Kafka's default
    assert len(pids[0]) == len(pids[1]) == 1 and pids[0] != pids[1] and min(pids[0] | pids[1]) >= 0
    assert [r[-1] for r in fetched] == list(range(40)) + list(range(30))


# ------------------------------------------------------------------ after compaction

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "600", "min.cleanable.dirty.ratio": "0.01"}


@pytest.mark.parametrize("compression", CODECS)
def test_compacted_segments_read_alike(tmp_path, compression):
    clock = MockClock(T0)
    data_dir = tmp_path / "d"
    with Broker(data_dir, clock=clock) as b:
        b.create_topic("t", 1, configs=COMPACT)
        p = Producer(b, compression_type=None if compression == "none" else compression,
                     enable_idempotence=True, linger_ms=60_000)
        for i in range(120):
            # 9 keys, then keys 0-3 rewritten (batches keep their records of keys 4-8), then new keys
            key = b"key-%d" % (i % 9 if i < 60 else i % 4 if i < 100 else i)
            value = None if i % 13 == 12 else b"value-%d" % i  # some tombstones
            headers = [("i", b"%d" % i), ("nul", None)] if i % 2 else None
            p.send("t", value=value, key=key, headers=headers, timestamp_ms=T0 + i * 10 - (i % 3) * 7)
            if i % 10 == 9:
                p.flush()
        p.close()
        before = fetch_all(b, "t", 0)
        b.run_log_maintenance()
        after = fetch_all(b, "t", 0)
    batches = assert_readers_agree(data_dir, "t", 0, after)
    # the premise: compaction removed records, leaving gaps inside batches and between them
    assert len(after) < len(before)
    assert any(bt.records and len(bt.records) < bt.last_offset_delta + 1 for bt in batches)
    assert any(a.base_offset + a.last_offset_delta + 1 < c.base_offset or
               len(a.records) < a.last_offset_delta + 1 for a, c in zip(batches, batches[1:]))
    assert {bt.compression for bt in batches if bt.records} == {CODEC_IDS[compression]}
    # what survived is what compaction keeps: the last record of each key in the cleaned part
    surviving = {r[2]: r for r in after}
    last_sent = {r[2]: r for r in before}
    for key, rec in surviving.items():
        if rec[3] is not None:
            assert last_sent[key][0] >= rec[0]
    assert set(after) <= set(before)


# ------------------------------------------------------------------ LogAppendTime


@pytest.mark.parametrize("compression", CODECS)
def test_log_append_time_read_alike_and_reported_by_every_reader(tmp_path, compression):
    clock = MockClock(T0)
    data_dir = tmp_path / "d"
    append_times = []
    with Broker(data_dir, clock=clock) as b:
        b.create_topic("t", 1, configs={"message.timestamp.type": "LogAppendTime"})
        p = Producer(b, compression_type=None if compression == "none" else compression,
                     batch_size=1_000_000, linger_ms=60_000)
        for round_ in range(3):
            for i in range(8):
                p.send("t", value=b"v%d-%d" % (round_, i), key=None if i % 2 else b"k",
                       headers=[("h", None)] if i % 3 else None, timestamp_ms=1_000 + 100 * i - 30 * (i % 2))
            clock.advance(12_345)
            append_times.append(clock.now_ms())
            p.flush()
        p.close()
        fetched = fetch_all(b, "t", 0)
    batches = assert_readers_agree(data_dir, "t", 0, fetched)
    assert len(batches) == 3
    for bt, append_time in zip(batches, append_times):
        assert bt.log_append_time and bt.max_timestamp == append_time
        assert bt.compression == CODEC_IDS[compression]
        assert {r[1] for r in bt.records} == {append_time}    # every reader's timestamp: the append time
    assert [r[1] for r in fetched] == [t for t in append_times for _ in range(8)]
