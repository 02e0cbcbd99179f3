"""Hash functions that decide partitions, scalar and vectorised, byte-exact with their clients.

Scalar functions (one key, pure Python, the reference):

- :func:`murmur2` — Kafka's ``Utils.murmur2`` (MurmurHash2, seed ``0x9747b28c``),
  returned as a **signed** 32-bit int exactly like Java: ``murmur2(b"21") == -973932308``.
- :func:`to_positive` — Kafka's ``Utils.toPositive``: ``h & 0x7fffffff`` (not ``abs``).
- :func:`crc32` — CRC-32 (IEEE, zlib), unsigned, as librdkafka's ``rd_crc32``.
- :func:`fnv1a32` — FNV-1a 32-bit (Go's ``hash/fnv.New32a``), unsigned.
- :func:`murmur3` — MurmurHash3 x86 32-bit, seed 0, signed (the ``mmh3`` library).

Vectorised functions (a sequence of keys → a numpy array, same values as the
scalar ones, element by element): :func:`murmur2_many`, :func:`crc32_many`,
:func:`fnv1a32_many`, :func:`murmur3_many`.  ``murmur2_many`` groups keys by length
and runs the MurmurHash2 rounds as uint32 numpy column operations (numpy's uint32
arithmetic wraps mod 2**32 exactly like Java's int arithmetic), so its cost is a few
array passes per 4 key bytes instead of a Python loop per key.

The vectorised functions take a list of ``bytes``/``None``, a pandas Series or a pyarrow
binary/string array (:class:`KeyColumn` turns any of them into one Arrow-style column,
zero-copy for Arrow input). A ``None`` key hashes as the empty key there; callers mask it
(``partition_many`` returns -1 for it).

Invariants: every function is pure and deterministic (no salted ``hash()``); the
vectorised result equals the scalar one for every key (property-tested).

Thread-safety: pure functions; safe from any thread (the struct cache only grows).
"""

from __future__ import annotations

import struct
import zlib

import mmh3
import numpy as np
import pyarrow as pa

from kafkasim.errors import InvalidArgumentError

__all__ = [
    "MURMUR2_SEED", "murmur2", "to_positive", "crc32", "fnv1a32", "murmur3",
    "murmur2_many", "crc32_many", "fnv1a32_many", "murmur3_many", "KeyColumn",
]

MURMUR2_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2(byte[])`` as a signed 32-bit int.

    Example::

        >>> murmur2(b"21"), murmur2(b"abc")
        (-973932308, 479470107)
    """
    length = len(data)
    h = MURMUR2_SEED ^ length
    nblocks = length >> 2
    if nblocks:
        unpack = _WORDS.get(nblocks)
        if unpack is None:
            unpack = _WORDS.setdefault(nblocks, struct.Struct("<%dI" % nblocks).unpack_from)
        # little-endian 32-bit words, as Java assembles them byte by byte
        for k in unpack(data):
            k = (k * 0x5BD1E995) & 0xFFFFFFFF
            h = ((h * 0x5BD1E995) & 0xFFFFFFFF) ^ (((k ^ (k >> 24)) * 0x5BD1E995) & 0xFFFFFFFF)
    tail = length & 3
    if tail:
        i = length - tail
        if tail == 3:
            h ^= data[i + 2] << 16
        if tail >= 2:
            h ^= data[i + 1] << 8
        h = ((h ^ data[i]) * 0x5BD1E995) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0x5BD1E995) & 0xFFFFFFFF
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


_WORDS: dict = {}  # nblocks -> struct unpack_from for that many little-endian uint32 words


def to_positive(h: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (``h & 0x7fffffff``); never ``abs``."""
    return h & 0x7FFFFFFF


def crc32(data: bytes) -> int:
    """CRC-32 (IEEE 802.3, as zlib and librdkafka's ``rd_crc32``), unsigned 32-bit."""
    return zlib.crc32(data)


def fnv1a32(data: bytes) -> int:
    """FNV-1a 32-bit (offset ``0x811c9dc5``, prime ``0x01000193``), unsigned, as Go's ``fnv.New32a``."""
    h = _FNV_OFFSET
    for b in data:
        h = ((h ^ b) * _FNV_PRIME) & _MASK
    return h


def murmur3(data: bytes) -> int:
    """MurmurHash3 x86 32-bit with seed 0, signed (``mmh3.hash``)."""
    return mmh3.hash(data, 0, True)


# --------------------------------------------------------------------------- vectorised

class KeyColumn:
    """Keys laid out as one arrow-style column: ``data`` (uint8), ``offsets`` (int64, n+1)
    and ``null`` (bool mask, or None when no key is missing).

    Built once per batch by :meth:`of`, which accepts a list/tuple of ``bytes``/``None``,
    a pandas Series or a pyarrow (chunked) binary/string array.
    """

    __slots__ = ("data", "offsets", "null", "n")

    def __init__(self, data: np.ndarray, offsets: np.ndarray, null, n: int) -> None:
        self.data, self.offsets, self.null, self.n = data, offsets, null, n

    @classmethod
    def of(cls, keys) -> "KeyColumn":
        if isinstance(keys, KeyColumn):
            return keys
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
        if not isinstance(keys, pa.Array):
            try:
                keys = pa.array(keys, type=pa.large_binary(), from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
                raise InvalidArgumentError(f"keys must be bytes or None: {exc}") from exc
        if not (pa.types.is_large_binary(keys.type)):
            if not (pa.types.is_binary(keys.type) or pa.types.is_string(keys.type)
                    or pa.types.is_large_string(keys.type) or pa.types.is_null(keys.type)):
                raise InvalidArgumentError(f"keys must be a binary or string column, got {keys.type}")
            keys = keys.cast(pa.large_binary())
        n = len(keys)
        _, off_buf, data_buf = keys.buffers()
        offsets = np.frombuffer(off_buf, dtype=np.int64)[keys.offset:keys.offset + n + 1] \
            if off_buf is not None else np.zeros(n + 1, np.int64)
        data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None and data_buf.size \
            else np.zeros(0, np.uint8)
        null = keys.is_null().to_numpy(zero_copy_only=False) if keys.null_count else None
        return cls(data, offsets, null, n)

    def groups(self):
        """Yield ``(length, rows_or_None, uint8 matrix [rows, length])``, one per key length.

        ``rows`` is None when every key has the same length (the common case: no gather).
        Missing keys appear as length 0; callers mask them with :attr:`null`.
        """
        n, offsets = self.n, self.offsets
        if n == 0:
            return
        lens = np.diff(offsets)
        lo, hi = int(lens.min()), int(lens.max())
        if lo == hi:
            base = int(offsets[0])
            yield lo, None, self.data[base:base + n * lo].reshape(n, lo)
            return
        order = np.argsort(lens, kind="stable")
        bounds = np.flatnonzero(np.diff(lens[order])) + 1
        starts = offsets[:-1]
        for rows in np.split(order, bounds):
            length = int(lens[rows[0]])
            if length:
                mat = self.data[starts[rows][:, None] + np.arange(length)]
            else:
                mat = np.zeros((len(rows), 0), np.uint8)
            yield length, rows, mat

    def to_list(self) -> list:
        """The keys as a list of ``bytes`` (``None`` for a missing key)."""
        raw = self.data.tobytes()
        offs = self.offsets.tolist()
        out = [raw[offs[i]:offs[i + 1]] for i in range(self.n)]
        if self.null is not None:
            for i in np.flatnonzero(self.null).tolist():
                out[i] = None
        return out


def _murmur2_matrix(mat: np.ndarray) -> np.ndarray:
    """MurmurHash2 (Kafka's) of each row of a uint8 matrix, as uint32."""
    n, length = mat.shape
    m = np.uint32(_M)
    h = np.full(n, (MURMUR2_SEED ^ length) & _MASK, dtype=np.uint32)
    nblocks = length >> 2
    if nblocks:
        body = mat[:, : nblocks * 4]
        if length != nblocks * 4 or not body.flags.c_contiguous:
            body = np.ascontiguousarray(body)
        words = body.view("<u4").reshape(n, nblocks)
        k = np.empty(n, dtype=np.uint32)
        t = np.empty(n, dtype=np.uint32)
        for j in range(nblocks):
            np.multiply(words[:, j], m, out=k)
            np.right_shift(k, 24, out=t)
            np.bitwise_xor(k, t, out=k)
            np.multiply(k, m, out=k)
            np.multiply(h, m, out=h)
            np.bitwise_xor(h, k, out=h)
    tail = length & 3
    if tail:
        i = length & ~3
        if tail == 3:
            h ^= mat[:, i + 2].astype(np.uint32) << np.uint32(16)
        if tail >= 2:
            h ^= mat[:, i + 1].astype(np.uint32) << np.uint32(8)
        h ^= mat[:, i].astype(np.uint32)
        h *= m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h


def _per_group(col: KeyColumn, fn) -> np.ndarray:
    out = np.zeros(col.n, dtype=np.uint32)
    for length, rows, mat in col.groups():
        if rows is None:
            return fn(mat, length)
        out[rows] = fn(mat, length)
    return out


def murmur2_many(keys) -> np.ndarray:
    """``murmur2`` of every key as an ``int32`` array (vectorised; equals the scalar values).

    ``keys``: anything :meth:`KeyColumn.of` takes. A missing key hashes as the empty key;
    mask it yourself (``partition_many`` returns -1 for it).
    """
    return _per_group(KeyColumn.of(keys), lambda mat, _: _murmur2_matrix(mat)).view(np.int32)


def _fnv_matrix(mat: np.ndarray, length: int) -> np.ndarray:
    prime = np.uint32(_FNV_PRIME)
    h = np.full(mat.shape[0], _FNV_OFFSET, dtype=np.uint32)
    for j in range(length):
        h ^= mat[:, j]
        h *= prime
    return h


def fnv1a32_many(keys) -> np.ndarray:
    """``fnv1a32`` of every key as a ``uint32`` array (one numpy pass per key byte column)."""
    return _per_group(KeyColumn.of(keys), _fnv_matrix)


def _key_list(keys) -> list:
    if not isinstance(keys, (list, tuple)):
        keys = KeyColumn.of(keys).to_list()
    if None in keys:
        return [b"" if k is None else k for k in keys]
    return keys


def crc32_many(keys) -> np.ndarray:
    """``crc32`` of every key as a ``uint32`` array (zlib's C CRC per key; missing = empty)."""
    ks = _key_list(keys)
    return np.fromiter(map(zlib.crc32, ks), dtype=np.uint32, count=len(ks))


def murmur3_many(keys) -> np.ndarray:
    """``murmur3`` of every key as an ``int32`` array (mmh3's C hash per key; missing = empty)."""
    ks = _key_list(keys)
    return np.fromiter(map(mmh3.hash, ks), dtype=np.int32, count=len(ks))
