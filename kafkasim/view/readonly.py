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

With no server running nobody is a member of a classic group (its members live in a server
or in one process's Broker), so every classic group with a record is ``Empty``, as the
coordinator reloads it. A consumer group (KIP-848) is read from its records (types 3..8,
:mod:`kafkasim.protocol.consumer_group_log`) with its members, epochs and assignments, as
a restarted coordinator reloads it (its members then have a session timeout to heartbeat);
its state is derived as Kafka's (Empty, Assigning, Reconciling, Stable); a negative committed offset (a sentinel a tool committed) reads as no offset, as Kafka's
tools show it. A server that runs is asked instead (the CLI's routing); a cluster's data dir
is opened as the cluster.

Thread-safety: none; one command owns one instance.
"""

from __future__ import annotations

import json
import os
import uuid
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
        consumer = self._consumer_groups()
        ids = (set(self._groups.groups) | {g for g, offs in self._groups.offsets.items() if offs}) - set(consumer)
        classic = [{"group_id": g, "protocol_type": (self._groups.groups.get(g) or {}).get("protocol_type") or "",
                    "state": "Empty", "type": "classic"} for g in sorted(ids)]
        return sorted(classic + [{"group_id": g, "protocol_type": "consumer", "state": d["state"], "type": "consumer"}
                                 for g, d in consumer.items()], key=lambda g: g["group_id"])

    def _consumer_groups(self) -> dict[str, dict]:
        """group id -> the consumer group (KIP-848) its records hold (:meth:`GroupsModel.consumer_groups`),
        in the shape of ``Broker.describe_group``."""
        out = {}
        for gid, g in self._groups.consumer_groups(self._topic_names()).items():
            out[gid] = {"group_id": gid, "type": "consumer", "state": g["state"], "protocol_type": "consumer",
                        "protocol": g["assignor"], "generation": g["group_epoch"],
                        "leader": None, "group_epoch": g["group_epoch"], "assignment_epoch": g["assignment_epoch"],
                        "members": [{"member_id": m["member_id"], "group_instance_id": m["instance_id"],
                                     "client_id": m["client_id"], "client_host": m["client_host"],
                                     "member_epoch": m["member_epoch"], "member_type": m["member_type"],
                                     "assignment": [TopicPartition(t, p) for t, p in m["assigned"]],
                                     "target_assignment": [TopicPartition(t, p) for t, p in m["target"]]}
                                    for m in g["members"]]}
        return out

    def _topic_names(self) -> dict:
        """topic id -> name, from the data dir's ``meta/topics/<topic id>.json``."""
        out = {}
        folder = os.path.join(self.data_dir, "meta", "topics")
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
            try:
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    meta = json.load(f)
                out[uuid.UUID(hex=meta["topic_id"])] = meta["name"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return out

    def describe_group(self, group_id: str) -> dict:
        meta = self._groups.groups.get(group_id)
        offsets = self._groups.offsets.get(group_id) or {}
        consumer = self._consumer_groups().get(group_id)
        if consumer is not None:
            return self._with_rows(dict(consumer), offsets)
        if meta is None and not offsets:
            return {"group_id": group_id, "state": "Dead", "protocol_type": "", "protocol": None,
                    "generation": -1, "leader": None, "members": [], "offsets": {}, "partitions": []}
        meta = meta or {}
        return self._with_rows({"group_id": group_id, "state": "Empty",
                                "protocol_type": meta.get("protocol_type") or "", "protocol": meta.get("protocol"),
                                "generation": meta.get("generation", 0), "leader": None, "members": []}, offsets)

    def _with_rows(self, desc: dict, offsets: dict) -> dict:
        """``desc`` plus ``offsets`` and ``partitions`` (committed, log end, lag, owner) as the broker's."""
        owners = {(tp.topic, tp.partition): m["member_id"] for m in desc["members"] for tp in m["assignment"]}
        rows = []
        for topic, partition in sorted(set(offsets) | set(owners)):
            committed = offsets.get((topic, partition))
            try:
                leo: Optional[int] = self.list_offsets(topic, partition, _LATEST)[0]
            except UnknownTopicOrPartitionError:
                leo = None
            current = committed if committed is not None and committed >= 0 else None
            rows.append({"topic": topic, "partition": partition, "committed": current, "log_end_offset": leo,
                         "member_id": owners.get((topic, partition)),
                         "lag": None if current is None or leo is None else max(0, leo - current)})
        desc["offsets"] = {TopicPartition(t, p): OffsetAndMetadata(o) for (t, p), o in sorted(offsets.items())}
        desc["partitions"] = rows
        return desc

    def close(self) -> None:
        """Nothing to release: nothing was opened or locked."""

    def __enter__(self) -> "ReadOnlyDataDir":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
