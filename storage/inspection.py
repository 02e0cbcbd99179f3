"""Offline inspection of segment files: ``dump_segment`` (kafka-dump-log) and ``verify_data_dir``.

Both read files directly (never through :class:`kafkasim.storage.log.Log`, never modifying
anything), following the offline-reader rule of FORMAT.md §5: read a segment from
position 0, verify every batch, and on a corrupt batch report file and position and
move on to the next segment (the length field of a corrupt batch cannot be trusted).
Batches are walked with the shared :class:`kafkasim.records.framing.BatchIterator`; what
it stops at (torn tail, bad header, CRC) and what these readers reject themselves
(undecodable records, offsets out of range) are reported the same way.

- :func:`dump_segment` yields one dict per batch of a ``.log`` (or per entry of an
  ``.index`` / ``.timeindex``), with the fields kafka-dump-log prints.
- :func:`verify_data_dir` checks every partition of a data directory: each batch's
  header, CRC and records; the offset checks of FORMAT.md §2.4 within and across segments
  (increasing, inside each segment's range, and — in segments at or past the cleaner
  checkpoint, which compaction never touched — contiguous: every batch starts where the
  previous ended, and a segment's batches end where the next segment begins, so a file cut
  at a batch boundary is an error); segment names inside the offset range; a recovery
  point or clean-shutdown marker that claims more bytes than the active segment holds;
  every index entry pointing at the batch it names; every time-index entry naming the
  largest timestamp so far and the last offset of its batch. It returns :class:`Problem` s.

A data dir (or segment) in the old record format (format version 1) is refused with
``OldLogFormatError`` naming ``kafkasim upgrade-data-dir`` (:mod:`kafkasim.storage.data_format`).

Thread-safety: pure readers; safe to run while a broker is writing, though a batch being
appended at that moment may be reported as a torn tail.
"""

from __future__ import annotations

import os
import struct
from typing import Any, Callable, Iterator, NamedTuple, Optional

from kafkasim.errors import CorruptRecordError, InvalidArgumentError
from kafkasim.records import framing
from kafkasim.records import record_batch as rb
from kafkasim.records.compression import CODEC_NAMES
from kafkasim.records.framing import BatchIterator
from kafkasim.storage import checkpoints, data_format, layout
from kafkasim.storage.files import storage_errors
from kafkasim.storage.index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE

__all__ = ["dump_segment", "verify_data_dir", "verify_partition", "Problem", "render_bytes"]

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")


class Problem(NamedTuple):
    """One finding of :func:`verify_data_dir`: ``severity`` is ``error`` (data or index
    corruption) or ``warning`` (a missing index: derived data, rebuilt on open)."""

    path: str
    position: Optional[int]
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        at = "" if self.position is None else f" at position {self.position}"
        return f"{self.severity.upper()} {self.path}{at}: {self.message}"


def render_bytes(b: Optional[bytes]) -> Optional[str]:
    """Bytes as text for humans and JSON: UTF-8 with undecodable bytes as ``\\xNN``."""
    if b is None:
        return None
    return b.decode("utf-8", errors="backslashreplace")


def _read(path: str) -> bytes:
    with storage_errors("read", path):
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError as exc:
            raise InvalidArgumentError(f"no such file: {path}") from exc


_INT32_MAX = (1 << 31) - 1


def _sequence_plus(base_sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: sequences wrap from 2^31-1 to 0; -1 stays -1."""
    if base_sequence < 0:
        return -1
    if base_sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - base_sequence) - 1
    return base_sequence + increment


def _batch_dict(pos: int, h: rb.BatchHeader, crc_valid: bool) -> dict[str, Any]:
    """One batch's fields, named for JSON; ``kafkasim dump-log`` prints them in Kafka's layout."""
    attrs = h.attributes
    return {
        "position": pos,
        "base_offset": h.base_offset,
        "last_offset": h.last_offset,
        "count": h.record_count,
        "size": h.size,
        "magic": h.magic,
        "crc": h.crc,
        "crc_valid": crc_valid,
        "timestamp_type": "LogAppendTime" if attrs & framing.ATTR_TIMESTAMP_TYPE_LOG_APPEND else "CreateTime",
        "base_timestamp": h.base_timestamp,
        "max_timestamp": h.max_timestamp,
        "producer_id": h.producer_id,
        "producer_epoch": h.producer_epoch,
        "base_sequence": h.base_sequence,
        "last_sequence": _sequence_plus(h.base_sequence, h.last_offset_delta),
        "partition_leader_epoch": h.partition_leader_epoch,
        "is_transactional": bool(attrs & framing.ATTR_TRANSACTIONAL),
        "is_control": bool(attrs & framing.ATTR_CONTROL),
        # Kafka's DefaultRecordBatch.deleteHorizonMs: the base timestamp when the bit is set
        "delete_horizon_ms": h.base_timestamp if attrs & framing.ATTR_DELETE_HORIZON else None,
        "compression": CODEC_NAMES.get(attrs & framing.ATTR_COMPRESSION_MASK, "unknown"),
    }


_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}
_CONTROL_KEY = struct.Struct(">hh")      # version, type (Kafka's ControlRecordType)
_END_TXN_VALUE = struct.Struct(">hi")    # version, coordinator epoch (Kafka's EndTransactionMarker)


def _control_record(key: Optional[bytes], value: Optional[bytes]) -> dict[str, Any]:
    """What kafka-dump-log prints for a control record: the marker type and coordinator epoch."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return {"control_type": "UNKNOWN(-1)"}
    _, type_id = _CONTROL_KEY.unpack_from(key)
    name = _CONTROL_TYPES.get(type_id)
    if name is None:
        return {"control_type": f"UNKNOWN({type_id})"}
    epoch = _END_TXN_VALUE.unpack_from(value)[1] if value is not None and len(value) >= _END_TXN_VALUE.size else -1
    return {"control_type": name, "coordinator_epoch": epoch}


def dump_segment(path: str, records: bool = False,
                 decoder: Optional[Callable[[Optional[bytes], Optional[bytes]], tuple]] = None) -> Iterator[dict[str, Any]]:
    """Yield what a segment file holds, like kafka-dump-log.

    ``.log``: one dict per batch (position, base/last offset, count, size, CRC and whether
    it is valid, timestamps, producer id/epoch/sequences, transactional/control flags, delete
    horizon, compression codec; with ``records`` a ``records`` list of offset, timestamp, key,
    value, headers, sequence, and ``key_size``/``value_size``: the stored byte lengths, -1 for
    None; a control batch's records carry ``control_type``/``coordinator_epoch`` instead of key and value; ``decoder(key, value) -> (key text, value text)`` renders
    key and value instead of :func:`render_bytes`, e.g. kafka-dump-log's
    ``--offsets-decoder``). A corrupt batch — including one whose
    offsets fail FORMAT.md §2.4, judged from the file's name, its directory's next segment
    and cleaner checkpoint — yields a dict with an ``error`` and ends the dump.
    ``.index``: ``{offset, position}`` per entry; ``.timeindex``: ``{timestamp, offset}``
    per entry (absolute offsets).
    """
    name = os.path.basename(path)
    data = _read(path)
    stem = name.split(".", 1)[0]
    base = int(stem) if stem.isdigit() else 0
    if name.endswith(layout.INDEX_SUFFIX):
        usable = len(data) - len(data) % OFFSET_ENTRY_SIZE
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data[:usable]):
            yield {"offset": base + rel, "position": pos}
        if usable != len(data):
            yield {"position": usable, "error": f"{len(data) - usable} trailing bytes (not a whole entry)"}
        return
    if name.endswith(layout.TIMEINDEX_SUFFIX):
        usable = len(data) - len(data) % TIME_ENTRY_SIZE
        for ts, rel in _TIME_ENTRY.iter_unpack(data[:usable]):
            yield {"timestamp": ts, "offset": base + rel}
        if usable != len(data):
            yield {"position": usable, "error": f"{len(data) - usable} trailing bytes (not a whole entry)"}
        return
    data_format.check_segment(path)
    batches = BatchIterator(data, where=path, **_offset_bounds(path))
    for pos, h in batches:
        d = _batch_dict(pos, h, True)
        if records:
            try:
                render = decoder or (lambda k, v: (render_bytes(k), render_bytes(v)))
                d["records"] = [
                    {"offset": r.offset, "timestamp": r.timestamp,
                     **(_control_record(r.key, r.value) if d["is_control"]
                        else dict(zip(("key", "value"), render(r.key, r.value)))),
                     "key_size": -1 if r.key is None else len(r.key),
                     "value_size": -1 if r.value is None else len(r.value),
                     "sequence": _sequence_plus(h.base_sequence, r.offset - h.base_offset),
                     "headers": [[k, render_bytes(v)] for k, v in r.headers]}
                    for r in rb.iter_records(data, pos, h, where=path)]
            except CorruptRecordError as exc:
                d["error"] = str(exc)
                yield d
                return
        yield d
    if batches.error is not None:   # a torn or corrupt batch ends the dump
        if batches.header is None:
            yield {"position": batches.position, "error": str(batches.error)}
        else:
            yield {**_batch_dict(batches.position, batches.header, False), "error": str(batches.error)}


def _offset_bounds(path: str) -> dict:
    """The §2.4 checks for the segment file ``path``: none unless it is named like a segment."""
    base = layout.parse_segment_name(os.path.basename(path))
    if base is None or base > layout.MAX_BASE_OFFSET:
        return {}
    directory = os.path.dirname(path) or "."
    with storage_errors("list", directory):
        later = [b for b, _ in layout.list_segments(directory) if b > base]
    return {"first_offset": base, "end_offset": later[0] if later else base + (1 << 32),
            "contiguous": base >= checkpoints.contiguous_from(directory)}


# -- verify --------------------------------------------------------------------------------------
def verify_data_dir(data_dir: str, stats: Optional[dict] = None) -> list[Problem]:
    """Check every partition directory of ``data_dir``; return the problems found (none: all good).

    ``stats``, if given, is filled with counts of partitions, segments, batches and records.
    """
    if not os.path.isdir(data_dir):
        raise InvalidArgumentError(f"data dir {data_dir!r} does not exist or is not a directory")
    if stats is None:
        stats = {}
    for key in ("partitions", "segments", "batches", "records"):
        stats.setdefault(key, 0)
    problems: list[Problem] = []
    with storage_errors("list", data_dir):
        partitions = layout.list_partitions(data_dir)
    for _, path in partitions:
        stats["partitions"] += 1
        problems.extend(verify_partition(path, stats))
    return problems


def verify_partition(path: str, stats: Optional[dict] = None) -> list[Problem]:
    """Check one partition directory (see :func:`verify_data_dir`)."""
    if stats is None:
        stats = {}
    for key in ("segments", "batches", "records"):
        stats.setdefault(key, 0)
    problems: list[Problem] = []
    data_format.check_partition(path)
    with storage_errors("list", path):
        segments = layout.list_segments(path)
    contiguous_from = checkpoints.contiguous_from(path)
    prev_next = 0
    for i, (base, log_path) in enumerate(segments):
        stats["segments"] += 1
        upper = segments[i + 1][0] if i + 1 < len(segments) else base + (1 << 32)
        if base > layout.MAX_BASE_OFFSET:
            problems.append(Problem(log_path, None, f"named past the offset range (base offset {base} > "
                                                    f"{layout.MAX_BASE_OFFSET}): not a segment; opening the log fails"))
            continue
        if base < prev_next:
            problems.append(Problem(log_path, None,
                                    f"base offset {base} is not above the previous segment's last offset {prev_next - 1}"))
        data = _read(log_path)
        batches: list[tuple[int, rb.BatchHeader]] = []
        contiguous = base >= contiguous_from
        walk = BatchIterator(data, where=log_path, first_offset=base, end_offset=upper, contiguous=contiguous)
        for pos, h in walk:
            try:
                body = rb.decode_records(data, pos, h, where=log_path)
            except CorruptRecordError as exc:
                walk.reject(exc)
                break
            stats["batches"] += 1
            stats["records"] += len(body)
            batches.append((pos, h))
        if walk.error is not None:
            msg = str(walk.error)
            problems.append(Problem(log_path, walk.position,
                                    msg.split(": ", 1)[1] if msg.startswith(log_path) else msg))
        elif contiguous and i + 1 < len(segments) and walk.next_offset != upper:
            problems.append(Problem(log_path, len(data), f"the batches end with offset {walk.next_offset - 1}, but the "
                                                         f"next segment starts at offset {upper}: offsets "
                                                         f"{walk.next_offset}..{upper - 1} are missing"))
        elif i + 1 == len(segments):
            problems.extend(_verify_flushed(path, base, log_path, len(data)))
        prev_next = max(prev_next, walk.next_offset)
        problems.extend(_verify_indexes(log_path, base, batches, len(data), complete=walk.error is None))
    return problems


def _verify_flushed(path: str, base: int, log_path: str, size: int) -> list[Problem]:
    """The active segment must hold at least what the recovery point and a clean-shutdown
    marker say was written (a file cut at a batch boundary loses flushed records silently)."""
    claims = []
    rp = checkpoints.read_recovery_point(path)
    if rp is not None and rp.base_offset == base:
        claims.append(("the recovery point", rp.position, rp.next_offset))
    marker = checkpoints.read_clean_shutdown(path)
    if marker is not None and marker.base_offset == base:
        claims.append(("the clean-shutdown marker", marker.size, marker.log_end_offset))
    return [Problem(log_path, size, f"{what} says {n} bytes (up to offset {offset - 1}) were written, "
                                    f"the file holds {size}: records are missing")
            for what, n, offset in claims if n > size]


def _verify_indexes(log_path: str, base: int, batches: list, log_size: int, complete: bool) -> list[Problem]:
    problems = []
    stem = log_path[:-len(layout.LOG_SUFFIX)]
    by_pos = {p: h for p, h in batches}
    checked_to = batches[-1][0] if batches else 0
    idx_path = stem + layout.INDEX_SUFFIX
    if not os.path.exists(idx_path):
        if log_size:
            problems.append(Problem(idx_path, None, "missing (rebuilt from the log on open)", "warning"))
    else:
        data = _read(idx_path)
        if len(data) % OFFSET_ENTRY_SIZE:
            problems.append(Problem(idx_path, None, f"size {len(data)} is not a multiple of {OFFSET_ENTRY_SIZE}"))
        prev = (-1, 0)
        for i, (rel, p) in enumerate(_OFFSET_ENTRY.iter_unpack(data[:len(data) - len(data) % OFFSET_ENTRY_SIZE])):
            where = i * OFFSET_ENTRY_SIZE
            if rel <= prev[0] or p <= prev[1]:
                problems.append(Problem(idx_path, where, f"entry ({base + rel}, {p}) does not increase"))
                break
            prev = (rel, p)
            if p > checked_to and not complete:
                continue  # beyond a corrupt batch: cannot be checked
            h = by_pos.get(p)
            if h is None:
                problems.append(Problem(idx_path, where, f"entry for offset {base + rel} points at position {p}, "
                                                          "where no batch starts"))
                break
            if h.base_offset != base + rel:
                problems.append(Problem(idx_path, where, f"entry for offset {base + rel} points at position {p}, "
                                                          f"where the batch has base offset {h.base_offset}"))
                break
    ts_path = stem + layout.TIMEINDEX_SUFFIX
    if not os.path.exists(ts_path):
        if log_size:
            problems.append(Problem(ts_path, None, "missing (rebuilt from the log on open)", "warning"))
        return problems
    data = _read(ts_path)
    if len(data) % TIME_ENTRY_SIZE:
        problems.append(Problem(ts_path, None, f"size {len(data)} is not a multiple of {TIME_ENTRY_SIZE}"))
    running = {}
    top = -1
    for _, h in batches:
        top = max(top, h.max_timestamp)
        running[h.last_offset] = (top, h.max_timestamp)
    last_checked = batches[-1][1].last_offset if batches else base - 1
    prev = (None, -1)
    for i, (ts, rel) in enumerate(_TIME_ENTRY.iter_unpack(data[:len(data) - len(data) % TIME_ENTRY_SIZE])):
        where = i * TIME_ENTRY_SIZE
        off = base + rel
        if (prev[0] is not None and ts <= prev[0]) or rel <= prev[1]:
            problems.append(Problem(ts_path, where, f"entry ({ts}, {off}) does not increase"))
            break
        prev = (ts, rel)
        if off > last_checked and not complete:
            continue
        got = running.get(off)
        if got is None:
            problems.append(Problem(ts_path, where, f"entry ({ts}, {off}) names an offset that ends no batch"))
            break
        if got != (ts, ts):
            problems.append(Problem(ts_path, where, f"entry ({ts}, {off}): the largest timestamp up to that batch "
                                                     f"is {got[0]} and the batch's own is {got[1]}"))
            break
    return problems
