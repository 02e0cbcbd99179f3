"""Kafka's reassignment JSON (``kafka-reassign-partitions.sh``), read and written.

Format (version 1, the only one Kafka accepts)::

    {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],
                                "log_dirs":["any","any","any"]}]}

``log_dirs`` is optional (defaults to ``"any"`` per replica) and, when present, must be
as long as ``replicas``. ``version`` is optional (defaults to 1). Writing sorts by topic
then partition and prints compactly, as Kafka's ``--generate`` does. Errors are
:class:`~kafkasim.errors.InvalidArgumentError` with Kafka's messages where Kafka has one
(``Not supported version field value 2``, ``Partition replica list cannot be empty``,
``Partition reassignment contains duplicate topic partitions: ...``, ``Size of replicas
list [1, 2] is different from size of log dirs list [any] for partition foo-0``), and
otherwise a message naming the bad field and partition entry. Duplicates are listed in
sorted order (Kafka prints a ``HashSet``'s order). Pure; thread-safe.
"""

from __future__ import annotations

import json
from typing import Mapping, Optional, Sequence

from kafkasim.errors import InvalidArgumentError
from kafkasim.types import TopicPartition

__all__ = ["ANY_LOG_DIR", "dumps_reassignment", "loads_reassignment", "loads_reassignment_with_log_dirs"]

ANY_LOG_DIR = "any"


def dumps_reassignment(plan: Mapping[TopicPartition, Sequence[int]],
                       log_dirs: Optional[Mapping[TopicPartition, Sequence[str]]] = None) -> str:
    """The plan as Kafka's reassignment JSON (``log_dirs`` default to ``"any"``)."""
    entries = []
    for tp in sorted(plan):
        replicas = [int(b) for b in plan[tp]]
        dirs = list((log_dirs or {}).get(tp) or [ANY_LOG_DIR] * len(replicas))
        if len(dirs) != len(replicas):
            raise InvalidArgumentError(_size_message(replicas, dirs, tp))
        entries.append({"topic": tp.topic, "partition": tp.partition, "replicas": replicas, "log_dirs": dirs})
    return json.dumps({"version": 1, "partitions": entries}, separators=(",", ":"))


def _size_message(replicas, dirs, tp) -> str:
    return (f"Size of replicas list [{', '.join(map(str, replicas))}] is different from size of "
            f"log dirs list [{', '.join(dirs)}] for partition {tp}")


def _field(entry: dict, name: str, kind, where: str):
    if name not in entry:
        raise InvalidArgumentError(f"No such field exists: `{name}` ({where})")
    value = entry[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidArgumentError(f"{where}: field `{name}` must be {kind.__name__}, got {json.dumps(value)}")
    return value


def _document(text: str) -> list:
    if not text.strip():
        raise InvalidArgumentError("The input string shouldn't be empty")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"The input string is not a valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise InvalidArgumentError(f"Expected JSON object, received {json.dumps(doc)}")
    version = doc.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        raise InvalidArgumentError(f"Expected `Integer` value, received {json.dumps(version)}")
    if version != 1:
        raise InvalidArgumentError(f"Not supported version field value {version}")
    entries = doc.get("partitions", [])
    if not isinstance(entries, list):
        raise InvalidArgumentError(f"Expected JSON array, received {json.dumps(entries)}")
    if not entries:
        raise InvalidArgumentError("Partition reassignment list cannot be empty")
    return entries


def loads_reassignment_with_log_dirs(text: str) -> tuple[dict[TopicPartition, list[int]],
                                                         dict[TopicPartition, list[str]]]:
    """Parse and validate; returns ``(replicas per partition, log dirs per partition)``."""
    plan: dict[TopicPartition, list[int]] = {}
    dirs: dict[TopicPartition, list[str]] = {}
    duplicates, repeated = set(), []
    for i, entry in enumerate(_document(text)):
        where = f"partitions[{i}]"
        if not isinstance(entry, dict):
            raise InvalidArgumentError(f"{where}: expected a JSON object, got {json.dumps(entry)}")
        tp = TopicPartition(_field(entry, "topic", str, where), _field(entry, "partition", int, where))
        where = f"{where} ({tp})"
        if tp.partition < 0:
            raise InvalidArgumentError(f"{where}: field `partition` must be >= 0, got {tp.partition}")
        replicas = _field(entry, "replicas", list, where)
        if any(not isinstance(b, int) or isinstance(b, bool) or b < 0 for b in replicas):
            raise InvalidArgumentError(f"{where}: field `replicas` must hold broker ids (integers >= 0), "
                                       f"got {json.dumps(replicas)}")
        if not replicas:
            raise InvalidArgumentError("Partition replica list cannot be empty")
        log_dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
            raise InvalidArgumentError(f"{where}: field `log_dirs` must be a list of strings, "
                                       f"got {json.dumps(log_dirs)}")
        if len(log_dirs) != len(replicas):
            raise InvalidArgumentError(_size_message(replicas, log_dirs, tp))
        if tp in plan:
            duplicates.add(tp)
        many = sorted({b for b in replicas if replicas.count(b) > 1})
        if many:
            repeated.append(f"{tp} contains multiple entries for {','.join(map(str, many))}")
        plan[tp], dirs[tp] = list(replicas), list(log_dirs)
    if duplicates:
        raise InvalidArgumentError("Partition reassignment contains duplicate topic partitions: "
                                   + ",".join(str(tp) for tp in sorted(duplicates)))
    if repeated:
        raise InvalidArgumentError("Partition replica lists may not contain duplicate entries: "
                                   + ". ".join(repeated))
    return plan, dirs


def loads_reassignment(text: str) -> dict[TopicPartition, list[int]]:
    """Parse and validate Kafka's reassignment JSON into ``{TopicPartition: replicas}``."""
    return loads_reassignment_with_log_dirs(text)[0]
