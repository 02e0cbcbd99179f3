"""``kafkasim dump-log`` prints what Kafka's ``kafka-dump-log.sh --files F [--print-data-log]`` prints.

The layout, from Kafka's ``DumpLogSegments`` (core/src/main/scala/kafka/tools/DumpLogSegments.scala,
``dumpLog`` and ``printBatchLevel``) and its ``DumpLogSegmentsTest``:

- ``Dumping <file>`` then, for a ``.log``, ``Log starting offset: <base offset from the name>``;
- per v2 batch one line, fields separated by one space, each ``name: value``, in this order:
  baseOffset lastOffset count baseSequence lastSequence producerId producerEpoch
  partitionLeaderEpoch isTransactional isControl deleteHorizonMs position
  <timestampType: CreateTime|LogAppendTime>: <maxTimestamp> size magic compresscodec crc isvalid
  (deleteHorizonMs is Java's ``OptionalLong``: ``OptionalLong.empty``; booleans ``true``/``false``;
  compresscodec is ``CompressionType.name``: none, gzip, snappy, lz4, zstd; crc the unsigned CRC-32C);
- with ``--deep-iteration`` or ``--print-data-log`` per record a line starting ``| `` (``RecordIndent``):
  offset <timestampType> keySize valueSize sequence headerKeys, headerKeys as ``[a,b]``; with
  ``--print-data-log`` then `` key: K`` only when the record has a key and `` payload: V`` only when
  it has a value (DumpLogSegmentsTest.testPrintDataLog: lines end ``headerKeys: [] key: message key N
  payload: message value N``, and without key or value those parts are absent).
"""

from __future__ import annotations

import os
import re

import pytest

from kafkasim.broker import Broker
from kafkasim.cli import main
from kafkasim.records import record_batch as rb
from kafkasim.records.framing import decode_header

BATCH_FIELDS = ["baseOffset", "lastOffset", "count", "baseSequence", "lastSequence", "producerId", "producerEpoch",
                "partitionLeaderEpoch", "isTransactional", "isControl", "deleteHorizonMs", "position", "{ts}",
                "size", "magic", "compresscodec", "crc", "isvalid"]
RECORD_FIELDS = ["offset", "{ts}", "keySize", "valueSize", "sequence", "headerKeys"]
T0 = 1_700_000_000_000
_PAIR = re.compile(r"(\w+): (\[[^\]]*\]|\S+)")


def fields(line: str) -> list[tuple[str, str]]:
    """``name: value`` pairs of one line, checking they cover it with single spaces between
    (a record's payload, last, is the rest of the line, as Kafka prints it)."""
    head, sep, payload = line.partition(" payload: ") if not line.startswith("payload: ") else ("", " ", line[9:])
    pairs = _PAIR.findall(head)
    assert " ".join(f"{k}: {v}" for k, v in pairs) == head, line
    return pairs + ([("payload", payload)] if sep else [])


def seg(data: str, topic: str) -> str:
    d = os.path.join(data, f"{topic}-0")
    return os.path.join(d, sorted(f for f in os.listdir(d) if f.endswith(".log"))[0])


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("dump") / "data")
    with Broker(data) as b:
        b.create_topic("plain", 1)
        b.create_topic("stamped", 1, configs={"message.timestamp.type": "LogAppendTime"})
        pid, epoch = b.init_producer_id()
        b.append_records("plain", 0, [(T0, b"k0", b"v0", [("a", b"1"), ("b", None)]),
                                      (T0 + 1, None, b"no key", ()), (T0 + 2, b"k2", None, ())],
                         producer_id=pid, producer_epoch=epoch, base_sequence=0)
        b.produce("plain", 0, rb.encode_batch(0, [(0, T0 + 3, b"gz", b"zipped" * 20, ())], compression=1))
        b.append_records("stamped", 0, [(T0, b"s", b"t", ())])
    return data


def run(capsys, *argv) -> tuple[int, list[str]]:
    rc = main(["dump-log", *argv])
    return rc, capsys.readouterr().out.splitlines()


def test_header_lines_and_batch_fields_in_kafkas_order(data_dir, capsys):
    path = seg(data_dir, "plain")
    rc, lines = run(capsys, path)
    assert rc == 0
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 0"
    batches = lines[2:]
    assert len(batches) == 2 and not any(line.startswith("|") for line in batches)   # shallow: no records
    data = open(path, "rb").read()
    pos = 0
    for line, codec in zip(batches, ["none", "gzip"]):
        got = fields(line)
        assert [k for k, _ in got] == [f.format(ts="CreateTime") for f in BATCH_FIELDS]
        h = decode_header(data, pos)
        v = dict(got)
        assert v["baseOffset"] == str(h.base_offset) and v["lastOffset"] == str(h.last_offset)
        assert v["position"] == str(pos) and v["size"] == str(h.size) and v["CreateTime"] == str(h.max_timestamp)
        assert v["magic"] == "2" and v["compresscodec"] == codec and v["crc"] == str(h.crc)
        assert (v["isTransactional"], v["isControl"], v["isvalid"]) == ("false", "false", "true")
        assert v["deleteHorizonMs"] == "OptionalLong.empty"
        pos += h.size
    first = dict(fields(batches[0]))
    assert (first["count"], first["baseSequence"], first["lastSequence"]) == ("3", "0", "2")
    assert first["producerEpoch"] == "0" and int(first["producerId"]) >= 0
    second = dict(fields(batches[1]))
    assert (second["baseSequence"], second["lastSequence"], second["producerId"]) == ("-1", "-1", "-1")


def test_print_data_log_records(data_dir, capsys):
    rc, lines = run(capsys, "--print-data-log", "--files", seg(data_dir, "plain"))
    assert rc == 0
    recs = [line for line in lines if line.startswith("| ")]
    assert len(recs) == 4
    names = [[k for k, _ in fields(r[2:])] for r in recs]
    base = [f.format(ts="CreateTime") for f in RECORD_FIELDS]
    assert names == [base + ["key", "payload"], base + ["payload"], base + ["key"], base + ["key", "payload"]]
    assert recs[0] == (f"| offset: 0 CreateTime: {T0} keySize: 2 valueSize: 2 sequence: 0 headerKeys: [a,b] "
                       f"key: k0 payload: v0")
    assert recs[1] == f"| offset: 1 CreateTime: {T0 + 1} keySize: -1 valueSize: 6 sequence: 1 headerKeys: [] payload: no key"
    assert recs[2] == f"| offset: 2 CreateTime: {T0 + 2} keySize: 2 valueSize: -1 sequence: 2 headerKeys: [] key: k2"
    assert recs[3].startswith(f"| offset: 3 CreateTime: {T0 + 3} keySize: 2 valueSize: 120 sequence: -1 headerKeys: [] "
                              f"key: gz payload: zippedzipped")


def test_deep_iteration_prints_record_metadata_without_data(data_dir, capsys):
    rc, lines = run(capsys, "--deep-iteration", seg(data_dir, "plain"))
    recs = [line for line in lines if line.startswith("| ")]
    assert rc == 0 and len(recs) == 4
    assert all([k for k, _ in fields(r[2:])] == [f.format(ts="CreateTime") for f in RECORD_FIELDS] for r in recs)


def test_log_append_time_names_the_timestamp_type(data_dir, capsys):
    rc, lines = run(capsys, "--print-data-log", seg(data_dir, "stamped"))
    assert rc == 0
    batch = fields(lines[2])
    assert [k for k, _ in batch] == [f.format(ts="LogAppendTime") for f in BATCH_FIELDS]
    rec = fields(lines[3][2:])
    assert [k for k, _ in rec][:6] == [f.format(ts="LogAppendTime") for f in RECORD_FIELDS]
    assert dict(rec)["LogAppendTime"] == dict(batch)["LogAppendTime"]   # every record reads the append time


def test_skip_record_metadata_and_index_files(data_dir, capsys):
    path = seg(data_dir, "plain")
    _, lines = run(capsys, "--print-data-log", "--skip-record-metadata", path)
    assert [line for line in lines if line.startswith("|")][:2] == ["| key: k0 payload: v0", "| payload: no key"]
    idx = path[:-4] + ".index"
    rc, lines = run(capsys, idx)
    assert rc == 0 and lines == [f"Dumping {idx}", f"{idx} is empty."]


def test_a_torn_tail_is_reported_as_kafka_does(tmp_path, data_dir, capsys):
    src = seg(data_dir, "plain")
    d = tmp_path / "t-0"
    d.mkdir()
    path = str(d / os.path.basename(src))
    data = open(src, "rb").read()
    with open(path, "wb") as f:
        f.write(data + data[:30])
    rc = main(["dump-log", path])
    out, err = capsys.readouterr()
    assert rc == 1
    assert out.splitlines()[-1] == f"Found 30 invalid bytes at the end of {os.path.basename(path)}"
    assert path in err
