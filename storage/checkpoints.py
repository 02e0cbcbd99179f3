"""The small state files of one partition directory (storage/FORMAT.md §4, §6).

- ``recovery-point``: ``<next offset> <segment base offset> <byte position> <largest
  timestamp> <offset of the largest timestamp>`` — the flushed prefix of the log, written
  after every fsync (:class:`RecoveryPoint`). A hint that may lag, as Kafka's
  recovery-point checkpoint does: its rename is not made durable by a directory fsync of
  its own (the file itself is fsynced), so after a power cut it may name an older point,
  from which recovery simply validates more. What makes flushed records durable is the
  segment's fsync and, for a new segment's name, the directory fsync of the roll.
- ``clean-shutdown``: ``<log end offset> <active segment base offset> <active segment
  size>`` — present only after a clean close, and consumed (deleted) by the next open
  (:class:`CleanShutdown`).
- ``cleaner-checkpoint``: the offset below which the log was (or is being) compacted. It
  is written before compaction swaps in its first rewritten segment and never moves back,
  so every segment whose base offset is at or past it was never compacted and holds
  contiguous offsets (:func:`contiguous_from`, FORMAT.md §2.4).

- ``log-start-offset``: the log start offset when DeleteRecords moved it past the first
  segment's base offset (Kafka keeps these in one ``log-start-offset-checkpoint`` per log
  dir; here each partition directory keeps its own). Written before the move takes effect.

All four are one line of ASCII integers, replaced all-or-nothing with
:func:`kafkasim.storage.files.atomic_write` (``.tmp``, fsync, rename, directory fsync; the
recovery point without the directory fsync).

Invariant: a reader never trusts these files blindly. A missing or malformed file reads as
None (or 0 for the cleaner checkpoint); the loader then validates the active segment from
position 0 instead of from the recovery point, and checks the recovery point itself
against the log before relying on it (FORMAT.md §4).

Stateless functions over one directory; thread-safe as the file system is (the log
serialises its own writers).
"""

from __future__ import annotations

import os
from typing import NamedTuple, Optional

from kafkasim.storage.files import atomic_write, fsync_dir, storage_errors

__all__ = [
    "RECOVERY_POINT_FILE", "CLEAN_SHUTDOWN_FILE", "CLEANER_CHECKPOINT_FILE", "RecoveryPoint", "CleanShutdown",
    "read_recovery_point", "write_recovery_point", "take_clean_shutdown", "read_clean_shutdown",
    "write_clean_shutdown",
    "read_cleaner_checkpoint", "write_cleaner_checkpoint", "contiguous_from", "parse_contiguous_from",
    "NEVER_CONTIGUOUS", "LOG_START_OFFSET_FILE", "read_log_start_offset", "write_log_start_offset",
]

RECOVERY_POINT_FILE = "recovery-point"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"
CLEANER_CHECKPOINT_FILE = "cleaner-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset"


class RecoveryPoint(NamedTuple):
    """Where the flushed prefix of the log ends: in segment ``base_offset`` at byte ``position``,
    the next offset there being ``next_offset``; the last two fields describe that segment up
    to ``position`` (-1 when it holds nothing)."""

    next_offset: int
    base_offset: int
    position: int
    max_timestamp: int
    offset_of_max_timestamp: int


class CleanShutdown(NamedTuple):
    """What a clean close recorded about the active segment."""

    log_end_offset: int
    base_offset: int
    size: int


def _read_ints(path: str, n: int) -> Optional[list[int]]:
    """The ``n`` integers of a small text file, or None when missing or malformed."""
    try:
        with open(path, "r", encoding="ascii") as f:
            parts = f.read(256).split()
        if len(parts) != n:
            return None
        return [int(p) for p in parts]
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _write_ints(path: str, *values: int, sync_dir: bool = True) -> None:
    atomic_write(path, " ".join(map(str, values)) + "\n", encoding="ascii", sync_dir=sync_dir)


def read_recovery_point(directory: str) -> Optional[RecoveryPoint]:
    v = _read_ints(os.path.join(directory, RECOVERY_POINT_FILE), 5)
    return RecoveryPoint(*v) if v is not None else None


def write_recovery_point(directory: str, point: RecoveryPoint) -> None:
    _write_ints(os.path.join(directory, RECOVERY_POINT_FILE), *point, sync_dir=False)   # a hint: see above


def take_clean_shutdown(directory: str) -> Optional[CleanShutdown]:
    """Read and delete the clean-shutdown marker (a crash from here on is an unclean one).

    None when there was no marker or it is malformed (a malformed one is deleted too).
    """
    path = os.path.join(directory, CLEAN_SHUTDOWN_FILE)
    if not os.path.exists(path):
        return None
    v = _read_ints(path, 3)
    with storage_errors("remove", path):
        os.unlink(path)
    fsync_dir(directory)
    return CleanShutdown(*v) if v is not None else None


def read_clean_shutdown(directory: str) -> Optional[CleanShutdown]:
    """The clean-shutdown marker without consuming it (``verify-log``), or None."""
    v = _read_ints(os.path.join(directory, CLEAN_SHUTDOWN_FILE), 3)
    return CleanShutdown(*v) if v is not None else None


def write_clean_shutdown(directory: str, marker: CleanShutdown) -> None:
    _write_ints(os.path.join(directory, CLEAN_SHUTDOWN_FILE), *marker)


def read_cleaner_checkpoint(directory: str) -> int:
    """Offset below which the log was compacted (0 if never, or unreadable)."""
    v = _read_ints(os.path.join(directory, CLEANER_CHECKPOINT_FILE), 1)
    return v[0] if v else 0


def write_cleaner_checkpoint(directory: str, offset: int) -> None:
    _write_ints(os.path.join(directory, CLEANER_CHECKPOINT_FILE), offset)


def read_log_start_offset(directory: str) -> int:
    """The log start offset DeleteRecords set (0 if never, or unreadable: the first segment's
    base offset then rules, as in a log that never had records deleted)."""
    v = _read_ints(os.path.join(directory, LOG_START_OFFSET_FILE), 1)
    return v[0] if v and v[0] >= 0 else 0


def write_log_start_offset(directory: str, offset: int) -> None:
    _write_ints(os.path.join(directory, LOG_START_OFFSET_FILE), offset)


NEVER_CONTIGUOUS = 1 << 63
"""What :func:`contiguous_from` says when it cannot tell: any segment may have been compacted."""


def parse_contiguous_from(text: Optional[bytes]) -> int:
    """:func:`contiguous_from` from the bytes of ``cleaner-checkpoint`` (None: no such file), for
    readers that do not go through the local file system (the Spark data source)."""
    if text is None:
        return 0
    try:
        parts = text[:256].decode("ascii").split()
        if len(parts) == 1 and int(parts[0]) >= 0:
            return int(parts[0])
    except (UnicodeDecodeError, ValueError):
        pass
    return NEVER_CONTIGUOUS


def contiguous_from(directory: str) -> int:
    """The offset from which a log's offsets are contiguous (FORMAT.md §2.4): segments whose base
    offset is at or past it were never compacted. 0 without a ``cleaner-checkpoint`` (never
    compacted); :data:`NEVER_CONTIGUOUS` when the file is unreadable, so an unreadable checkpoint
    never makes legitimate compaction gaps look like corruption."""
    path = os.path.join(directory, CLEANER_CHECKPOINT_FILE)
    try:
        with open(path, "rb") as f:
            return parse_contiguous_from(f.read(256))
    except FileNotFoundError:
        return 0
    except OSError:
        return NEVER_CONTIGUOUS
