"""The one batch walk (``kafkasim.records.framing.BatchIterator``) every reader uses.

- Over a buffer and over a ``read(position, n)`` callable (any chunk size) it yields the
  same batches and stops at the same place, for the same reason, with the same message.
- It stops — never raises — at a torn tail (``torn``: the data ended inside a header or a
  batch), a bad header or a CRC mismatch, naming the file and the position (``at``
  shifted), and keeps the header of a batch that parsed.
- ``reject`` stops the walk at the batch just yielded; ``iter_batches`` raises where the
  walk stops.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kafkasim.errors import CorruptRecordError
from kafkasim.records import record_batch as rb
from kafkasim.records.framing import HEADER_SIZE, BatchIterator, iter_batches


def _segment(sizes: list[int]) -> tuple[bytes, list[int]]:
    """Batches of ``sizes`` records each, back to back, and their positions."""
    out, positions, base, pos = [], [], 0, 0
    for n in sizes:
        b = rb.encode_records(base, [(1000 + i, b"k%d" % i, b"v" * (i % 7), ()) for i in range(n)])
        out.append(b)
        positions.append(pos)
        base += n
        pos += len(b)
    return b"".join(out), positions


def _walk(source, end=None, **kw):
    batches = BatchIterator(source, end=end, where="seg.log", **kw)
    got = [(pos, h.base_offset) for pos, h in batches]
    return got, (batches.position, str(batches.error) if batches.error else None, batches.torn,
                 batches.header is not None)


def _reader(data: bytes):
    return lambda pos, n: data[pos:pos + n]


@settings(max_examples=120, deadline=None)
@given(sizes=st.lists(st.integers(1, 12), min_size=1, max_size=8), cut=st.integers(0, 10_000),
       flip=st.one_of(st.none(), st.integers(0, 10_000)), chunk=st.sampled_from([HEADER_SIZE, 100, 4096]),
       check_crc=st.booleans())
def test_buffer_and_reader_walks_agree(sizes, cut, flip, chunk, check_crc):
    data, _ = _segment(sizes)
    data = bytearray(data[:cut % (len(data) + 1)])
    if flip is not None and data:
        data[flip % len(data)] ^= 0x40
    data = bytes(data)
    from_buffer = _walk(data, check_crc=check_crc)
    from_reader = _walk(_reader(data), end=len(data), check_crc=check_crc, chunk=chunk)
    assert from_buffer == from_reader


def test_a_clean_walk_ends_at_the_end_with_no_error():
    data, positions = _segment([3, 1, 5])
    got, (position, error, torn, header) = _walk(data)
    assert [p for p, _ in got] == positions and [o for _, o in got] == [0, 3, 4]
    assert (position, error, torn, header) == (len(data), None, False, False)


def test_a_torn_tail_stops_the_walk_and_says_so():
    data, positions = _segment([2, 2])
    for cut, header_parsed in ((len(data) - 1, True), (positions[1] + HEADER_SIZE - 1, False)):
        got, (position, error, torn, header) = _walk(data[:cut])
        assert [p for p, _ in got] == positions[:1]
        assert position == positions[1] and torn and header is header_parsed
        assert error.startswith("seg.log: truncated batch") and f"at position {positions[1]}" in error


def test_a_crc_mismatch_stops_the_walk_keeping_the_header_and_naming_the_file_position():
    data, positions = _segment([2, 2, 2])
    bad = bytearray(data)
    bad[positions[1] + HEADER_SIZE + 1] ^= 0xFF
    batches = BatchIterator(bytes(bad), where="seg.log", at=1000)
    assert [p for p, _ in batches] == positions[:1]
    assert batches.position == positions[1] and not batches.torn
    assert batches.header.base_offset == 2
    assert str(batches.error).startswith(f"seg.log: CRC mismatch in batch at position {1000 + positions[1]}")
    assert [p for p, _ in BatchIterator(bytes(bad), check_crc=False)] == positions


def test_a_bad_header_stops_the_walk_without_a_header():
    data, positions = _segment([1, 1])
    bad = bytearray(data)
    bad[positions[1] + 16] = 7                      # magic
    got, (position, error, torn, header) = _walk(bytes(bad))
    assert position == positions[1] and not torn and not header and "unknown magic 7" in error


def test_reject_stops_at_the_batch_just_yielded():
    data, positions = _segment([1, 1, 1])
    batches = BatchIterator(data, where="seg.log")
    seen = []
    for pos, h in batches:
        seen.append(pos)
        if h.base_offset == 1:
            batches.reject(CorruptRecordError("offsets out of range"))
    assert seen == positions[:2]
    assert (batches.position, str(batches.error), batches.torn, batches.header.base_offset) == \
        (positions[1], "offsets out of range", False, 1)


def test_iter_batches_raises_where_the_walk_stops():
    data, positions = _segment([1, 1])
    with pytest.raises(CorruptRecordError, match=f"truncated batch at position {positions[1]}"):
        list(iter_batches(data[:-3], where="seg.log"))
    assert [p for p, _ in iter_batches(data)] == positions
    with pytest.raises(TypeError):
        BatchIterator(_reader(data))               # a read callable needs an end


def test_an_end_past_a_buffer_is_the_buffer_end():
    data, positions = _segment([1, 1])
    assert _walk(data, end=len(data) + 100) == _walk(data)
    got, (position, error, torn, _) = _walk(data[:-1], end=len(data))
    assert position == positions[1] and torn and "truncated batch" in error


# -- the offset checks (FORMAT.md §2.4) ------------------------------------------------------------
def _relabel(data: bytes, pos: int, base_offset: int) -> bytes:
    return data[:pos] + rb.set_base_offset(data[pos:], base_offset)[:len(data) - pos]


def test_without_first_offset_nothing_is_checked_and_next_offset_follows_the_batches():
    data, positions = _segment([2, 3])
    data = _relabel(data, positions[1], 999)
    batches = BatchIterator(data, where="seg.log")
    assert [h.base_offset for _, h in batches] == [0, 999]
    assert batches.error is None and batches.next_offset == 1002


@pytest.mark.parametrize("contiguous", [True, False])
def test_offsets_that_go_back_stop_the_walk_naming_file_and_position(contiguous):
    data, positions = _segment([2, 3, 1])
    data = _relabel(data, positions[2], 1)        # 1 < 5, the previous batch's next offset
    batches = BatchIterator(data, where="seg.log", first_offset=0, contiguous=contiguous, at=100)
    assert [h.base_offset for _, h in batches] == [0, 2]
    assert batches.position == positions[2] and not batches.torn and batches.header.base_offset == 1
    assert batches.next_offset == 5
    assert f"seg.log: batch at position {100 + positions[2]} has base offset 1" in str(batches.error)


def test_a_gap_is_corrupt_only_where_offsets_are_contiguous():
    data, positions = _segment([2, 3, 1])
    data = _relabel(data, positions[1], 4)        # a gap 2..3: compaction could leave one
    loose = BatchIterator(data, where="seg.log", first_offset=0)
    assert [h.base_offset for _, h in loose] == [0, 4] and loose.error is not None   # 5 follows 4..6: back
    strict = BatchIterator(data, where="seg.log", first_offset=0, contiguous=True)
    assert [h.base_offset for _, h in strict] == [0]
    assert "has base offset 4, expected 2 (offsets are contiguous here)" in str(strict.error)
    data, positions = _segment([2, 3])
    gap = _relabel(data, positions[1], 7)
    assert [h.base_offset for _, h in BatchIterator(gap, first_offset=0)] == [0, 7]


def test_the_first_batch_must_start_at_first_offset_and_every_batch_end_below_end_offset():
    data, _ = _segment([2, 3])
    wrong_start = BatchIterator(data, where="seg.log", first_offset=1, contiguous=True)
    assert list(wrong_start) == [] and "expected 1" in str(wrong_start.error)
    capped = BatchIterator(data, where="seg.log", first_offset=0, end_offset=4, contiguous=True)
    assert [h.base_offset for _, h in capped] == [0]
    assert "offsets 2..4, past the segment's last possible offset 3" in str(capped.error)
    whole = BatchIterator(data, first_offset=0, end_offset=5, contiguous=True)
    assert [h.base_offset for _, h in whole] == [0, 2] and whole.error is None and whole.next_offset == 5


def test_offset_checks_are_the_same_over_a_reader():
    data, positions = _segment([2, 3, 1, 4])
    data = _relabel(data, positions[2], 6)
    for chunk in (HEADER_SIZE, 100, 4096):
        got = _walk(_reader(data), end=len(data), chunk=chunk, first_offset=0, contiguous=True)
        assert got == _walk(data, first_offset=0, contiguous=True)
