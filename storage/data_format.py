"""Which record format a partition directory holds: the one check that refuses old data dirs.

Segments hold Kafka's record batch v2 (FORMAT.md §2, format version 2: ``magic`` 2).
kafkasim before it wrote format version 1: the same 61-byte header with ``magic`` 1, a zlib
CRC-32 and msgpack records. Version 1 is no longer read (its one reader left is
:mod:`kafkasim.storage.upgrade`, behind ``kafkasim upgrade-data-dir``), so every reader that
opens a partition directory — the log's loader, ``dump-log``, ``verify-log``, the read-only
group commands — calls :func:`check_partition` first and gets :class:`OldLogFormatError`
naming the directory and the command, instead of a CRC or magic error on the first read.

The check is cheap: one byte per partition, the ``magic`` (byte 16) of the first batch of the
first non-empty segment. That one byte speaks for the whole partition because version 2
writers only write version 2, and ``upgrade-data-dir`` converts a partition's segments last
to first: until every later segment is converted, the first non-empty one is still version 1,
so a partition whose conversion was interrupted is still refused.

Pure reads (one ``pread`` of a byte per partition); thread-safe.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from kafkasim.errors import OldLogFormatError
from kafkasim.storage import layout
from kafkasim.storage.files import storage_errors

__all__ = ["OLD_MAGIC", "MAGIC_OFFSET", "UPGRADE_COMMAND", "first_magic", "check_partition", "check_segment",
           "data_dir_of"]

OLD_MAGIC = 1
"""The ``magic`` byte of format version 1 (kafkasim's own batches)."""
MAGIC_OFFSET = 16
"""Where ``magic`` sits in a batch (after base_offset, batch_length, partition_leader_epoch)."""
UPGRADE_COMMAND = "kafkasim upgrade-data-dir"
_BROKER_DIR = re.compile(r"^broker-\d+$")


def _magic_of(path: str) -> Optional[int]:
    """The magic byte of the first batch of the segment file ``path``; None when it is shorter."""
    with storage_errors("read", path):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            b = os.pread(fd, 1, MAGIC_OFFSET)
        finally:
            os.close(fd)
    return b[0] if b else None


def first_magic(partition_path: str) -> tuple[Optional[str], Optional[int]]:
    """``(segment path, magic)`` of the first non-empty segment of a partition directory,
    or ``(None, None)`` when every segment is empty."""
    with storage_errors("list", partition_path):
        segments = layout.list_segments(partition_path)
    for _, path in segments:
        magic = _magic_of(path)
        if magic is not None:
            return path, magic
    return None, None


def data_dir_of(partition_path: str) -> str:
    """The data dir a partition directory belongs to: its parent, or for a cluster replica's
    ``<data_dir>/broker-<i>/<topic>-<p>`` the data dir above ``broker-<i>``."""
    parent = os.path.dirname(os.path.abspath(partition_path))
    if _BROKER_DIR.match(os.path.basename(parent)):
        top = os.path.dirname(parent)
        if os.path.exists(os.path.join(top, layout.META_DIR, "cluster.json")):
            return top
    return parent


def _error(partition_path: str, segment: str) -> OldLogFormatError:
    return OldLogFormatError(
        f"{partition_path} holds segments in kafkasim's old record format (format version 1: magic "
        f"{OLD_MAGIC} in {os.path.basename(segment)}), which this version no longer reads. Convert the data "
        f"dir to Kafka's record batch v2 once, with no server running on it: "
        f"{UPGRADE_COMMAND} {data_dir_of(partition_path)}")


def check_partition(partition_path: str) -> None:
    """Raise :class:`OldLogFormatError` (naming the directory and ``kafkasim upgrade-data-dir
    <data_dir>``) when the partition directory holds format version 1 (module docstring)."""
    segment, magic = first_magic(partition_path)
    if magic == OLD_MAGIC:
        raise _error(partition_path, segment)


def check_segment(path: str) -> None:
    """:func:`check_partition` for one segment file (``dump-log FILE``): its own first batch."""
    if _magic_of(path) == OLD_MAGIC:
        raise _error(os.path.dirname(os.path.abspath(path)), path)
