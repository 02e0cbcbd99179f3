"""``kafka-get-offsets`` over the broker API: the offset of each partition at a time.

``--time`` takes Kafka's values: ``-1``/``latest`` (log end), ``-2``/``earliest`` (log
start), or a timestamp in ms (the first offset whose record timestamp is at or after
it). As in Kafka's ``GetOffsetShell``: ``--topic`` is a regular expression matched
against the whole topic name (default: every topic, internal ones included unless
excluded), ``--partitions`` a comma-separated list of ids, partitions with no offset at
that time are left out, and rows are sorted by ``topic-partition`` text.
``max-timestamp`` (-3) and the tiered-storage specs (-4, -5, -6) are not served.
Pure function of the broker's answers; thread-safe as the broker is.
"""

from __future__ import annotations

import re
from typing import Optional

from kafkasim.errors import InvalidArgumentError

__all__ = ["parse_time", "get_offsets"]

_NAMED = {"latest": -1, "earliest": -2}
_UNSERVED = {"max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5, "earliest-pending-upload": -6}


def parse_time(text: str) -> int:
    """``latest``/``-1``, ``earliest``/``-2`` or a timestamp in ms → the ListOffsets timestamp."""
    if text in _NAMED:
        return _NAMED[text]
    if text in _UNSERVED or text in {str(v) for v in _UNSERVED.values()}:
        raise InvalidArgumentError(f"--time {text}: not served by kafkasim (no max-timestamp index, "
                                   f"no tiered storage); use -1/latest, -2/earliest or a timestamp")
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgumentError(
            f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest, "
            f"or a specified long format timestamp") from None
    if value < -2:
        raise InvalidArgumentError(f"--time {value}: a timestamp must be >= 0 (or -1 latest, -2 earliest)")
    return value


def get_offsets(broker, *, topic: Optional[str] = None, partitions: Optional[str] = None,
                time: str = "latest", exclude_internal: bool = False) -> list[dict]:
    """``[{"topic", "partition", "offset"}]`` for the matching partitions (see the module docstring)."""
    ts = parse_time(time)
    try:
        pattern = re.compile(topic if topic is not None else ".*")
    except re.error as exc:
        raise InvalidArgumentError(f"--topic {topic!r} is not a valid regular expression: {exc}") from None
    wanted = None
    if partitions:
        try:
            wanted = {int(p) for p in partitions.split(",")}
        except ValueError:
            raise InvalidArgumentError("--partitions expects a comma separated list of numeric partition ids, "
                                       f"but received: {partitions}") from None
    rows = []
    for name in broker.list_topics(include_internal=not exclude_internal):
        if not pattern.fullmatch(name):
            continue
        for p in range(broker.partition_count(name)):
            if wanted is not None and p not in wanted:
                continue
            offset = broker.list_offsets(name, p, ts)[0]
            if offset >= 0:
                rows.append({"topic": name, "partition": p, "offset": offset})
    if not rows and not any(pattern.fullmatch(n) for n in broker.list_topics(include_internal=True)):
        raise InvalidArgumentError("Could not match any topic-partitions with the specified filters")
    rows.sort(key=lambda r: f"{r['topic']}-{r['partition']}")
    return rows
