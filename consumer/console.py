"""Library side of ``kafkasim consume`` (Kafka's kafka-console-consumer): the read loop and
the record formatter.

:func:`consume` yields records of one topic until ``max_records`` records, or until no
record arrived for ``timeout_ms`` (then it raises :class:`KafkaTimeoutError`, as Kafka's
``--timeout-ms``), or until the caller stops iterating (Ctrl-C); without a ``timeout_ms``
it runs until then. Where it reads:

- ``partition`` (Kafka's ``--partition``): that partition only, no group; from ``offset``
  (``"earliest"``, ``"latest"`` or a non-negative offset), else from the beginning with
  ``from_beginning``, else from the end;
- ``group_id``: subscribes as a member of the group (auto-commit on, as the console
  consumer), committing on exit; ``from_beginning`` applies without a committed offset;
- ``share_group_id`` (``--share-group``, Kafka's kafka-console-share-consumer): subscribes as
  a member of that share group (KIP-932) with implicit acknowledgement: every record shown is
  accepted by the next poll or on exit; records acquired but not shown (``max_records``
  reached) are released on exit. Where a share group starts is its group config
  ``share.auto.offset.reset``, so it takes no ``partition``, ``offset`` or ``from_beginning``;
- neither: every partition, no group, nothing committed.

``isolation_level`` is Kafka's console consumer's ``--isolation-level`` (default
``read_uncommitted``); transaction markers are never shown.

:class:`MessageFormatter` is Kafka's DefaultMessageFormatter: properties ``print.timestamp``,
``print.partition``, ``print.offset``, ``print.headers``, ``print.key``, ``print.value``
(default: the value only), ``key.separator`` (between every column; default tab),
``line.separator``, ``headers.separator`` (","), ``null.literal`` ("null"); columns in
Kafka's order: ``CreateTime:<ts>``, ``Partition:<p>``, ``Offset:<o>``, headers
(``k:v,k2:v2`` or ``NO_HEADERS``), key, value. Bytes are written as they are.
:func:`record_to_json` renders one record as the JSON-lines object of ``--json``.

Thread-safety: a generator owning one Consumer; use it from one thread.
"""

from __future__ import annotations

import base64
import difflib
from typing import Callable, Iterator, Mapping, Optional, Union

from kafkasim.consumer.consumer import Consumer
from kafkasim.consumer.fetcher import LOG_APPEND_TIME, ConsumerRecord
from kafkasim.consumer.share_consumer import ShareConsumer
from kafkasim.errors import InvalidArgumentError, KafkaTimeoutError
from kafkasim.types import TopicPartition

__all__ = ["consume", "parse_offset", "MessageFormatter", "record_to_json", "text_or_base64"]

_BOOLEANS = ("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key", "print.value")
_SEPARATORS = {"key.separator": "\t", "line.separator": "\n", "headers.separator": ",", "null.literal": "null"}


def parse_offset(text: str) -> Union[str, int]:
    """``--offset``: ``earliest``, ``latest`` or a non-negative offset, with Kafka's message otherwise."""
    low = text.lower()
    if low in ("earliest", "latest"):
        return low
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidArgumentError(f"The provided offset value '{text}' is incorrect. Valid values are "
                                   "'earliest', 'latest', or a non-negative long.")
    return value


def consume(broker, topic: str, *, group_id: Optional[str] = None, partition: Optional[int] = None,
            offset: Union[None, str, int] = None, from_beginning: bool = False,
            max_records: Optional[int] = None, timeout_ms: Optional[int] = None,
            client_id: str = "kafkasim-console-consumer",
            on_wait: Optional[Callable[[str], None]] = None,
            isolation_level: str = "read_uncommitted",
            share_group_id: Optional[str] = None) -> Iterator[ConsumerRecord]:
    """Yield records of ``topic`` (see the module docstring for where from and until when).

    ``on_wait(text)`` is called once, with ``group_id``, while the consumer first waits for
    the group to assign it partitions (the coordinator holds a new group's first rebalance
    for ``group.initial.rebalance.delay.ms``, 3 s by default, as Kafka's does).
    ``isolation_level`` (Kafka's ``--isolation-level``): ``read_committed`` reads only committed
    transactional records, up to the last stable offset."""
    reset = "earliest" if from_beginning else "latest"
    clock = broker.clock
    # created as the broker's auto.create.topics.enable says (Kafka's console consumer's first
    # metadata request does that); UnknownTopicOrPartitionError when it does not
    count = broker.auto_create_topic(topic)
    if share_group_id is not None:
        if group_id is not None or partition is not None or offset is not None or from_beginning:
            raise InvalidArgumentError("a share group reads where its group config share.auto.offset.reset says: "
                                       "share_group_id takes no group_id, partition, offset or from_beginning")
        yield from _share_consume(broker, topic, share_group_id, max_records=max_records, timeout_ms=timeout_ms,
                                  client_id=client_id)
        return
    if partition is not None:
        if not 0 <= partition < count:
            raise InvalidArgumentError(f"partition {partition} of topic {topic} does not exist "
                                       f"(it has partitions 0..{count - 1})")
        c = Consumer(broker, auto_offset_reset=reset, client_id=client_id, clock=clock,
                     isolation_level=isolation_level)
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        start = offset if offset is not None else reset
        if start == "earliest":
            c.seek_to_beginning(tp)
        elif start == "latest":
            c.seek_to_end(tp)
        else:
            c.seek(tp, start)
    elif group_id is None:
        c = Consumer(broker, auto_offset_reset=reset, client_id=client_id, clock=clock,
                     isolation_level=isolation_level)
        c.assign([TopicPartition(topic, p) for p in range(count)])
    else:
        c = Consumer(broker, topic, group_id=group_id, auto_offset_reset=reset, client_id=client_id,
                     clock=clock, isolation_level=isolation_level)
    n = 0
    told = False
    try:
        last = clock.now_ms()
        while max_records is None or n < max_records:
            want = None if max_records is None else max_records - n
            wait = 100 if timeout_ms is None else min(100, timeout_ms)
            batch = c.poll(timeout_ms=wait, max_records=want)
            now = clock.now_ms()
            if c.rebalance_pending:
                last = now        # the timeout counts only once the consumer has its partitions
                if on_wait is not None and not told and group_id is not None:
                    told = True
                    on_wait(f"waiting for group {group_id} to assign partitions (a new group's first "
                            f"rebalance waits group.initial.rebalance.delay.ms, 3000 ms by default)")
            if not batch:
                if timeout_ms is not None and now - last >= timeout_ms:
                    raise KafkaTimeoutError(f"no message for {timeout_ms} ms (--timeout-ms)")
                continue
            last = now
            for recs in batch.values():
                for r in recs:
                    yield r
                    n += 1
    finally:
        c.close()


def _share_consume(broker, topic: str, group_id: str, *, max_records: Optional[int], timeout_ms: Optional[int],
                   client_id: str) -> Iterator:
    """:func:`consume` as a member of share group ``group_id`` (implicit acknowledgement)."""
    clock = broker.clock
    c = ShareConsumer(broker, group_id=group_id, client_id=client_id, clock=clock)
    n = 0
    try:
        c.subscribe([topic])
        last = clock.now_ms()
        while max_records is None or n < max_records:
            want = None if max_records is None else max_records - n
            wait = 100 if timeout_ms is None else min(100, timeout_ms)
            records = c.poll(timeout_ms=wait, max_records=want)
            now = clock.now_ms()
            if not c.assignment():
                last = now        # the timeout counts only once the member has its partitions
            if not records:
                if timeout_ms is not None and now - last >= timeout_ms:
                    raise KafkaTimeoutError(f"no message for {timeout_ms} ms (--timeout-ms)")
                continue
            last = now
            for r in records:
                yield r
                n += 1
    finally:
        c.close()


class MessageFormatter:
    """Kafka's DefaultMessageFormatter over ``properties`` (see the module docstring)."""

    def __init__(self, properties: Mapping[str, str]) -> None:
        known = list(_BOOLEANS) + list(_SEPARATORS)
        for name in properties:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=2)
                hint = f" (did you mean {' or '.join(close)}?)" if close else ""
                raise InvalidArgumentError(f"unknown --property {name!r}{hint}; known: {', '.join(known)}")
        flags = {name: False for name in _BOOLEANS}
        flags["print.value"] = True
        for name in _BOOLEANS:
            if name in properties:
                flags[name] = properties[name].strip().lower() == "true"
        self._flags = flags
        sep = {name: properties.get(name, default).encode("utf-8") for name, default in _SEPARATORS.items()}
        self._key_sep, self._line_sep = sep["key.separator"], sep["line.separator"]
        self._headers_sep, self._null = sep["headers.separator"], sep["null.literal"]

    def format(self, r: ConsumerRecord) -> bytes:
        """One record as the bytes Kafka's formatter writes for it (line separator included)."""
        f, null = self._flags, self._null
        cols: list[bytes] = []
        if f["print.timestamp"]:
            kind = "LogAppendTime" if r.timestamp_type == LOG_APPEND_TIME else "CreateTime"
            cols.append(f"{kind}:{r.timestamp}".encode())
        if f["print.partition"]:
            cols.append(f"Partition:{r.partition}".encode())
        if f["print.offset"]:
            cols.append(f"Offset:{r.offset}".encode())
        if f["print.headers"]:
            cols.append(self._headers_sep.join(k.encode("utf-8") + b":" + (null if v is None else v)
                                               for k, v in r.headers) if r.headers else b"NO_HEADERS")
        if f["print.key"]:
            cols.append(null if r.key is None else r.key)
        if f["print.value"]:
            cols.append(null if r.value is None else r.value)
        # Kafka writes the column separator after each column but the last, the line separator after it
        return self._key_sep.join(cols) + self._line_sep if cols else b""


def text_or_base64(data: Optional[bytes]) -> tuple[Optional[str], bool]:
    """``(text, False)`` when ``data`` is valid UTF-8, else ``(base64 text, True)``."""
    if data is None:
        return None, False
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), True


def record_to_json(r: ConsumerRecord) -> dict:
    """One record as a JSON-ready dict (the ``kafkasim consume --json`` line format)."""
    key, key_b64 = text_or_base64(r.key)
    value, value_b64 = text_or_base64(r.value)
    headers = []
    for hk, hv in r.headers:
        text, b64 = text_or_base64(hv)
        headers.append({"key": hk, "value": text, "value_base64": b64})
    return {"topic": r.topic, "partition": r.partition, "offset": r.offset,
            "timestamp": r.timestamp, "key": key, "key_base64": key_b64,
            "value": value, "value_base64": value_b64, "headers": headers}
