"""Old-format data dirs are refused, and ``kafkasim upgrade-data-dir`` converts them to Kafka v2.

The fixture ``fixtures/old_format_v1/`` is a data dir written by kafkasim before issue 22
(format version 1: magic 1, zlib CRC-32, msgpack records; ``fixtures/make_old_format_v1.py``
says what it holds: two- and three-segment partitions, a compacted partition with gaps inside
batches, headers with a null value, null keys and values, idempotent batches, a LogAppendTime
topic, a committed offset) with ``expected.json``, every batch and record as that version read
them back. Every test works on a copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from kafkasim.broker import Broker
from kafkasim.cli import main
from kafkasim.errors import KafkaStorageError, OldLogFormatError
from kafkasim.records import record_batch as rb
from kafkasim.records.framing import MAGIC, BatchIterator
from kafkasim.storage import layout
from kafkasim.storage.files import lock_data_dir
from kafkasim.storage.inspection import verify_data_dir
from kafkasim.storage.upgrade import upgrade_data_dir

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "old_format_v1")
CHILD = os.path.join(HERE, "upgrade_child.py")
with open(os.path.join(FIXTURE, "expected.json")) as _f:
    EXPECTED = json.load(_f)
HEADER_FIELDS = ("base_offset", "partition_leader_epoch", "attributes", "last_offset_delta", "base_timestamp",
                 "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "record_count")
OLD_SEGMENTS = 9    # non-empty segments in the fixture (empty ones need no conversion)


@pytest.fixture
def old_dir(tmp_path):
    path = str(tmp_path / "data")
    shutil.copytree(os.path.join(FIXTURE, "data"), path)
    return path


def _hex(b):
    return None if b is None else b.hex()


def dump(data_dir: str) -> dict:
    """Every batch and record of every partition, as expected.json lays them out (v2 reader)."""
    out = {}
    for _, path in layout.list_partitions(data_dir):
        batches = []
        for _, seg in layout.list_segments(path):
            data = open(seg, "rb").read()
            walk = BatchIterator(data, where=seg)
            for pos, h in walk:
                assert h.magic == MAGIC
                batches.append({
                    "segment": os.path.basename(seg), "header": {f: getattr(h, f) for f in HEADER_FIELDS},
                    "records": [{"offset": r.offset, "timestamp": r.timestamp, "key": _hex(r.key),
                                 "value": _hex(r.value), "headers": [[k, _hex(v)] for k, v in r.headers],
                                 "producer_id": r.producer_id, "producer_epoch": r.producer_epoch,
                                 "sequence": r.sequence}
                                for r in rb.iter_records(data, pos, h, where=seg)]})
            assert walk.error is None, walk.error
        out[os.path.basename(path)] = batches
    return out


def expected() -> dict:
    return {name: [{"segment": b["segment"], "header": {f: b["header"][f] for f in HEADER_FIELDS},
                    "records": b["records"]} for b in part["batches"]]
            for name, part in EXPECTED.items()}


def assert_everything_reads_back(data_dir: str) -> None:
    assert dump(data_dir) == expected()
    problems = verify_data_dir(data_dir)
    assert problems == [], problems          # no corruption, and no index left missing
    with Broker(data_dir) as b:             # and the broker's log reads serve the same records
        for name, part in EXPECTED.items():
            pd = layout.parse_partition_dir(name)
            log = b.log(pd.topic, pd.partition)
            got, offset = [], log.log_start_offset
            while offset < log.log_end_offset:
                recs = log.read(offset, 1 << 20)
                got.extend({"offset": r.offset, "timestamp": r.timestamp, "key": _hex(r.key), "value": _hex(r.value),
                            "headers": [[k, _hex(v)] for k, v in r.headers], "producer_id": r.producer_id,
                            "producer_epoch": r.producer_epoch, "sequence": r.sequence} for r in recs)
                offset = recs[-1].offset + 1 if recs else log.log_end_offset
            assert got == [r for bt in part["batches"] for r in bt["records"]], name


def files_of(data_dir: str) -> dict:
    out = {}
    for root, _, names in os.walk(data_dir):
        for n in names:
            if n == ".lock":
                continue
            p = os.path.join(root, n)
            out[os.path.relpath(p, data_dir)] = open(p, "rb").read()
    return out


# -- refusing -----------------------------------------------------------------------------------
def test_the_broker_refuses_an_old_data_dir_naming_the_command(old_dir):
    with pytest.raises(OldLogFormatError) as err:
        Broker(old_dir)
    msg = str(err.value)
    assert f"kafkasim upgrade-data-dir {old_dir}" in msg
    assert "-" in msg and os.path.join(old_dir, "") in msg      # names the partition directory
    assert isinstance(err.value, KafkaStorageError)


def test_offline_commands_refuse_it_too(old_dir, capsys):
    assert main(["verify-log", "--data-dir", old_dir]) == 1
    assert f"kafkasim upgrade-data-dir {old_dir}" in capsys.readouterr().err
    seg = os.path.join(old_dir, "orders-0", "00000000000000000000.log")
    assert main(["dump-log", seg]) == 1
    assert f"kafkasim upgrade-data-dir {old_dir}" in capsys.readouterr().err
    assert main(["groups", "list", "--data-dir", old_dir]) == 1
    assert "kafkasim upgrade-data-dir" in capsys.readouterr().err


# -- upgrading ----------------------------------------------------------------------------------
def test_upgrade_converts_every_segment_and_every_record_reads_back_equal(old_dir, capsys):
    assert main(["upgrade-data-dir", old_dir]) == 0
    out = capsys.readouterr().out
    assert "orders-0: converted 3 of 3 segments to Kafka v2" in out
    assert "compacted-0: converted 3 of 7 segments" in out        # four are empty after compaction
    assert "orders-1: converted 1 of 1 segments" in out
    assert_everything_reads_back(old_dir)


def test_kafka_pythons_own_v2_reader_reads_the_converted_segments(old_dir):
    """An independent reader (kafka-python's DefaultRecordBatch) sees the same records, CRCs valid."""
    from kafka.record.memory_records import MemoryRecords

    upgrade_data_dir(old_dir)
    want = {name: [r for bt in part["batches"] for r in bt["records"]] for name, part in EXPECTED.items()}
    for _, path in layout.list_partitions(old_dir):
        got = []
        for _, seg in layout.list_segments(path):
            records = MemoryRecords(open(seg, "rb").read())
            while records.has_next():
                batch = records.next_batch()
                assert batch.validate_crc()
                got.extend({"offset": r.offset, "timestamp": r.timestamp, "key": _hex(r.key), "value": _hex(r.value),
                            "headers": [[k, _hex(v)] for k, v in r.headers]} for r in batch)
        assert got == [{k: r[k] for k in ("offset", "timestamp", "key", "value", "headers")}
                       for r in want[os.path.basename(path)]], path


def test_a_rerun_on_an_upgraded_data_dir_changes_nothing(old_dir, capsys):
    assert main(["upgrade-data-dir", old_dir]) == 0
    before = files_of(old_dir)
    capsys.readouterr()
    assert main(["upgrade-data-dir", old_dir, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["segments_converted"] == 0 and summary["partitions_converted"] == 0
    assert all(d["indexes_rebuilt"] == 0 and not d["notes"] for d in summary["details"])
    assert files_of(old_dir) == before


def test_upgrade_refuses_while_a_broker_holds_the_data_dir(old_dir, capsys):
    lock = lock_data_dir(old_dir)
    try:
        assert main(["upgrade-data-dir", old_dir]) == 1
        assert "lock" in capsys.readouterr().err
    finally:
        lock.close()
    assert files_of(old_dir) == files_of(os.path.join(FIXTURE, "data"))


def test_a_corrupt_old_batch_stops_the_upgrade_before_its_partition_changes(old_dir, capsys):
    seg = os.path.join(old_dir, "orders-0", "00000000000000000000.log")
    with open(seg, "r+b") as f:     # inside the second batch's records (it spans 86..200)
        f.seek(150)
        b = f.read(1)
        f.seek(150)
        f.write(bytes([b[0] ^ 0xFF]))
    before = files_of(os.path.join(old_dir, "orders-0"))
    assert main(["upgrade-data-dir", old_dir]) == 1
    err = capsys.readouterr().err
    assert seg in err and "position" in err
    assert files_of(os.path.join(old_dir, "orders-0")) == before


@pytest.mark.parametrize("where,n", [("renamed", 2), ("renamed", 5), ("written", 3), ("written", 7),
                                     ("renamed", OLD_SEGMENTS)])
def test_sigkill_mid_upgrade_then_rerun_loses_nothing(old_dir, where, n, capsys):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p)}
    r = subprocess.run([sys.executable, CHILD, old_dir, where, str(n)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == -9, (r.returncode, r.stderr)             # killed at the chosen step
    leftovers = [p for p in files_of(old_dir) if p.endswith(".upgrading")]
    assert bool(leftovers) == (where == "written")
    if (where, n) != ("renamed", OLD_SEGMENTS):                    # some segment is still old: refused
        with pytest.raises(OldLogFormatError):
            Broker(old_dir)
    assert main(["upgrade-data-dir", old_dir]) == 0
    assert not [p for p in files_of(old_dir) if p.endswith(".upgrading")]
    capsys.readouterr()
    assert_everything_reads_back(old_dir)


def test_the_live_view_names_the_command_instead_of_reading_old_segments(old_dir):
    from kafkasim.view.snapshot import DataDirWatcher

    problems = DataDirWatcher(old_dir).poll()["problems"]
    assert any(f"kafkasim upgrade-data-dir {old_dir}" in p and "orders-0" in p for p in problems), problems
    assert not any("CRC" in p or "magic" in p.split("(")[0] for p in problems), problems
