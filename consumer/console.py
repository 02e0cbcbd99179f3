"""Library side of ``kafkasim consume`` (Kafka's kafka-console-consumer): a bounded read loop.

:func:`consume` yields records of one topic: without a group it assigns itself every
partition and never commits; with a group it subscribes (auto-commit on, as the
console consumer) and commits on exit. It stops after ``max_records`` records or when
no record arrived for ``timeout_ms`` once the consumer had its partitions.
:func:`record_to_json` renders one record as the JSON-lines object the CLI prints.

Thread-safety: a generator owning one Consumer; use it from one thread.
"""

from __future__ import annotations

import base64
from typing import Iterator, Optional

from kafkasim.consumer.consumer import Consumer
from kafkasim.consumer.fetcher import ConsumerRecord
from kafkasim.types import TopicPartition

__all__ = ["consume", "record_to_json", "text_or_base64"]


def consume(broker, topic: str, *, group_id: Optional[str] = None, from_beginning: bool = False,
            max_records: Optional[int] = None, timeout_ms: int = 1_000,
            client_id: str = "kafkasim-console-consumer") -> Iterator[ConsumerRecord]:
    """Yield records of ``topic`` until ``max_records`` or ``timeout_ms`` without records."""
    reset = "earliest" if from_beginning else "latest"
    clock = broker.clock
    if group_id is None:
        c = Consumer(broker, auto_offset_reset=reset, client_id=client_id, clock=clock)
        c.assign([TopicPartition(topic, p) for p in range(broker.partition_count(topic))])
    else:
        broker.partition_count(topic)   # UnknownTopicOrPartitionError before joining anything
        c = Consumer(broker, topic, group_id=group_id, auto_offset_reset=reset, client_id=client_id,
                     clock=clock)
    n = 0
    try:
        last = clock.now_ms()
        while max_records is None or n < max_records:
            want = None if max_records is None else max_records - n
            batch = c.poll(timeout_ms=min(100, timeout_ms), max_records=want)
            now = clock.now_ms()
            if c.rebalance_pending:
                last = now        # the timeout counts only once the consumer has its partitions
            if not batch:
                if now - last >= timeout_ms:
                    return
                continue
            last = now
            for recs in batch.values():
                for r in recs:
                    yield r
                    n += 1
    finally:
        c.close()


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
