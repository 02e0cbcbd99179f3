"""Producer state snapshots (storage/producer_snapshot.py): Kafka's bytes and ProducerStateManagerTest's snapshot cases."""

from __future__ import annotations

import os
import struct

import crc32c
import pytest
from hypothesis import given, strategies as st

from kafkasim.errors import KafkaStorageError
from kafkasim.storage import layout
from kafkasim.storage.producer_snapshot import (
    SNAPSHOT_ENTRY_SIZE, CorruptSnapshotError, ProducerSnapshotEntry as E, decode_snapshot, encode_snapshot,
    read_snapshot, write_snapshot,
)

NO_TIMESTAMP = -1
# Kafka's testReadWriteSnapshot: producer 1 with batch metadata (last sequence 1, last offset 2,
# offset delta 3, timestamp NO_TIMESTAMP), coordinator epoch 3 and an open transaction at 100;
# producer 11 with no batch metadata (Kafka then writes last sequence -1, last offset -1,
# offset delta 0 and the entry's own last timestamp 123456), coordinator epoch 13, no transaction.
KAFKA_ENTRIES = [E(1, 2, 1, 2, 3, NO_TIMESTAMP, 3, 100), E(11, 12, -1, -1, 0, 123456, 13, -1)]


def test_bytes_by_hand():
    """Version 1, CRC-32C over [6, end), count, then the 46-byte entries (ProducerSnapshot.json v1)."""
    entry = (struct.pack(">q", 11) + struct.pack(">h", 12) + struct.pack(">i", -1) + struct.pack(">q", -1)
             + struct.pack(">i", 0) + struct.pack(">q", 123456) + struct.pack(">i", 13) + struct.pack(">q", -1))
    assert len(entry) == SNAPSHOT_ENTRY_SIZE == 46
    counted = b"\x00\x00\x00\x01" + entry
    expected = b"\x00\x01" + crc32c.crc32c(counted).to_bytes(4, "big") + counted
    assert encode_snapshot([KAFKA_ENTRIES[1]]) == expected
    assert decode_snapshot(expected) == [KAFKA_ENTRIES[1]]


def test_read_write_snapshot(tmp_path):
    """Kafka's testReadWriteSnapshot."""
    path = str(tmp_path / "testReadWriteSnapshot")
    write_snapshot(path, KAFKA_ENTRIES)
    assert read_snapshot(path) == KAFKA_ENTRIES
    assert os.path.getsize(path) == 10 + 2 * 46
    assert os.listdir(tmp_path) == ["testReadWriteSnapshot"]     # no .tmp left behind


def test_empty_snapshot(tmp_path):
    path = str(tmp_path / layout.snapshot_name(0))
    write_snapshot(path, [])
    assert read_snapshot(path) == []


def _snapshot_at(tmp_path, offset: int) -> str:
    path = str(tmp_path / layout.snapshot_name(offset))
    write_snapshot(path, [E(1, 0, 0, offset - 1, 0, 1000, -1, -1)])
    return path


def test_load_from_corrupt_snapshot_file(tmp_path):
    """Kafka's testLoadFromCorruptSnapshotFile: 37 zero bytes written over the start of the file."""
    path = _snapshot_at(tmp_path, 2)
    with open(path, "r+b") as f:
        f.write(bytes(37))
    with pytest.raises(CorruptSnapshotError, match=f"{path}: unknown file version 0"):
        read_snapshot(path)


def test_load_from_truncated_snapshot_file(tmp_path):
    """Kafka's testLoadFromTruncatedSnapshotFile: cut in the middle."""
    path = _snapshot_at(tmp_path, 2)
    os.truncate(path, os.path.getsize(path) // 2)
    with pytest.raises(CorruptSnapshotError, match=f"{path}: truncated: 28 bytes, 1 entries need 56"):
        read_snapshot(path)


def test_load_from_empty_snapshot_file(tmp_path):
    """Kafka's testLoadFromEmptySnapshotFile."""
    path = _snapshot_at(tmp_path, 2)
    os.truncate(path, 0)
    with pytest.raises(CorruptSnapshotError, match="truncated: 0 bytes, no version"):
        read_snapshot(path)


def test_crc_mismatch(tmp_path):
    path = _snapshot_at(tmp_path, 2)
    with open(path, "r+b") as f:
        f.seek(20)
        f.write(b"\x7f")
    with pytest.raises(CorruptSnapshotError, match=r"CRC mismatch: stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}"):
        read_snapshot(path)
    assert issubclass(CorruptSnapshotError, KafkaStorageError)


@pytest.mark.parametrize("data, message", [
    (b"\x00", "truncated: 1 bytes, no version"),
    (b"\x00\x02" + bytes(8), "unknown file version 2"),
    (b"\xff\xff" + bytes(8), "unknown file version -1"),
    (b"\x00\x01\x00\x00", "shorter than the 10-byte header"),
    (b"\x00\x01" + bytes(4) + b"\xff\xff\xff\xff", "negative entry count -1"),
    (encode_snapshot([]) + b"\x00", "1 bytes after the 0 entries"),
])
def test_malformed_snapshots(data, message):
    with pytest.raises(CorruptSnapshotError, match=message):
        decode_snapshot(data, where="x.snapshot")


def test_every_truncation_and_every_bit_flip_is_refused():
    data = encode_snapshot(KAFKA_ENTRIES)
    for n in range(len(data)):
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(data[:n])
    for i in range(len(data)):
        if 2 <= i < 6:
            continue          # the CRC field itself: a flip there is a mismatch too, tested below
        flipped = bytearray(data)
        flipped[i] ^= 0x01
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(bytes(flipped))
    flipped = bytearray(data)
    flipped[3] ^= 0x01
    with pytest.raises(CorruptSnapshotError, match="CRC mismatch"):
        decode_snapshot(bytes(flipped))


def test_missing_file_is_a_storage_error(tmp_path):
    with pytest.raises(KafkaStorageError, match="cannot read producer snapshot"):
        read_snapshot(str(tmp_path / layout.snapshot_name(3)))


def test_fields_outside_their_types_are_refused():
    with pytest.raises(ValueError, match="outside its type"):
        encode_snapshot([E(1, 1 << 15, 0, 0, 0, 0, 0, -1)])


def test_plain_tuples_are_accepted():
    assert decode_snapshot(encode_snapshot([tuple(KAFKA_ENTRIES[0])])) == KAFKA_ENTRIES[:1]


def test_snapshot_names():
    assert layout.snapshot_name(4711) == "00000000000000004711.snapshot"
    assert layout.parse_snapshot_name("00000000000000004711.snapshot") == 4711
    for bad in ("4711.snapshot", "00000000000000004711.log", "00000000000000004711.snapshot.tmp",
                "00000000000000004711.snapshot.deleted", "x0000000000000004711.snapshot"):
        assert layout.parse_snapshot_name(bad) is None
    with pytest.raises(ValueError):
        layout.snapshot_name(-1)


def test_list_snapshots(tmp_path):
    for offset in (42, 5, 2):
        _snapshot_at(tmp_path, offset)
    (tmp_path / "00000000000000000007.snapshot.deleted").write_bytes(b"")
    (tmp_path / layout.segment_name(0)).write_bytes(b"")
    assert [o for o, _ in layout.list_snapshots(str(tmp_path))] == [2, 5, 42]
    assert layout.list_snapshots(str(tmp_path))[0][1] == str(tmp_path / layout.snapshot_name(2))


_i = lambda bits: st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)  # noqa: E731


@given(st.lists(st.builds(E, _i(64), _i(16), _i(32), _i(64), _i(32), _i(64), _i(32), _i(64)), max_size=20))
def test_round_trip(entries):
    data = encode_snapshot(entries)
    assert len(data) == 10 + 46 * len(entries)
    assert decode_snapshot(data) == entries


def test_docstring_examples_hold():
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module("kafkasim.storage.producer_snapshot"))
    assert result.failed == 0 and result.attempted > 0
