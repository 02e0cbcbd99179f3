"""The C codec ``kafkasim.records._codec`` against its references.

- ``pack_records`` is byte-identical to msgpack-python (``Packer(use_bin_type=True)``) across
  every msgpack int/str/bin/array width boundary, returns the right min/max timestamps, and
  returns None (so the Python path decides) for anything outside the common shape.
- ``encode_records`` / ``encode_trusted_batch`` give the same bytes and the same
  ``InvalidRecordError`` with and without the extension.
- ``ArrowColumnBuilder`` gives the same buffers on its C and pure-Python paths, and those
  buffers decode (with pyarrow) to what ``decode_columns`` and the encoder's input say.
- On malformed payloads both paths reject or accept together; a rejected batch leaves
  nothing behind (rows, bitmaps, offsets), whatever was decoded before the problem.
"""

from __future__ import annotations

import itertools
import struct
import tracemalloc

import msgpack
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from kafkasim.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from kafkasim.records import record_batch as rb
from kafkasim.records.columns import ArrowColumnBuilder

codec = rb._codec
needs_c = pytest.mark.skipif(not rb.C_CODEC, reason="kafkasim.records._codec not built (see test_c_codec_is_built)")

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
_ref_pack = msgpack.Packer(use_bin_type=True).pack


def test_c_codec_is_built():
    """The project build compiles the extension; without it every C test below is skipped."""
    assert rb.C_CODEC is True
    assert rb._codec is not None and hasattr(rb._codec, "pack_records")
    assert ArrowColumnBuilder()._c is not None


# ------------------------------------------------------------------ strategies

# every msgpack int width boundary, both sides, both signs
_EDGES = sorted({s * v for s in (1, -1) for v in (
    0, 1, 30, 31, 32, 33, 127, 128, 129, 255, 256, 257, 32767, 32768, 32769,
    65535, 65536, 65537, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 2**32, 2**32 + 1, 2**63 - 1)} | {INT64_MIN})
_int64 = st.one_of(st.sampled_from(_EDGES), st.integers(INT64_MIN, INT64_MAX))

_BLOB_LENS = [0, 1, 31, 32, 33, 255, 256, 257, 65535, 65536, 65537]
_STR_LENS = [0, 1, 31, 32, 33, 255, 256, 257, 65535, 65536]
_CHARS = ["a", "\x00", "é", "€", "𝄞"]   # 1, 1, 2, 3 and 4 UTF-8 bytes


def _filled(n: int, byte: int) -> bytes:
    return bytes([byte]) * n


_blob = st.one_of(st.none(), st.binary(max_size=24),
                  st.builds(_filled, st.sampled_from(_BLOB_LENS), st.integers(0, 255)))
_small_blob = st.one_of(st.none(), st.binary(max_size=8))


@st.composite
def _sized_text(draw) -> str:
    """A str of exactly a sampled UTF-8 length, made of (mostly) non-ASCII characters."""
    target = draw(st.sampled_from(_STR_LENS))
    ch = draw(st.sampled_from(_CHARS))
    w = len(ch.encode())
    k = target // w
    s = ch * k + "a" * (target - k * w)
    assert len(s.encode()) == target
    return s


_hkey = st.one_of(st.text(max_size=10), _sized_text())
_pair = st.one_of(st.tuples(_hkey, _blob), st.builds(lambda k, v: [k, v], _hkey, _blob))
_small_pair = st.tuples(st.text(max_size=3), _small_blob)
_pairs = st.one_of(st.lists(_pair, max_size=3),
                   st.lists(_small_pair, min_size=14, max_size=17))   # fixarray / array16 boundary
_headers = st.one_of(st.just(()), st.just([]), _pairs.map(tuple), _pairs)
_headers_or_none = st.one_of(st.none(), _headers)


@st.composite
def _stamps(draw, n: int, min_value: int = INT64_MIN) -> list:
    """``n`` int64 timestamps >= ``min_value`` whose differences to the first hit int boundaries."""
    base = draw(st.one_of(st.sampled_from([0, 1, 1_700_000_000_000, 2**62, INT64_MAX, -1, INT64_MIN]),
                          st.integers(INT64_MIN, INT64_MAX)))
    base = max(base, min_value)
    out = []
    for _ in range(n):
        how = draw(st.integers(0, 3))
        if how <= 1:
            off = draw(st.sampled_from(_EDGES))
            ts = base + off if min_value <= base + off <= INT64_MAX else base - off
            if not min_value <= ts <= INT64_MAX:
                ts = base
        elif how == 2:
            ts = draw(st.integers(max(min_value, 0), INT64_MAX))
        else:
            ts = draw(st.integers(min_value, INT64_MAX))
        out.append(ts)
    return out


def _seq(items: list, as_list: bool):
    return list(items) if as_list else tuple(items)


@st.composite
def _records4(draw, min_ts: int = INT64_MIN, max_size: int = 18) -> list | tuple:
    """``(ts, key, value, headers)`` records, as ``encode_records`` takes them."""
    n = draw(st.integers(1, max_size))
    stamps = draw(_stamps(n, min_ts))
    recs = [_seq([ts, draw(_blob), draw(_blob), draw(_headers_or_none)], draw(st.booleans())) for ts in stamps]
    return _seq(recs, draw(st.booleans()))


@st.composite
def _records5(draw, max_size: int = 18) -> list | tuple:
    """``(delta, ts, key, value, headers)`` records (any int64 deltas; headers never None)."""
    n = draw(st.integers(1, max_size))
    stamps = draw(_stamps(n))
    recs = [_seq([draw(_int64), ts, draw(_blob), draw(_blob), draw(_headers)], draw(st.booleans()))
            for ts in stamps]
    return _seq(recs, draw(st.booleans()))


def _reference(records, with_deltas: bool) -> bytes:
    if with_deltas:
        first = records[0][1]
        return _ref_pack([(d, ts - first, k, v, h) for d, ts, k, v, h in records])
    first = records[0][0]
    return _ref_pack([(i, ts - first, k, v, h or ()) for i, (ts, k, v, h) in enumerate(records)])


def _deltas_fit(stamps: list) -> bool:
    return all(INT64_MIN <= ts - stamps[0] <= INT64_MAX for ts in stamps)


# ------------------------------------------------------------------ pack_records


@needs_c
@settings(max_examples=120, deadline=None)
@given(records=_records4())
def test_pack_records_is_msgpack(records):
    stamps = [r[0] for r in records]
    got = codec.pack_records(records, False)
    if not _deltas_fit(stamps):   # ts - first_ts beyond int64: the Python path packs a uint64
        assert got is None
        return
    assert got is not None
    payload, lo, hi = got
    assert type(payload) is bytes
    assert payload == _reference(records, False)
    assert (lo, hi) == (min(stamps), max(stamps))


@needs_c
@settings(max_examples=100, deadline=None)
@given(records=_records5())
def test_pack_records_with_deltas_is_msgpack(records):
    stamps = [r[1] for r in records]
    got = codec.pack_records(records, True)
    if not _deltas_fit(stamps):
        assert got is None
        return
    assert got is not None
    payload, lo, hi = got
    assert payload == _reference(records, True)
    assert (lo, hi) == (min(stamps), max(stamps))


@needs_c
@pytest.mark.parametrize("n", [15, 16, 65535, 65536])
def test_pack_records_array_widths(n):
    """fixarray / array16 / array32 heads, for the record list and for one record's headers."""
    records = [(1000 + (i % 300), None if i % 3 else b"k", b"", None) for i in range(n)]
    payload, lo, hi = codec.pack_records(records, False)
    assert payload == _reference(records, False)
    assert (lo, hi) == (1000, 1299 if n > 299 else 1000 + n - 1)
    hdrs = tuple(("h", None if i % 2 else b"x") for i in range(n))
    one = [(0, 5, None, None, hdrs)]
    assert codec.pack_records(one, True)[0] == _reference(one, True)


class _MyInt(int):
    pass


class _MyList(list):
    pass


class _MyTuple(tuple):
    pass


_GOOD4 = (1000, b"k", b"v", (("h", b"x"),))
_GOOD5 = (0, 1000, b"k", b"v", (("h", b"x"),))

_DECLINES = {
    # name: (records, with_deltas)
    "bool ts": ([(True, b"k", b"v", ())], False),
    "float ts": ([(1000.0, b"k", b"v", ())], False),
    "int subclass ts": ([(_MyInt(1000), b"k", b"v", ())], False),
    "int subclass delta": ([(_MyInt(0), 1000, b"k", b"v", ())], True),
    "bool delta": ([(False, 1000, b"k", b"v", ())], True),
    "None ts": ([(None, b"k", b"v", ())], False),
    "str key": ([(1000, "k", b"v", ())], False),
    "bytearray value": ([(1000, b"k", bytearray(b"v"), ())], False),
    "memoryview key": ([(1000, memoryview(b"k"), b"v", ())], False),
    "bytes subclass value": ([(1000, b"k", type("B", (bytes,), {})(b"v"), ())], False),
    "bytes header key": ([(1000, b"k", b"v", ((b"h", b"x"),))], False),
    "str subclass header key": ([(1000, b"k", b"v", ((type("S", (str,), {})("h"), b"x"),))], False),
    "surrogate header key": ([(1000, b"k", b"v", (("\ud800", b"x"),))], False),
    "str header value": ([(1000, b"k", b"v", (("h", "x"),))], False),
    "header pair of 3": ([(1000, b"k", b"v", (("h", b"x", None),))], False),
    "header pair of 1": ([(1000, b"k", b"v", (("h",),))], False),
    "header not a pair": ([(1000, b"k", b"v", ("hx",))], False),
    "headers a dict": ([(1000, b"k", b"v", {"h": b"x"})], False),
    "headers falsy int": ([(1000, b"k", b"v", 0)], False),
    "headers list subclass": ([(1000, b"k", b"v", _MyList([("h", b"x")]))], False),
    "ts 2**63": ([(2**63, b"k", b"v", ())], False),
    "ts -2**63-1": ([(-(2**63) - 1, b"k", b"v", ())], False),
    "later ts 2**63": ([_GOOD4, (2**63, None, None, ())], False),
    "delta 2**63": ([(2**63, 1000, b"k", b"v", ())], True),
    "ts delta beyond int64": ([(INT64_MIN, None, None, ()), (INT64_MAX, None, None, ())], False),
    "headers None with deltas": ([(0, 1000, b"k", b"v", None)], True),
    "records list subclass": (_MyList([_GOOD4]), False),
    "record tuple subclass": ([_MyTuple(_GOOD4)], False),
    "record of 3": ([(1000, b"k", b"v")], False),
    "record of 5 without deltas": ([_GOOD5], False),
    "record of 4 with deltas": ([_GOOD4], True),
    "record not a sequence": ([_GOOD4, 5], False),
    "records a generator": ((r for r in [_GOOD4]), False),
    "empty list": ([], False),
    "empty tuple": ((), True),
}


@needs_c
@pytest.mark.parametrize("name", list(_DECLINES))
def test_pack_records_declines(name):
    records, with_deltas = _DECLINES[name]
    # the common shape next to it is accepted: the decline is about this one difference
    good = [_GOOD5] if with_deltas else [_GOOD4]
    assert codec.pack_records(good, with_deltas) is not None
    assert codec.pack_records(records, with_deltas) is None


@needs_c
def test_pack_records_rejects_bad_arguments():
    with pytest.raises(TypeError):
        codec.pack_records([_GOOD4])


# ------------------------------------------------------------------ encode_* with and without C


def _outcome(fn, *args, **kw):
    """``("ok", bytes)`` or ``(exception type name, message)``."""
    try:
        out = fn(*args, **kw)
    except Exception as exc:  # noqa: BLE001 - the point is to compare whatever happens
        return type(exc).__name__, str(exc)
    if isinstance(out, tuple):   # encode_records_parts
        out = (out[0], b"".join(out[1]))
    return "ok", out


def _both(fn, *args, **kw):
    """(outcome with the C codec, outcome of the pure-Python path)."""
    with_c = _outcome(fn, *args, **kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rb, "_codec", None)
        pure = _outcome(fn, *args, **kw)
    return with_c, pure


_KW = dict(producer_id=77, producer_epoch=3, base_sequence=1000)


@needs_c
@settings(max_examples=80, deadline=None)
@given(records=_records4(min_ts=0), base=st.integers(0, 2**40), log_append=st.booleans())
def test_encode_records_same_bytes_with_and_without_c(records, base, log_append):
    assert codec.pack_records(records, False) is not None   # the C path is really taken
    attrs = rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND if log_append else 0
    for fn in (rb.encode_records, rb.encode_records_parts):
        with_c, pure = _both(fn, base, records, attributes=attrs, **_KW)
        assert with_c[0] == "ok"
        assert with_c == pure
    batch = with_c[1][1]
    h = rb.decode_header(batch)
    rb.verify(batch, 0, h)
    assert (h.base_timestamp, h.max_timestamp) == (records[0][0], max(r[0] for r in records))


@needs_c
@settings(max_examples=80, deadline=None)
@given(records=_records4(max_size=8))
def test_encode_records_same_outcome_for_any_timestamps(records):
    """Negative timestamps anywhere: the same InvalidTimestampError (message included)."""
    with_c, pure = _both(rb.encode_records, 0, records)
    assert with_c == pure
    if min(r[0] for r in records) < 0:
        assert with_c[0] == InvalidTimestampError.__name__ and "negative timestamp" in with_c[1]


@needs_c
@settings(max_examples=80, deadline=None)
@given(data=st.data(), n=st.integers(1, 18), gaps=st.booleans())
def test_encode_trusted_batch_same_bytes_with_and_without_c(data, n, gaps):
    stamps = data.draw(_stamps(n, 0))
    deltas = list(range(n))
    if gaps:
        deltas = list(itertools.accumulate(data.draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))))
    records = [(d, ts, data.draw(_blob), data.draw(_blob), data.draw(_headers)) for d, ts in zip(deltas, stamps)]
    assert codec.pack_records(records, True) is not None
    with_c, pure = _both(rb.encode_trusted_batch, records, **_KW)
    assert with_c[0] == "ok"
    assert with_c == pure
    if not gaps:
        assert with_c[1] == rb.encode_batch(0, records, **_KW)


_ERROR_CASES = {
    "negative timestamp later": [(5, None, b"v", ()), (7, b"k", None, None), (-3, None, None, None)],
    "negative timestamp first": [(-1, None, b"v", ()), (7, b"k", None, None)],
    "negative timestamp twice": [(4, None, b"v", ()), (-9, None, None, ()), (-9, None, None, ())],
    "non-tuple record": [(1, None, None, None), 5],
    "record of 3": [(1, None, None)],
    "record of 5": [(0, 1, None, None, ())],
    "None timestamp": [(1, None, None, None), (None, None, None, None)],
    "float timestamp": [(1.5, None, None, None)],
    "unencodable key": [(1, object(), None, None)],
    "unencodable header value": [(1, None, None, (("h", object()),))],
    "empty": [],
    "bool timestamp": [(True, b"k", b"v", ())],
    "str key (not a bin: refused by both paths)": [(1, "k", b"v", ())],
    "bytearray value": [(1, b"k", bytearray(b"v"), [("h", bytearray(b"x"))])],
    "list subclass": _MyList([(1, b"k", b"v", ())]),
}


@needs_c
@pytest.mark.parametrize("name", list(_ERROR_CASES))
def test_encode_records_errors_match_the_python_path(name):
    with_c, pure = _both(rb.encode_records, 0, _ERROR_CASES[name])
    assert with_c == pure
    if name.startswith("negative"):
        assert with_c[0] == InvalidTimestampError.__name__
    if name.startswith(("non-tuple", "record of", "None", "unencodable", "empty", "float", "bool", "str key",
                        "bytearray")):
        assert with_c[0] == InvalidRecordError.__name__
    if name == "negative timestamp later":
        assert with_c[1] == "negative timestamp -3 at offset delta 2"
    if name == "negative timestamp twice":
        assert with_c[1] == "negative timestamp -9 at offset delta 1"


@needs_c
@pytest.mark.parametrize("records", [
    [(0, 1, object(), None, ())],
    [(0, 1, None, None, (("h", object()),))],
    [(0, 1, None, None, None)],
    [(0, 2**64, None, None, ())],
    [],
], ids=["unencodable key", "unencodable header", "headers None", "ts 2**64", "empty"])
def test_encode_trusted_batch_errors_match_the_python_path(records):
    with_c, pure = _both(rb.encode_trusted_batch, records)
    assert with_c == pure


# ------------------------------------------------------------------ ArrowColumnBuilder: C vs Python


def _builders() -> tuple:
    c = ArrowColumnBuilder()
    assert c._c is not None
    p = ArrowColumnBuilder()
    p._c = None
    return c, p


@st.composite
def _batch_spec(draw, null_keys: bool | None = None, max_n: int = 20, edge_stamps: bool = True):
    """``(records, last_offset_delta)`` for ``encode_batch``; some compacted (gaps, lod beyond)."""
    n = draw(st.integers(1, max_n))
    if draw(st.booleans()):
        gaps = draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
        deltas = [d - 1 for d in itertools.accumulate(gaps)]
        lod = deltas[-1] + draw(st.integers(0, 3))
    else:
        deltas, lod = list(range(n)), n - 1
    stamps = draw(_stamps(n, 0) if edge_stamps else st.lists(st.integers(0, 2**45), min_size=n, max_size=n))
    key = {None: _small_blob, True: st.none(), False: st.binary(max_size=8)}[null_keys]
    hdrs = st.lists(_small_pair, max_size=3).map(tuple)
    recs = [(d, ts, draw(key), draw(_small_blob), draw(hdrs)) for d, ts in zip(deltas, stamps)]
    return recs, lod


def _encode_all(specs, base: int = 0) -> list:
    """Each spec as its own batch bytes, base offsets continuing."""
    out = []
    for recs, lod in specs:
        out.append(rb.encode_batch(base, recs, last_offset_delta=lod))
        base += lod + 1
    return out


def _add(builder, batch, where="<test>"):
    h = rb.decode_header(batch)
    return builder.add(batch, 0, h, where=where)


@needs_c
@settings(max_examples=70, deadline=None)
@given(specs=st.lists(_batch_spec(), min_size=1, max_size=5),
       split=st.integers(0, 6), buftype=st.sampled_from([bytes, bytearray, memoryview]))
def test_arrow_builder_c_equals_python(specs, split, buftype):
    segment = b"".join(_encode_all(specs))
    buf = buftype(segment)
    c, p = _builders()
    takes = {id(c): [], id(p): []}
    for b in (c, p):
        for i, (pos, h) in enumerate(rb.iter_batches(segment)):
            if i == split:   # a take() in the middle starts afresh
                takes[id(b)].append(b.take())
                assert b.rows == 0 and b.nbytes == 0
            assert b.add(buf, pos, h) == h.record_count
        takes[id(b)].append(b.take())
        assert b.take()["rows"] == 0
    assert takes[id(c)] == takes[id(p)]
    assert sum(t["rows"] for t in takes[id(c)]) == sum(len(r) for r, _ in specs)


def _int64s(b: bytes) -> list:
    return list(struct.unpack(f"={len(b) // 8}q", b))


def _arrow(col, n: int, string: bool = False) -> list:
    validity, offsets, data, nulls = col
    arr = pa.Array.from_buffers(pa.string() if string else pa.binary(), n,
                                [validity and pa.py_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(data)],
                                null_count=nulls)
    arr.validate(full=True)
    return arr.to_pylist()


def _decode_take(t: dict) -> tuple:
    """The five columns a take() holds, as Python values (via pyarrow)."""
    n = t["rows"]
    hoff = list(struct.unpack(f"={n + 1}i", t["header_offsets"]))
    m = hoff[-1]
    hk, hv = _arrow(t["header_keys"], m, string=True), _arrow(t["header_values"], m)
    headers = tuple(tuple(zip(hk[a:b], hv[a:b])) for a, b in zip(hoff, hoff[1:]))
    return (tuple(_int64s(t["offset_deltas"])), tuple(_int64s(t["timestamp_deltas"])),
            tuple(_arrow(t["keys"], n)), tuple(_arrow(t["values"], n)), headers)


@needs_c
@settings(max_examples=40, deadline=None)
@given(specs=st.lists(_batch_spec(), min_size=1, max_size=5))
def test_arrow_builder_buffers_mean_what_decode_columns_says(specs):
    batches = _encode_all(specs)
    c, p = _builders()
    expected = [[], [], [], [], []]
    for batch in batches:
        h = rb.decode_header(batch)
        for col, vals in zip(expected, rb.decode_columns(batch, 0, h)):
            col.extend(vals)
        _add(c, batch)
        _add(p, batch)
    expected = tuple(map(tuple, expected))
    for b in (c, p):
        got = _decode_take(b.take())
        assert got == expected
    # and what the encoder was given
    deltas = tuple(d for recs, _ in specs for d, *_ in recs)
    tsds = tuple(ts - recs[0][1] for recs, _ in specs for _, ts, *_ in recs)
    keys = tuple(r[2] for recs, _ in specs for r in recs)
    values = tuple(r[3] for recs, _ in specs for r in recs)
    headers = tuple(tuple(r[4]) for recs, _ in specs for r in recs)
    assert expected == (deltas, tsds, keys, values, headers)


@needs_c
def test_arrow_builder_extreme_timestamp_deltas_and_big_blobs():
    recs = [(0, INT64_MAX, b"k" * 70000, None, (("é" * 200, b"x" * 300),)),
            (1, 0, None, b"v" * 65536, ()), (5, 2**31, b"", b"", (("", None),) * 16)]
    batch = rb.encode_batch(3, recs, last_offset_delta=9)
    c, p = _builders()
    _add(c, batch)
    _add(p, batch)
    tc, tp = c.take(), p.take()
    assert tc == tp
    assert _int64s(tc["timestamp_deltas"]) == [0, -INT64_MAX, 2**31 - INT64_MAX]
    assert _decode_take(tc)[2:4] == ((b"k" * 70000, None, b""), (None, b"v" * 65536, b""))


# ------------------------------------------------------------------ corruption agreement

class Raw(bytes):
    """Bytes spliced into a payload as they are (not msgpack-packed)."""


def _payload(items, array_len=None) -> bytes:
    head = msgpack.Packer().pack_array_header(len(items) if array_len is None else array_len)
    return head + b"".join(it if isinstance(it, Raw) else _ref_pack(it) for it in items)


def _wrap(payload: bytes, count: int, lod: int, base: int = 0) -> bytes:
    """A batch around ``payload`` with a correct length and CRC (the records are not checked)."""
    return rb._assemble(base, -1, 0, lod, 1_000, 1_000, -1, -1, -1, count, payload)


def _run(builder, before, bad, after, bad_view=None):
    """Add before, then bad (maybe rejected), then after; return (accepted, take())."""
    for b in before:
        _add(builder, b)
    rows0, nbytes0 = builder.rows, builder.nbytes
    try:
        if bad_view is not None:
            builder.add(bad_view, 0, rb.decode_header(bad))
        else:
            _add(builder, bad, where="bad.log")
        accepted = True
    except CorruptRecordError as exc:
        assert "bad.log" in str(exc) or bad_view is not None
        assert (builder.rows, builder.nbytes) == (rows0, nbytes0)
        accepted = False
    for b in after:
        _add(builder, b)
    return accepted, builder.take()


def _check_agreement(before, bad, after, must_reject: bool = False, bad_view=None):
    c, p = _builders()
    acc_c, take_c = _run(c, before, bad, after, bad_view)
    acc_p, take_p = _run(p, before, bad, after, bad_view)
    assert acc_c == acc_p, f"C {'accepted' if acc_c else 'rejected'}, Python {'accepted' if acc_p else 'rejected'}"
    if must_reject:
        assert not acc_c
    assert take_c == take_p
    if not acc_c:   # nothing of the rejected batch is left behind
        for fresh in _builders():
            for b in before + after:
                _add(fresh, b)
            assert fresh.take() == take_c
    return acc_c


_good_before = st.lists(_batch_spec(null_keys=True, max_n=10, edge_stamps=False),
                        min_size=1, max_size=2).map(lambda s: _encode_all(s, 0))
_good_after = st.lists(_batch_spec(max_n=10, edge_stamps=False),
                       min_size=1, max_size=2).map(lambda s: _encode_all(s, 10_000))


@st.composite
def _prefix(draw) -> list:
    """Good records (deltas 0..k-1) with non-null keys and null values / null header values,
    so the bad record comes after the rejected batch has touched every column and bitmap."""
    k = draw(st.integers(0, 11))
    return [[i, draw(st.integers(-300, 70000)), draw(st.binary(max_size=5)),
             draw(st.one_of(st.none(), st.binary(max_size=3))),
             draw(st.lists(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=3))),
                           max_size=3))]
            for i in range(k)]


def _utf8_key_record(d: int, key_bytes: bytes) -> Raw:
    return Raw(b"\x95" + _ref_pack(d) + b"\x00\xc0\xc0\x91\x92"
               + bytes([0xa0 | len(key_bytes)]) + key_bytes + b"\xc0")


# name -> function(d, lod) giving the bad item(s) placed after the prefix;
# the batch's last_offset_delta is d + 2
_BAD = {
    "str key": lambda d, lod: [[d, 0, "k", b"v", []]],
    "int value": lambda d, lod: [[d, 0, b"k", 5, []]],
    "bool key": lambda d, lod: [[d, 0, False, b"v", []]],
    "ext value": lambda d, lod: [[d, 0, None, msgpack.ExtType(1, b"x"), []]],
    "float delta": lambda d, lod: [[float(d), 0, None, None, []]],
    "float tsd": lambda d, lod: [[d, 1.5, None, None, []]],
    "float32 tsd": lambda d, lod: [Raw(b"\x95" + _ref_pack(d) + b"\xca\x3f\x80\x00\x00\xc0\xc0\x90")],
    "true as tsd": lambda d, lod: [[d, True, None, None, []]],
    "true as delta": lambda d, lod: [[True, 0, None, None, []]],
    "nil delta": lambda d, lod: [[None, 0, None, None, []]],
    "map headers": lambda d, lod: [[d, 0, None, None, {"a": b"x"}]],
    "nil headers": lambda d, lod: [[d, 0, None, None, None]],
    "headers a bin": lambda d, lod: [[d, 0, None, None, b"ab"]],
    "header key nil": lambda d, lod: [[d, 0, None, None, [["ok", None], [None, b"x"]]]],
    "header key bin": lambda d, lod: [[d, 0, None, None, [[b"k", b"x"]]]],
    "header key int": lambda d, lod: [[d, 0, None, None, [[1, b"x"]]]],
    "header value str": lambda d, lod: [[d, 0, None, None, [["k", "x"]]]],
    "header value int": lambda d, lod: [[d, 0, None, None, [["k", 0]]]],
    "header pair of 3": lambda d, lod: [[d, 0, None, None, [["k", b"x", None]]]],
    "header pair of 1": lambda d, lod: [[d, 0, None, None, [["k"]]]],
    "header pair a map": lambda d, lod: [[d, 0, None, None, [{"k": b"x"}]]],
    "header key bad utf-8": lambda d, lod: [_utf8_key_record(d, b"\xff\xfe")],
    "header key utf-8 surrogate": lambda d, lod: [_utf8_key_record(d, b"\xed\xa0\x80")],
    "uint64 max delta": lambda d, lod: [[2**64 - 1, 0, None, None, []]],
    "delta 2**63": lambda d, lod: [[2**63, 0, None, None, []]],
    "tsd 2**63": lambda d, lod: [[d, 2**63, None, None, []]],
    "tsd uint64 max": lambda d, lod: [[d, 2**64 - 1, None, None, []]],
    "negative delta": lambda d, lod: [[-1, 0, None, None, []]],
    "repeated delta": lambda d, lod: [[max(d - 1, 0), 0, None, None, []], [max(d - 1, 0), 0, None, None, []]],
    "delta beyond last_offset_delta": lambda d, lod: [[lod + 1, 0, None, None, []]],
    "record of 4": lambda d, lod: [[d, 0, None, None]],
    "record of 6": lambda d, lod: [[d, 0, None, None, [], None]],
    "record a bin of 5": lambda d, lod: [b"abcde"],
    "record a str of 5": lambda d, lod: ["abcde"],
    "record nil": lambda d, lod: [None],
    "record an int": lambda d, lod: [d],
    "reserved byte 0xc1 as key": lambda d, lod: [Raw(b"\x95" + _ref_pack(d) + b"\x00\xc1\xc0\x90")],
    "bin16 key running past the end": lambda d, lod: [Raw(b"\x95" + _ref_pack(d) + b"\x00\xc5\x01\x00ab")],
    "truncated inside a record": lambda d, lod: [Raw(_ref_pack([d, 0, b"key", b"value", [["h", b"x"]]])[:-3])],
    "trailing byte": lambda d, lod: [[d, 0, None, None, []], Raw(b"\xc0")],
    "trailing record": lambda d, lod: [[d, 0, None, None, []], Raw(_ref_pack([d + 1, 0, None, None, []]))],
}


_COUNT_AND_BODY = ["array says more", "array says fewer", "header says more", "header says fewer",
                   "body a map", "body a bin", "body nil", "empty payload"]


def _bad_batch(name: str, prefix: list) -> bytes:
    """The batch of case ``name``: ``prefix`` (good records, deltas 0..k-1), then the problem."""
    d = len(prefix)
    if name in _BAD:
        lod = d + 2
        items = prefix + _BAD[name](d, lod)
        count = len(prefix) + 1 if name.startswith("trailing") else len(items)
        return _wrap(_payload(items, count), count, lod)
    items = prefix + [[d, 7, None, b"z", [["k", None]]]]
    n = len(items)
    payload, count = {
        "array says more": (_payload(items, n + 1), n + 1),
        "array says fewer": (_payload(items, n - 1), n - 1),
        "header says more": (_payload(items), n + 1),
        "header says fewer": (_payload(items), n - 1),
        "body a map": (_ref_pack({0: items[0]}), 1),
        "body a bin": (_ref_pack(b"\x95" * 6), 1),
        "body nil": (b"\xc0", 0),
        "empty payload": (b"", 0),
    }[name]
    return _wrap(payload, count, n + 1)


def _fixed_records(n: int, first: int, key, value, nh: int = 1) -> list:
    return [(i, 1_000 + i, key(i), value(i), tuple((f"h{j}", None if (i + j) % 2 else b"x") for j in range(nh)))
            for i in range(n)][first:]


# (before, prefix, after), chosen so that rows before the bad batch are / are not a multiple of 8,
# keys already have a bitmap, values get their first nulls in the bad batch (and must lose them),
# and the bad batch crosses a bitmap byte; `after` puts nulls where the bad batch had non-nulls.
_SCENARIOS = {
    "5 rows before, 3 in prefix": (
        [rb.encode_batch(0, _fixed_records(5, 0, lambda i: None if i % 2 else b"k", lambda i: b"v"))],
        [[i, i, b"key", None if i == 1 else b"v", [["h", None], ["g", b"x"]]] for i in range(3)],
        [rb.encode_batch(9, _fixed_records(6, 0, lambda i: None if i < 3 else b"K", lambda i: None if i % 3 else b"V"))]),
    "8 rows before, empty prefix": (
        [rb.encode_batch(0, _fixed_records(8, 0, lambda i: None, lambda i: b"v", nh=0))],
        [],
        [rb.encode_batch(9, _fixed_records(9, 0, lambda i: b"k" if i % 2 else None, lambda i: None, nh=2))]),
    "13 rows before (2 batches), 11 in prefix": (
        [rb.encode_batch(0, _fixed_records(6, 0, lambda i: None, lambda i: b"v" * i)),
         rb.encode_batch(6, _fixed_records(7, 0, lambda i: b"k", lambda i: b"w", nh=3), last_offset_delta=9)],
        [[i, -i, b"k%d" % i, None if i % 2 else b"", [["é", None]] * (i % 3)] for i in range(11)],
        [rb.encode_batch(20, _fixed_records(12, 0, lambda i: None if i % 4 else b"a", lambda i: None if i % 5 else b"b"))]),
    "16 rows before, 10 in prefix": (
        [rb.encode_batch(0, _fixed_records(16, 0, lambda i: None if i == 3 else b"k", lambda i: None if i == 15 else b"v"))],
        [[i, i, b"k", b"v", [["h", b""], ["i", None]]] for i in range(10)],
        [rb.encode_batch(30, _fixed_records(10, 0, lambda i: None, lambda i: None, nh=2))]),
}


@needs_c
@pytest.mark.parametrize("scenario", list(_SCENARIOS))
@pytest.mark.parametrize("name", list(_BAD) + _COUNT_AND_BODY)
def test_malformed_batch_rejected_by_both_and_rolled_back(name, scenario):
    before, prefix, after = _SCENARIOS[scenario]
    _check_agreement(before, _bad_batch(name, prefix), after, must_reject=True)


@needs_c
@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(list(_BAD) + _COUNT_AND_BODY), before=_good_before, after=_good_after,
       prefix=_prefix())
def test_malformed_batch_rejected_by_both_and_rolled_back_generated(name, before, after, prefix):
    _check_agreement(before, _bad_batch(name, prefix), after, must_reject=True)


@needs_c
@settings(max_examples=20, deadline=None)
@given(before=_good_before, after=_good_after, n=st.integers(0, 3))
def test_empty_and_valid_hand_built_payloads_accepted_by_both(before, after, n):
    """The other side of the hand-built cases: the same construction, well-formed, is accepted."""
    items = [[i * 2, -i, None if i % 2 else b"k", None, [["é", None], ["", b""]]] for i in range(n)]
    assert _check_agreement(before, _wrap(_payload(items), n, max(2 * n - 1, 0)), after)


@st.composite
def _mutation(draw):
    """A valid batch and an edit of its payload (which is then re-wrapped with a good CRC)."""
    recs, lod = draw(_batch_spec(max_n=12))
    batch = rb.encode_batch(0, recs, last_offset_delta=lod)
    h = rb.decode_header(batch)
    payload = bytearray(batch[rb.HEADER_SIZE:])
    kind = draw(st.sampled_from(["flip", "flip", "truncate", "insert", "delete", "count"]))
    count = h.record_count
    if kind == "flip":
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(payload) - 1))
            payload[i] ^= draw(st.integers(1, 255))
    elif kind == "truncate":
        del payload[draw(st.integers(0, len(payload) - 1)):]
    elif kind == "insert":
        i = draw(st.integers(0, len(payload)))
        payload[i:i] = draw(st.one_of(st.binary(min_size=1, max_size=4),
                                      st.sampled_from([b"\xc0", b"\x90", b"\xc3", b"\xa1a", b"\xc4\x01z",
                                                       b"\xcf" + b"\xff" * 8, b"\x81\x00\x00"])))
    elif kind == "delete":
        i = draw(st.integers(0, len(payload) - 1))
        del payload[i:i + draw(st.integers(1, 4))]
    else:
        count = max(0, count + draw(st.sampled_from([-1, 1, 2**31 - 1 - count])))
    lod = max(0, lod + draw(st.sampled_from([0, 0, 0, -1, 1])))
    return rb._assemble(0, -1, 0, lod, h.base_timestamp, h.max_timestamp, -1, -1, -1, count, bytes(payload))


@needs_c
@settings(max_examples=200, deadline=None)
@given(before=_good_before, bad=_mutation(), after=_good_after)
def test_mutated_payloads_same_verdict_and_rollback(before, bad, after):
    _check_agreement(before, bad, after)


@needs_c
@settings(max_examples=30, deadline=None)
@given(before=_good_before, spec=_batch_spec(max_n=10, edge_stamps=False), after=_good_after,
       cut=st.integers(1, 40))
def test_batch_running_past_the_buffer_is_rejected_by_both(before, spec, after, cut):
    """add() on a buffer shorter than the header says (an unverified batch)."""
    batch = _encode_all([spec])[0]
    view = memoryview(batch)[:max(rb.HEADER_SIZE, len(batch) - cut)]
    _check_agreement(before, batch, after, must_reject=True, bad_view=view)


@needs_c
@pytest.mark.parametrize("claimed", [2**31 - 1, 2**24, 100])
def test_huge_claimed_record_count_rejected_without_allocating(claimed):
    payload = b"\xdd" + struct.pack(">I", claimed) + _ref_pack([0, 0, None, None, []]) * 3
    batch = _wrap(payload, claimed, 2**31 - 1)
    c, p = _builders()
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError):
            _add(c, batch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    with pytest.raises(CorruptRecordError):
        _add(p, batch)
    assert c.rows == p.rows == 0


# ------------------------------------------------------------------ known differences of the Python path


@needs_c
def test_a_map_record_is_rejected_by_both():
    record = {0: 0, 1: 0, None: 0, b"x": 0, (): 0}   # keys read as delta 0, tsd 1, nil, b"x", []
    _check_agreement([], _wrap(_ref_pack([record]), 1, 0), [], must_reject=True)


@needs_c
def test_nbytes_counts_header_data_on_both_paths():
    batch = rb.encode_batch(0, [(0, 1, b"k", b"v", (("hk", b"hv"),))])
    c, p = _builders()
    _add(c, batch)
    _add(p, batch)
    assert c.nbytes == 6
    assert p.nbytes == c.nbytes
