"""The cluster controller's durable state: ``<data_dir>/meta/cluster.json`` (storage/FORMAT.md §7).

What Kafka's controller (KRaft's metadata log, or ZooKeeper before it) knows, kept in one
JSON file because every ``kafkasim cluster`` command is its own process:

- ``brokers``: id, rack (or null), state (``alive``, ``stopped``, ``isolated``: from clients,
  peers and the controller), the follower fetch delay (``slow``), ``isolated_from``
  (``clients`` or ``followers`` for an alive broker cut off from one side only, else null),
  ``disk_full`` (the disk-full fault) and ``log_dir_offline`` (its log directory failed: Kafka's
  ``LogDirFailureChannel``; it stays offline until the broker restarts), in id order. Files
  written before the last three fields existed load with null/false;
- ``partitions``: per topic, per partition: ``replicas`` (assignment order, the first is
  the preferred leader), ``leader`` (-1: offline), ``isr``, ``leader_epoch``;
- ``lost_records``: what unclean leader elections lost (topic, partition, offset, key hex);
- ``seed`` and ``placements`` (how many random placements were drawn), so the random start
  of Kafka's placement is reproducible across processes.

Invariants, checked on every load (a file breaking one is a
:class:`~kafkasim.errors.KafkaStorageError` naming the file, the field and the value):
broker ids are distinct ints ≥ 0; replicas are distinct known brokers; the ISR is a subset
of the replicas; the leader is -1 or a member of the ISR; epochs are ints ≥ 0. Every write
is :func:`kafkasim.storage.files.atomic_write` (old file or new file, never half).

Not thread-safe: the cluster calls it under its metadata lock.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from kafkasim.errors import KafkaStorageError
from kafkasim.storage.files import atomic_write, make_dirs, storage_errors
from kafkasim.storage.layout import META_DIR

__all__ = ["BrokerInfo", "PartitionInfo", "ControllerState", "ControllerStore", "BROKER_STATES",
           "ISOLATED_FROM", "CLUSTER_FILE"]

CLUSTER_FILE = "cluster.json"
BROKER_STATES = ("alive", "stopped", "isolated")
ISOLATED_FROM = ("clients", "followers")
"""An alive broker's partial isolations (``isolated`` as a state is both, and the controller)."""
_BROKER_FIELDS = {"id", "rack", "state", "delay_ms"}
_BROKER_OPTIONAL = {"isolated_from": None, "disk_full": False, "log_dir_offline": False}
_VERSION = 1


@dataclass
class BrokerInfo:
    """One broker as the controller sees it."""

    id: int
    rack: Optional[str] = None
    state: str = "alive"
    delay_ms: int = 0
    isolated_from: Optional[str] = None   # "clients" | "followers" while alive, else None
    disk_full: bool = False
    log_dir_offline: bool = False


@dataclass
class PartitionInfo:
    """One partition's replica assignment and leadership."""

    replicas: list[int]
    leader: int
    isr: list[int]
    leader_epoch: int = 0


@dataclass
class ControllerState:
    """Everything in ``cluster.json`` (see the module docstring)."""

    brokers: dict[int, BrokerInfo]
    partitions: dict[str, list[PartitionInfo]] = field(default_factory=dict)
    lost_records: list[dict] = field(default_factory=list)
    seed: int = 0
    placements: int = 0

    def to_json(self) -> dict:
        return {"version": _VERSION, "seed": self.seed, "placements": self.placements,
                "brokers": [asdict(b) for _, b in sorted(self.brokers.items())],
                "partitions": {t: [asdict(p) for p in ps] for t, ps in sorted(self.partitions.items())},
                "lost_records": self.lost_records}


class ControllerStore:
    """Reads and writes ``<data_dir>/meta/cluster.json``."""

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, META_DIR, CLUSTER_FILE)

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def save(self, state: ControllerState) -> None:
        with storage_errors("create", os.path.dirname(self.path)):
            make_dirs(os.path.dirname(self.path))
        atomic_write(self.path, json.dumps(state.to_json(), indent=1, sort_keys=True) + "\n")

    def load(self) -> ControllerState:
        with storage_errors("read cluster metadata", self.path):
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise KafkaStorageError(f"unreadable cluster metadata {self.path}: {exc}") from exc
        return self._parse(raw)

    def _bad(self, where: str, value: Any, why: str) -> KafkaStorageError:
        return KafkaStorageError(f"invalid cluster metadata {self.path}: {where}={value!r}: {why}")

    def _int(self, where: str, value: Any, low: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self._bad(where, value, f"expected an integer >= {low}")
        return value

    def _parse(self, raw: Any) -> ControllerState:
        if not isinstance(raw, dict) or raw.get("version") != _VERSION:
            raise self._bad("version", raw.get("version") if isinstance(raw, dict) else raw,
                            f"expected a JSON object with version {_VERSION}")
        brokers: dict[int, BrokerInfo] = {}
        for i, b in enumerate(raw.get("brokers") or []):
            if not isinstance(b, dict) or not _BROKER_FIELDS <= set(b) <= _BROKER_FIELDS | set(_BROKER_OPTIONAL):
                raise self._bad(f"brokers[{i}]", b, "expected id, rack, state, delay_ms "
                                "(and isolated_from, disk_full, log_dir_offline)")
            bid = self._int(f"brokers[{i}].id", b["id"], 0)
            if bid in brokers:
                raise self._bad(f"brokers[{i}].id", bid, "duplicate broker id")
            if b["rack"] is not None and not isinstance(b["rack"], str):
                raise self._bad(f"brokers[{i}].rack", b["rack"], "expected a string or null")
            if b["state"] not in BROKER_STATES:
                raise self._bad(f"brokers[{i}].state", b["state"], f"expected one of {BROKER_STATES}")
            extra = {k: b.get(k, default) for k, default in _BROKER_OPTIONAL.items()}
            if extra["isolated_from"] is not None and (extra["isolated_from"] not in ISOLATED_FROM
                                                       or b["state"] != "alive"):
                raise self._bad(f"brokers[{i}].isolated_from", extra["isolated_from"],
                                f"expected null, or one of {ISOLATED_FROM} for an alive broker")
            for flag in ("disk_full", "log_dir_offline"):
                if not isinstance(extra[flag], bool):
                    raise self._bad(f"brokers[{i}].{flag}", extra[flag], "expected true or false")
            brokers[bid] = BrokerInfo(bid, b["rack"], b["state"], self._int(f"brokers[{i}].delay_ms", b["delay_ms"], 0),
                                      **extra)
        if not brokers:
            raise self._bad("brokers", raw.get("brokers"), "expected at least one broker")
        parts: dict[str, list[PartitionInfo]] = {}
        raw_parts = raw.get("partitions")
        if not isinstance(raw_parts, dict):
            raise self._bad("partitions", raw_parts, "expected an object")
        for topic, plist in raw_parts.items():
            if not isinstance(plist, list):
                raise self._bad(f"partitions.{topic}", plist, "expected a list")
            parts[topic] = [self._partition(f"partitions.{topic}[{p}]", info, brokers)
                            for p, info in enumerate(plist)]
        lost = raw.get("lost_records", [])
        if not isinstance(lost, list):
            raise self._bad("lost_records", lost, "expected a list")
        return ControllerState(brokers, parts, lost, self._int("seed", raw.get("seed"), 0),
                               self._int("placements", raw.get("placements"), 0))

    def _partition(self, where: str, info: Any, brokers: dict[int, BrokerInfo]) -> PartitionInfo:
        if not isinstance(info, dict) or set(info) != {"replicas", "leader", "isr", "leader_epoch"}:
            raise self._bad(where, info, "expected replicas, leader, isr, leader_epoch")
        replicas, isr = info["replicas"], info["isr"]
        for name, ids in (("replicas", replicas), ("isr", isr)):
            if not isinstance(ids, list) or len(set(map(repr, ids))) != len(ids):
                raise self._bad(f"{where}.{name}", ids, "expected a list of distinct broker ids")
            for b in ids:
                if self._int(f"{where}.{name}", b, 0) not in brokers:
                    raise self._bad(f"{where}.{name}", ids, f"broker {b} is not in the cluster")
        if not replicas:
            raise self._bad(f"{where}.replicas", replicas, "expected at least one replica")
        if not set(isr) <= set(replicas):
            raise self._bad(f"{where}.isr", isr, f"not a subset of the replicas {replicas}")
        leader = self._int(f"{where}.leader", info["leader"], -1)
        if leader != -1 and leader not in isr:
            raise self._bad(f"{where}.leader", leader, f"not in the ISR {isr}")
        return PartitionInfo(list(replicas), leader, list(isr), self._int(f"{where}.leader_epoch",
                                                                          info["leader_epoch"], 0))
