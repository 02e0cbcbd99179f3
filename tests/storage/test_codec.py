"""The two paths of ``kafkasim.records`` against each other: the C codec
(``kafkasim.records._codec``) and the pure-Python path of ``record_batch``/``columns``, on
Kafka's record batch v2. (The C codec against an independent oracle, kafka-python's builder and
reader, is tests/storage/test_codec_v2.py; this file reuses its corpus of malformed sections.)

- ``encode_records`` / ``encode_records_parts`` / ``encode_trusted_batch`` give the same bytes
  with and without the extension — uncompressed, with every codec, with LogAppendTime — and
  ``encode_batch`` (Python only) gives those bytes too; records the one record rule refuses
  raise the same error, message included, on both paths.
- ``decode_columns``, ``decode_records``, ``iter_records`` and ``scan_records`` agree with each
  other, with what was encoded and across the paths, compressed (gzip, snappy, lz4, zstd) or
  not; in a LogAppendTime batch (attribute 0x08) every record reads as ``max_timestamp``.
- ``ArrowColumnBuilder`` gives the same buffers on both paths, and they decode (pyarrow) to what
  ``decode_columns`` says.
- Every malformed records section of test_codec_v2's ``MALFORMED`` corpus, plain or compressed,
  and random mutations of valid sections, are rejected by both paths with
  ``CorruptRecordError`` naming the file; a rejected batch leaves nothing behind in an
  ``ArrowColumnBuilder`` (rows, bitmaps, offsets), whatever was decoded before the problem.
"""

from __future__ import annotations

import itertools
import struct
import tracemalloc

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkasim.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from kafkasim.records import record_batch as rb
from kafkasim.records.columns import ArrowColumnBuilder
from kafkasim.records.compression import compress
from kafkasim.types import Record
from test_codec_v2 import GOOD, MALFORMED, raw   # the C codec's oracle-tested corpus (same directory)

codec = rb._codec
needs_c = pytest.mark.skipif(not rb.C_CODEC, reason="kafkasim.records._codec not built (see test_c_codec_is_built)")

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
CODECS = [1, 2, 3, 4]   # gzip, snappy, lz4, zstd
LOG_APPEND = rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND


def fuzz(n: int) -> settings:
    """Hypothesis settings of a generated test here: ``n`` examples, no deadline (big blobs)."""
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_c_codec_is_built():
    """The project build compiles the extension; without it every C test below is skipped."""
    assert rb.C_CODEC is True
    assert rb._codec is not None and hasattr(rb._codec, "pack_records") and hasattr(rb._codec, "scan_records")
    assert ArrowColumnBuilder()._c is not None


# ------------------------------------------------------------------ strategies

# zigzag varint width boundaries, both sides, both signs (63/64: 1 -> 2 bytes, 8191/8192: 2 -> 3, ...)
_EDGES = sorted({s * (2 ** (7 * k - 1) + d) for k in range(1, 10) for d in (-1, 0) for s in (1, -1)}
                | {0, 1, -1, INT64_MAX, INT64_MIN})

_BLOB_LENS = [0, 1, 63, 64, 65, 8191, 8192, 8193, 70000]
_STR_LENS = [0, 1, 63, 64, 65, 8191, 8192]
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
_pairs = st.one_of(st.lists(_pair, max_size=3), st.lists(_small_pair, min_size=60, max_size=70))  # count 63/64
_headers = st.one_of(st.just(()), st.just([]), _pairs.map(tuple), _pairs)
_headers_or_none = st.one_of(st.none(), _headers)


@st.composite
def _stamps(draw, n: int, min_value: int = INT64_MIN) -> list:
    """``n`` int64 timestamps >= ``min_value`` whose differences to the first hit varint boundaries."""
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


_compression = st.sampled_from([0, 0, 1, 2, 3, 4])


# ------------------------------------------------------------------ encode_* with and without C


def _outcome(fn, *args, **kw):
    """``("ok", result)`` or ``(exception type name, message)``."""
    try:
        out = fn(*args, **kw)
    except Exception as exc:  # noqa: BLE001 - the point is to compare whatever happens
        return type(exc).__name__, str(exc)
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], rb.BatchHeader):   # encode_records_parts
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
@fuzz(80)
@given(records=_records4(min_ts=0), base=st.integers(0, 2**40), log_append=st.booleans(), compression=_compression)
def test_encode_records_same_bytes_with_and_without_c(records, base, log_append, compression):
    assert codec.pack_records(records, False) is not None   # the C path is really taken
    attrs = LOG_APPEND if log_append else 0
    for fn in (rb.encode_records, rb.encode_records_parts):
        with_c, pure = _both(fn, base, records, attributes=attrs, compression=compression, **_KW)
        assert with_c[0] == "ok", with_c
        assert with_c == pure
    header, batch = with_c[1]
    assert rb.decode_header(batch) == header
    rb.verify(batch, 0, header)
    assert header.attributes == attrs | compression
    stamps = [r[0] for r in records]
    assert (header.base_timestamp, header.max_timestamp) == (stamps[0], max(stamps))
    # encode_batch (the checked Python path) writes the same bytes for deltas 0..n-1
    recs5 = [(i, ts, k, v, h or ()) for i, (ts, k, v, h) in enumerate(records)]
    assert rb.encode_batch(base, recs5, attributes=attrs, compression=compression, **_KW) == batch


@needs_c
@fuzz(80)
@given(records=_records4(max_size=8))
def test_encode_records_same_outcome_for_any_timestamps(records):
    """Negative timestamps anywhere: the same InvalidTimestampError (message included)."""
    with_c, pure = _both(rb.encode_records, 0, records)
    assert with_c == pure
    if min(r[0] for r in records) < 0:
        assert with_c[0] == InvalidTimestampError.__name__ and "negative timestamp" in with_c[1]
    else:
        assert with_c[0] == "ok"


@needs_c
@fuzz(80)
@given(data=st.data(), n=st.integers(1, 18), gaps=st.booleans(), compression=_compression)
def test_encode_trusted_batch_same_bytes_with_and_without_c(data, n, gaps, compression):
    stamps = data.draw(_stamps(n, 0))
    deltas = list(range(n))
    if gaps:   # outside the contract (deltas 0..n-1), still the same bytes on both paths
        deltas = list(itertools.accumulate(data.draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))))
    records = [(d, ts, data.draw(_blob), data.draw(_blob), data.draw(_headers)) for d, ts in zip(deltas, stamps)]
    assert codec.pack_records(records, True) is not None
    with_c, pure = _both(rb.encode_trusted_batch, records, compression=compression, **_KW)
    assert with_c[0] == "ok", with_c
    assert with_c == pure
    if not gaps:
        assert with_c[1] == rb.encode_batch(0, records, compression=compression, **_KW)


class _MyList(list):
    pass


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
    "str key": [(1, "k", b"v", ())],
    "str header value": [(1, b"k", b"v", (("h", "x"),))],
    "bytes header key": [(1, b"k", b"v", ((b"h", b"x"),))],
    "bytearray value": [(1, b"k", bytearray(b"v"), [("h", bytearray(b"x"))])],
    "header pair of 3": [(1, b"k", b"v", (("h", b"x", None),))],
    "headers a dict": [(1, b"k", b"v", {"h": b"x"})],
    "timestamp 2**63": [(1, None, None, ()), (2**63, None, None, ())],
    "list subclass": _MyList([(1, b"k", b"v", ())]),
}


@needs_c
@pytest.mark.parametrize("name", list(_ERROR_CASES))
def test_encode_records_errors_match_the_python_path(name):
    with_c, pure = _both(rb.encode_records, 0, _ERROR_CASES[name])
    assert with_c == pure
    if name == "list subclass":   # declined by C, packed by Python: the same bytes
        assert with_c == ("ok", rb.encode_records(0, [(1, b"k", b"v", ())]))
        return
    if name.startswith("negative"):
        assert with_c[0] == InvalidTimestampError.__name__
    elif name.startswith(("None", "float", "bool", "timestamp")):
        assert with_c[0] in (InvalidTimestampError.__name__, InvalidRecordError.__name__)
    else:
        assert with_c[0] == InvalidRecordError.__name__, with_c
    if name == "negative timestamp later":
        assert with_c[1] == "negative timestamp -3 at offset delta 2"
    if name == "negative timestamp twice":
        assert with_c[1] == "negative timestamp -9 at offset delta 1"
    if name == "str key":
        assert with_c[1] == "record 0: key must be bytes or None, got str: 'k'"


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
    if records and records[0][4] is None:   # no headers, as () (the C codec declines, Python writes 0)
        assert with_c == ("ok", rb.encode_trusted_batch([(0, 1, None, None, ())]))
    else:
        assert with_c[0] == InvalidRecordError.__name__


# ------------------------------------------------------------------ the decoders, on both paths


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


def _encode_all(specs, base: int = 0, compression: int = 0, attributes: int = 0) -> list:
    """Each spec as its own batch bytes, base offsets continuing, producer fields set."""
    out = []
    for i, (recs, lod) in enumerate(specs):
        out.append(rb.encode_batch(base, recs, last_offset_delta=lod, compression=compression,
                                   attributes=attributes, producer_id=77, producer_epoch=3,
                                   base_sequence=(2**31 - 3 + 100 * i) % 2**31))   # one wraps past int32
        base += lod + 1
    return out


def _decoded(segment, where: str = "<test>") -> list:
    """Every decoder's reading of every batch of ``segment``."""
    out = []
    for pos, h in rb.iter_batches(segment):
        out.append((rb.decode_columns(segment, pos, h, where=where), rb.decode_records(segment, pos, h, where=where),
                    list(rb.iter_records(segment, pos, h, where=where)), rb.scan_records(segment, pos, h, where=where)))
    return out


def _expected_reading(specs, segment, log_append: bool) -> list:
    """What the decoders must say about ``_encode_all(specs)``, from the encoder's input."""
    out = []
    for (recs, _), (_, h) in zip(specs, rb.iter_batches(segment)):
        ts0 = recs[0][1]
        deltas = tuple(r[0] for r in recs)
        real_tsds = tuple(r[1] - ts0 for r in recs)
        tsds = (h.max_timestamp - ts0,) * len(recs) if log_append else real_tsds
        cols = (deltas, tsds, tuple(r[2] for r in recs), tuple(r[3] for r in recs), tuple(tuple(r[4]) for r in recs))
        rows = [list(r) for r in zip(*cols)]
        records = [Record(h.base_offset + d, ts0 + tsd, k, v, hd, 77, 3, (h.base_sequence + d) % 2**31)
                   for d, tsd, k, v, hd in zip(*cols)]
        keys = cols[2]
        scan = (min(real_tsds), max(real_tsds), keys.count(None), deltas == tuple(range(len(recs))))
        out.append((cols, rows, records, scan))
    return out


@needs_c
@fuzz(60)
@given(specs=st.lists(_batch_spec(), min_size=1, max_size=4), compression=_compression, log_append=st.booleans())
def test_decoders_agree_with_each_other_and_across_paths(specs, compression, log_append):
    """decode_columns == decode_records == iter_records (and scan_records) == the encoder's input, C and Python."""
    segment = b"".join(_encode_all(specs, compression=compression, attributes=LOG_APPEND if log_append else 0))
    with_c, pure = _both(_decoded, segment)
    assert with_c[0] == "ok", with_c
    assert with_c == pure
    assert with_c[1] == _expected_reading(specs, segment, log_append)


@needs_c
@pytest.mark.parametrize("compression", CODECS)
def test_compressed_batches_decode_the_same_on_both_paths(compression):
    recs = [(0, 1_000, b"k" * 100, b"v" * 5000, (("h", None), ("é", b"x" * 70))),
            (1, 900, None, None, ()), (4, 70_000, b"", b"w" * 9000, (("", b""),) * 70)]
    plain = rb.encode_batch(10, recs, last_offset_delta=6)
    packed = rb.encode_batch(10, recs, last_offset_delta=6, compression=compression)
    h = rb.decode_header(packed)
    assert h.attributes & rb.ATTR_COMPRESSION_MASK == compression
    assert len(packed) < len(plain)                                   # really compressed
    assert bytes(rb.records_section(packed, 0, h)) == plain[rb.HEADER_SIZE:]
    expected = _decoded(plain)
    with_c, pure = _both(_decoded, packed)
    assert with_c == pure == ("ok", expected)
    c, p = _builders()
    _add(c, packed)
    _add(p, packed)
    ref, _ = _builders()
    _add(ref, plain)
    assert c.take() == p.take() == ref.take()


def _log_append_batch(recs, append_time: int, compression: int) -> bytes:
    """A LogAppendTime batch as the broker writes it: ``max_timestamp`` is the append time,
    later than every record's own timestamp, which stays in the records."""
    created = rb.encode_batch(0, recs, attributes=LOG_APPEND)
    h = rb.decode_header(created)
    section = compress(compression, created[rb.HEADER_SIZE:])
    return rb._assemble(0, -1, LOG_APPEND | compression, h.last_offset_delta, h.base_timestamp, append_time,
                        -1, -1, -1, h.record_count, section)


@needs_c
@pytest.mark.parametrize("compression", [0] + CODECS)
def test_log_append_time_every_record_reads_as_max_timestamp_on_both_paths(compression):
    recs = [(0, 1_000, b"a", b"x", ()), (1, 5_000, None, b"y", (("h", None),)), (3, 3_000, b"c", None, ())]
    batch = _log_append_batch(recs, 9_000, compression)
    h = rb.decode_header(batch)
    rb.verify(batch, 0, h)
    assert rb.timestamp_delta_override(h) == 8_000

    def read(buf):
        cols = rb.decode_columns(buf, 0, h)
        return cols[1], [r.timestamp for r in rb.iter_records(buf, 0, h)], \
            [r[1] for r in rb.decode_records(buf, 0, h)]

    with_c, pure = _both(read, batch)
    assert with_c == pure == ("ok", ((8_000,) * 3, [9_000] * 3, [8_000] * 3))
    for b in _builders():
        _add(b, batch)
        assert _int64s(b.take()["timestamp_deltas"]) == [8_000] * 3
    # a CreateTime batch of the same records reads each record's own timestamp
    create = rb.encode_batch(0, recs, compression=compression)
    assert [r.timestamp for r in rb.iter_records(create, 0, rb.decode_header(create))] == [1_000, 5_000, 3_000]


# ------------------------------------------------------------------ ArrowColumnBuilder: C vs Python


def _builders() -> tuple:
    c = ArrowColumnBuilder()
    assert c._c is not None
    p = ArrowColumnBuilder()
    p._c = None
    return c, p


def _add(builder, batch, where="<test>", header=None):
    h = rb.decode_header(batch) if header is None else header
    return builder.add(batch, 0, h, where=where)


@needs_c
@fuzz(60)
@given(specs=st.lists(_batch_spec(), min_size=1, max_size=5), split=st.integers(0, 6),
       buftype=st.sampled_from([bytes, bytearray, memoryview]), compression=_compression, log_append=st.booleans())
def test_arrow_builder_c_equals_python(specs, split, buftype, compression, log_append):
    segment = b"".join(_encode_all(specs, compression=compression, attributes=LOG_APPEND if log_append else 0))
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
@fuzz(40)
@given(specs=st.lists(_batch_spec(), min_size=1, max_size=5), compression=_compression)
def test_arrow_builder_buffers_mean_what_decode_columns_says(specs, compression):
    batches = _encode_all(specs, compression=compression)
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


@needs_c
def test_nbytes_counts_header_data_on_both_paths():
    batch = rb.encode_batch(0, [(0, 1, b"k", b"v", (("hk", b"hv"), ("é", None)))])
    c, p = _builders()
    _add(c, batch)
    _add(p, batch)
    assert c.nbytes == 2 + 4 + 2   # key, value, "hk" + b"hv", "é" (2 UTF-8 bytes)
    assert p.nbytes == c.nbytes


# ------------------------------------------------------------------ malformed batches: both paths reject, roll back


def _wrap(section: bytes, count: int, lod: int, compression: int = 0) -> tuple[bytes, rb.BatchHeader]:
    """A batch around ``section`` (compressed with ``compression``) with a correct length and
    CRC, the records unchecked; and its header, unchecked too (a negative record count would
    stop ``decode_header`` before the records are looked at)."""
    header, parts = rb._assemble_parts(0, -1, compression, lod, 1_000, 1_000, -1, -1, -1, count,
                                       compress(compression, section))
    return b"".join(parts), header


def _readers_reject(batch: bytes, header: rb.BatchHeader) -> None:
    """Every decoder, on the current path, raises CorruptRecordError naming the file and position."""
    for fn in (rb.decode_columns, rb.decode_records, rb.scan_records,
               lambda *a, **k: list(rb.iter_records(*a, **k))):
        with pytest.raises(CorruptRecordError, match=r"^bad\.log: .*position 0"):
            fn(batch, 0, header, where="bad.log")


def _run(builder, before, bad, bad_header, after):
    """Add before, then bad (maybe rejected), then after; return (accepted, take())."""
    for b in before:
        _add(builder, b)
    rows0, nbytes0 = builder.rows, builder.nbytes
    try:
        builder.add(bad, 0, bad_header, where="bad.log")
        accepted = True
    except CorruptRecordError as exc:
        assert "bad.log" in str(exc)
        assert (builder.rows, builder.nbytes) == (rows0, nbytes0)
        accepted = False
    for b in after:
        _add(builder, b)
    return accepted, builder.take()


def _check_agreement(before, bad, after, must_reject: bool = False, bad_header=None) -> bool:
    """C and Python builders accept or reject ``bad`` together and hold the same buffers after;
    a rejected batch leaves exactly what adding only ``before`` and ``after`` leaves."""
    bad_header = rb.decode_header(bad) if bad_header is None else bad_header
    c, p = _builders()
    acc_c, take_c = _run(c, before, bad, bad_header, after)
    acc_p, take_p = _run(p, before, bad, bad_header, after)
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


def _fixed_records(n: int, key, value, nh: int = 1) -> list:
    return [(i, 1_000 + i, key(i), value(i), tuple((f"h{j}", None if (i + j) % 2 else b"x") for j in range(nh)))
            for i in range(n)]


# (before, after), chosen so that rows before the bad batch are / are not a multiple of 8, keys
# already have a bitmap, values get their first nulls in the bad batch (MALFORMED's GOOD prefix
# has a null key, a null value and a null header value) and must lose them, and `after` puts
# nulls where the bad batch had non-nulls.
_SCENARIOS = {
    "nothing before": ([], [rb.encode_batch(0, _fixed_records(3, lambda i: b"k", lambda i: b"v"))]),
    "5 rows before": (
        [rb.encode_batch(0, _fixed_records(5, lambda i: None if i % 2 else b"k", lambda i: b"v"))],
        [rb.encode_batch(9, _fixed_records(6, lambda i: None if i < 3 else b"K", lambda i: None if i % 3 else b"V"))]),
    "8 rows before": (
        [rb.encode_batch(0, _fixed_records(8, lambda i: None, lambda i: b"v", nh=0))],
        [rb.encode_batch(9, _fixed_records(9, lambda i: b"k" if i % 2 else None, lambda i: None, nh=2))]),
    "13 rows before (2 batches, one compressed)": (
        [rb.encode_batch(0, _fixed_records(6, lambda i: None, lambda i: b"v" * i)),
         rb.encode_batch(6, _fixed_records(7, lambda i: b"k", lambda i: b"w", nh=3), last_offset_delta=9,
                         compression=4)],
        [rb.encode_batch(20, _fixed_records(12, lambda i: None if i % 4 else b"a",
                                            lambda i: None if i % 5 else b"b"))]),
}


@needs_c
@pytest.mark.parametrize("scenario", list(_SCENARIOS))
@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_batch_rejected_by_both_paths_and_rolled_back(name, scenario):
    bad, header = _wrap(*MALFORMED[name])
    if header.record_count >= 0:
        assert rb.decode_header(bad) == header
    rb.verify(bad, 0, header)   # the CRC is right: the records are what is wrong
    with_c, pure = _both(_readers_reject, bad, header)
    assert with_c == pure == ("ok", None)
    before, after = _SCENARIOS[scenario]
    _check_agreement(before, bad, after, must_reject=True, bad_header=header)


@needs_c
@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_compressed_batch_rejected_by_both_paths_and_rolled_back(name, compression):
    bad, header = _wrap(*MALFORMED[name], compression=compression)
    with_c, pure = _both(_readers_reject, bad, header)
    assert with_c == pure == ("ok", None)
    before, after = _SCENARIOS["5 rows before"]
    _check_agreement(before, bad, after, must_reject=True, bad_header=header)


@needs_c
@pytest.mark.parametrize("compression", [0] + CODECS)
@pytest.mark.parametrize("section, count, lod", [
    (GOOD + raw(2), 3, 2), (GOOD + raw(2), 3, 9), (GOOD, 2, 1), (b"", 0, 0)],
    ids=["three records", "last_offset_delta beyond", "two records", "no records"])
def test_well_formed_hand_built_batches_accepted_by_both(section, count, lod, compression):
    """The other side of the malformed cases: the same construction, well-formed, is accepted."""
    batch, header = _wrap(section, count, lod, compression)
    with_c, pure = _both(_decoded, batch)
    assert with_c[0] == "ok"
    assert with_c == pure
    assert with_c[1][0][0][0] == (0, 1, 2)[:count]
    before, after = _SCENARIOS["5 rows before"]
    assert _check_agreement(before, batch, after, bad_header=header)


_good_before = st.lists(_batch_spec(null_keys=True, max_n=10, edge_stamps=False),
                        min_size=1, max_size=2).map(lambda s: _encode_all(s, 0))
_good_after = st.lists(_batch_spec(max_n=10, edge_stamps=False),
                       min_size=1, max_size=2).map(lambda s: _encode_all(s, 10_000))


@needs_c
@fuzz(100)
@given(name=st.sampled_from(sorted(MALFORMED)), compression=_compression, before=_good_before, after=_good_after)
def test_malformed_batch_rejected_by_both_and_rolled_back_generated(name, compression, before, after):
    bad, header = _wrap(*MALFORMED[name], compression=compression)
    _check_agreement(before, bad, after, must_reject=True, bad_header=header)


@st.composite
def _mutation(draw):
    """A valid batch and an edit of its records section (re-wrapped with a good CRC, maybe
    compressed after the edit), or of its compressed bytes."""
    recs, lod = draw(_batch_spec(max_n=12))
    batch = rb.encode_batch(0, recs, last_offset_delta=lod)
    h = rb.decode_header(batch)
    compression = draw(_compression)
    section = bytearray(batch[rb.HEADER_SIZE:])
    if compression and draw(st.booleans()):
        section = bytearray(compress(compression, bytes(section)))   # edit the compressed bytes
        packed = True
    else:
        packed = False
    kind = draw(st.sampled_from(["flip", "flip", "truncate", "insert", "delete", "count"]))
    count = h.record_count
    if kind == "flip":
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(section) - 1))
            section[i] ^= draw(st.integers(1, 255))
    elif kind == "truncate":
        del section[draw(st.integers(0, len(section) - 1)):]
    elif kind == "insert":
        i = draw(st.integers(0, len(section)))
        section[i:i] = draw(st.one_of(st.binary(min_size=1, max_size=4),
                                      st.sampled_from([b"\x00", b"\x01", b"\x02", b"\x7f", b"\x80" * 6,
                                                       b"\xff" * 10 + b"\x01", b"\x03\x00\x00\x00"])))
    elif kind == "delete":
        i = draw(st.integers(0, len(section) - 1))
        del section[i:i + draw(st.integers(1, 4))]
    else:
        count = max(0, count + draw(st.sampled_from([-1, 1, 2**31 - 1 - count])))
    lod = max(0, lod + draw(st.sampled_from([0, 0, 0, -1, 1])))
    section = bytes(section) if packed else compress(compression, bytes(section))
    return rb._assemble(0, -1, compression, lod, h.base_timestamp, h.max_timestamp, -1, -1, -1, count, section)


@needs_c
@fuzz(200)
@given(before=_good_before, bad=_mutation(), after=_good_after)
def test_mutated_batches_same_verdict_and_rollback(before, bad, after):
    accepted = _check_agreement(before, bad, after)
    with_c, pure = _both(_decoded, bad)
    assert with_c[0] == pure[0] == ("ok" if accepted else "CorruptRecordError")
    if accepted:
        assert with_c == pure


@needs_c
@fuzz(30)
@given(before=_good_before, spec=_batch_spec(max_n=10, edge_stamps=False), after=_good_after,
       cut=st.integers(1, 40))
def test_batch_running_past_the_buffer_is_rejected_by_both(before, spec, after, cut):
    """add() on a buffer shorter than the header says (an unverified batch)."""
    batch = _encode_all([spec])[0]
    view = memoryview(batch)[:max(rb.HEADER_SIZE, len(batch) - cut)]
    c, p = _builders()
    outcomes = []
    for b in (c, p):
        for x in before:
            _add(b, x)
        rows0 = b.rows
        with pytest.raises(CorruptRecordError):
            b.add(view, 0, rb.decode_header(batch))
        assert b.rows == rows0
        for x in after:
            _add(b, x)
        outcomes.append(b.take())
    assert outcomes[0] == outcomes[1]


@needs_c
@pytest.mark.parametrize("claimed", [2**31 - 1, 2**24, 100])
def test_huge_claimed_record_count_rejected_without_allocating(claimed):
    section = raw(0) + raw(1) + raw(2)
    batch, header = _wrap(section, claimed, 2**31 - 1)
    c, p = _builders()
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError):
            _add(c, batch, header=header)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    with pytest.raises(CorruptRecordError):
        _add(p, batch, header=header)
    assert c.rows == p.rows == 0
    with_c, pure = _both(_readers_reject, batch, header)
    assert with_c == pure == ("ok", None)
