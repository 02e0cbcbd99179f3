"""``kafkasim upgrade-data-dir``: convert a data dir from format version 1 to Kafka's record batch v2.

Format version 1 (kafkasim before issue 22; FORMAT.md version 1, §2) wrote Kafka's 61-byte v2
header layout with ``magic`` 1, a zlib CRC-32 over bytes ``[21, end)`` and the records as one
msgpack array ``[[offset_delta, timestamp_delta, key, value, headers], ...]`` (headers
``[[str, bin | nil], ...]``). This module holds the **only** reader of that format left in
kafkasim (:func:`read_old_segment`); everything else refuses such a directory
(:mod:`kafkasim.storage.data_format`). Each old batch becomes one v2 batch from the one
encoder, :func:`kafkasim.records.record_batch.encode_batch`, keeping every header field:
base offset, last offset delta (a compacted batch keeps its offset range), partition leader
epoch, attributes (LogAppendTime, 0x08), base and max timestamp, producer id, epoch and base
sequence; the records keep their offset deltas, timestamps, keys, values and headers.

:func:`upgrade_data_dir` works per partition directory (the data dir's, and a cluster's
``broker-<i>/`` ones), in numbered steps:

1. Leftovers are handled as the log's open does (``loader.remove_leftovers``: an interrupted
   compaction swap is completed), and ``<base>.log.upgrading`` files of an interrupted run are
   removed: their segment is still the old file and is converted again.
2. A partition whose segments are all version 2 (or empty) is done; only an index missing
   after an interrupted run is rebuilt.
3. ``clean-shutdown`` and ``recovery-point`` are removed first: they name byte positions in
   the old files. Without them the next open validates the active segment from position 0
   (bounded by one segment) and writes them anew.
4. Segments are converted **last to first**, each atomically: the old file is read and every
   batch checked (header, CRC, records, increasing offsets); the v2 bytes are written to
   ``<base>.log.upgrading`` and fsynced; the segment's ``.index``/``.timeindex`` (byte
   positions in the old file) are deleted; the ``.upgrading`` file is renamed over
   ``<base>.log`` and the directory fsynced; then both indexes are rebuilt from the new bytes
   by the segment's own rule (:meth:`LogSegment.rebuild_indexes`, as compaction does after a
   swap) and fsynced. Last to first because the open check reads only the first non-empty
   segment: it stays version 1 until the whole partition is converted, so a partition whose
   conversion was interrupted is refused, never half read.
5. A torn tail of the last segment (an old broker killed mid-write, no clean shutdown) is
   dropped as the old broker's recovery would have, and reported; a corrupt batch anywhere
   else stops the upgrade with ``CorruptRecordError`` naming file and position, before that
   partition is changed.

Safe to rerun after a crash at any point: each segment is, on disk, the old file (perhaps with
an ``.upgrading`` leftover) or the new one (skipped), never a mix, and nothing is deleted
before its replacement is durable. A rerun on an upgraded data dir changes nothing.

The caller holds the data dir's lock (:func:`kafkasim.storage.files.lock_data_dir`), which
:func:`upgrade_data_dir` takes itself: a server running on the data dir makes it fail.
Not thread-safe; one run per data dir.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from typing import Callable, NamedTuple, Optional

import msgpack

from kafkasim.config import LogConfig
from kafkasim.errors import CorruptRecordError, InvalidArgumentError
from kafkasim.records import record_batch as rb
from kafkasim.records.framing import MAGIC
from kafkasim.storage import checkpoints, data_format, layout
from kafkasim.storage.files import fsync_dir, lock_data_dir, storage_errors
from kafkasim.storage.loader import remove_leftovers
from kafkasim.storage.segment import LogSegment

__all__ = ["upgrade_data_dir", "upgrade_partition", "read_old_segment", "OldBatch", "PartitionUpgrade",
           "UPGRADING_SUFFIX"]

UPGRADING_SUFFIX = ".upgrading"
"""``<base>.log.upgrading``: a converted segment not yet renamed over its ``.log``."""

# -- format version 1: the one reader left ------------------------------------------------------
_OLD_HEADER = struct.Struct(">qiibIhiqqqhii")   # the 61-byte header, as Kafka's v2 lays it out
_OLD_HEADER_SIZE = _OLD_HEADER.size
_OLD_OVERHEAD = 12                               # base_offset + batch_length
_OLD_CRC_START = 21
_OLD_MIN_LENGTH = _OLD_HEADER_SIZE - _OLD_OVERHEAD
_BROKER_DIR = re.compile(r"^broker-\d+$")


class OldBatch(NamedTuple):
    """One version-1 batch, decoded: its header fields and its records
    ``[offset_delta, timestamp (absolute), key, value, headers]``."""

    position: int
    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list


class _Stop(NamedTuple):
    position: int
    reason: str
    torn: bool      # the data ended inside the batch (a torn tail), not a batch that is wrong


def read_old_segment(data: bytes, where: str, first_offset: int) -> tuple[list[OldBatch], Optional[_Stop]]:
    """Every batch of a version-1 segment's bytes, checked as FORMAT.md v1 §2.3/§2.4 said
    (magic 1, lengths, CRC-32, records, offsets increasing from ``first_offset``); stops at
    the first batch failing a check and says where and why."""
    out: list[OldBatch] = []
    pos, n, expect = 0, len(data), first_offset
    while pos < n:
        if n - pos < _OLD_HEADER_SIZE:
            return out, _Stop(pos, f"truncated batch header ({n - pos} of {_OLD_HEADER_SIZE} bytes)", True)
        (base, length, ple, magic, crc, attrs, lod, base_ts, max_ts, pid, epoch, seq,
         count) = _OLD_HEADER.unpack_from(data, pos)
        if magic != data_format.OLD_MAGIC:
            return out, _Stop(pos, f"magic {magic}, not {data_format.OLD_MAGIC}", False)
        if length < _OLD_MIN_LENGTH or count < 0 or lod < 0 or base < 0:
            return out, _Stop(pos, f"impossible header (batch_length={length} record_count={count} "
                                   f"last_offset_delta={lod} base_offset={base})", False)
        end = pos + _OLD_OVERHEAD + length
        if end > n:
            return out, _Stop(pos, f"truncated batch: needs {end - pos} bytes, {n - pos} present", True)
        actual = zlib.crc32(memoryview(data)[pos + _OLD_CRC_START:end])
        if actual != crc:
            return out, _Stop(pos, f"CRC mismatch: stored 0x{crc:08x}, computed 0x{actual:08x}", False)
        if base < expect:
            return out, _Stop(pos, f"base offset {base} below {expect}, where the previous batch ended", False)
        try:
            body = msgpack.unpackb(memoryview(data)[pos + _OLD_HEADER_SIZE:end], raw=False, use_list=True,
                                   strict_map_key=False)
        except Exception as exc:   # msgpack raises several unrelated types on garbage
            return out, _Stop(pos, f"undecodable records: {exc}", False)
        records, prev = [], -1
        if not isinstance(body, list) or len(body) != count or count == 0:
            return out, _Stop(pos, f"the header says {count} records, the payload does not hold them", False)
        for rec in body:
            if (not isinstance(rec, list) or len(rec) != 5 or type(rec[0]) is not int or type(rec[1]) is not int
                    or not prev < rec[0] <= lod):
                return out, _Stop(pos, f"malformed record {rec!r:.80}", False)
            delta, tsd, key, value, headers = rec
            prev = delta
            records.append((delta, base_ts + tsd, key, value, tuple((k, v) for k, v in headers or ())))
        out.append(OldBatch(pos, base, ple, attrs, lod, base_ts, max_ts, pid, epoch, seq, records))
        pos, expect = end, base + lod + 1
    return out, None


def _encode(batch: OldBatch, where: str) -> bytes:
    """The v2 batch for one old batch, every header field kept (checked after encoding)."""
    new = rb.encode_batch(batch.base_offset, batch.records, producer_id=batch.producer_id,
                          producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                          partition_leader_epoch=batch.partition_leader_epoch, attributes=batch.attributes,
                          last_offset_delta=batch.last_offset_delta)
    h = rb.decode_header(new, 0, where=where)
    kept = (h.base_offset, h.partition_leader_epoch, h.attributes, h.last_offset_delta, h.max_timestamp,
            h.producer_id, h.producer_epoch, h.base_sequence, h.record_count)
    want = (batch.base_offset, batch.partition_leader_epoch, batch.attributes, batch.last_offset_delta,
            batch.max_timestamp, batch.producer_id, batch.producer_epoch, batch.base_sequence, len(batch.records))
    if kept != want:   # impossible unless the encoder changed a field: fail before anything is replaced
        raise CorruptRecordError(f"{where}: batch at position {batch.position} would not convert field for field: "
                                 f"old {want}, new {kept}")
    return new


# -- the conversion -----------------------------------------------------------------------------
class PartitionUpgrade(NamedTuple):
    """What :func:`upgrade_partition` did to one partition directory."""

    path: str
    segments_converted: int
    segments_total: int
    batches: int
    records: int
    bytes_before: int
    bytes_after: int
    indexes_rebuilt: int
    notes: list

    @property
    def changed(self) -> bool:
        return bool(self.segments_converted or self.indexes_rebuilt or self.notes)


def _segment_magic(path: str) -> Optional[int]:
    with storage_errors("read", path):
        with open(path, "rb") as f:
            f.seek(data_format.MAGIC_OFFSET)
            b = f.read(1)
    return b[0] if b else None


def _unlink(path: str) -> bool:
    with storage_errors("remove", path):
        try:
            os.unlink(path)
            return True
        except FileNotFoundError:
            return False


def _read(path: str) -> bytes:
    with storage_errors("read", path):
        with open(path, "rb") as f:
            return f.read()


def _write_synced(path: str, parts: list[bytes]) -> None:
    with storage_errors("write", path):
        with open(path, "wb") as f:
            for p in parts:
                f.write(p)
            f.flush()
            os.fsync(f.fileno())


def _rebuild_indexes(directory: str, base: int, upper: Optional[int], interval: int, contiguous: bool,
                     final: bool, report: Callable[[str], None]) -> None:
    """Both indexes of segment ``base`` derived from its (v2) bytes, written and fsynced."""
    seg = LogSegment.open_closed(directory, base, interval, report)
    try:
        seg.contiguous = contiguous
        seg.rebuild_indexes(final, upper)
        seg.index.flush(fsync=True)
        seg.time_index.flush(fsync=True)
    finally:
        seg.close()


def upgrade_partition(path: str, *, index_interval_bytes: int = LogConfig.index_interval_bytes,
                      on_segment: Optional[Callable[[str], None]] = None) -> PartitionUpgrade:
    """Convert one partition directory (the steps of the module docstring); ``on_segment(path)``
    is called after each segment is renamed into place (progress; tests stop a run there)."""
    notes: list[str] = []
    swapped = remove_leftovers(path, notes.append)                                    # step 1
    with storage_errors("list", path):
        names = sorted(os.listdir(path))
    for name in names:
        if name.endswith(layout.LOG_SUFFIX + UPGRADING_SUFFIX):
            _unlink(os.path.join(path, name))
            notes.append(f"{name}: removed, left by an interrupted upgrade (its segment is converted again)")
    with storage_errors("list", path):
        segments = layout.list_segments(path)
    if swapped:   # as the loader does for a swap it completes (FORMAT.md §1.1)
        bases = [b for b, _ in segments]
        later = [b for b in bases if b > max(swapped)]
        compacted_to = later[0] if later else max(swapped) + 1
        if compacted_to > checkpoints.contiguous_from(path):
            checkpoints.write_cleaner_checkpoint(path, compacted_to)
    contiguous_from = checkpoints.contiguous_from(path)
    uppers = {base: (segments[i + 1][0] if i + 1 < len(segments) else None) for i, (base, _) in enumerate(segments)}
    last_base = segments[-1][0] if segments else None
    old = [(b, p) for b, p in segments if _segment_magic(p) == data_format.OLD_MAGIC]
    stats = dict(batches=0, records=0, bytes_before=0, bytes_after=0, indexes_rebuilt=0)

    def rebuild(base: int) -> None:
        # final=True for every segment, the active one too: what a clean close leaves
        _rebuild_indexes(path, base, uppers[base], index_interval_bytes, base >= contiguous_from, True,
                         notes.append)
        stats["indexes_rebuilt"] += 1

    # read and check every old segment before the first is replaced (step 5); then convert
    # them last to first (step 4), reading each again (one segment in memory at a time)
    kept_bytes = {}
    for base, seg_path in old:
        batches, stop = read_old_segment(_read(seg_path), seg_path, base)
        kept_bytes[base] = None if stop is None else stop.position
        if stop is not None and not (base == last_base and stop.torn):
            raise CorruptRecordError(
                f"{seg_path}: batch at position {stop.position} cannot be converted: {stop.reason}. No segment "
                f"of {path} was converted; check it with the previous kafkasim's verify-log, or move the "
                f"partition directory away")
    if old:                                                                           # step 3
        removed = [_unlink(os.path.join(path, f))
                   for f in (checkpoints.CLEAN_SHUTDOWN_FILE, checkpoints.RECOVERY_POINT_FILE)]
        if any(removed):
            fsync_dir(path)
    for base, seg_path in reversed(old):                                              # step 4
        data = _read(seg_path)
        batches, stop = read_old_segment(data, seg_path, base)
        if stop is not None:
            if kept_bytes[base] != stop.position:   # the file changed under us: nobody else may write it
                raise CorruptRecordError(f"{seg_path}: changed while it was being upgraded")
            notes.append(f"{os.path.basename(seg_path)}: dropped {len(data) - stop.position} bytes of a torn last "
                         f"batch at position {stop.position} ({stop.reason}), as recovery would have")
        parts = [_encode(b, seg_path) for b in batches]
        tmp = seg_path + UPGRADING_SUFFIX
        _write_synced(tmp, parts)
        stem = seg_path[:-len(layout.LOG_SUFFIX)]
        for suffix in (layout.INDEX_SUFFIX, layout.TIMEINDEX_SUFFIX):
            _unlink(stem + suffix)
        with storage_errors("rename into place", tmp):
            os.replace(tmp, seg_path)
        fsync_dir(path)
        if on_segment is not None:
            on_segment(seg_path)
        rebuild(base)
        stats["batches"] += len(batches)
        stats["records"] += sum(len(b.records) for b in batches)
        stats["bytes_before"] += len(data)
        stats["bytes_after"] += sum(map(len, parts))
    converted = {b for b, _ in old}
    # step 2 (and after an interrupted run): a v2 segment whose index is missing
    for base, seg_path in segments:
        stem = seg_path[:-len(layout.LOG_SUFFIX)]
        if base in converted:
            continue
        if not (os.path.exists(stem + layout.INDEX_SUFFIX) and os.path.exists(stem + layout.TIMEINDEX_SUFFIX)):
            if _segment_magic(seg_path) in (None, MAGIC):
                rebuild(base)
    return PartitionUpgrade(path, len(converted), len(segments), notes=notes, **stats)


def _partition_dirs(data_dir: str) -> list[str]:
    """Every partition directory of a data dir: its own and, in a cluster's data dir, each
    ``broker-<i>/``'s (FORMAT.md §7.2)."""
    with storage_errors("list", data_dir):
        top = layout.list_partitions(data_dir)
        cluster = os.path.exists(os.path.join(data_dir, layout.META_DIR, "cluster.json"))
        out = []
        for pd, p in top:
            name = os.path.basename(p)
            if cluster and _BROKER_DIR.match(name):
                out.extend(q for _, q in layout.list_partitions(p))
            else:
                out.append(p)
    return out


def _index_intervals(data_dir: str) -> dict[str, int]:
    """``index.interval.bytes`` per topic from its metadata file (FORMAT.md §1.2), so rebuilt
    indexes equal what appending would have written; a topic without the override (or an
    unreadable file) uses the default."""
    out: dict[str, int] = {}
    topics = os.path.join(data_dir, layout.META_DIR, "topics")
    try:
        names = os.listdir(topics)
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(topics, name), encoding="utf-8") as f:
                meta = json.load(f)
            value = (meta.get("configs") or {}).get("index.interval.bytes")
            if value is not None:
                out[meta["name"]] = LogConfig.from_overrides({"index.interval.bytes": value}).index_interval_bytes
        except Exception:   # a broken metadata file is the broker's to report; the default index rule is valid
            continue
    return out


def upgrade_data_dir(data_dir: str, *, on_partition: Optional[Callable[[PartitionUpgrade], None]] = None,
                     on_segment: Optional[Callable[[str], None]] = None) -> list[PartitionUpgrade]:
    """Convert every partition directory of ``data_dir`` to Kafka's record batch v2 (module
    docstring), holding the data dir's lock; return what was done per partition, also passed to
    ``on_partition`` as each one finishes. Raises ``KafkaStorageError`` when a server holds the
    data dir, ``CorruptRecordError`` for a batch it cannot convert (naming file and position)."""
    if not os.path.isdir(data_dir):
        raise InvalidArgumentError(f"data dir {data_dir!r} does not exist or is not a directory")
    lock = lock_data_dir(data_dir)
    try:
        intervals = _index_intervals(data_dir)
        results = []
        for path in _partition_dirs(data_dir):
            pd = layout.parse_partition_dir(os.path.basename(path))
            interval = intervals.get(pd.topic, LogConfig.index_interval_bytes) if pd else LogConfig.index_interval_bytes
            result = upgrade_partition(path, index_interval_bytes=interval, on_segment=on_segment)
            results.append(result)
            if on_partition is not None:
                on_partition(result)
        return results
    finally:
        lock.close()
