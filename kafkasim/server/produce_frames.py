"""Produce requests and responses read and written by hand: the one hot API, without kio.

Every other API goes through kio (:mod:`kafkasim.server.codec`). Produce carries the data, so
its per-request cost is what ``serve_produce_records_per_s`` measures; through kio a request
of one 110 KB batch cost about 80 µs to decode (a bounds walk, then kio's reader, which copies
the records) and about 95 µs to build and encode its 60-byte response (``make bench``'s
server, 2026-11-27). Here the records stay a ``memoryview`` of the frame (the log writes them
from it) and the response is packed with :mod:`struct`.

Formats (Kafka's ``ProduceRequest.json``/``ProduceResponse.json``, versions 3–12, the ones
served; v9+ are flexible: compact strings, arrays and bytes, tagged fields, and request
header v2 / response header v1):

- request: ``transactional_id`` nullable string, ``acks`` int16, ``timeout_ms`` int32,
  ``topic_data`` [``name`` string, ``partition_data`` [``index`` int32, ``records`` nullable
  bytes]]; the request defines no tagged field, so every tag is skipped;
- response: ``responses`` [``name``, ``partition_responses`` [``index`` int32,
  ``error_code`` int16, ``base_offset`` int64, ``log_append_time_ms`` int64,
  ``log_start_offset`` int64 (v5+), ``record_errors`` [``batch_index`` int32,
  ``batch_index_error_message`` nullable string] (v8+), ``error_message`` nullable string
  (v8+)]], ``throttle_time_ms`` int32. v10's tagged ``current_leader`` and
  ``node_endpoints`` (KIP-951 hints) are never sent.

kio stays the reference: tests/server/test_produce_frames.py checks both directions byte for
byte against kio for every served version, and feeds the reader hostile frames. Invariant:
:func:`decode` returns a fully parsed request or raises ``MalformedRequest``, whatever the bytes.
Pure functions; thread-safe.
"""

from __future__ import annotations

import datetime
import struct
from typing import Callable, NamedTuple, Optional

__all__ = ["PRODUCE_KEY", "FIRST_FLEXIBLE", "ProducePartition", "ProduceTopic", "ProduceBody", "decode", "encode_response"]

PRODUCE_KEY = 0
FIRST_FLEXIBLE = 9

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")
_PARTITION_HEAD = struct.Struct(">ihqq")        # index, error_code, base_offset, log_append_time
_Q = struct.Struct(">q")


class ProducePartition(NamedTuple):
    index: int
    records: Optional[memoryview]


class ProduceTopic(NamedTuple):
    name: str
    partition_data: tuple


class ProduceBody(NamedTuple):
    """The fields of kio's ``ProduceRequest`` that kafkasim reads, under kio's names."""

    transactional_id: Optional[str]
    acks: int
    timeout: datetime.timedelta
    topic_data: tuple


class _Reader:
    """A cursor over a frame; every read checks the bytes it needs are there."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: memoryview) -> None:
        self.buf, self.pos, self.end = buf, 0, len(buf)

    def _need(self, n: int, what: str) -> int:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise ValueError(f"{what}: {n} bytes at byte {pos}, {self.end - pos} left")
        self.pos = pos + n
        return pos

    def int16(self) -> int:
        return _H.unpack_from(self.buf, self._need(2, "int16"))[0]

    def int32(self) -> int:
        return _I.unpack_from(self.buf, self._need(4, "int32"))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.buf[self._need(1, "varint")]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError(f"varint longer than 5 bytes at byte {self.pos}")

    def _text(self, n: int, what: str) -> str:
        pos = self._need(n, what)
        return str(self.buf[pos:pos + n], "utf-8")

    def string(self, nullable: bool) -> Optional[str]:
        n = self.int16()
        if n < 0:
            if nullable:
                return None
            raise ValueError(f"null string at byte {self.pos - 2}")
        return self._text(n, "string")

    def compact_string(self, nullable: bool) -> Optional[str]:
        n = self.uvarint() - 1
        if n < 0:
            if nullable:
                return None
            raise ValueError(f"null compact string at byte {self.pos}")
        return self._text(n, "compact string")

    def records(self, flexible: bool) -> Optional[memoryview]:
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            return None
        pos = self._need(n, "records")
        return self.buf[pos:pos + n]

    def count(self, flexible: bool, what: str) -> int:
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            raise ValueError(f"null {what} array at byte {self.pos}")
        if n > self.end - self.pos:       # every element takes at least one byte
            raise ValueError(f"{what} array of {n} elements with {self.end - self.pos} bytes left")
        return n

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()                # the tag: none is defined for Produce requests
            self._need(self.uvarint(), "tagged field")


def decode(frame, version: int, malformed: Callable[[str], Exception]):
    """``(correlation_id, client_id, body, trailing bytes)`` of a whole Produce request frame
    (header + body, without the size prefix) of a served ``version``; ``malformed(message)``
    makes the exception raised for bytes that do not parse."""
    r = _Reader(memoryview(frame))
    flexible = version >= FIRST_FLEXIBLE
    try:
        _, _, correlation_id = _HEADER.unpack_from(r.buf, r._need(8, "header"))
        client_id = r.string(nullable=True)
        if flexible:
            r.skip_tags()
        string = r.compact_string if flexible else r.string
        transactional_id = string(True)
        acks = r.int16()
        timeout = r.int32()
        topics = []
        for _ in range(r.count(flexible, "topic_data")):
            name = string(False)
            parts = []
            for _ in range(r.count(flexible, "partition_data")):
                index = r.int32()
                parts.append(ProducePartition(index, r.records(flexible)))
                if flexible:
                    r.skip_tags()
            topics.append(ProduceTopic(name, tuple(parts)))
            if flexible:
                r.skip_tags()
        if flexible:
            r.skip_tags()
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        raise malformed(f"ProduceRequest v{version}: {exc}") from None
    body = ProduceBody(transactional_id, acks, datetime.timedelta(milliseconds=timeout), tuple(topics))
    return correlation_id, client_id, body, r.end - r.pos


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(s: Optional[str], flexible: bool, out: list) -> None:
    if s is None:
        out.append(b"\x00" if flexible else b"\xff\xff")
        return
    data = s.encode("utf-8")
    out.append(_uvarint(len(data) + 1) if flexible else _H.pack(len(data)))
    out.append(data)


def _count(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else _I.pack(n)


def encode_response(version: int, correlation_id: int, result: dict) -> bytes:
    """The whole response frame (size prefix, header, body) for the Produce handler's
    ``result`` dict (``responses`` of ``name`` and ``partition_responses`` rows with
    ``index``, ``error_code``, ``base_offset``, ``log_append_time`` and ``log_start_offset``
    in ms, ``error_message`` and optional ``record_errors`` ``[{batch_index,
    batch_index_error_message}]``; optional ``throttle_time`` in ms), as kio writes it."""
    flexible = version >= FIRST_FLEXIBLE
    out = [b"", _I.pack(correlation_id)]
    if flexible:
        out.append(b"\x00")
    responses = result.get("responses", ())
    out.append(_count(len(responses), flexible))
    for topic in responses:
        _string(topic["name"], flexible, out)
        rows = topic.get("partition_responses", ())
        out.append(_count(len(rows), flexible))
        for row in rows:
            out.append(_PARTITION_HEAD.pack(row["index"], row.get("error_code", 0), row.get("base_offset", -1),
                                            row.get("log_append_time", -1)))
            if version >= 5:
                out.append(_Q.pack(row.get("log_start_offset", -1)))
            if version >= 8:
                errors = row.get("record_errors") or ()
                out.append(_count(len(errors), flexible))
                for e in errors:
                    out.append(_I.pack(e["batch_index"]))
                    _string(e.get("batch_index_error_message"), flexible, out)
                    if flexible:
                        out.append(b"\x00")
                _string(row.get("error_message"), flexible, out)
            if flexible:
                out.append(b"\x00")
        if flexible:
            out.append(b"\x00")
    out.append(_I.pack(result.get("throttle_time", 0)))
    if flexible:
        out.append(b"\x00")
    size = sum(map(len, out))
    out[0] = _I.pack(size)
    return b"".join(out)
