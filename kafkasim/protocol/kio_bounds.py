"""Untrusted bytes -> kio entities, with every length checked before kio reads them.

kio's native (Rust) reader sizes an array's storage from the length on the wire before
reading any element, so a forged length (2**31 elements) makes it ask for hundreds of GB
and the process aborts: an abort, not an exception (found by tests/server/test_fuzz.py
with kio 0.6.5). :func:`check_bounds` therefore walks the bytes first, driven by the same
kio dataclasses (field order, ``kafka_type``, tags, flexible or not: no schema is restated
here), and refuses any length or element count that cannot fit in the bytes that remain.
Only bytes that pass reach kio's reader, so what it allocates is bounded by their size.

Used by the wire front end for whole requests (:mod:`kafkasim.server.codec`) and by
:mod:`kafkasim.protocol.consumer_protocol` for the bytes a group member embeds in
JoinGroup and SyncGroup (which the coordinator keeps opaque and decodes beside).

Pure functions; thread-safe (the per-class plans and kio's reader caches are built once
and only read afterwards).
"""

from __future__ import annotations

import dataclasses
import functools
import struct

import kafkasim.protocol.kio_import  # noqa: F401  (first: kio without hypothesis; see it)
from kio.serial import entity_reader
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

__all__ = ["Bounds", "MalformedEntity", "check_bounds", "read_entity"]


class MalformedEntity(ValueError):
    """Bytes that do not parse as the entity they should hold."""


def read_entity(cls: type, data, pos: int = 0):
    """``(entity, end)``: one ``cls`` entity read from untrusted ``data`` at ``pos``, after
    :func:`check_bounds`. Raises :class:`MalformedEntity`, never anything else."""
    view = memoryview(data)
    try:
        check_bounds(cls, view, pos, len(view))
        entity, n = entity_reader(cls)(view, pos)
    except Bounds as exc:
        raise MalformedEntity(f"{cls.__name__}: {exc}") from None
    except Exception as exc:
        raise MalformedEntity(f"{cls.__name__}: {type(exc).__name__}: {exc}") from exc
    return entity, pos + n


class Bounds(ValueError):
    """A length or count in the bytes cannot fit in the bytes that remain."""


_FIXED = {"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2,
          "int32": 4, "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8,
          "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _uvarint(buf, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    for i in range(5):
        if pos >= end:
            raise Bounds(f"truncated varint at byte {pos}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    raise Bounds(f"varint longer than 5 bytes at byte {pos}")


def _need(pos: int, n: int, end: int, what: str) -> int:
    if n < 0 or pos + n > end:
        raise Bounds(f"{what} of {n} bytes at byte {pos} runs past the end ({end})")
    return pos + n


def _length(buf, pos: int, end: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A string/bytes/array length: compact (uvarint n+1) when flexible, else int16/int32;
    -1 means null."""
    if flexible:
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    fmt = _I32 if wide else _I16
    _need(pos, fmt.size, end, "length")
    return fmt.unpack_from(buf, pos)[0], pos + fmt.size


@functools.lru_cache(maxsize=None)
def _plan(cls: type, is_header: bool) -> tuple:
    """Per field: (tag or None, kafka_type, shape, nested class, legacy string?)."""
    plan = []
    for f in dataclasses.fields(cls):
        shape = classify_field(f)
        nested = shape.type_ if isinstance(shape, (EntityField, EntityTupleField)) else None
        tag = f.metadata.get("tag")
        plan.append((tag, f.metadata.get("kafka_type"), shape.is_array, nested,
                     is_optional(f) and nested is not None and not shape.is_array,
                     is_header and f.name == "client_id"))
    return tuple(plan)


def _check_value(kafka_type, nested, is_array, nullable_struct, legacy, flexible, buf, pos, end):
    if is_array:
        n, pos = _length(buf, pos, end, flexible, wide=True)
        if n < -1:
            raise Bounds(f"array length {n} at byte {pos}")
        if n > end - pos:   # every element takes at least one byte
            raise Bounds(f"array of {n} elements at byte {pos} cannot fit in {end - pos} bytes")
        for _ in range(max(n, 0)):
            pos = _check_value(kafka_type, nested, False, False, False, flexible, buf, pos, end)
        return pos
    if nested is not None:
        if nullable_struct:
            _need(pos, 1, end, "null marker")
            if buf[pos] == 0xFF:
                return pos + 1
            pos += 1
        return check_bounds(nested, buf, pos, end)
    size = _FIXED.get(kafka_type)
    if size is not None:
        return _need(pos, size, end, kafka_type)
    if kafka_type in ("string", "bytes", "records"):
        n, pos = _length(buf, pos, end, flexible and not legacy, wide=kafka_type != "string")
        if n < -1:
            raise Bounds(f"{kafka_type} length {n} at byte {pos}")
        return _need(pos, max(n, 0), end, kafka_type)
    raise Bounds(f"unknown field type {kafka_type!r}")


def check_bounds(cls: type, buf, pos: int, end: int, *, is_header: bool = False) -> int:
    """Walk one ``cls`` entity at ``pos`` checking every length; returns where it ends."""
    flexible = cls.__flexible__
    tagged = {}
    for tag, kafka_type, is_array, nested, nullable_struct, legacy in _plan(cls, is_header):
        if tag is not None:
            tagged[tag] = (kafka_type, nested, is_array, nullable_struct, legacy)
            continue
        pos = _check_value(kafka_type, nested, is_array, nullable_struct, legacy, flexible, buf, pos, end)
    if flexible:
        count, pos = _uvarint(buf, pos, end)
        if count > end - pos:
            raise Bounds(f"{count} tagged fields at byte {pos} cannot fit")
        for _ in range(count):
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            field_end = _need(pos, size, end, f"tagged field {tag}")
            if tag in tagged:
                kafka_type, nested, is_array, nullable_struct, legacy = tagged[tag]
                _check_value(kafka_type, nested, is_array, nullable_struct, legacy, flexible,
                             buf, pos, field_end)
            pos = field_end
    return pos
