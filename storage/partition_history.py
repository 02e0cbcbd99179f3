"""A topic's partition-count history: the ``partition_history`` field of its metadata file
(storage/FORMAT.md §1.2), built, checked and read here, once.

One entry per ``create_partitions`` (Kafka's CreatePartitions), oldest first::

    {"from_partitions": 6, "to_partitions": 8, "time_ms": 1700000001000,
     "log_end_offsets": [40, 37, 41, 39, 36, 42]}

``log_end_offsets[p]`` is partition ``p``'s log end offset when the count changed: the
first offset of ``p`` written under the new count. The new partitions start at offset 0.

Invariants (checked by :func:`check_partition_history`, on the broker's load and on every
reader's): entries chain (each ``from_partitions`` is the previous ``to_partitions``; the
last ``to_partitions`` is the topic's current count), counts only grow, ``time_ms`` never
decreases, ``log_end_offsets`` has one int >= 0 per old partition. A violation is a
:class:`~kafkasim.errors.KafkaStorageError` saying which entry and field.

Pure functions over plain data: no I/O, thread-safe. Storage layer, so that the broker
(writer) and the Spark jobs (reader of a data dir) share the one set of rules.
"""

from __future__ import annotations

from typing import Any, Sequence

from kafkasim.errors import KafkaStorageError

__all__ = ["FIELD", "history_entry", "check_partition_history", "counts_of"]

FIELD = "partition_history"
"""The name of the history field in a topic's metadata file."""

_KEYS = ("from_partitions", "log_end_offsets", "time_ms", "to_partitions")


def history_entry(from_partitions: int, to_partitions: int, time_ms: int,
                  log_end_offsets: Sequence[int]) -> dict:
    """One history entry (the module docstring), checked."""
    entry = {"from_partitions": int(from_partitions), "to_partitions": int(to_partitions),
             "time_ms": int(time_ms), "log_end_offsets": [int(o) for o in log_end_offsets]}
    check_partition_history([entry], to_partitions)
    return entry


def _int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise KafkaStorageError(f"{where}: {value!r:.80} is not an int >= {minimum}")
    return value


def check_partition_history(value: Any, partitions: int) -> list[dict]:
    """``value`` as a history of a topic that now has ``partitions`` partitions; a
    KafkaStorageError naming the entry, the field and the value if it breaks a rule."""
    if not isinstance(value, list):
        raise KafkaStorageError(f"{FIELD}: expected a list, got {type(value).__name__}")
    prev_to, prev_time = None, 0
    for i, entry in enumerate(value):
        where = f"{FIELD}[{i}]"
        if not isinstance(entry, dict) or tuple(sorted(entry)) != _KEYS:
            raise KafkaStorageError(f"{where}: expected an object with exactly the fields {', '.join(_KEYS)}, "
                                    f"got {entry!r:.80}")
        a = _int(entry["from_partitions"], f"{where}.from_partitions", 1)
        b = _int(entry["to_partitions"], f"{where}.to_partitions", a + 1)
        t = _int(entry["time_ms"], f"{where}.time_ms", prev_time)
        if prev_to is not None and a != prev_to:
            raise KafkaStorageError(
                f"{where}.from_partitions: {a} is not the previous entry's to_partitions {prev_to}")
        offsets = entry["log_end_offsets"]
        if not isinstance(offsets, list) or len(offsets) != a:
            raise KafkaStorageError(f"{where}.log_end_offsets: expected a list of {a} offsets, got {offsets!r:.80}")
        for p, o in enumerate(offsets):
            _int(o, f"{where}.log_end_offsets[{p}]", 0)
        prev_to, prev_time = b, t
    if prev_to is not None and prev_to != partitions:
        raise KafkaStorageError(f"{FIELD}: the last entry grows the topic to {prev_to} partitions, "
                                f"but it has {partitions}")
    return value


def counts_of(history: Sequence[dict]) -> list[int]:
    """Every partition count the history names, ascending (the current one last)."""
    return [e["from_partitions"] for e in history] + [e["to_partitions"] for e in history[-1:]]
