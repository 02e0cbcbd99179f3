"""Text input for ``kafkasim produce``: kafka-console-producer's line reader, streaming.

Lines are read, parsed and sent **one at a time**, as ``kafka-console-producer`` does:
a record is handed to the producer as soon as its line is read (so a producer in one
terminal and a consumer in another see records as they are typed), and input ends at
end of file. Two formats:

- ``line`` (the default; Kafka's ``LineMessageReader``): the whole line is the value
  and the key is null. Reader properties (``--property name=value``) with Kafka's names
  and defaults: ``parse.key`` (false), ``key.separator`` (TAB), ``parse.headers``
  (false), ``headers.delimiter`` (TAB), ``headers.separator`` (``,``, a regular
  expression as in Kafka), ``headers.key.separator`` (``:``), ``null.marker`` (none),
  ``ignore.error`` (false). A line is ``[headers<delim>][key<sep>]value``; an empty
  line is a record with an empty value, as in Kafka. Errors use Kafka's words, e.g.
  ``No key separator found on line number 3: 'abc'``.
- ``json`` (kafkasim's own): one JSON object per line, ``{"key": str|null, "value":
  str|null, "headers": {str: str|null}, "partition": int, "timestamp": int}``, every
  field optional; blank lines are skipped.

Input must be UTF-8; a line that is not is an error naming its number and byte.

**What a failure leaves** (:func:`produce_lines` never raises for a bad line): the
records of the lines before the failing one were sent; the producer is flushed, and the
summary says exactly how many records were acknowledged before the failing line, and
names that line and its error. A line that fails as it is read or sent (a parse error,
a record the one record rule refuses, an explicit partition out of range, a record over
``max.request.size``) stops the reading: nothing after it is sent. A record the broker
refuses later (e.g. over the topic's ``max.message.bytes``) fails alone — the producer
splits its batch, as Kafka's does — while the lines after it may already be on their way:
``after_error`` counts those that were written anyway, so the summary stays exact.

Thread-safety: pure parsing plus one Producer call sequence; use from one thread.
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Mapping, NamedTuple, Optional, Union

from kafkasim.errors import InvalidArgumentError, KafkaSimError
from kafkasim.records.validation import check_timestamp

__all__ = ["LineRecord", "LineReader", "parse_json_line", "produce_lines", "READER_PROPERTIES"]

_JSON_FIELDS = {"key", "value", "headers", "partition", "timestamp"}

READER_PROPERTIES = {          # Kafka's LineMessageReader properties and defaults
    "parse.key": "false",
    "key.separator": "\t",
    "parse.headers": "false",
    "headers.delimiter": "\t",
    "headers.separator": ",",
    "headers.key.separator": ":",
    "null.marker": None,
    "ignore.error": "false",
}


class LineRecord(NamedTuple):
    key: Optional[bytes]
    value: Optional[bytes]
    headers: tuple
    partition: Optional[int]
    timestamp_ms: Optional[int]


def _flag(v: Optional[str]) -> bool:
    return str(v).strip().lower() == "true"


class LineReader:
    """Kafka's ``LineMessageReader``: properties in, one record per line out.

    >>> LineReader({"parse.key": "true", "key.separator": ":"}).parse("user1:hello", 1)
    LineRecord(key=b'user1', value=b'hello', headers=(), partition=None, timestamp_ms=None)
    """

    def __init__(self, properties: Optional[Mapping[str, str]] = None) -> None:
        props = dict(READER_PROPERTIES)
        unknown = sorted(set(properties or {}) - set(READER_PROPERTIES))
        if unknown:
            raise InvalidArgumentError(
                f"unknown reader propert{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)} "
                f"(known: {', '.join(READER_PROPERTIES)})")
        props.update(properties or {})
        self.parse_key = _flag(props["parse.key"])
        self.key_separator = props["key.separator"]
        self.parse_headers = _flag(props["parse.headers"])
        self.headers_delimiter = props["headers.delimiter"]
        self.headers_separator = props["headers.separator"]
        self.headers_key_separator = props["headers.key.separator"]
        self.ignore_error = _flag(props["ignore.error"])
        self.null_marker = props["null.marker"]
        for a, b in (("headers.delimiter", "headers.separator"), ("headers.delimiter", "headers.key.separator"),
                     ("headers.separator", "headers.key.separator")):
            if props[a] == props[b]:
                raise InvalidArgumentError(f"{a} and {b} may not be equal")
        for other in ("key.separator", "headers.separator", "headers.delimiter", "headers.key.separator"):
            if self.null_marker is not None and props[other] == self.null_marker:
                raise InvalidArgumentError(f"null.marker and {other} may not be equal")
        for name in ("key.separator", "headers.delimiter", "headers.key.separator"):
            if not props[name]:
                raise InvalidArgumentError(f"{name} may not be empty")
        try:
            self._header_split = re.compile(self.headers_separator)
        except re.error as exc:
            raise InvalidArgumentError(f"headers.separator {self.headers_separator!r} is not a valid "
                                       f"regular expression: {exc}") from exc

    def _field(self, enabled: bool, line: str, start: int, mark: str, what: str, lineno: int) -> Optional[str]:
        if not enabled:
            return None
        i = line.find(mark, start)
        if i < 0:
            if self.ignore_error:
                return None
            raise InvalidArgumentError(f"No {what} found on line number {lineno}: '{line}'")
        return line[start:i]

    def _bytes(self, s: Optional[str]) -> Optional[bytes]:
        return None if s is None or s == self.null_marker else s.encode("utf-8")

    def _headers(self, text: str, lineno: int) -> tuple:
        pairs = self._header_split.split(text)
        while len(pairs) > 1 and pairs[-1] == "":      # Java's String.split drops trailing empties
            pairs.pop()
        out = []
        for pair in pairs:
            i = pair.find(self.headers_key_separator)
            if i < 0:
                if self.ignore_error:
                    out.append((pair, None))
                    continue
                raise InvalidArgumentError(
                    f"No header key separator found in pair '{pair}' on line number {lineno}")
            key = pair[:i]
            if self.null_marker is not None and key == self.null_marker:
                raise InvalidArgumentError(f"Header keys should not be equal to the null marker "
                                           f"'{self.null_marker}' as they can't be null")
            out.append((key, self._bytes(pair[i + len(self.headers_key_separator):])))
        return tuple(out)

    def parse(self, line: str, lineno: int) -> LineRecord:
        """One line (without its end-of-line) → a record; raises InvalidArgumentError naming ``lineno``."""
        headers = self._field(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter", lineno)
        start = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._field(self.parse_key, line, start, self.key_separator, "key separator", lineno)
        start += 0 if key is None else len(key) + len(self.key_separator)
        hs = self._headers(headers, lineno) if headers is not None and headers != self.null_marker else ()
        return LineRecord(self._bytes(key), self._bytes(line[start:]), hs, None, None)


def _text(field: str, v, lineno: int) -> Optional[bytes]:
    if v is None:
        return None
    if not isinstance(v, str):
        raise InvalidArgumentError(
            f"line {lineno}: JSON field {field!r} must be a string or null, got {type(v).__name__}: {v!r:.40}")
    return v.encode("utf-8")


def parse_json_line(line: str, lineno: int) -> Optional[LineRecord]:
    """One JSON-object line → a record (``None`` for a blank line); raises InvalidArgumentError."""
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"line {lineno}: invalid JSON: {exc.msg} at column {exc.colno}") from exc
    if not isinstance(obj, dict):
        raise InvalidArgumentError(f"line {lineno}: a JSON line must be an object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - _JSON_FIELDS)
    if unknown:
        raise InvalidArgumentError(
            f"line {lineno}: unknown JSON field(s) {', '.join(unknown)} (allowed: {', '.join(sorted(_JSON_FIELDS))})")
    headers = obj.get("headers") or {}
    if not isinstance(headers, dict):
        raise InvalidArgumentError(f"line {lineno}: 'headers' must be an object of strings")
    hs = tuple((str(k), _text(f"headers.{k}", v, lineno)) for k, v in headers.items())
    part = obj.get("partition")
    if part is not None and (isinstance(part, bool) or not isinstance(part, int)):
        raise InvalidArgumentError(f"line {lineno}: 'partition' must be an integer, got {part!r}")
    ts = obj.get("timestamp")
    if ts is not None:
        ts = check_timestamp(ts, f"line {lineno}: ")      # the one record rule
    return LineRecord(_text("key", obj.get("key"), lineno), _text("value", obj.get("value"), lineno),
                      hs, part, ts)


def _decode(raw: Union[bytes, str], lineno: int) -> str:
    if isinstance(raw, str):
        text = raw
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(
                f"line {lineno}: not valid UTF-8 ({exc.reason}: byte 0x{raw[exc.start]:02x} at byte "
                f"{exc.start + 1} of the line)") from exc
    if text.endswith("\n"):
        text = text[:-1]
    return text[:-1] if text.endswith("\r") else text


def produce_lines(producer, topic: str, lines: Iterable[Union[bytes, str]], *,
                  reader: Optional[LineReader] = None, input_format: str = "line",
                  partition: Optional[int] = None) -> dict:
    """Stream ``lines`` to ``topic`` (see the module docstring); flush; summarise.

    Returns ``{"topic", "records", "partitions": {p: {"count", "first_offset",
    "last_offset"}}, "error": None | {"line", "type", "message"}, "after_error"}``;
    ``records`` counts the acknowledged records, all of them from lines before
    ``error["line"]`` (``partitions`` describes them); ``after_error`` counts the records
    of lines after it that were written anyway (sent before the failure came back).
    """
    if input_format not in ("line", "json"):
        raise InvalidArgumentError(f"input format {input_format!r}: must be 'line' or 'json'")
    reader = reader or LineReader()
    sent: list = []                       # (lineno, future)
    error: Optional[dict] = None
    for lineno, raw in enumerate(lines, 1):
        try:
            text = _decode(raw, lineno)
            rec = parse_json_line(text, lineno) if input_format == "json" else reader.parse(text, lineno)
            if rec is None:
                continue
            sent.append((lineno, producer.send(
                topic, value=rec.value, key=rec.key, headers=rec.headers or None,
                partition=partition if partition is not None else rec.partition,
                timestamp_ms=rec.timestamp_ms)))
        except KafkaSimError as exc:
            error = {"line": lineno, "type": type(exc).__name__, "message": str(exc)}
            break
        if sent and sent[-1][1].failed():
            break                          # a synchronous delivery failure: stop reading here
    try:
        producer.flush()
    except KafkaSimError:
        pass                               # each future below says what happened to it
    outcomes = []
    for lineno, future in sent:
        try:
            outcomes.append((lineno, future.get(timeout=0)))
        except KafkaSimError as exc:
            outcomes.append((lineno, None))
            if error is None or lineno < error["line"]:
                error = {"line": lineno, "type": type(exc).__name__, "message": str(exc)}
    parts: dict[int, dict] = {}
    acked = after = 0
    for lineno, md in outcomes:
        if md is None:
            continue
        if error is not None and lineno > error["line"]:
            after += 1
            continue
        acked += 1
        s = parts.setdefault(md.partition, {"count": 0, "first_offset": md.offset, "last_offset": md.offset})
        s["count"] += 1
        s["first_offset"] = min(s["first_offset"], md.offset)
        s["last_offset"] = max(s["last_offset"], md.offset)
    return {"topic": topic, "records": acked, "partitions": dict(sorted(parts.items())), "error": error,
            "after_error": after}
