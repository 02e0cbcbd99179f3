"""Names on disk, in one place (FORMAT.md §1): partition directories, segment files, producer snapshots, leftovers.

Pure functions over names and paths; no I/O except :func:`list_partitions`,
:func:`list_segments` and :func:`list_snapshots`, which only list directories. Thread-safe.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple, Optional

from kafkasim.errors import InvalidTopicError
from kafkasim.storage.files import TMP_SUFFIX

__all__ = [
    "LOG_SUFFIX", "INDEX_SUFFIX", "TIMEINDEX_SUFFIX", "META_DIR", "MAX_TOPIC_LENGTH",
    "validate_topic", "partition_dir_name", "parse_partition_dir", "segment_name",
    "parse_segment_name", "list_partitions", "list_segments", "PartitionDir",
    "DELETED_SUFFIX", "CLEANED_SUFFIX", "SWAP_SUFFIX", "TMP_SUFFIX", "LEFTOVER_SUFFIXES", "MAX_BASE_OFFSET",
    "TXN_INDEX_SUFFIX", "SNAPSHOT_SUFFIX", "snapshot_name", "parse_snapshot_name", "list_snapshots",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"   # a segment's aborted-transaction index (storage/txn_index.py)
SNAPSHOT_SUFFIX = ".snapshot"    # a producer state snapshot (storage/producer_snapshot.py)
META_DIR = "meta"
# leftovers of an interrupted delete / compaction / atomic write (FORMAT.md §1.1)
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
LEFTOVER_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, TMP_SUFFIX)
"""Removed on open; a ``<base>.log.swap`` is completed instead (FORMAT.md §1.1)."""
MAX_TOPIC_LENGTH = 249
MAX_BASE_OFFSET = (1 << 63) - 1
"""The largest base offset a segment may be named with (Java's ``Long.MAX_VALUE``, as in Kafka); a
``.log`` named past it (20 digits allow up to 10^20 - 1) is not a segment: opening refuses it."""
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
_SEGMENT = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT = re.compile(r"^(\d{20})\.snapshot$")


def validate_topic(name: object) -> str:
    """Return ``name`` if it is a legal Kafka topic name, else raise InvalidTopicError.

    Kafka's rules: 1–249 characters from ``[a-zA-Z0-9._-]``, and not ``.`` or ``..``.
    """
    if not isinstance(name, str) or not name:
        raise InvalidTopicError(f"Topic name is illegal, it can't be empty: {name!r}")
    if name in (".", ".."):
        raise InvalidTopicError(f"Topic name cannot be \".\" or \"..\": {name!r}")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_LENGTH} characters, "
            f"topic name: {name[:40]}... ({len(name)} characters)")
    if not _LEGAL.match(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'")
    return name


def partition_dir_name(topic: str, partition: int) -> str:
    """``orders``, 3 → ``orders-3``."""
    return f"{topic}-{partition}"


class PartitionDir(NamedTuple):
    topic: str
    partition: int


def parse_partition_dir(name: str) -> Optional[PartitionDir]:
    """``orders-3`` → ``PartitionDir("orders", 3)``; None for anything else."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or (len(part) > 1 and part[0] == "0"):
        return None
    try:
        validate_topic(topic)
    except InvalidTopicError:
        return None
    return PartitionDir(topic, int(part))


def segment_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    """4711 → ``00000000000000004711.log`` (20 digits so ``ls`` sorts numerically)."""
    if base_offset < 0:
        raise ValueError(f"negative base offset {base_offset}")
    return f"{base_offset:020d}{suffix}"


def parse_segment_name(name: str) -> Optional[int]:
    """``00000000000000004711.log`` → 4711; None for anything else."""
    m = _SEGMENT.match(name)
    return int(m.group(1)) if m else None


def snapshot_name(offset: int) -> str:
    """4711 → ``00000000000000004711.snapshot``: the producer state as of log end offset ``offset``
    (Kafka's ``LogFileUtils.producerSnapshotFile``)."""
    return segment_name(offset, SNAPSHOT_SUFFIX)


def parse_snapshot_name(name: str) -> Optional[int]:
    """``00000000000000004711.snapshot`` → 4711; None for anything else."""
    m = _SNAPSHOT.match(name)
    return int(m.group(1)) if m else None


def list_partitions(data_dir: str) -> list[tuple[PartitionDir, str]]:
    """Every partition directory under ``data_dir``, sorted by (topic, partition)."""
    out = []
    for entry in os.scandir(data_dir):
        if entry.is_dir():
            pd = parse_partition_dir(entry.name)
            if pd is not None:
                out.append((pd, entry.path))
    return sorted(out)


def list_segments(partition_path: str) -> list[tuple[int, str]]:
    """``(base_offset, path)`` of every ``.log`` segment in a partition directory, in order."""
    out = []
    for entry in os.scandir(partition_path):
        base = parse_segment_name(entry.name)
        if base is not None:
            out.append((base, entry.path))
    return sorted(out)


def list_snapshots(partition_path: str) -> list[tuple[int, str]]:
    """``(offset, path)`` of every producer snapshot in a partition directory, oldest first."""
    out = []
    for entry in os.scandir(partition_path):
        offset = parse_snapshot_name(entry.name)
        if offset is not None and entry.is_file():
            out.append((offset, entry.path))
    return sorted(out)
