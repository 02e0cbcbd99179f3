"""What a record is (storage/FORMAT.md §2.2), checked in one place: the one validation of a record.

A record handed to kafkasim — by ``Producer.send``, ``Broker.append_records``,
``Log.append``, inside a producer's batch at ``Broker.produce``, or by ``kafkasim produce``
(through ``send``) — has

- ``key`` and ``value``: ``bytes`` or ``None``;
- ``headers``: a sequence of ``(key, value)`` pairs (a list or tuple of 2-item tuples or
  lists, or any other iterable of them that is not a ``str``, bytes or a mapping), each
  ``key`` a ``str`` and each ``value`` ``bytes`` or ``None``;
- ``timestamp``: an ``int`` (not a ``bool``) of milliseconds since the epoch in
  ``[0, 2**63 - 1]`` — the int64 of FORMAT.md §2.1, never negative.

Errors name the field and the bad value, after where the record is (``record 3: ``):
:class:`~kafkasim.errors.InvalidTimestampError` for a timestamp (Kafka's code 32),
:class:`~kafkasim.errors.InvalidRecordError` for everything else (code 87), e.g.
``header 0: key must be str, got bytes: b'hk'`` or ``header 'h': value must be bytes or
None, got str: 'v'``.

Every entry point runs these checks before a sequence number or an offset is assigned,
so a rejected record never reaches a batch: the producer in ``send()``
(:func:`check_timestamp`, :func:`check_headers`; its serializer step makes key and value
bytes), the broker's ``append_records`` and the log's ``append`` (:func:`check_records`),
and the broker's ``produce`` for an encoded batch (``storage/validation.py``: a v2 batch
cannot hold a field of the wrong type, so there the records' lengths, offsets and
timestamps are checked as they are walked). Sizes are estimated the producer's way (:func:`record_size`, ``RECORD_OVERHEAD``
plus key, value and header bytes); the limits themselves (``max.request.size``,
``max.message.bytes``) belong to the producer and the log.

Speed: the common record (no headers, no explicit timestamp) costs the producer nothing
here; a header costs a few type checks. Pure functions; thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Optional, Sequence

from kafkasim.errors import InvalidRecordError, InvalidTimestampError

__all__ = [
    "MAX_TIMESTAMP", "RECORD_OVERHEAD", "check_timestamp", "check_blob", "check_headers",
    "check_record", "check_records", "record_size",
]

MAX_TIMESTAMP = 2**63 - 1
"""The largest timestamp a record may carry (int64, FORMAT.md §2.1)."""

RECORD_OVERHEAD = 8
"""Estimated bytes per record besides key, value and headers (deltas, lengths)."""

_NOT_HEADERS = (str, bytes, bytearray, memoryview, Mapping)


def _shown(v: Any) -> str:
    return f"{type(v).__name__}: {v!r:.60}"


def check_timestamp(ts: Any, where: str = "") -> int:
    """``ts`` as an int if it is a valid record timestamp, else InvalidTimestampError naming it."""
    if type(ts) is int and 0 <= ts <= MAX_TIMESTAMP:
        return ts
    if isinstance(ts, int) and not isinstance(ts, bool) and 0 <= ts <= MAX_TIMESTAMP:
        return int(ts)              # an int subclass (IntEnum, ...): stored as a plain int
    raise InvalidTimestampError(
        f"{where}Invalid timestamp: {ts!r:.60}. A record timestamp is an int of milliseconds "
        f"since the epoch in [0, 2**63-1], got {type(ts).__name__}")


def check_blob(what: str, v: Any, where: str = "") -> Optional[bytes]:
    """``v`` if it is bytes or None (a record's key or value), else InvalidRecordError naming ``what``."""
    if v is None or isinstance(v, bytes):
        return v
    raise InvalidRecordError(f"{where}{what} must be bytes or None, got {_shown(v)}")


def check_headers(headers: Any, where: str = "") -> tuple[tuple, int]:
    """``(headers as a tuple of (key, value) tuples, their size in bytes)``; InvalidRecordError
    naming the bad header.

    ``None`` is no headers. The pairs are copied into tuples (a list pair the caller changes
    later cannot change the record). The size counts each key's characters and each
    value's bytes.
    """
    if type(headers) is not tuple and type(headers) is not list:
        if headers is None:
            return (), 0
        if isinstance(headers, _NOT_HEADERS) or not isinstance(headers, Iterable):
            raise InvalidRecordError(
                f"{where}headers must be a sequence of (str, bytes) pairs, got {_shown(headers)}")
        headers = tuple(headers)
    size = 0
    pairs = []
    for i, pair in enumerate(headers):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InvalidRecordError(f"{where}header {i}: expected a (key, value) pair, got {pair!r:.60}")
        k, v = pair
        if not isinstance(k, str):
            raise InvalidRecordError(f"{where}header {i}: key must be str, got {_shown(k)}")
        if v is None:
            size += len(k)
        elif isinstance(v, bytes):
            size += len(k) + len(v)
        else:
            raise InvalidRecordError(f"{where}header {k!r:.60}: value must be bytes or None, got {_shown(v)}")
        pairs.append(pair if type(pair) is tuple else (k, v))
    return tuple(pairs), size


def record_size(key: Optional[bytes], value: Optional[bytes], headers: Sequence = ()) -> int:
    """The producer's size estimate of a well-formed record: overhead, key, value and header bytes."""
    size = RECORD_OVERHEAD
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    for k, v in headers or ():
        size += len(k) + (len(v) if v is not None else 0)
    return size


def check_record(timestamp: Any, key: Any, value: Any, headers: Any, where: str = "") -> tuple:
    """``(timestamp, key, value, headers as a tuple)`` of a valid record; else the error naming the field.

    Checked in order: timestamp, key, value, headers.
    """
    timestamp = check_timestamp(timestamp, where)
    check_blob("key", key, where)
    check_blob("value", value, where)
    return timestamp, key, value, check_headers(headers, where)[0]


def check_records(records: Any, where: str = "") -> list[tuple]:
    """The ``(timestamp_ms, key, value, headers)`` records checked, as a list of tuples
    (headers as tuples); the error names the record (``record 3: ...``) and the field."""
    if isinstance(records, (str, bytes, bytearray, Mapping)) or not isinstance(records, Iterable):
        raise InvalidRecordError(
            f"{where}records must be a sequence of (timestamp_ms, key, value, headers) tuples, "
            f"got {_shown(records)}")
    out = []
    for i, r in enumerate(records):
        if not isinstance(r, (tuple, list)) or len(r) != 4:
            raise InvalidRecordError(
                f"{where}record {i}: expected a (timestamp_ms, key, value, headers) tuple, got {r!r:.80}")
        out.append(check_record(*r, where=f"{where}record {i}: "))
    return out
