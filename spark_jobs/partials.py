"""Partial aggregates of the log, computed where the records are decoded: one scan feeds every audit.

The ordering, skew and lag audits need per-record data only for a few checks; everything
else they report is a sum, a minimum or a maximum over groups of records. The kafkasim data
source's ``mode=partials`` (``spark.read.format("kafkasim").option("mode", "partials")
.option("partials", spec.to_json())``) runs :func:`partition_partials` in each scan task, on
the decoded rows of each (topic, partition) the task reads, and ships only these rows to the
JVM — the map-side half of a Spark aggregation, done before the Python → JVM hand-over that
costs most of a scan. Spark then combines them (sums, mins, maxes) exactly as it would have
aggregated the records. Rows (``PARTIALS_SCHEMA``), by ``kind``:

- ``key``: per (topic, partition, key, producer_id, client_id) — key null for keyless
  records; ``producer_id`` the batch's, null when < 0; ``client_id`` the last
  ``kafkasim.producer`` header: ``records``, ``bytes`` (key + value + header keys and
  values), ``first_ts``/``first_ts_offset`` (the first record by (timestamp, offset)),
  ``min_offset``/``min_offset_ts``, ``max_offset``/``max_offset_ts``.
- ``window``: per (topic, partition, ``window_start``): ``records`` in the tumbling window
  ``[window_start, window_start + window_ms)`` of record timestamps.
- ``record``: the records the sequence and input-order checks read, whole (``offset``,
  ``timestamp``, ``key``, ``headers``, ``producer_id``; ``value`` only for
  ``sequence=value:FIELD``): keyed records with a ``kafkasim.seq`` or a ``kafkasim-input``
  header (``sequence=header``), or every keyed record (``value:FIELD``). None when the
  spec's ``sequence`` is None.
- ``next``: per committed offset ``mark`` of the spec for this partition, the first record
  at or after it: ``found_offset``, ``found_ts`` (no row when none is in this task).
- ``end``: per commit time ``mark`` of the spec for this partition, the highest offset of
  a record whose timestamp is at most ``mark``: ``found_offset``.

Combining partial rows of the same group (several tasks or pieces read one partition):
sums of ``records``/``bytes``; the least (``first_ts``, ``first_ts_offset``); the least
``min_offset`` with its ``min_offset_ts``; the greatest ``max_offset`` with its
``max_offset_ts``; for ``next`` the least ``found_offset`` with its ``found_ts``; for ``end``
the greatest ``found_offset``. Every combination is exact: the result equals the
aggregate over the records themselves (the tests check it against the record-level
transforms).

Pure functions of numpy/pyarrow data; thread-safe.
"""

from __future__ import annotations

import json
from typing import Iterable, NamedTuple, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkasim.errors import InvalidArgumentError
from kafkasim.spark_jobs.arrow_rows import _HEADER_TYPE
from kafkasim.types import INPUT_HEADER, PRODUCER_HEADER, SEQUENCE_HEADER

__all__ = ["PARTIALS_SCHEMA", "READ_COLUMNS", "Spec", "partition_partials", "KINDS"]

KINDS = ("key", "window", "record", "next", "end")

_FIELDS = [
    ("kind", pa.string(), "string"), ("topic", pa.string(), "string"), ("partition", pa.int32(), "int"),
    ("key", pa.binary(), "binary"), ("producer_id", pa.int64(), "long"), ("client_id", pa.string(), "string"),
    ("window_start", pa.int64(), "long"), ("records", pa.int64(), "long"), ("bytes", pa.int64(), "long"),
    ("first_ts", pa.int64(), "long"), ("first_ts_offset", pa.int64(), "long"),
    ("min_offset", pa.int64(), "long"), ("min_offset_ts", pa.int64(), "long"),
    ("max_offset", pa.int64(), "long"), ("max_offset_ts", pa.int64(), "long"),
    ("offset", pa.int64(), "long"), ("timestamp", pa.int64(), "long"), ("value", pa.binary(), "binary"),
    ("headers", _HEADER_TYPE, "array<struct<key:string,value:binary>>"),
    ("mark", pa.int64(), "long"), ("found_offset", pa.int64(), "long"), ("found_ts", pa.int64(), "long"),
]
PARTIALS_SCHEMA = ", ".join(f"{n} {ddl}" for n, _, ddl in _FIELDS)
"""The DDL of ``mode=partials`` rows (see the module docstring)."""
ARROW_SCHEMA = pa.schema([(n, t) for n, t, _ in _FIELDS])

READ_COLUMNS = ["offset", "timestamp", "key", "value", "headers", "producer_id"]
"""The data source columns :func:`partition_partials` reads (topic and partition are the piece's)."""


class Spec(NamedTuple):
    """What a partials scan computes besides the ``key`` rows (JSON in the ``partials`` option).

    ``window_ms``: the ``window`` rows' width (None: no window rows). ``sequence``: None (no
    ``record`` rows), ``header`` or ``value:FIELD``. ``marks``: ``{(topic, partition):
    ([committed offsets], [commit times])}`` for the ``next`` and ``end`` rows.
    """

    window_ms: Optional[int] = None
    sequence: Optional[str] = None
    marks: dict = {}

    def to_json(self) -> str:
        return json.dumps({"window_ms": self.window_ms, "sequence": self.sequence,
                           "marks": [[t, p, sorted(set(nx)), sorted(set(en))]
                                     for (t, p), (nx, en) in sorted(self.marks.items())]})

    @classmethod
    def from_json(cls, text: Optional[str]) -> "Spec":
        if not text:
            return cls()
        try:
            raw = json.loads(text)
            spec = cls(window_ms=raw.get("window_ms"), sequence=raw.get("sequence"),
                       marks={(str(t), int(p)): ([int(x) for x in nx], [int(x) for x in en])
                              for t, p, nx, en in raw.get("marks", ())})
        except (ValueError, TypeError, AttributeError) as exc:
            raise InvalidArgumentError(f"option partials is not a partials spec: {text[:200]!r} ({exc})") from None
        if spec.window_ms is not None and (not isinstance(spec.window_ms, int) or spec.window_ms <= 0):
            raise InvalidArgumentError(f"partials window_ms must be a positive integer, got {spec.window_ms!r}")
        if spec.sequence is not None and spec.sequence != "header" and not (
                spec.sequence.startswith("value:") and len(spec.sequence) > 6):
            raise InvalidArgumentError(f"sequence source must be 'header' or 'value:FIELD', got {spec.sequence!r}")
        return spec


def _np(a) -> np.ndarray:
    return a.to_numpy(zero_copy_only=False) if not isinstance(a, np.ndarray) else a


def _lengths(col) -> np.ndarray:
    return _np(pc.fill_null(pc.binary_length(col), 0)).astype(np.int64, copy=False)


def _header_facts(headers: pa.Array, n: int) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """Per row: header bytes, the last ``kafkasim.producer`` value (string, null if none),
    and whether a ``kafkasim.seq`` or a ``kafkasim-input`` header is present (a record the
    sequence or input-order checks read)."""
    nbytes = np.zeros(n, dtype=np.int64)
    has_seq = np.zeros(n, dtype=bool)
    flat = pc.list_flatten(headers)
    if len(flat) == 0:
        return nbytes, pa.nulls(n, pa.string()), has_seq
    rows = _np(pc.list_parent_indices(headers))
    hk, hv = flat.field("key"), flat.field("value")
    np.add.at(nbytes, rows, _lengths(hk) + _lengths(hv))
    is_prod = _np(pc.fill_null(pc.equal(hk, PRODUCER_HEADER), False))
    checked = pc.or_(pc.equal(hk, SEQUENCE_HEADER), pc.equal(hk, INPUT_HEADER))
    has_seq[rows[_np(pc.fill_null(checked, False))]] = True
    client = pa.nulls(n, pa.string())
    if is_prod.any():
        idx = np.nonzero(is_prod)[0]
        owner = rows[idx]
        last = np.r_[owner[1:] != owner[:-1], True]          # the last producer header of each row
        idx, owner = idx[last], owner[last]
        slots = np.full(n, -1, dtype=np.int64)
        slots[owner] = idx
        vals = pc.cast(hv.take(pa.array(np.where(slots >= 0, slots, 0))), pa.string(), safe=False)
        client = pc.if_else(pa.array(slots >= 0), vals, pa.nulls(n, pa.string()))
    return nbytes, client, has_seq


def _codes(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Dense codes of ``arr`` (nulls get their own code) and the distinct values by code."""
    enc = pc.dictionary_encode(arr, null_encoding="encode")
    return _np(enc.indices).astype(np.int64, copy=False), enc.dictionary


def _first_of_groups(gid: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Row index of the first row of each group (groups numbered 0..G-1) in ``order``."""
    _, idx = np.unique(gid[order], return_index=True)   # groups are 0..G-1, all present
    return order[idx]


def partition_partials(topic: str, partition: int, t: pa.Table, spec: Spec) -> pa.Table:
    """The partial rows (``ARROW_SCHEMA``) of records ``t`` (``READ_COLUMNS``, offset order)
    of one topic partition."""
    n = t.num_rows
    if n == 0:
        return ARROW_SCHEMA.empty_table()
    off = _np(t.column("offset").combine_chunks()).astype(np.int64, copy=False)
    ts = _np(t.column("timestamp").combine_chunks()).astype(np.int64, copy=False)
    ts_sorted = n < 2 or bool(np.all(ts[1:] >= ts[:-1]))
    key = t.column("key").combine_chunks()
    headers = t.column("headers").combine_chunks()
    hbytes, client, has_seq = _header_facts(headers, n)
    size = _lengths(key) + _lengths(t.column("value").combine_chunks()) + hbytes
    pid = _np(t.column("producer_id").combine_chunks()).astype(np.int64, copy=False)

    kcode, kvals = _codes(key)
    ccode, cvals = _codes(client)
    if pid.min() == pid.max():
        pvals, pcode = pid[:1], np.zeros(n, dtype=np.int64)
    else:
        pvals, pcode = np.unique(pid, return_inverse=True)
    if len(cvals) == 1 and len(pvals) == 1:
        # one producer identity (the common case): the groups are the key codes, numbered by
        # dictionary_encode in order of first appearance — no sort needed
        gid, g = kcode, len(kvals)
        first_idx = np.nonzero(np.r_[True, kcode[1:] > np.maximum.accumulate(kcode)[:-1]])[0]
        last_idx = np.empty(g, dtype=np.int64)
        last_idx[kcode] = np.arange(n)                       # repeated indices: the last write stays
    else:
        gid_raw = (kcode * len(cvals) + ccode) * len(pvals) + pcode
        groups, first_idx, gid = np.unique(gid_raw, return_index=True, return_inverse=True)
        g = len(groups)
        last_idx = _first_of_groups(gid, np.arange(n - 1, -1, -1))
    if ts_sorted:
        first_ts_idx = first_idx                     # timestamps in offset order: the first row is first
    else:
        first_ts_idx = _first_of_groups(gid, np.lexsort((off, ts)))
    records = np.bincount(gid, minlength=g).astype(np.int64)
    nbytes = np.bincount(gid, weights=size, minlength=g).astype(np.int64)
    gk = kcode[first_idx]
    key_col = kvals.take(pa.array(gk))
    gp = pid[first_idx]
    cols = {
        "kind": pa.array(["key"] * g, pa.string()),
        "key": key_col,
        "producer_id": pa.array(gp, pa.int64(), mask=gp < 0),
        "client_id": cvals.take(pa.array(ccode[first_idx])),
        "records": records, "bytes": nbytes,
        "first_ts": ts[first_ts_idx], "first_ts_offset": off[first_ts_idx],
        "min_offset": off[first_idx], "min_offset_ts": ts[first_idx],
        "max_offset": off[last_idx], "max_offset_ts": ts[last_idx],
    }
    parts = [_table(topic, partition, g, cols)]
    if spec.window_ms:
        starts = np.floor_divide(ts, spec.window_ms) * spec.window_ms
        if ts_sorted:                                       # runs of equal starts, no sort
            edges = np.r_[0, np.nonzero(starts[1:] != starts[:-1])[0] + 1, n]
            ws, wc = starts[edges[:-1]], np.diff(edges)
        else:
            ws, wc = np.unique(starts, return_counts=True)
        parts.append(_table(topic, partition, len(ws), {"kind": pa.array(["window"] * len(ws), pa.string()),
                                                       "window_start": ws, "records": wc.astype(np.int64)}))
    if spec.sequence:
        keyed = _np(pc.is_valid(key))
        pick = np.nonzero(keyed & (has_seq if spec.sequence == "header" else True))[0]
        if len(pick):
            take = pa.array(pick)
            cols = {"kind": pa.array(["record"] * len(pick), pa.string()), "offset": off[pick], "timestamp": ts[pick],
                    "key": key.take(take), "headers": headers.take(take), "producer_id": pid[pick]}
            if spec.sequence != "header":
                cols["value"] = t.column("value").combine_chunks().take(take)
            parts.append(_table(topic, partition, len(pick), cols))
    nxt, ends = spec.marks.get((topic, partition), ((), ()))
    if len(nxt):
        marks = np.asarray(sorted(nxt), dtype=np.int64)
        at = np.searchsorted(off, marks, side="left")          # offsets ascend within a partition
        ok = at < n
        m, at = marks[ok], at[ok]
        parts.append(_table(topic, partition, len(m), {"kind": pa.array(["next"] * len(m), pa.string()),
                                                      "mark": m, "found_offset": off[at], "found_ts": ts[at]}))
    if len(ends):
        marks = np.asarray(sorted(ends), dtype=np.int64)
        order = np.argsort(ts, kind="stable")
        best = np.maximum.accumulate(off[order])
        at = np.searchsorted(ts[order], marks, side="right")
        ok = at > 0
        m = marks[ok]
        parts.append(_table(topic, partition, len(m), {"kind": pa.array(["end"] * len(m), pa.string()),
                                                      "mark": m, "found_offset": best[at[ok] - 1]}))
    return pa.concat_tables([t for t in parts if t.num_rows])


def _table(topic: str, partition: int, n: int, cols: dict) -> pa.Table:
    arrays = []
    for name, typ, _ in _FIELDS:
        if name == "topic":
            arrays.append(pa.array([topic] * n, pa.string()) if n < 2 else
                          pa.array([topic], pa.string()).take(pa.array(np.zeros(n, dtype=np.int32))))
        elif name == "partition":
            arrays.append(pa.array(np.full(n, partition, dtype=np.int32)))
        elif name in cols:
            v = cols[name]
            arrays.append(v if isinstance(v, (pa.Array, pa.ChunkedArray)) else pa.array(v, typ))
        else:
            arrays.append(pa.nulls(n, typ))
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)


def partials_of_pieces(chunks: Iterable[tuple[str, int, list]], spec: Spec) -> Iterable[pa.RecordBatch]:
    """For ``(topic, partition, [record batches])`` runs (consecutive pieces of one
    partition joined), the partial rows as record batches."""
    for topic, partition, batches in chunks:
        if not batches:
            continue
        table = pa.Table.from_batches(batches)
        for batch in partition_partials(topic, partition, table, spec).to_batches():
            if batch.num_rows:      # an empty batch ends PySpark's Arrow stream early
                yield batch
