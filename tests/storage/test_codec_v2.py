"""The C codec ``kafkasim.records._codec`` (Kafka record batch v2 records section) against an
independent oracle: kafka-python's ``DefaultRecordBatchBuilder`` / ``DefaultRecordBatch``.

- ``pack_records`` is byte-identical to the records section kafka-python's builder writes
  (its uncompressed ``build()`` minus the 61-byte header) on generated input: null keys and
  values, headers with null values and non-ASCII keys, negative timestamp deltas, every
  varint width boundary, values over 64 KiB; it returns the right min/max timestamps and
  None for anything outside exact types.
- ``decode_columns``, ``scan_records`` and ``ArrowColumns.add``/``take`` read those bytes as
  kafka-python's reader does (``fixed_tsd`` replaces every timestamp delta); the Arrow buffers
  have the layout ``columns.ArrowColumnBuilder`` documents and decode with pyarrow.
- Every malformation (truncation at every byte, varint/varlong overflow, record length not
  matching its body, count mismatch, bytes left over, lengths < -1, negative header count or
  header key length, invalid UTF-8 header keys, offset deltas not increasing or beyond
  last_offset_delta) raises ValueError in all three readers, and a failed ``ArrowColumns.add``
  leaves rows, nbytes and every buffer exactly as before.
"""

from __future__ import annotations

import array
import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

kafka_default = pytest.importorskip("kafka.record.default_records")
codec = pytest.importorskip("kafkasim.records._codec")

HEADER = 61
INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
FIXED = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------ the oracle (kafka-python)

def kp_batch(records_with_deltas) -> bytes:
    """kafka-python's uncompressed v2 batch of ``(delta, ts, key, value, headers)`` records."""
    builder = kafka_default.DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=2 ** 31)
    for delta, ts, key, value, headers in records_with_deltas:
        assert builder.append(delta, ts, key, value, list(headers or ())) is not None
    return bytes(builder.build())


def kp_section(records_with_deltas) -> bytes:
    return kp_batch(records_with_deltas)[HEADER:]


def kp_read(batch: bytes) -> list:
    """``(delta, tsd, key, value, headers)`` per record, as kafka-python's reader sees them."""
    b = kafka_default.DefaultRecordBatch(batch)
    first = b.first_timestamp
    return [(r.offset - b.base_offset, r.timestamp - first, r.key, r.value,
             tuple(tuple(h) for h in r.headers)) for r in b]


def with_deltas(records) -> list:
    return [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)]


# ------------------------------------------------------------------ strategies

# zigzag varint width boundaries: 63/64 (1->2 bytes), 8191/8192 (2->3), ... both signs
_VARINT_EDGES = sorted({s * (2 ** (7 * k - 1) + d) for k in range(1, 10) for d in (-1, 0)
                        for s in (1, -1)} | {0, 1, -1})
_tsd = st.one_of(st.sampled_from([e for e in _VARINT_EDGES if abs(e) < 2 ** 61]),
                 st.integers(-(2 ** 61), 2 ** 61))
_SIZES = [0, 1, 63, 64, 65, 8191, 8192, 8193, 70000]   # 70000: over 64 KiB


def _filled(n: int, byte: int) -> bytes:
    return bytes([byte]) * n


_blob = st.one_of(st.none(), st.binary(max_size=20),
                  st.builds(_filled, st.sampled_from(_SIZES), st.integers(0, 255)))
_small_blob = st.one_of(st.none(), st.binary(max_size=6))
_hkey = st.one_of(st.text(max_size=8),
                  st.sampled_from(["", "é", "€uro", "𝄞", "ключ", "キー", "a" * 64, "é" * 4100]))
_pair = st.one_of(st.tuples(_hkey, _blob), st.builds(lambda k, v: [k, v], _hkey, _small_blob))
_headers = st.one_of(st.just(()), st.lists(_pair, max_size=3), st.tuples(_pair, _pair))


@st.composite
def _records(draw, max_size=6):
    """(ts, key, value, headers) records; timestamps around a first one, deltas of either sign."""
    n = draw(st.integers(1, max_size))
    ts0 = draw(st.integers(-(2 ** 61), 2 ** 61))
    recs = []
    for i in range(n):
        ts = ts0 if i == 0 else ts0 + draw(_tsd)
        recs.append((ts, draw(_blob), draw(_blob), draw(_headers)))
    return recs


@st.composite
def _delta_records(draw, max_size=6):
    """(delta, ts, key, value, headers): strictly increasing deltas with gaps, within int32."""
    recs = draw(_records(max_size))
    delta = draw(st.sampled_from([0, 0, 1, 63, 64]))
    out = []
    for ts, k, v, h in recs:
        out.append((delta, ts, k, v, h))
        delta += draw(st.sampled_from([1, 1, 2, 63, 64, 8192, 2 ** 20]))
    return out


# ------------------------------------------------------------------ pack_records

@FIXED
@given(_records())
def test_pack_records_is_kafka_pythons_records_section(recs):
    packed = codec.pack_records(recs, False)
    assert packed is not None
    section, min_ts, max_ts = packed
    assert section == kp_section(with_deltas(recs))
    stamps = [r[0] for r in recs]
    assert (min_ts, max_ts) == (min(stamps), max(stamps))


@FIXED
@given(_delta_records())
def test_pack_records_with_deltas_is_kafka_pythons_records_section(recs):
    packed = codec.pack_records(tuple(recs), True)
    assert packed is not None
    assert packed[0] == kp_section(recs)
    assert packed[1:] == (min(r[1] for r in recs), max(r[1] for r in recs))


def test_pack_records_none_headers_and_list_shapes():
    recs = [[5, None, None, None], (3, b"k", b"", [["h", None]]), (-7, b"", b"v", ())]
    assert codec.pack_records(recs, False) == (kp_section(with_deltas(recs)), -7, 5)


def test_pack_records_by_hand():
    """One record spelled out byte by byte (Kafka's DefaultRecord layout)."""
    section, _, _ = codec.pack_records([(10, b"k", None, [("é", None)])], False)
    body = bytes([0, 0, 0, 2]) + b"k" + bytes([1, 2, 4]) + "é".encode() + bytes([1])
    assert section == bytes([2 * len(body)]) + body


@pytest.mark.parametrize("recs,deltas", [
    ([], False),
    ([(1, "key", b"v", ())], False),                      # str key
    ([(1, bytearray(b"k"), b"v", ())], False),            # not exact bytes
    ([(1, b"k", memoryview(b"v"), ())], False),
    ([(True, b"k", b"v", ())], False),                    # bool timestamp
    ([(2 ** 63, b"k", b"v", ())], False),                 # beyond int64
    ([(INT64_MIN, None, None, ()), (INT64_MAX, None, None, ())], False),   # delta beyond int64
    ([(1, b"k", b"v", [(b"bytes-key", b"v")])], False),   # bytes header key
    ([(1, b"k", b"v", [("k", "str-value")])], False),
    ([(1, b"k", b"v", [("k", b"v", b"x")])], False),      # not a pair
    ([(1, b"k", b"v", [("\ud800", b"v")])], False),       # lone surrogate: no UTF-8
    ([(1, b"k", b"v", "headers")], False),
    ([(1, b"k", b"v")], False),                           # wrong width
    ([(0, 1, b"k", b"v", None)], True),                   # None headers with deltas
    ([(2 ** 31, 1, b"k", b"v", ())], True),               # offset delta beyond int32
    ([(INT32_MIN - 1, 1, b"k", b"v", ())], True),
    ([(1.0, 1, b"k", b"v", ())], True),
])
def test_pack_records_declines_what_it_cannot_pack_exactly(recs, deltas):
    assert codec.pack_records(recs, deltas) is None


def test_pack_records_declines_a_non_sequence():
    assert codec.pack_records(iter([(1, b"k", b"v", ())]), False) is None


# ------------------------------------------------------------------ readers vs the oracle

def _expected_buffers(rows) -> dict:
    """The Arrow buffers ArrowColumns.take() must give for (delta, tsd, key, value, headers) rows,
    built the plain way (columns.ArrowColumnBuilder's documented layout)."""
    def blobs(items):
        nulls = sum(b is None for b in items)
        valid = None
        if nulls:
            bits = bytearray((len(items) + 7) // 8)
            for i, b in enumerate(items):
                if b is not None:
                    bits[i >> 3] |= 1 << (i & 7)
            valid = bytes(bits)
        offs, pos = [0], 0
        for b in items:
            pos += len(b or b"")
            offs.append(pos)
        return valid, array.array("i", offs).tobytes(), b"".join(b or b"" for b in items), nulls

    pairs = [p for r in rows for p in r[4]]
    hoffs, pos = [0], 0
    for r in rows:
        pos += len(r[4])
        hoffs.append(pos)
    return {"rows": len(rows),
            "offset_deltas": array.array("q", [r[0] for r in rows]).tobytes(),
            "timestamp_deltas": array.array("q", [r[1] for r in rows]).tobytes(),
            "keys": blobs([r[2] for r in rows]), "values": blobs([r[3] for r in rows]),
            "header_offsets": array.array("i", hoffs).tobytes(),
            "header_keys": blobs([k.encode() for k, _ in pairs]),
            "header_values": blobs([v for _, v in pairs])}


def _normal(recs_with_deltas) -> list:
    """(delta, tsd, key, value, headers-as-tuples) of records given as (delta, ts, ...)."""
    ts0 = recs_with_deltas[0][1]
    return [(d, ts - ts0, k, v, tuple(tuple(p) for p in (h or ()))) for d, ts, k, v, h in recs_with_deltas]


def _columns(rows) -> tuple:
    return tuple(tuple(r[i] for r in rows) for i in range(5))


@FIXED
@given(_delta_records(), st.binary(max_size=3), st.binary(max_size=3),
       st.sampled_from([bytes, bytearray, memoryview]))
def test_readers_agree_with_kafka_pythons_reader(recs, prefix, suffix, kind):
    batch = kp_batch(recs)
    rows = kp_read(batch)
    assert rows == _normal(recs)
    section = batch[HEADER:]
    buf = kind(prefix + section + suffix)
    start, end, n, last = len(prefix), len(prefix) + len(section), len(recs), recs[-1][0]

    assert codec.decode_columns(buf, start, end, n, last) == _columns(rows)
    assert codec.decode_columns(buf, start, end, n, last + 5) == _columns(rows)

    tsds = [r[1] for r in rows]
    contiguous = [r[0] for r in rows] == list(range(n))
    assert codec.scan_records(buf, start, end, n, last) == (
        min(tsds), max(tsds), sum(r[2] is None for r in rows), contiguous)

    ac = codec.ArrowColumns()
    assert ac.add(buf, start, end, n, last) == n
    assert ac.rows == n
    assert ac.nbytes == sum(len(r[2] or b"") + len(r[3] or b"") + sum(len(k.encode()) + len(v or b"")
                                                                       for k, v in r[4]) for r in rows)
    assert ac.take() == _expected_buffers(rows)
    assert ac.rows == 0 and ac.nbytes == 0


@FIXED
@given(st.lists(_delta_records(max_size=4), min_size=1, max_size=5), st.integers(INT64_MIN, INT64_MAX),
       st.booleans())
def test_arrow_columns_accumulate_batches_and_fixed_tsd(batches, fixed, use_fixed):
    """Several batches in one ArrowColumns (bitmaps appearing mid-way), then pyarrow reads them back."""
    ac = codec.ArrowColumns()
    all_rows = []
    for recs in batches:
        section = kp_section(recs)
        rows = _normal(recs)
        if use_fixed:
            rows = [(d, fixed, k, v, h) for d, _, k, v, h in rows]
            assert codec.decode_columns(section, 0, len(section), len(recs), recs[-1][0], fixed) == _columns(rows)
            assert ac.add(section, 0, len(section), len(recs), recs[-1][0], fixed_tsd=fixed) == len(recs)
        else:
            assert ac.add(section, 0, len(section), len(recs), recs[-1][0], fixed_tsd=None) == len(recs)
        all_rows += rows
        assert ac.rows == len(all_rows)
    got = ac.take()
    assert got == _expected_buffers(all_rows)

    def arr(typ, col, n):
        valid, offs, data, nulls = col
        return pa.Array.from_buffers(typ, n, [valid and pa.py_buffer(valid), pa.py_buffer(offs),
                                              pa.py_buffer(data)], null_count=nulls)

    n = got["rows"]
    assert arr(pa.binary(), got["keys"], n).to_pylist() == [r[2] for r in all_rows]
    assert arr(pa.binary(), got["values"], n).to_pylist() == [r[3] for r in all_rows]
    nh = struct.unpack_from("<i", got["header_offsets"], 4 * n)[0]
    hk = arr(pa.string(), got["header_keys"], nh)
    hv = arr(pa.binary(), got["header_values"], nh)
    headers = pa.ListArray.from_arrays(pa.array(array.array("i", got["header_offsets"]), pa.int32()),
                                       pa.StructArray.from_arrays([hk, hv], ["k", "v"]))
    assert [tuple((p["k"], p["v"]) for p in h) for h in headers.to_pylist()] == [r[4] for r in all_rows]
    assert array.array("q", got["timestamp_deltas"]).tolist() == [r[1] for r in all_rows]


def test_fixed_tsd_in_decode_columns_and_type_errors():
    recs = [(0, 100, b"a", b"b", ()), (1, 50, None, None, ())]
    section = kp_section(recs)
    n = len(section)
    assert codec.decode_columns(section, 0, n, 2, 1, fixed_tsd=9)[1] == (9, 9)
    assert codec.decode_columns(section, 0, n, 2, 1, None)[1] == (0, -50)
    with pytest.raises(TypeError):
        codec.decode_columns(section, 0, n, 2, 1, fixed_tsd="9")
    with pytest.raises(OverflowError):
        codec.ArrowColumns().add(section, 0, n, 2, 1, fixed_tsd=2 ** 63)


def test_empty_section_and_zero_records():
    assert codec.decode_columns(b"xyz", 1, 1, 0, -1) == ((), (), (), (), ())
    assert codec.scan_records(b"", 0, 0, 0, -1) == (0, 0, 0, True)
    ac = codec.ArrowColumns()
    assert ac.add(b"", 0, 0, 0, -1) == 0
    assert ac.take() == _expected_buffers([])


def test_scan_records_contiguity_and_nulls():
    recs = [(0, 10, None, b"v", ()), (1, 5, b"k", None, ()), (2, 30, None, None, [("h", None)])]
    s = kp_section(recs)
    assert codec.scan_records(s, 0, len(s), 3, 2) == (-5, 20, 2, True)
    assert codec.scan_records(s, 0, len(s), 3, 7) == (-5, 20, 2, True)
    gaps = [(0, 10, b"k", b"v", ()), (2, 11, b"k", b"v", ())]
    s = kp_section(gaps)
    assert codec.scan_records(s, 0, len(s), 2, 2) == (0, 1, 0, False)
    late = [(1, 10, b"k", b"v", ()), (2, 11, b"k", b"v", ())]
    s = kp_section(late)
    assert codec.scan_records(s, 0, len(s), 2, 2) == (0, 1, 0, False)


def test_non_minimal_varints_are_read_as_kafka_reads_them():
    """Kafka's readVarint/readVarlong accept up to 5/10 bytes, padded encodings included."""
    body = (b"\x00" + b"\x80" * 9 + b"\x00"      # timestampDelta 0 in 10 bytes
            + b"\x80\x80\x80\x80\x00"             # offsetDelta 0 in 5 bytes
            + b"\x01\x01" + b"\x00")              # null key, null value, no headers
    rec = varint(len(body)) + body
    assert codec.decode_columns(rec, 0, len(rec), 1, 0) == ((0,), (0,), (None,), (None,), ((),))


# ------------------------------------------------------------------ malformations

def varint(v: int) -> bytes:
    """Zigzag varint of any int (no width limit: tests write overlong ones on purpose)."""
    u = (v << 1) ^ (v >> 200) if v < 0 else v << 1
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7f) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def raw(delta=0, tsd=0, key=b"k", value=b"v", headers=(), *, length=None, extra=b"",
        klen=None, vlen=None, hcount=None, attributes=b"\x00", tsd_bytes=None, delta_bytes=None,
        klen_bytes=None) -> bytes:
    """One record written field by field, each field overridable with bad values."""
    body = bytearray(attributes)
    body += tsd_bytes if tsd_bytes is not None else varint(tsd)
    body += delta_bytes if delta_bytes is not None else varint(delta)
    if klen_bytes is not None:
        body += klen_bytes
    else:
        body += varint(klen if klen is not None else (-1 if key is None else len(key)))
    body += key or b""
    body += varint(vlen if vlen is not None else (-1 if value is None else len(value))) + (value or b"")
    body += varint(len(headers) if hcount is None else hcount)
    for hk, hv in headers:
        hk = hk if isinstance(hk, bytes) else hk.encode()
        if isinstance(hv, int):          # a raw (bad) header value length
            body += varint(len(hk)) + hk + varint(hv)
        else:
            body += varint(len(hk)) + hk + varint(-1 if hv is None else len(hv)) + (hv or b"")
    body += extra
    return (length if isinstance(length, bytes) else varint(len(body) if length is None else length)) + bytes(body)


# valid records first (nulls, headers with a null value), so a reader has decoded some before the problem
GOOD = raw(0, 0, None, b"v", [("é", None)]) + raw(1, -3, b"k", None, [("h", b"x")])


def _bad_header_key(k: bytes) -> bytes:
    return raw(2, headers=[(k, b"v")])


MALFORMED = {
    # name: (section, record_count, last_offset_delta)
    "truncated record (length beyond the section)": (GOOD + raw(2)[:-1], 3, 5),
    "truncated inside the length varint": (GOOD + b"\x80", 3, 5),
    "6-byte varint (offset delta)": (GOOD + raw(2, delta_bytes=b"\x84\x80\x80\x80\x80\x00"), 3, 5),
    "6-byte varint (record length)": (GOOD + b"\x80\x80\x80\x80\x80\x00" + raw(2)[1:], 3, 5),
    "6-byte varint (key length)": (GOOD + raw(2, klen_bytes=b"\x82\x80\x80\x80\x80\x00"), 3, 5),
    "11-byte varlong (timestamp delta)": (GOOD + raw(2, tsd_bytes=b"\x80" * 10 + b"\x00"), 3, 5),
    # the length counts one byte more than the fields take (that byte is there, inside the record)
    "record length longer than the fields": (GOOD + raw(2, length=len(raw(2)), extra=b"\x00"), 3, 5),
    # the length counts one byte less: the fields run past it
    "record length shorter than the fields": (GOOD + raw(2, length=len(raw(2)) - 2) + b"\x00", 3, 5),
    "record length zero": (GOOD + b"\x00", 3, 5),
    "negative record length": (GOOD + varint(-1) + raw(2)[1:], 3, 5),
    "count larger than the records": (GOOD + raw(2), 4, 5),
    "count smaller than the records": (GOOD + raw(2), 2, 5),
    "bytes left over": (GOOD + raw(2) + b"\x00", 3, 5),
    "key length < -1": (GOOD + raw(2, key=None, klen=-2), 3, 5),
    "value length < -1": (GOOD + raw(2, value=None, vlen=-2), 3, 5),
    "header value length < -1": (GOOD + raw(2, headers=[("h", -2)]), 3, 5),
    "negative header count": (GOOD + raw(2, hcount=-1), 3, 5),
    "header count beyond the body": (GOOD + raw(2, hcount=3), 3, 5),
    "negative header key length": (GOOD + raw(2, hcount=1, extra=varint(-1) + b"\x02v"), 3, 5),
    "invalid UTF-8 header key (0xff)": (GOOD + _bad_header_key(b"\xff"), 3, 5),
    "invalid UTF-8 header key (overlong)": (GOOD + _bad_header_key(b"\xc0\x80"), 3, 5),
    "invalid UTF-8 header key (surrogate)": (GOOD + _bad_header_key(b"\xed\xa0\x80"), 3, 5),
    "invalid UTF-8 header key (beyond U+10FFFF)": (GOOD + _bad_header_key(b"\xf4\x90\x80\x80"), 3, 5),
    "invalid UTF-8 header key (cut sequence)": (GOOD + _bad_header_key("a€".encode()[:-1]), 3, 5),
    "offset delta repeated": (GOOD + raw(1), 3, 5),
    "offset delta decreasing": (GOOD + raw(0), 3, 5),
    "negative first offset delta": (raw(-1), 1, 5),
    "offset delta beyond last_offset_delta": (GOOD + raw(6), 3, 5),
    "last_offset_delta below the first delta": (GOOD, 2, 0),
    "record count beyond what the bytes can hold": (GOOD, 10 ** 6, 10 ** 6),
    "negative record count": (GOOD, -1, 5),
}


def test_raw_writes_what_kafka_python_writes():
    """The hand-written records the malformations start from are the oracle's own bytes."""
    good = GOOD + raw(2)
    assert good == kp_section([(0, 0, None, b"v", [("é", None)]), (1, -3, b"k", None, [("h", b"x")]),
                               (2, 0, b"k", b"v", ())])
    assert codec.decode_columns(good, 0, len(good), 3, 2)[0] == (0, 1, 2)


def test_malformed_cases_are_what_their_names_say():
    """Spot-check the hand-built cases that patch bytes."""
    tail = MALFORMED["negative header key length"][0][len(GOOD):]
    assert tail == varint(len(tail) - 1) + b"\x00\x00\x04\x02k\x02v\x02\x01\x02v"
    assert MALFORMED["6-byte varint (key length)"][0].endswith(b"\x04\x82\x80\x80\x80\x80\x00k\x02v\x00")
    assert MALFORMED["11-byte varlong (timestamp delta)"][0][len(GOOD) + 1:].startswith(b"\x00" + b"\x80" * 10 + b"\x00\x04")


def _state(ac) -> tuple:
    return ac.rows, ac.nbytes


def _loaded(with_nulls: bool):
    ac = codec.ArrowColumns()
    recs = [(0, 1, None if with_nulls else b"k0", b"v", [("a", None if with_nulls else b"")]),
            (1, 2, b"k1", b"w", ()), (2, 3, b"k2", b"x", [("é", b"y")])]
    s = kp_section(recs)
    ac.add(s, 0, len(s), 3, 2)
    return ac, _expected_buffers(_normal(recs))


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("with_nulls", [False, True])
def test_every_malformation_raises_and_leaves_nothing_behind(name, with_nulls):
    section, count, last = MALFORMED[name]
    buf = b"\x07" + section + b"\x07"
    args = (buf, 1, 1 + len(section), count, last)
    with pytest.raises(ValueError):
        codec.decode_columns(*args)
    with pytest.raises(ValueError):
        codec.decode_columns(*args, fixed_tsd=3)
    with pytest.raises(ValueError):
        codec.scan_records(*args)
    ac, expected = _loaded(with_nulls)
    before = _state(ac)
    with pytest.raises(ValueError):
        ac.add(*args)
    assert _state(ac) == before
    assert ac.take() == expected
    # and a failed add into an empty ArrowColumns keeps it empty
    ac = codec.ArrowColumns()
    with pytest.raises(ValueError):
        ac.add(*args)
    assert (ac.rows, ac.nbytes) == (0, 0)
    assert ac.take() == _expected_buffers([])


def test_failed_add_then_a_good_add_continues_the_columns():
    ac, _ = _loaded(False)
    section, count, last = MALFORMED["invalid UTF-8 header key (0xff)"]
    with pytest.raises(ValueError):
        ac.add(section, 0, len(section), count, last)
    more = [(0, 9, None, None, [("z", None)])]
    s = kp_section(more)
    ac.add(s, 0, len(s), 1, 0)
    first = [(0, 1, b"k0", b"v", [("a", b"")]), (1, 2, b"k1", b"w", ()), (2, 3, b"k2", b"x", [("é", b"y")])]
    assert ac.take() == _expected_buffers(_normal(first) + _normal(more))


@pytest.mark.parametrize("start,end", [(-1, 5), (0, 10 ** 6), (5, 4)])
def test_range_outside_the_buffer(start, end):
    with pytest.raises(ValueError):
        codec.decode_columns(GOOD, start, end, 2, 1)
    with pytest.raises(ValueError):
        codec.scan_records(GOOD, start, end, 2, 1)
    ac = codec.ArrowColumns()
    with pytest.raises(ValueError):
        ac.add(GOOD, start, end, 2, 1)
    assert ac.rows == 0


def test_error_messages_name_the_problem():
    def msg(name):
        section, count, last = MALFORMED[name]
        with pytest.raises(ValueError) as exc:
            codec.scan_records(section, 0, len(section), count, last)
        return str(exc.value)
    assert "varint longer than 5 bytes" in msg("6-byte varint (offset delta)")
    assert "varlong longer than 10 bytes" in msg("11-byte varlong (timestamp delta)")
    assert "UTF-8" in msg("invalid UTF-8 header key (overlong)")
    assert "negative header count" in msg("negative header count")
    assert "negative header key length" in msg("negative header key length")
    assert "key length < -1" in msg("key length < -1")
    assert "left over" in msg("bytes left over")
    assert "record index 2 of 3" in msg("offset delta repeated")


def test_every_truncation_of_a_valid_section_raises():
    recs = [(0, 5, b"key", b"value" * 30, [("hé", b"x"), ("n", None)]), (1, -70, None, None, ()),
            (2, 10 ** 12, b"", b"", [("", b"")])]
    section = kp_section(recs)
    for cut in range(len(section)):
        for args in ((section[:cut], 0, cut, 3, 2), (section, 0, cut, 3, 2)):
            with pytest.raises(ValueError):
                codec.decode_columns(*args)
            with pytest.raises(ValueError):
                codec.scan_records(*args)
            ac = codec.ArrowColumns()
            with pytest.raises(ValueError):
                ac.add(*args)
            assert ac.rows == 0 and ac.nbytes == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=8))
def test_header_key_utf8_check_is_pythons_strict_decoder(key):
    section = raw(0, headers=[(key, b"v")])
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    ac = codec.ArrowColumns()
    if text is None:
        with pytest.raises(ValueError):
            codec.decode_columns(section, 0, len(section), 1, 0)
        with pytest.raises(ValueError):
            ac.add(section, 0, len(section), 1, 0)
    else:
        assert codec.decode_columns(section, 0, len(section), 1, 0)[4] == (((text, b"v"),),)
        assert ac.add(section, 0, len(section), 1, 0) == 1


@FIXED
@given(_delta_records(max_size=3), st.data())
def test_mutated_sections_three_readers_agree(recs, data):
    """Random byte flips: decode_columns, scan_records and ArrowColumns accept or reject together,
    agree on what they accept, and a rejected add leaves the columns untouched."""
    section = bytearray(kp_section(recs))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(section) - 1))
        section[i] = data.draw(st.integers(0, 255))
    section = bytes(section)
    n, last = len(recs), recs[-1][0]
    outcomes = []
    for fn in (codec.decode_columns, codec.scan_records):
        try:
            outcomes.append(fn(section, 0, len(section), n, last))
        except ValueError:
            outcomes.append(None)
    ac, expected = _loaded(True)
    try:
        ac.add(section, 0, len(section), n, last)
        added = True
    except ValueError:
        added = False
        assert ac.take() == expected
    assert (outcomes[0] is None) == (outcomes[1] is None) == (not added)
    if outcomes[0] is not None:
        rows = list(zip(*outcomes[0]))
        tsds = outcomes[0][1]
        assert outcomes[1] == (min(tsds), max(tsds), outcomes[0][2].count(None),
                               outcomes[0][0] == tuple(range(n)))
        loaded_rows = _normal([(0, 1, None, b"v", [("a", None)]), (1, 2, b"k1", b"w", ()),
                               (2, 3, b"k2", b"x", [("é", b"y")])])
        assert ac.take() == _expected_buffers(loaded_rows + rows)
