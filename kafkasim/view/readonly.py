"""A data dir's groups and offsets read from its files alone: what read-only commands use.

``kafkasim groups list`` and ``kafkasim groups describe`` only read. Opened as an embedded
:class:`~kafkasim.broker.Broker`, a data dir is locked (a writer starting meanwhile fails)
and every log is opened and closed, which writes recovery points and clean-shutdown markers
with their fsyncs (448 for a data dir of one 6-partition topic and the 50 partitions of
``__consumer_offsets``). :class:`ReadOnlyDataDir` answers the same calls those commands make
(``describe_group``, ``list_groups``, ``list_offsets``) from the files, the way the live
view reads them: ``__consumer_offsets`` replayed with :class:`kafkasim.view.groups.GroupsModel`
and each partition's offsets from :class:`kafkasim.view.tail.PartitionTail`. It takes no
lock, opens no :class:`~kafkasim.storage.log.Log`, writes nothing and calls no fsync. A data dir
in the old record format is refused as the broker refuses it (``OldLogFormatError``).

With no server running nobody is a member of a group (members live in a server or in one
process's Broker), so every group with a record is ``Empty``, as the coordinator reloads
it; a negative committed offset (a sentinel a tool committed) reads as no offset, as Kafka's
tools show it. A server that runs is asked instead (the CLI's routing); a cluster's data dir
is opened as the cluster.

Thread-safety: none; one command owns one instance.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from kafkasim.errors import IllegalStateError, UnknownTopicOrPartitionError
from kafkasim.protocol.offsets import OFFSETS_TOPIC
from kafkasim.storage import data_format, layout
from kafkasim.types import OffsetAndMetadata, TopicPartition
from kafkasim.view.groups import GroupsModel
from kafkasim.view.tail import PartitionTail

__all__ = ["ReadOnlyDataDir"]

_EARLIEST, _LATEST = -2, -1
_ALL = 1 << 62        # read every byte in one poll (a command reads the files once)


class ReadOnlyDataDir:
    """The read paths of a one-broker data dir, from its files (see the module docstring)."""

    broker_id = 0

    def __init__(self, data_dir: str) -> None:
        self.data_dir = os.path.abspath(data_dir)
        self._groups = GroupsModel()
        apply = self._groups.apply

        def on_batch(h, cols) -> None:
            deltas, tsds, keys, values, _ = cols
            for d, t, k, v in zip(deltas, tsds, keys, values):
                apply(k, v, h.base_timestamp + t, h.base_offset + d)

        partitions = layout.list_partitions(self.data_dir)
        for _, path in partitions:   # an old-format data dir: the broker's error, naming upgrade-data-dir
            data_format.check_partition(path)
        for part, path in partitions:
            if part.topic == OFFSETS_TOPIC:
                PartitionTail(path, budget=_ALL).poll(on_batch, decode=True)

    # ------------------------------------------------------------------ the calls commands make

    def list_offsets(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        """EARLIEST (-2) → (log start, -1) and LATEST (-1) → (log end, -1), from the segment files."""
        path = os.path.join(self.data_dir, layout.partition_dir_name(topic, partition))
        if not os.path.isdir(path):
            raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {topic}-{partition}")
        if timestamp not in (_EARLIEST, _LATEST):
            raise IllegalStateError(f"a read-only data dir answers earliest and latest only, not {timestamp}")
        tail = PartitionTail(path, budget=_ALL)
        tail.poll()
        return (tail.log_start_offset if timestamp == _EARLIEST else tail.log_end_offset), -1

    def list_groups(self) -> list[dict]:
        ids = set(self._groups.groups) | {g for g, offs in self._groups.offsets.items() if offs}
        return [{"group_id": g, "protocol_type": (self._groups.groups.get(g) or {}).get("protocol_type") or "",
                 "state": "Empty", "type": "classic"} for g in sorted(ids)]
        # "type": as Broker.list_groups (consumer groups, KIP-848, live in memory only: never on disk)

    def describe_group(self, group_id: str) -> dict:
        meta = self._groups.groups.get(group_id)
        offsets = self._groups.offsets.get(group_id) or {}
        if meta is None and not offsets:
            return {"group_id": group_id, "state": "Dead", "protocol_type": "", "protocol": None,
                    "generation": -1, "leader": None, "members": [], "offsets": {}, "partitions": []}
        rows = []
        for (topic, partition), committed in sorted(offsets.items()):
            try:
                leo: Optional[int] = self.list_offsets(topic, partition, _LATEST)[0]
            except UnknownTopicOrPartitionError:
                leo = None
            current = committed if committed >= 0 else None
            rows.append({"topic": topic, "partition": partition, "committed": current, "log_end_offset": leo,
                         "member_id": None,
                         "lag": None if current is None or leo is None else max(0, leo - current)})
        meta = meta or {}
        return {"group_id": group_id, "state": "Empty", "protocol_type": meta.get("protocol_type") or "",
                "protocol": meta.get("protocol"), "generation": meta.get("generation", 0), "leader": None,
                "members": [],
                "offsets": {TopicPartition(t, p): OffsetAndMetadata(o) for (t, p), o in sorted(offsets.items())},
                "partitions": rows}

    def close(self) -> None:
        """Nothing to release: nothing was opened or locked."""

    def __enter__(self) -> "ReadOnlyDataDir":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
