"""Kafka v2 records decoded straight into Arrow buffers, for columnar readers (the Spark data source, the view).

:class:`ArrowColumnBuilder` takes the records of CRC-verified batches (storage/FORMAT.md §2,
decompressed here when the batch is compressed) and hands them out as the buffers of Arrow ``binary``/``list``
arrays, so a reader builds ``pyarrow`` arrays without a Python object per record. It has
two paths that give the same buffers and the same errors: the C extension
``kafkasim.records._codec`` (``ArrowColumns``) when it is built and enabled, and
:func:`kafkasim.records.record_batch.decode_columns`
otherwise (the ``--py-files`` zip, ``KAFKASIM_PURE_PYTHON=1``).

Invariant: a batch that ``add`` rejects leaves nothing behind (rows, bitmaps, offsets).

Thread-safety: an :class:`ArrowColumnBuilder` belongs to one thread; the module-level
helpers are pure.
"""

from __future__ import annotations

import array
import itertools
import operator

from kafkasim.errors import CorruptRecordError
from kafkasim.records import record_batch as _rb
from kafkasim.records.framing import BatchHeader

__all__ = ["ArrowColumnBuilder"]

_first = operator.itemgetter(0)
_second = operator.itemgetter(1)


class ArrowColumnBuilder:
    """Records of verified batches, accumulated as Arrow buffers for columnar readers.

    ``add`` decodes one batch (after :func:`~kafkasim.records.framing.verify`) with the
    checks of :mod:`kafkasim.records.record_batch` (lengths, count, deltas, UTF-8 header
    keys) and raises :class:`CorruptRecordError` naming ``where`` and the position; a
    rejected batch leaves nothing behind. ``take`` hands out everything added since the
    last ``take`` and starts afresh::

        {"rows": n,
         "offset_deltas": bytes (n int64, native order), "timestamp_deltas": bytes (n int64),
         "keys": (validity, offsets, data, null_count), "values": (...),
         "header_offsets": bytes (n + 1 int32),
         "header_keys": (...), "header_values": (...)}

    where ``validity`` is an LSB-first bitmap or None when nothing is null and
    ``offsets`` holds count + 1 int32: exactly the buffers of Arrow ``binary``/``string``
    and ``list`` arrays (``pyarrow.Array.from_buffers``). Column data must stay under
    2 GiB per ``take``: callers flush on :attr:`nbytes`.

    The C path (``kafkasim.records._codec.ArrowColumns``) touches no Python object per
    record; the pure-Python path builds the same buffers from
    :func:`kafkasim.records.record_batch.decode_columns`.
    """

    def __init__(self) -> None:
        codec = _rb._codec   # looked up per builder: tests and KAFKASIM_PURE_PYTHON switch paths
        self._c = codec.ArrowColumns() if codec is not None else None
        self._py: list = []
        self._py_rows = self._py_nbytes = 0

    @property
    def rows(self) -> int:
        return self._c.rows if self._c is not None else self._py_rows

    @property
    def nbytes(self) -> int:
        """Bytes of key, value and header data held."""
        return self._c.nbytes if self._c is not None else self._py_nbytes

    def add(self, buf, pos: int, header: BatchHeader, *, where: str = "<buffer>") -> int:
        """Decode the records of the verified batch at ``pos`` (decompressing its records
        section first when the attributes name a codec); return how many were added."""
        if self._c is not None:
            section = _rb.records_section(buf, pos, header, where=where)
            try:
                return self._c.add(section, 0, len(section), header.record_count,
                                   header.last_offset_delta, _rb.timestamp_delta_override(header))
            except ValueError as exc:
                raise CorruptRecordError(f"{where}: malformed records in batch at position {pos}: {exc}") from None
        cols = _rb.decode_columns(buf, pos, header, where=where)   # typed by the v2 decoder itself
        self._py.append(cols)
        self._py_rows += len(cols[0])
        self._py_nbytes += sum(map(len, filter(None, cols[2]))) + sum(map(len, filter(None, cols[3])))
        if any(cols[4]):
            self._py_nbytes += sum(len(hk.encode()) + len(hv or b"") for h in cols[4] for hk, hv in h)
        return len(cols[0])

    def take(self) -> dict:
        if self._c is not None:
            return self._c.take()
        parts, self._py, self._py_rows, self._py_nbytes = self._py, [], 0, 0
        deltas, tsds, keys, values, headers = (list(_chain(*(p[i] for p in parts))) for i in range(5))
        pairs = list(_chain(*headers)) if any(headers) else []
        return {"rows": len(deltas),
                "offset_deltas": _int64s(deltas), "timestamp_deltas": _int64s(tsds),
                "keys": _blob_buffers(keys), "values": _blob_buffers(values),
                "header_offsets": _offsets(map(len, headers)),
                "header_keys": _blob_buffers([k.encode() for k in map(_first, pairs)]),
                "header_values": _blob_buffers(list(map(_second, pairs)))}


_chain = itertools.chain


def _int64s(values: list) -> bytes:
    return array.array("q", values).tobytes()


def _offsets(lengths) -> bytes:
    return array.array("i", list(itertools.accumulate(lengths, initial=0))).tobytes()


def _blob_buffers(blobs: list) -> tuple:
    """Arrow binary buffers ``(validity | None, offsets, data, null_count)`` of bytes-or-None."""
    nulls = blobs.count(None)
    validity = None
    if nulls:
        bits = bytearray((len(blobs) + 7) // 8)
        for i, b in enumerate(blobs):
            if b is not None:
                bits[i >> 3] |= 1 << (i & 7)
        validity = bytes(bits)
    lengths = map(len, blobs) if not nulls else (0 if b is None else len(b) for b in blobs)
    return validity, _offsets(lengths), b"".join(filter(None, blobs)), nulls
