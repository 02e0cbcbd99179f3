"""What the live view shows, read from a data dir and nothing else: :class:`DataDirWatcher`.

Each :meth:`DataDirWatcher.poll` looks at the data dir another process writes (a running
``kafkasim serve``, a lab, ``kafkasim produce``) and returns a JSON-ready snapshot
(``SNAPSHOT_VERSION``; the fields are listed in docs/view.md):

- ``topics``: from the topic metadata files (``meta/topics/*.json``, FORMAT.md §1.2: name and
  partition count); per partition the records, log start/end offsets and segments from the
  segment files (:class:`kafkasim.view.tail.PartitionTail`), and the append rate: log end
  offset growth per second over the last ``rate_window_ms`` of the watcher's clock;
- ``recent``: the last records read, newest timestamp first, each with its key, the partition the log holds it
  in, and ``hash_partition``: Kafka's default routing ``murmur2(key) mod N`` for the topic's
  partition count now (None for a null key), so a record routed otherwise shows it;
- ``producers``: who wrote the records, from the batch headers (producer id, for idempotent
  producers) and the ``kafkasim.producer`` record header (the client id, when stamped); a
  record with neither is counted under ``unidentified``;
- ``groups`` and ``rebalances``: from ``__consumer_offsets`` (:mod:`kafkasim.view.groups`);
- ``cluster_events``: a broker's state or a partition's leader changing between two polls
  (the controller's file is a state, not a log: the view notes the change when it sees it);
- ``brokers``: broker 0 (the data dir) for one broker, with ``serving`` when its
  ``.server.json`` names a live process, and it leads every partition. A cluster data dir
  (``broker-<id>/`` log dirs, the controller's ``meta/cluster.json``) lists every broker with
  its rack and state (``alive``, ``stopped``, ``isolated``) and each partition's replicas,
  leader (-1: offline) and ISR as the controller recorded them; a partition's numbers are
  its leader's log (the replica with the largest log end offset when the leader's is not
  there), and ``held_by`` lists the brokers whose log dir holds a replica.

Nothing is invented: every number is counted from the files as they are at the poll. The
watcher only reads (plain ``open``/``pread``, never a ``Log``, never the data dir's lock).

Time comes from the injected clock (:mod:`kafkasim.clock`), so a test drives the rates with
a ``MockClock``. Thread-safety: not thread-safe; one poller thread owns a watcher (the view
server publishes the snapshots it returns, which are plain data).
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from typing import Any, Optional

from kafkasim.clock import Clock, SystemClock
from kafkasim.errors import InvalidArgumentError
from kafkasim.partitioning.base import murmur2_partition
from kafkasim.protocol.offsets import OFFSETS_TOPIC
from kafkasim.storage import layout
from kafkasim.types import PRODUCER_HEADER
from kafkasim.view.groups import GroupsModel
from kafkasim.view.tail import DEFAULT_BUDGET, PartitionTail

__all__ = ["DataDirWatcher", "SNAPSHOT_VERSION", "ADDRESS_FILE"]

SNAPSHOT_VERSION = 1
ADDRESS_FILE = ".server.json"   # written by `kafkasim serve` (kafkasim/server/address.py)
CLUSTER_FILE = "cluster.json"   # meta/cluster.json: a cluster's controller state (broker/controller.py)
_BROKER_DIR = re.compile(r"^broker-(\d+)$")
_KEY_CHARS = 60
MAX_EVENTS = 30


def _text(b: Optional[bytes]) -> Optional[str]:
    if b is None:
        return None
    s = bytes(b).decode("utf-8", errors="backslashreplace")
    return s if len(s) <= _KEY_CHARS else s[:_KEY_CHARS - 1] + "…"


def _client_of(headers) -> Optional[str]:
    """The client id a record's ``kafkasim.producer`` header carries, if any."""
    for hk, hv in headers or ():
        if hk == PRODUCER_HEADER and hv is not None:
            return bytes(hv).decode("utf-8", errors="backslashreplace")
    return None


def _pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _placement(cluster: Optional[dict], topic: str, partition: int, log_dirs) -> dict[str, Any]:
    """Replicas, leader and ISR of a partition: the controller's for a cluster; broker 0 for one broker."""
    if cluster is None:
        only = log_dirs[0][0] if len(log_dirs) == 1 else None
        return {"replicas": [only] if only is not None else [], "leader": only,
                "isr": [only] if only is not None else []}
    plist = cluster["partitions"].get(topic) or []
    if partition < len(plist):
        return dict(plist[partition])
    return {"replicas": [], "leader": None, "isr": []}


class DataDirWatcher:
    """Follows one data dir read-only and builds snapshots of it (see the module docstring)."""

    def __init__(self, data_dir: str, *, clock: Optional[Clock] = None, rate_window_ms: int = 10_000,
                 recent: int = 40, budget: int = DEFAULT_BUDGET) -> None:
        if not os.path.isdir(data_dir):
            raise InvalidArgumentError(f"data dir {data_dir} does not exist or is not a directory")
        if rate_window_ms < 1:
            raise InvalidArgumentError(f"rate window must be at least 1 ms, got {rate_window_ms}")
        self.data_dir = os.path.abspath(data_dir)
        self.clock = clock or SystemClock()
        self.rate_window_ms = rate_window_ms
        self.budget = budget
        self._tails: dict[tuple[int, str, int], PartitionTail] = {}
        self._samples: dict[tuple[str, int], deque] = {}
        self._recent: deque = deque(maxlen=recent)
        self._producers: dict[str, dict] = {}
        self._groups = GroupsModel()
        self._topic_sizes: dict[str, int] = {}
        self._events: deque = deque(maxlen=MAX_EVENTS)
        self._last_states: Optional[dict] = None
        self._last_leaders: dict = {}
        self.polls = 0

    # -- the sources ----------------------------------------------------------------------------
    def _log_dirs(self) -> list[tuple[int, str]]:
        """``[(broker id, log dir)]``: ``broker-<id>/`` directories of a cluster, else the data dir as broker 0."""
        found = []
        try:
            for entry in os.scandir(self.data_dir):
                m = _BROKER_DIR.match(entry.name)
                if m and entry.is_dir():
                    found.append((int(m.group(1)), entry.path))
        except OSError:
            return []
        return sorted(found) or [(0, self.data_dir)]

    def _read_topics(self, problems: list[str]) -> dict[str, int]:
        """Topic name → partition count, from every ``meta/topics/*.json`` that reads."""
        topics: dict[str, int] = {}
        meta = os.path.join(self.data_dir, layout.META_DIR, "topics")
        try:
            names = sorted(os.listdir(meta))
        except OSError:
            return topics
        for name in names:
            if not name.endswith(".json"):
                continue
            path = os.path.join(meta, name)
            try:
                with open(path, encoding="utf-8") as f:
                    raw = json.load(f)
                topic, n = raw["name"], raw["partitions"]
                if not isinstance(topic, str) or isinstance(n, bool) or not isinstance(n, int) or n < 1:
                    raise ValueError(f"name {topic!r}, partitions {n!r}")
            except FileNotFoundError:
                continue            # deleted between the listing and the read
            except (OSError, ValueError, KeyError, TypeError) as exc:
                problems.append(f"unreadable topic metadata {path}: {exc}")
                continue
            topics[topic] = n
        return topics

    def _read_cluster(self, problems: list[str]) -> Optional[dict[str, Any]]:
        """The controller's ``meta/cluster.json`` of a cluster data dir (brokers with rack and
        state; per partition replicas, leader, ISR), or None for a one-broker data dir."""
        path = os.path.join(self.data_dir, layout.META_DIR, CLUSTER_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                raw = json.load(f)
            brokers = {int(b["id"]): {"rack": b.get("rack"), "state": str(b.get("state"))}
                       for b in raw["brokers"]}
            partitions = {str(t): [{"replicas": [int(r) for r in p["replicas"]], "leader": int(p["leader"]),
                                    "isr": [int(r) for r in p["isr"]]} for p in plist]
                          for t, plist in (raw.get("partitions") or {}).items()}
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"unreadable cluster metadata {path}: {exc}")
            return None
        return {"brokers": brokers, "partitions": partitions}

    def _brokers(self, log_dirs: list[tuple[int, str]], cluster: Optional[dict]) -> list[dict[str, Any]]:
        address = None
        try:
            with open(os.path.join(self.data_dir, ADDRESS_FILE), encoding="utf-8") as f:
                address = json.load(f)
        except (OSError, ValueError):
            address = None
        serving = isinstance(address, dict) and _pid_alive(address.get("pid"))
        listener = f"{address.get('host')}:{address.get('port')}" if serving else None
        if cluster is not None:           # the controller's view: every broker, its rack and state
            dirs = dict(log_dirs)
            return [{"id": bid, "rack": info["rack"], "state": info["state"],
                     "log_dir": dirs.get(bid, os.path.join(self.data_dir, f"broker-{bid}")), "listener": listener}
                    for bid, info in sorted(cluster["brokers"].items())]
        return [{"id": broker_id, "rack": None, "log_dir": path,
                 "state": "serving" if serving else "not running", "listener": listener}
                for broker_id, path in log_dirs]

    # -- one look -------------------------------------------------------------------------------
    def poll(self) -> dict[str, Any]:
        """Read what changed since the last poll and return the whole snapshot."""
        now = self.clock.now_ms()
        problems: list[str] = []
        topics = self._read_topics(problems)
        self._topic_sizes = topics
        log_dirs = self._log_dirs()
        behind = False
        present: dict[tuple[int, str, int], str] = {}
        for broker_id, path in log_dirs:
            try:
                partitions = layout.list_partitions(path)
            except OSError as exc:
                problems.append(f"cannot list {path}: {exc}")
                continue
            for pd, ppath in partitions:
                present[(broker_id, pd.topic, pd.partition)] = ppath
        decoded: set[tuple[str, int]] = set()     # records are decoded from one replica only
        for key in sorted(present):
            tail = self._tails.get(key)
            if tail is None:
                tail = self._tails[key] = PartitionTail(present[key], budget=self.budget)
            first = key[1:] not in decoded
            decoded.add(key[1:])
            self._follow(key, tail, first_replica=first)
            behind = behind or tail.behind
            problems.extend(tail.problems)
        for key in [k for k in self._tails if k not in present]:
            del self._tails[key]
        self.polls += 1
        return self._snapshot(now, topics, log_dirs, self._read_cluster(problems), behind, problems)

    def _follow(self, key: tuple[int, str, int], tail: PartitionTail, first_replica: bool) -> None:
        _, topic, partition = key
        if topic == OFFSETS_TOPIC:
            if not first_replica:
                tail.poll()
                return
            apply = self._groups.apply

            def on_offsets_batch(h, cols) -> None:
                deltas, tsds, keys, values, _ = cols
                for d, t, k, v in zip(deltas, tsds, keys, values):
                    apply(k, v, h.base_timestamp + t, h.base_offset + d)
            tail.poll(on_offsets_batch, decode=True)
            return
        if not first_replica:
            tail.poll()
            return

        def on_batch(h, cols) -> None:
            deltas, tsds, keys, _, headers = cols
            count = len(deltas)
            pid = h.producer_id if h.producer_id >= 0 else None
            fallback = f"producer id {pid}" if pid is not None else "unidentified"
            if any(headers):               # some records carry headers: look for the client id
                idents = [_client_of(hdrs) for hdrs in headers]
                per: dict[tuple[str, Optional[str]], int] = {}
                for client in idents:
                    k = (client or fallback, client)
                    per[k] = per.get(k, 0) + 1
                for (ident, client), c in per.items():
                    self._count_producer(ident, client, pid, topic, partition, h.max_timestamp, c)
            else:                          # the common case: one count per batch, no loop per record
                idents = None
                self._count_producer(fallback, None, pid, topic, partition, h.max_timestamp, count)
            n = self._topic_sizes.get(topic)
            for i in range(max(0, count - (self._recent.maxlen or 0)), count):   # only what the list keeps
                k = keys[i]
                self._recent.append({
                    "topic": topic, "partition": partition, "offset": h.base_offset + deltas[i],
                    "timestamp": h.base_timestamp + tsds[i], "key": _text(k),
                    "hash_partition": murmur2_partition(bytes(k), n) if k is not None and n else None,
                    "partitions": n, "producer": (idents[i] if idents else None) or fallback})
        tail.poll(on_batch, decode=True)

    def _count_producer(self, ident: str, client: Optional[str], pid: Optional[int], topic: str,
                        partition: int, timestamp: int, count: int = 1) -> None:
        p = self._producers.get(ident)
        if p is None:
            p = self._producers[ident] = {"id": ident, "client_id": client, "producer_id": pid,
                                          "records": 0, "by_partition": {}, "last_timestamp": None}
        p["records"] += count
        tp = f"{topic}-{partition}"
        p["by_partition"][tp] = p["by_partition"].get(tp, 0) + count
        if pid is not None:
            p["producer_id"] = pid
        p["last_timestamp"] = timestamp if p["last_timestamp"] is None else max(p["last_timestamp"], timestamp)

    def _rate(self, tp: tuple[str, int], now: int, leo: int) -> float:
        samples = self._samples.setdefault(tp, deque())
        if not samples or samples[-1][0] != now:
            samples.append((now, leo))
        while len(samples) > 2 and samples[1][0] <= now - self.rate_window_ms:
            samples.popleft()
        t0, o0 = samples[0]
        if now <= t0:
            return 0.0
        return round(max(leo - o0, 0) * 1000.0 / (now - t0), 3)

    def _note_changes(self, now: int, brokers: list[dict], topics: list[dict]) -> None:
        """Broker state and partition leader changes since the previous poll, as events."""
        states = {b["id"]: b["state"] for b in brokers}
        leaders = {(t["name"], p["partition"]): p["leader"] for t in topics for p in t["partition_stats"]}
        if self._last_states is not None:
            for bid in sorted(set(states) | set(self._last_states)):
                before, after = self._last_states.get(bid), states.get(bid)
                if before != after:
                    self._events.append({"at_ms": now, "kind": "broker", "broker": bid,
                                         "from": before, "to": after})
            for tp in sorted(set(leaders) & set(self._last_leaders)):
                if leaders[tp] != self._last_leaders[tp]:
                    self._events.append({"at_ms": now, "kind": "leader", "topic": tp[0], "partition": tp[1],
                                         "from": self._last_leaders[tp], "to": leaders[tp]})
        self._last_states, self._last_leaders = states, leaders

    def _snapshot(self, now: int, topics: dict[str, int], log_dirs, cluster: Optional[dict], behind: bool,
                  problems: list[str]) -> dict[str, Any]:
        replicas: dict[tuple[str, int], list[tuple[int, PartitionTail]]] = {}
        for (broker_id, topic, partition), tail in sorted(self._tails.items()):
            replicas.setdefault((topic, partition), []).append((broker_id, tail))
        leos: dict[tuple[str, int], int] = {}
        names = sorted(set(topics) | {t for t, _ in replicas if t != OFFSETS_TOPIC})
        out_topics = []
        for name in names:
            if name == OFFSETS_TOPIC:
                continue
            count = max([topics.get(name, 0)] + [p + 1 for t, p in replicas if t == name])
            parts = []
            for p in range(count):
                held = replicas.get((name, p), [])
                placed = _placement(cluster, name, p, log_dirs)
                by_broker = dict(held)
                if placed["leader"] in by_broker:       # the leader's log is the partition's log
                    best = by_broker[placed["leader"]]
                else:
                    best = max(held, key=lambda bt: bt[1].log_end_offset)[1] if held else None
                leo = best.log_end_offset if best else 0
                leos[(name, p)] = leo
                parts.append({"partition": p, "records": best.records if best else 0,
                              "log_start_offset": best.log_start_offset if best else 0,
                              "log_end_offset": leo, "segments": best.segment_count if best else 0,
                              "rate": self._rate((name, p), now, leo),
                              "replicas": placed["replicas"], "leader": placed["leader"],
                              "isr": placed["isr"], "held_by": [b for b, _ in held]})
            out_topics.append({"name": name, "partitions": topics.get(name, count),
                               "partition_stats": parts, "records": sum(x["records"] for x in parts)})
        for tp in [tp for tp in self._samples if tp not in leos]:    # deleted partitions
            del self._samples[tp]
        brokers = self._brokers(log_dirs, cluster)
        self._note_changes(now, brokers, out_topics)
        return {
            "version": SNAPSHOT_VERSION, "data_dir": self.data_dir, "now_ms": now, "poll": self.polls,
            "behind": behind, "rate_window_ms": self.rate_window_ms,
            "brokers": brokers,
            "cluster_events": list(reversed(self._events)),
            "topics": out_topics,
            "producers": [dict(p, by_partition=dict(p["by_partition"]))
                          for p in sorted(self._producers.values(), key=lambda p: (-p["records"], p["id"]))],
            "recent": sorted(reversed(self._recent), key=lambda r: r["timestamp"], reverse=True),
            "groups": self._groups.to_json(leos),
            "rebalances": list(reversed(self._groups.rebalances)),
            "problems": problems,
        }
