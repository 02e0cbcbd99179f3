"""The read path's offset guarantees (FORMAT.md §2.4, §3.3, §5), case by case.

- Where compaction never ran, offsets are contiguous: a closed segment cut at a batch
  boundary makes reads into the lost range raise ``CorruptRecordError`` naming the file,
  and verify-log reports it wherever the cut falls; an active segment that lost flushed
  bytes is reported on open and by verify-log.
- An index rebuild that stops at corrupt data keeps the previous entries past it, so the
  records the first open served stay served, on this open and the next.
- Compaction moves the cleaner checkpoint before it swaps in a rewritten segment (and an
  interrupted swap completed on open moves it too), so its gaps are never taken for
  corruption; below the checkpoint reads step over gaps (``Log.fetch``'s ``next_offset``).
- A segment named past the offset range is refused on open, naming the file.
"""

from __future__ import annotations

import os

import pytest

from kafkasim.clock import MockClock
from kafkasim.config import LogConfig
from kafkasim.errors import CorruptRecordError, KafkaStorageError
from kafkasim.records import record_batch as rb
from kafkasim.storage import compaction, layout
from kafkasim.storage.inspection import dump_segment, verify_data_dir
from kafkasim.storage.log import Log
from storage_helpers import T0, make_records, read_all

CFG = LogConfig.from_overrides({"segment.bytes": 2048, "index.interval.bytes": 256})


def _build(d, n=200) -> Log:
    log = Log(str(d), CFG, MockClock(T0))
    for i in range(n):
        log.append(make_records(i, 1, size=45))   # batch sizes that leave batches past the last index entry
    return log


def _batches(path: str) -> list[tuple[int, rb.BatchHeader]]:
    with open(path, "rb") as f:
        return list(rb.iter_batches(f.read(), where=path))


def _index_positions(path: str) -> list[int]:
    with open(path[:-4] + ".index", "rb") as f:
        data = f.read()
    return [int.from_bytes(data[i + 4:i + 8], "big") for i in range(0, len(data), 8)]


def _errors(data_dir) -> list[str]:
    return [str(p) for p in verify_data_dir(str(data_dir)) if p.severity == "error"]


def test_a_cut_after_the_last_index_entry_is_reported_and_reads_into_it_raise(tmp_path):
    log = _build(tmp_path / "t-0")
    log.close()
    segs = layout.list_segments(str(tmp_path / "t-0"))
    # a closed segment with batches after its last index entry, cut at the first of them
    i, path, cut_pos, cut_h = next((i, path, p, h) for i, (_, path) in enumerate(segs[:-1])
                                   for p, h in _batches(path) if p > _index_positions(path)[-1])
    nxt = segs[i + 1][0]
    with open(path, "r+b") as f:
        f.truncate(cut_pos)
    os.unlink(path[:-4] + ".timeindex")          # only a warning: derived data
    errors = _errors(tmp_path)
    assert any(path in e and f"offsets {cut_h.base_offset}..{nxt - 1} are missing" in e for e in errors), errors
    log = Log(str(tmp_path / "t-0"), CFG, MockClock(T0))
    try:
        assert log.read(cut_h.base_offset - 1)[0].offset == cut_h.base_offset - 1
        for o in (cut_h.base_offset, nxt - 1):
            with pytest.raises(CorruptRecordError, match=f"{path}.*offsets {cut_h.base_offset}..{nxt - 1} "
                                                         f"are missing"):
                log.read(o)
        assert log.read(nxt)[0].offset == nxt
        assert any("are missing" in line for line in log.recovery_report)    # reported when loaded
    finally:
        log.close()


def test_flushed_bytes_missing_from_the_active_segment_are_reported(tmp_path):
    log = _build(tmp_path / "t-0", 30)
    log.flush()
    active = log.segments[-1].path
    log.close()
    cut = _batches(active)[-3][0]
    with open(active, "r+b") as f:
        f.truncate(cut)
    assert any("records are missing" in e for e in _errors(tmp_path))
    log = Log(str(tmp_path / "t-0"), CFG, MockClock(T0))
    try:
        assert any("lies past the segment's" in line and "flushed records are missing" in line
                   for line in log.recovery_report), log.recovery_report
        assert log.log_end_offset == 27
    finally:
        log.close()


def test_an_index_rebuild_that_stops_at_a_corrupt_header_keeps_what_lies_past_it(tmp_path):
    log = _build(tmp_path / "t-0")
    log.close()
    path = layout.list_segments(str(tmp_path / "t-0"))[1][1]
    entries = _index_positions(path)
    assert len(entries) >= 3
    by_pos = dict(_batches(path))
    bad, good = entries[1], entries[2]
    with open(path, "r+b") as f:          # the batch an index entry points at gets a bad magic byte
        f.seek(bad + 16)
        f.write(b"\x07")
    past = by_pos[good].base_offset
    log = Log(str(tmp_path / "t-0"), CFG, MockClock(T0))
    try:
        assert log.read(past)[0].offset == past                  # served through the later entry
        with pytest.raises(CorruptRecordError, match=f"{path}.*position {bad}"):
            log.read(by_pos[bad].base_offset)                   # the entry fails: rebuilt, stops there
        assert any("index rebuilt only up to position" in line for line in log.recovery_report)
        assert log.read(past)[0].offset == past                  # still served
        last = max(h.last_offset for h in by_pos.values())
        assert log.segments[1].max_timestamp == T0 + last        # the time index kept its tail too
        assert log.offset_for_time(T0 + past) == (past, T0 + past)
    finally:
        log.close()
    assert good in _index_positions(path)                        # the rebuild kept the entry past it
    again = Log(str(tmp_path / "t-0"), CFG, MockClock(T0))
    try:
        assert again.read(past)[0].offset == past
        with pytest.raises(CorruptRecordError):
            again.read(by_pos[bad].base_offset)
    finally:
        again.close()


def test_a_flipped_base_offset_is_never_returned(tmp_path):
    log = _build(tmp_path / "t-0")
    log.close()
    path = layout.list_segments(str(tmp_path / "t-0"))[1][1]
    pos, h = _batches(path)[3]
    with open(path, "r+b") as f:
        f.seek(pos + 7)
        f.write(bytes([(h.base_offset ^ 1) & 0xFF]))
    assert any(f"has base offset {h.base_offset ^ 1}, expected {h.base_offset}" in e for e in _errors(tmp_path))
    dumped = list(dump_segment(path))                # dump-log: the batch is shown, with the error
    assert dumped[-1]["position"] == pos and "expected" in dumped[-1]["error"] and len(dumped) == 4
    log = Log(str(tmp_path / "t-0"), CFG, MockClock(T0))
    try:
        with pytest.raises(CorruptRecordError, match=f"{path}: batch at position {pos} has base offset"):
            log.read(h.base_offset)
        assert log.read(h.base_offset - 1, 1)[0].offset == h.base_offset - 1
    finally:
        log.close()


def test_a_stray_segment_past_the_offset_range_is_refused_on_open(tmp_path):
    d = tmp_path / "t-0"
    _build(d, 3).close()
    stray = d / ("9" * 20 + ".log")
    stray.write_bytes(b"")
    with pytest.raises(KafkaStorageError, match="9" * 20 + ".log.*past the offset range"):
        Log(str(d), CFG, MockClock(T0))
    assert any("9" * 20 in e and "past the offset range" in e for e in _errors(tmp_path))
    stray.unlink()
    again = Log(str(d), CFG, MockClock(T0))
    assert [r.offset for r in read_all(again)] == [0, 1, 2]
    again.close()


# -- compaction: gaps that are not corruption ---------------------------------------------------
COMPACT = LogConfig.from_overrides({"cleanup.policy": "compact", "segment.bytes": 400})


def _compacted(d) -> Log:
    """Batches [k0] [k1, k0] [k0 x 6] [k2] ...: the batch at 1..2 keeps only its head."""
    log = Log(str(d), COMPACT, MockClock(T0))
    log.append([(T0, b"k0", b"a", ())])
    log.append([(T0, b"k1", b"b", ()), (T0, b"k0", b"c", ())])
    log.append([(T0, b"k0", b"d%d" % i, ()) for i in range(6)])
    for i in range(6):
        log.append([(T0, b"k2", b"e%d" % i, ())])
    return log


def test_fetch_steps_over_a_batch_compacted_to_its_head_and_says_where_to_go_on(tmp_path):
    log = _compacted(tmp_path / "t-0")
    try:
        log.compact()
        assert log.cleaner_checkpoint() > 2
        assert [r.offset for r in log.read(0, 1)] == [1]
        got = log.fetch(2, 1)              # only the head of 1..2 survived: 2 is a gap
        assert got.records and got.records[0].offset > 2 and got.records[0].key in (b"k0", b"k2")
        assert got.next_offset == rb.decode_header(log.read_batches(got.records[-1].offset)[0][1]).next_offset
        cols = log.fetch(2, 1, columns=True)
        assert cols.records.offsets == [r.offset for r in got.records] and cols.next_offset == got.next_offset
        end = log.fetch(log.log_end_offset)
        assert end.records == [] and end.next_offset == log.log_end_offset
        assert _errors(tmp_path) == []
    finally:
        log.close()


def test_compaction_moves_the_cleaner_checkpoint_before_it_swaps_a_segment_in(tmp_path, monkeypatch):
    log = _compacted(tmp_path / "t-0")
    seen = []
    real = compaction.compact_segments

    def interrupted(segments, horizon, swap, *bounds):
        def swap_then_crash(base, cleaned, txn_entries):
            seen.append(log.cleaner_checkpoint())
            swap(base, cleaned, txn_entries)
            raise KafkaStorageError("disk gone after the first swap")
        return real(segments, horizon, swap_then_crash, *bounds)

    monkeypatch.setattr(compaction, "compact_segments", interrupted)
    with pytest.raises(KafkaStorageError):
        log.compact()
    assert seen and seen[0] > 0                       # written before the first swap
    log.close()
    again = Log(str(tmp_path / "t-0"), COMPACT, MockClock(T0))
    try:
        assert read_all(again)                         # the compacted segment's gaps read as gaps
        assert _errors(tmp_path) == []
    finally:
        again.close()


def test_an_interrupted_swap_completed_on_open_moves_the_checkpoint(tmp_path):
    log = _compacted(tmp_path / "t-0")
    log.close()
    segs = layout.list_segments(str(tmp_path / "t-0"))
    first = segs[0][1]
    with open(first, "rb") as f:
        data = f.read()
    h = rb.decode_header(data)
    with open(first + ".swap", "wb") as f:            # as if an older version crashed mid-swap
        f.write(data[h.size:])
    again = Log(str(tmp_path / "t-0"), COMPACT, MockClock(T0))
    try:
        assert again.cleaner_checkpoint() == segs[1][0]
        assert [r.offset for r in read_all(again)][0] == h.next_offset
    finally:
        again.close()
    assert _errors(tmp_path) == []


def test_the_cleaner_checkpoint_never_moves_back(tmp_path):
    log = _compacted(tmp_path / "t-0")
    try:
        log.write_cleaner_checkpoint(5)
        log.write_cleaner_checkpoint(2)
        assert log.cleaner_checkpoint() == 5
    finally:
        log.close()
