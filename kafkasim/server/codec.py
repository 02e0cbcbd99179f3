"""Frames ⟷ typed Kafka messages, through ``kio`` (dataclasses generated from Kafka's JSON schemas).

No message schema is written by hand here: every request and response class comes from
``kio.schema.<api>.v<N>``, and kio's reader/writer do the bytes. This module adds only
what the schemas leave to the caller:

- the frame: ``int32 size`` + request header + body. The header version follows from
  the body's: header v2 (tagged fields) for a flexible request version, else v1; the
  response header is v1 for a flexible response, else v0 — except ApiVersions, whose
  response header is always v0 (so a client that does not know our versions can read it);
- :func:`build`: make a response of any version from one plain dict that may carry the
  fields of every version (fields the version lacks are dropped; fields the caller leaves
  out get the schema's default, else the type's zero value, as Kafka's generated code does);
- unit conversions kio makes explicit (``timedelta``/``datetime`` fields ⟷ milliseconds,
  ``ErrorCode`` ⟷ the ``errno`` of :mod:`kafkasim.errors`).

Invariants: :func:`decode_request` either returns a fully parsed header and body, or
raises :class:`MalformedRequest` — never anything else, whatever the bytes. Bytes after
the body are ignored, as Kafka ignores them (it reads the fields the schema defines and
never checks what remains: librdkafka >= 2.12 sends 3 such bytes with Metadata v9+,
librdkafka issue #5049); :attr:`Request.trailing` counts them, so the server can log them.

Hostile frames: kio's native (Rust) reader sizes an array's storage from the length on
the wire before reading any element, so a forged length (2**31 elements) makes it ask
for hundreds of GB and the process aborts — an abort, not an exception (found by
tests/server/test_fuzz.py with kio 0.6.5). :func:`~kafkasim.protocol.kio_bounds.check_bounds` therefore walks the
frame first, driven by the same kio dataclasses (field order, ``kafka_type``, tags,
flexible or not — no schema is restated here), and refuses any length or element count
that cannot fit in the bytes that remain. Only a frame that passes reaches kio's reader,
so what it allocates is bounded by the frame size. Pure functions; thread-safe (kio's per-class reader/writer caches are
built once and only read afterwards).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import struct
import uuid
from typing import Any, NamedTuple

import kafkasim.protocol.kio_import  # noqa: F401  (first: kio without hypothesis; see it)
from kio.index import load_entity_module
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional
from kio.static.constants import EntityType

from kafkasim.protocol.kio_bounds import Bounds, check_bounds
from kafkasim.server import produce_frames

__all__ = ["MalformedRequest", "Request", "peek", "peek_client_id", "request_class", "response_class",
           "decode_request", "decode_request_with_kio", "encode_result", "encode_response", "build", "ms",
           "API_VERSIONS_KEY",
           "encode_request", "decode_response"]

API_VERSIONS_KEY = 18
_PEEK = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


class MalformedRequest(Exception):
    """A frame that does not parse as the request it claims to be (internal to the server:
    the connection that sent it is closed; nothing reaches the broker)."""


class Request(NamedTuple):
    """A parsed request: header fields plus the kio body dataclass."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    trailing: int = 0
    """Bytes after the body that no field of the schema covers (ignored, as Kafka does)."""


def peek(frame) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)``: the first 8 bytes, common to every header."""
    if len(frame) < _PEEK.size:
        raise MalformedRequest(f"frame of {len(frame)} bytes is shorter than a request header")
    return _PEEK.unpack_from(frame, 0)


def peek_client_id(frame) -> str | None:
    """The client id of a request header (v1 and v2 both start with a nullable int16
    string after the first 8 bytes), or None when it cannot be read. For log lines about
    requests that are refused before they are parsed."""
    if len(frame) < _PEEK.size + 2:
        return None
    (n,) = struct.unpack_from(">h", frame, _PEEK.size)
    start = _PEEK.size + 2
    if n < 0 or start + n > len(frame):
        return None
    return bytes(frame[start:start + n]).decode("utf-8", "replace")


@functools.lru_cache(maxsize=None)
def _entity(api_key: int, version: int, kind: EntityType) -> type:
    module = load_entity_module(api_key_map[api_key], version, kind)
    for value in vars(module).values():
        if (isinstance(value, type) and dataclasses.is_dataclass(value)
                and getattr(value, "__type__", None) is kind and value.__module__ == module.__name__):
            return value
    raise LookupError(f"kio has no {kind.name} class for api key {api_key} v{version}")


def request_class(api_key: int, version: int) -> type:
    return _entity(api_key, version, EntityType.request)


def response_class(api_key: int, version: int) -> type:
    return _entity(api_key, version, EntityType.response)


def decode_request(frame, api_key: int, version: int) -> Request:
    """Parse a whole frame (header + body, without the size prefix) of a served version.
    Produce is read by :mod:`kafkasim.server.produce_frames` (its records stay a view of the
    frame), every other API by kio (:func:`decode_request_with_kio`)."""
    if api_key == produce_frames.PRODUCE_KEY:
        correlation_id, client_id, body, trailing = produce_frames.decode(frame, version, MalformedRequest)
        return Request(api_key, version, correlation_id, client_id, body, trailing)
    return decode_request_with_kio(frame, api_key, version)


def encode_result(api_key: int, version: int, correlation_id: int, result: dict) -> bytes:
    """The whole response frame for a handler's ``result`` dict: Produce's packed by
    :mod:`kafkasim.server.produce_frames`, every other API's built (:func:`build`) and
    written by kio (:func:`encode_response`)."""
    if api_key == produce_frames.PRODUCE_KEY:
        return produce_frames.encode_response(version, correlation_id, result)
    return encode_response(api_key, version, correlation_id, build(response_class(api_key, version), result))


def decode_request_with_kio(frame, api_key: int, version: int) -> Request:
    """:func:`decode_request` through kio, for any API (the reference for Produce too)."""
    cls = request_class(api_key, version)
    header_cls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
    view = memoryview(frame)
    try:
        end = check_bounds(header_cls, view, 0, len(view), is_header=True)
        check_bounds(cls, view, end, len(view))
    except Bounds as exc:
        raise MalformedRequest(f"{cls.__name__} v{version}: {exc}") from None
    try:
        header, n = entity_reader(header_cls)(view, 0)
        body, m = entity_reader(cls)(view, n)
    except Exception as exc:  # kio's DecodeError family, and ValueError/OverflowError on odd values
        raise MalformedRequest(f"{cls.__name__} v{version}: {type(exc).__name__}: {exc}") from exc
    return Request(api_key, version, header.correlation_id, header.client_id, body, len(frame) - n - m)


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """The whole response frame: size prefix, response header, body."""
    flexible = type(body).__flexible__ and api_key != API_VERSIONS_KEY
    header_cls = ResponseHeaderV1 if flexible else ResponseHeaderV0
    return _frame(header_cls(correlation_id=correlation_id), body)


class _Parts(list):
    """What kio writes, kept as the objects it writes, to be joined once into the frame."""

    __slots__ = ()
    write = list.append


def _frame(header: Any, body: Any) -> bytes:
    """Size prefix, ``header`` and ``body`` (kio entities) as one ``bytes``: what kio writes
    is joined once, so a Fetch response's records (megabytes, read from the segments) are
    copied once, where an ``io.BytesIO`` copied them in and then out again."""
    parts = _Parts((b"",))              # [0]: the size prefix, filled in below
    entity_writer(type(header))(parts, header)
    entity_writer(type(body))(parts, body)
    parts[0] = _SIZE.pack(sum(map(len, parts)))
    return b"".join(parts)


# ----------------------------------------------------------------- the client side

def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None,
                   body: Any) -> bytes:
    """The whole request frame (size prefix, request header, body) for a kio request
    ``body`` of ``version``: what a client sends (:mod:`kafkasim.server.remote`)."""
    header_cls = RequestHeaderV2 if type(body).__flexible__ else RequestHeaderV1
    return _frame(header_cls(request_api_key=api_key, request_api_version=version,
                             correlation_id=correlation_id, client_id=client_id), body)


def decode_response(api_key: int, version: int, frame) -> tuple[int, Any]:
    """``(correlation_id, body)`` of a response frame (without its size prefix) to a
    request of ``version``. Raises MalformedRequest when it does not parse exactly."""
    cls = response_class(api_key, version)
    flexible = cls.__flexible__ and api_key != API_VERSIONS_KEY
    header_cls = ResponseHeaderV1 if flexible else ResponseHeaderV0
    view = memoryview(frame)
    try:
        header, n = entity_reader(header_cls)(view, 0)
        body, m = entity_reader(cls)(view, n)
    except Exception as exc:
        raise MalformedRequest(f"{cls.__name__} v{version}: {type(exc).__name__}: {exc}") from exc
    if n + m != len(frame):
        raise MalformedRequest(f"{cls.__name__} v{version}: {len(frame) - n - m} bytes left over")
    return header.correlation_id, body


# ----------------------------------------------------------------- building responses

def ms(value) -> int:
    """Milliseconds of a kio ``timedelta``/``datetime`` field (ints pass through)."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return int(value)


def build(cls: type, data: dict) -> Any:
    """An instance of the kio dataclass ``cls`` from ``data`` (see the module docstring).

    Nested entities are given as dicts (or lists of dicts); ``error_code`` fields as ints;
    ``timedelta``/``datetime`` fields as milliseconds (``datetime`` -1 = null where the field
    is nullable, else written as -1). The fields'
    shapes are classified once per class (:func:`_plan`), not per response.
    """
    kwargs = {}
    for name, convert, zero in _plan(cls):
        if name in data:
            kwargs[name] = convert(data[name])
        elif zero is not None:
            kwargs[name] = zero()
    return cls(**kwargs)


@functools.lru_cache(maxsize=None)
def _plan(cls: type) -> tuple:
    """Per field of ``cls``: ``(name, convert(value), zero() or None when the field has a
    default)`` — what :func:`build` does with it, decided once per class."""
    plan = []
    for f in dataclasses.fields(cls):
        kafka_type = f.metadata.get("kafka_type")
        has_default = not (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
        plan.append((f.name, _converter(f, kafka_type),
                     None if has_default else functools.partial(_zero, f, kafka_type)))
    return tuple(plan)


def _identity(value):
    return value


def _converter(f: dataclasses.Field, kafka_type):
    """The function :func:`build` applies to a value given for field ``f``."""
    shape = classify_field(f)
    if isinstance(shape, EntityTupleField):
        sub = shape.type_
        return lambda value: None if value is None else tuple(build(sub, v) for v in value)
    if isinstance(shape, EntityField):
        sub = shape.type_
        return lambda value: None if value is None else build(sub, value)
    if shape.is_array:
        return lambda value: None if value is None else tuple(value)
    if kafka_type == "error_code":
        return ErrorCode
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return lambda value: datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64":
        if not is_optional(f):      # -1 written as -1 (DescribeTransactions' start time when none)
            return lambda value: _EPOCH + datetime.timedelta(milliseconds=value)
        return lambda value: None if value is None or value < 0 else _EPOCH + datetime.timedelta(milliseconds=value)
    return _identity


def _zero(f: dataclasses.Field, kafka_type):
    shape = classify_field(f)
    if shape.is_array:
        return ()
    if isinstance(shape, EntityField):
        return None if is_optional(f) else build(shape.type_, {})
    if is_optional(f):
        return None
    return {
        "string": "", "bytes": b"", "records": b"", "bool": False, "uuid": uuid.UUID(int=0),
        "error_code": ErrorCode(0), "timedelta_i32": datetime.timedelta(0),
        "timedelta_i64": datetime.timedelta(0), "datetime_i64": _EPOCH,
    }.get(kafka_type, 0)
