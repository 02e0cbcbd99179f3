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

from kafkasim.errors import CorruptRecordError

__all__ = ["uvarint", "RecordReader"]


def uvarint(n: int) -> bytes:
    """Kafka's unsigned varint (``ByteUtils.writeUnsignedVarint``) of ``n`` >= 0."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


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

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise self.fail(f"{len(self.buf) - self.pos} bytes left over")
