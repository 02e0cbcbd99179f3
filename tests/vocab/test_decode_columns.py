"""kafkasim.records.record_batch.decode_columns: the columnar decoder agrees with decode_records
and rejects the same malformed payloads."""

from __future__ import annotations

import struct
import zlib

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasim.errors import CorruptRecordError
from kafkasim.records import record_batch as rb

records = st.lists(
    st.tuples(st.integers(0, 2**40), st.none() | st.binary(max_size=20), st.none() | st.binary(max_size=40),
              st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2)),
    min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(records, st.data())
def test_columns_equal_rows(recs, data):
    gaps = data.draw(st.lists(st.integers(1, 3), min_size=len(recs), max_size=len(recs)))
    deltas, d = [], -1
    for g in gaps:
        d += g
        deltas.append(d)
    batch = rb.encode_batch(7, [(dl, ts, k, v, h) for dl, (ts, k, v, h) in zip(deltas, recs)])
    h = rb.decode_header(batch)
    rows = rb.decode_records(batch, 0, h)
    cols = rb.decode_columns(batch, 0, h)
    assert [list(c) for c in cols[:4]] == [[r[i] for r in rows] for i in range(4)]
    assert [[list(p) for p in hs] for hs in cols[4]] == [r[4] for r in rows]


def _forge(body, count: int, last_delta: int) -> bytes:
    payload = msgpack.packb(body, use_bin_type=True)
    tail = struct.pack(">hiqqqhii", 0, last_delta, 0, 0, -1, -1, -1, count) + payload
    return struct.pack(">qiibI", 0, len(tail) + 9, -1, rb.MAGIC, zlib.crc32(tail)) + tail


@pytest.mark.parametrize("body, count, last, fragment", [
    ([[0, 0, None, b"v", []], [0, 0, None, b"v", []]], 2, 1, "offset delta"),     # not increasing
    ([[0, 0, None, b"v", []], [5, 0, None, b"v", []]], 2, 1, "offset delta"),     # beyond last delta
    ([[0, 0, None, b"v"]], 1, 0, "malformed record"),                            # 4 fields
    ([[0, 0, None, b"v", [], 9]], 1, 0, "malformed record"),                     # 6 fields
    ([7], 1, 0, "malformed record"),                                             # not a record
    ([[0, 0, None, b"v", []]], 2, 1, "says 2 records"),                          # count mismatch
    ([[0, 0, None, b"v", []], [1, 0, None, b"v", []]], 2, 0, "beyond last_offset_delta"),
])
def test_malformed_payloads_are_corrupt(body, count, last, fragment):
    batch = _forge(body, count, last)
    h = rb.decode_header(batch)
    rb.verify(batch, 0, h)
    with pytest.raises(CorruptRecordError, match=fragment):
        rb.decode_columns(batch, 0, h, where="x.log")
    with pytest.raises(CorruptRecordError):
        rb.decode_records(batch, 0, h, where="x.log")
