"""Bytes of Kafka's schema-described records: the unsigned varint and a bounds-checked reader.

Shared by the records kafkasim writes in Kafka's own layout to internal topics
(:mod:`kafkasim.protocol.txn_log` for ``__transaction_state``,
:mod:`kafkasim.protocol.consumer_group_log` for KIP-848 groups in ``__consumer_offsets``).
Each module keeps its field readers (their messages name the schema's fields); the cursor,
varints, tagged fields and the end check are here.

Invariant: every read checks the bytes are there; every failure is a
:class:`~kafkasim.errors.CorruptRecordError` naming what was read and the byte. Pure; a
reader is used by one thread.
"""

from __future__ import annotations

import struct
import uuid
from typing import Mapping, Optional

from kafkasim.errors import CorruptRecordError

__all__ = ["uvarint", "key_string", "compact_string", "topic_partitions", "RecordReader"]

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


def uvarint(n: int) -> bytes:
    """Kafka's unsigned varint (``ByteUtils.writeUnsignedVarint``) of ``n`` >= 0."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def key_string(s: str, what: str) -> bytes:
    """A non-flexible (int16-length) string, as record keys hold them."""
    if not isinstance(s, str):
        raise TypeError(f"{what} must be a str, got {type(s).__name__}")
    data = s.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"{what} is {len(data)} bytes of UTF-8, longer than a Kafka string (32767)")
    return _I16.pack(len(data)) + data


def compact_string(s: Optional[str], what: str, nullable: bool = False) -> bytes:
    """A flexible version's compact string (unsigned varint length + 1; 0 for null)."""
    if s is None:
        if not nullable:
            raise ValueError(f"{what} may not be null")
        return b"\x00"
    if not isinstance(s, str):
        raise TypeError(f"{what} must be a str, got {type(s).__name__}")
    data = s.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"{what} is {len(data)} bytes of UTF-8, longer than a Kafka string (32767)")
    return uvarint(len(data) + 1) + data


def topic_partitions(tps: Mapping[uuid.UUID, "tuple[int, ...]"]) -> bytes:
    """A compact array of (TopicId uuid, Partitions [int32], tagged fields), sorted by topic id
    then partition (Kafka writes a hash map's order; readers do not depend on it)."""
    items = sorted(((t, sorted(ps)) for t, ps in tps.items() if ps), key=lambda kv: kv[0].bytes)
    out = [uvarint(len(items) + 1)]
    for t, ps in items:
        out.append(t.bytes + uvarint(len(ps) + 1) + struct.pack(f">{len(ps)}i", *ps) + b"\x00")
    return b"".join(out)


class RecordReader:
    """A cursor over one record's key or value; ``what`` prefixes every error message."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf, what: str) -> None:
        self.buf, self.pos, self.what = bytes(buf), 0, what

    def fail(self, why: str) -> CorruptRecordError:
        return CorruptRecordError(f"{self.what}: {why} at byte {self.pos}")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise self.fail(f"{n} bytes needed, {len(self.buf) - self.pos} left")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, st: struct.Struct) -> tuple:
        return st.unpack(self.take(st.size))

    def uvarint(self) -> int:
        result = shift = 0
        for _ in range(5):
            (b,) = self.take(1)
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                if result > 0x7FFFFFFF:
                    raise self.fail(f"unsigned varint {result} past int32")
                return result
            shift += 7
        raise self.fail("unsigned varint longer than 5 bytes")

    def utf8(self, data: bytes, field: str) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{field} is not UTF-8") from None

    def tagged_fields(self) -> dict[int, bytes]:
        """The tagged fields section: tag -> its bytes (unknown tags are the caller's to skip)."""
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out

    def i8(self) -> int:
        return self.unpack(_I8)[0]

    def i16(self) -> int:
        return self.unpack(_I16)[0]

    def i32(self) -> int:
        return self.unpack(_I32)[0]

    def i64(self) -> int:
        return self.unpack(_I64)[0]

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def key_string(self, field: str) -> str:
        n = self.i16()
        if n < 0:
            raise self.fail(f"null or negative length {n} for {field}")
        return self.utf8(self.take(n), field)

    def cstring(self, field: str, nullable: bool = False) -> Optional[str]:
        n = self.uvarint() - 1
        if n < 0:
            if nullable:
                return None
            raise self.fail(f"null string for the non-nullable {field}")
        return self.utf8(self.take(n), field)

    def count(self, field: str) -> int:
        """A compact array's length (checked against the bytes left)."""
        n = self.uvarint() - 1
        if n < 0 or n > len(self.buf) - self.pos:
            raise self.fail(f"invalid length {n} for the array {field}")
        return n

    def topic_partitions(self, field: str) -> dict:
        """What :func:`topic_partitions` wrote: topic id -> partitions."""
        out = {}
        for _ in range(self.count(field)):
            t = self.uuid()
            n = self.count(f"{field}.Partitions")
            out[t] = tuple(struct.unpack(f">{n}i", self.take(4 * n)))
            self.tagged_fields()
        return out

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise self.fail(f"{len(self.buf) - self.pos} bytes left over")
