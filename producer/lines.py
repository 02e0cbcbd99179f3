"""Text input for ``kafkasim produce``: parse lines into records and send them with a Producer.

Two line formats, chosen per line:

- ``key<TAB>value`` — split at the first TAB; both sides UTF-8. An empty key before the
  TAB is the empty key ``b""`` (not a null key). A line without a TAB is an error, as
  in ``kafka-console-producer --property parse.key=true``:
  ``No key separator found on line number 3: 'abc'``.
- a JSON object (the line starts with ``{``):
  ``{"key": str|null, "value": str|null, "headers": {str: str|null}, "partition": int,
  "timestamp": int}``; every field optional; strings are UTF-8 encoded; null key =
  keyless record, null value = tombstone. Unknown fields are an error.

Blank lines are skipped. All lines are parsed **before** anything is sent, so a bad
line (error names its 1-based line number) writes nothing.

Thread-safety: pure functions plus one Producer call sequence; use from one thread.
"""

from __future__ import annotations

import json
from typing import Iterable, NamedTuple, Optional

from kafkasim.errors import InvalidArgumentError

__all__ = ["LineRecord", "parse_line", "parse_lines", "produce_lines"]

_JSON_FIELDS = {"key", "value", "headers", "partition", "timestamp"}


class LineRecord(NamedTuple):
    key: Optional[bytes]
    value: Optional[bytes]
    headers: tuple
    partition: Optional[int]
    timestamp_ms: Optional[int]


def _text(field: str, v, lineno: int) -> Optional[bytes]:
    if v is None:
        return None
    if not isinstance(v, str):
        raise InvalidArgumentError(
            f"line {lineno}: JSON field {field!r} must be a string or null, got {type(v).__name__}: {v!r:.40}")
    return v.encode("utf-8")


def parse_line(line: str, lineno: int) -> Optional[LineRecord]:
    """One input line → a record (``None`` for a blank line); raises InvalidArgumentError naming ``lineno``."""
    line = line.rstrip("\r\n")
    if not line.strip():
        return None
    if line.lstrip().startswith("{"):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"line {lineno}: invalid JSON: {exc.msg} at column {exc.colno}") from exc
        if not isinstance(obj, dict):
            raise InvalidArgumentError(f"line {lineno}: a JSON line must be an object, got {type(obj).__name__}")
        unknown = sorted(set(obj) - _JSON_FIELDS)
        if unknown:
            raise InvalidArgumentError(
                f"line {lineno}: unknown JSON field(s) {', '.join(unknown)} "
                f"(allowed: {', '.join(sorted(_JSON_FIELDS))})")
        headers = obj.get("headers") or {}
        if not isinstance(headers, dict):
            raise InvalidArgumentError(f"line {lineno}: 'headers' must be an object of strings")
        hs = tuple((str(k), _text(f"headers.{k}", v, lineno)) for k, v in headers.items())
        part = obj.get("partition")
        if part is not None and (isinstance(part, bool) or not isinstance(part, int)):
            raise InvalidArgumentError(f"line {lineno}: 'partition' must be an integer, got {part!r}")
        ts = obj.get("timestamp")
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int) or ts < 0):
            raise InvalidArgumentError(f"line {lineno}: 'timestamp' must be a non-negative integer (ms), got {ts!r}")
        return LineRecord(_text("key", obj.get("key"), lineno), _text("value", obj.get("value"), lineno),
                          hs, part, ts)
    key, sep, value = line.partition("\t")
    if not sep:
        raise InvalidArgumentError(f"No key separator found on line number {lineno}: '{line[:80]}'")
    return LineRecord(key.encode("utf-8"), value.encode("utf-8"), (), None, None)


def parse_lines(lines: Iterable[str]) -> list[LineRecord]:
    """Parse every line first; the first bad line raises with its number."""
    out = []
    for i, line in enumerate(lines, 1):
        rec = parse_line(line, i)
        if rec is not None:
            out.append(rec)
    return out


def produce_lines(producer, topic: str, lines: Iterable[str], partition: Optional[int] = None) -> dict:
    """Parse ``lines``, send each record (``partition`` overrides every line's), flush, summarise.

    Returns ``{"topic", "records", "partitions": {p: {"count", "first_offset", "last_offset"}}}``.
    """
    records = parse_lines(lines)
    futures = [producer.send(topic, value=r.value, key=r.key, headers=r.headers or None,
                             partition=partition if partition is not None else r.partition,
                             timestamp_ms=r.timestamp_ms)
               for r in records]
    producer.flush()
    parts: dict[int, dict] = {}
    for f in futures:
        md = f.get()
        s = parts.setdefault(md.partition, {"count": 0, "first_offset": md.offset, "last_offset": md.offset})
        s["count"] += 1
        s["first_offset"] = min(s["first_offset"], md.offset)
        s["last_offset"] = max(s["last_offset"], md.offset)
    return {"topic": topic, "records": len(records), "partitions": dict(sorted(parts.items()))}
