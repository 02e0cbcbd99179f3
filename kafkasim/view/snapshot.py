"""What the live view shows, read from a data dir and nothing else: :class:`DataDirWatcher`.

Each :meth:`DataDirWatcher.poll` looks at the data dir another process writes (a running
``kafkasim serve``, a lab, ``kafkasim produce``) and returns a JSON-ready snapshot
(``SNAPSHOT_VERSION``; the fields are listed in docs/view.md):

- ``topics``: from the topic metadata files (``meta/topics/*.json``, FORMAT.md §1.2: name and
  partition count); per partition the records, log start/end offsets and segments from the
  segment files (:class:`kafkasim.view.tail.PartitionTail`), and the append rate: log end
  offset growth per second over the last ``rate_window_ms`` of the watcher's clock;
- ``recent``: the last ``recent`` records read of each topic, newest timestamp first, each
  with its key, the partition the log holds it in, ``hash_partition``: Kafka's default routing
  ``murmur2(key) mod N`` for the topic's partition count now (None for a null key),
  ``routed_by`` and ``mismatch``. The log does not record a partitioner, so a mismatch is
  claimed only where it is real: a keyed record written by an identified producer (a client
  id header or a producer id) in a partition that none of the known clients' partitioners
  (murmur2: Java, kafka-python; crc32: librdkafka; FNV-1a: Sarama) gives its key. A record
  with no producer (a lab appending to partitions it picks, as ``consumer-scaling`` does) is
  "unknown producer", never a mismatch;
- per partition also the ``high_watermark`` (the log end offset on one broker; on a cluster
  the least log end offset of the ISR replicas read) and the ``last_stable_offset`` (Kafka's
  LSO: the first offset of the earliest open transaction, bounded by the high watermark),
  and ``transactions``: the open transactions per producer id with their transactional id,
  state and partitions (:mod:`kafkasim.view.txns`, from the partitions' batches and
  ``__transaction_state``, which is not drawn as a topic). A control batch (a transaction
  marker) is not a record: not counted, not in ``recent``, whose rows of a transaction say
  ``open``, ``committed`` or ``aborted`` (``txn``);
- ``producers``: who wrote the records, from the batch headers (producer id, for idempotent
  producers) and the ``kafkasim.producer`` record header (the client id, when stamped); a
  record with neither is counted under ``unidentified``;
- ``groups`` and ``rebalances``: from ``__consumer_offsets`` (:mod:`kafkasim.view.groups`),
  which a cluster keeps at the data dir's root (not under ``broker-<id>/``); each member with
  its position (last fetch offset, from ``.fetch-positions.json`` that a live ``kafkasim
  serve`` writes) and committed offset per owned partition; share groups (KIP-932) too, from
  their records in ``__consumer_offsets`` and ``__share_group_state`` (not drawn as a topic),
  each member with every partition it is assigned and each share-partition's in-flight records
  and redeliveries (:mod:`kafkasim.view.share_groups`);
- ``active``: the topic written to most recently and the group touched most recently among
  those reading it: what the page opens on;
- ``clock``: whether the timestamps are simulated (a lab's data dir, or timestamps more than
  a day from the view's clock): the page labels them so;
- ``faults``: the fault events of the last few seconds that a running ``kafkasim serve``
  injected (``.server-faults.json``), per partition they name and per broker for those naming
  none, with short labels (:mod:`kafkasim.view.fault_flashes`); each broker also carries its
  fault state from ``meta/cluster.json`` (disk full, log dir offline, isolated from clients,
  followers or both, slowed);
- ``cluster_events``: a broker's state or a partition's leader changing between two polls
  (the controller's file is a state, not a log: the view notes the change when it sees it);
- ``brokers``: broker 0 (the data dir) for one broker, with ``serving`` when its
  ``.server.json`` names a live process, and it leads every partition. Each broker's
  ``listener`` is its own ``host:port`` from ``.server.json`` (a served cluster lists one per
  broker), ``port_open`` false while it is stopped, and ``replicas`` the replicas it holds
  with their role (leader, follower, out-of-sync, offline). A cluster data dir
  (``broker-<id>/`` log dirs, the controller's ``meta/cluster.json``) lists every broker with
  its rack and state (``alive``, ``stopped``, ``isolated``) and each partition's replicas,
  leader (-1: offline) and ISR as the controller recorded them; a partition's numbers are
  its leader's log (the replica with the largest log end offset when the leader's is not
  there), and ``held_by`` lists the brokers whose log dir holds a replica.

A data dir wiped and made again (a lab's rerun) is noticed (its inode, or the lab marker's
mtime, changes) and everything read before is forgotten, so two runs are never mixed.

Nothing is invented: every number is counted from the files as they are at the poll. The
watcher only reads (plain ``open``/``pread``, never a ``Log``, never the data dir's lock).

Time comes from the injected clock (:mod:`kafkasim.clock`), so a test drives the rates with
a ``MockClock``. Thread-safety: not thread-safe; one poller thread owns a watcher (the view
server publishes the snapshots it returns, which are plain data).

Over 500 lines because it is one job, turning the files of a data dir into one snapshot:
the per-source folds live in their own modules (tail, groups, txns), and what is left is how
they meet (which replica's numbers a partition shows, the active topic, the clock kind).
"""

from __future__ import annotations

import json
import os
import re
import uuid
import zlib
from collections import deque
from typing import Any, Optional

from kafkasim.clock import Clock, SystemClock
from kafkasim.errors import InvalidArgumentError, OldLogFormatError
from kafkasim.partitioning.base import murmur2_partition
from kafkasim.partitioning.hashing import fnv1a32
from kafkasim.protocol.offsets import OFFSETS_TOPIC
from kafkasim.protocol.share_state_log import SHARE_GROUP_STATE_TOPIC
from kafkasim.protocol.txn_log import TRANSACTION_STATE_TOPIC
from kafkasim.records.framing import ATTR_TRANSACTIONAL
from kafkasim.storage import data_format, layout
from kafkasim.types import PRODUCER_HEADER
from kafkasim.view.fault_flashes import FAULT_WINDOW_MS, broker_fault_state, fold_fault_events, read_fault_events
from kafkasim.view.groups import GroupsModel
from kafkasim.view.share_groups import ShareGroupsModel
from kafkasim.view.tail import DEFAULT_BUDGET, PartitionTail
from kafkasim.view.txns import PartitionTxns, TxnStateModel, is_control, last_stable_offset, open_transactions

__all__ = ["DataDirWatcher", "SNAPSHOT_VERSION", "ADDRESS_FILE"]

SNAPSHOT_VERSION = 1
ADDRESS_FILE = ".server.json"   # written by `kafkasim serve` (kafkasim/server/address.py)
POSITIONS_FILE = ".fetch-positions.json"   # written by `kafkasim serve` (kafkasim/server/positions.py)
LAB_MARKER = ".kafkasim-scenario"   # a lab's data dir (scenarios/_common.py MARKER): its clock is simulated
SIMULATED_SKEW_MS = 24 * 3600 * 1000
"""Timestamps further than this from the view's clock are not wall-clock time."""
CLUSTER_FILE = "cluster.json"   # meta/cluster.json: a cluster's controller state (broker/controller.py)
_BROKER_DIR = re.compile(r"^broker-(\d+)$")
_KEY_CHARS = 60
ROOT = -1
"""The broker id under which the data dir's root is read on a cluster (``__consumer_offsets``,
``__transaction_state``)."""
MAX_EVENTS = 30
_FAULT_FIELDS = ("isolated_from", "disk_full", "log_dir_offline", "slow_ms")
INTERNAL_TOPICS = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC)
"""Not drawn as topics: read for the groups, the transactions and the share groups' delivery state."""


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


def _partitioners(key: bytes, n: int) -> list[str]:
    """Where the known clients' partitioners put ``key`` in a topic of ``n`` partitions, in the
    order of ``_PARTITIONER_NAMES``: murmur2, crc32, FNV-1a (Sarama's sign rule)."""
    h = fnv1a32(key)
    signed = h - 0x100000000 if h & 0x80000000 else h
    return [murmur2_partition(key, n), zlib.crc32(key) % n, abs(signed) % n]


_PARTITIONER_NAMES = ("murmur2 (Kafka's default)", "crc32 (librdkafka)",
                      "fnv1a (Sarama)")


def _recent_row(r: list) -> dict[str, Any]:
    """One "recent records" row from what the tail kept: ``[topic, partition, offset, timestamp,
    key, partitions, producer, identified, producer id, txn]``; ``txn`` is None (not in a
    transaction), ``open``, ``committed`` or ``aborted`` (its marker was read)."""
    topic, partition, offset, timestamp, key, n, producer, identified, _, txn = r
    return {"topic": topic, "partition": partition, "offset": offset, "timestamp": timestamp,
            "key": _text(key), "partitions": n, "producer": producer, "txn": txn,
            **_routing(key, n, partition, identified=identified)}


def _routing(key: Optional[bytes], n: Optional[int], partition: int, identified: bool) -> dict[str, Any]:
    """How a record came to be in ``partition``, as far as the log can tell (see the module docstring)."""
    if key is None or not n:
        return {"hash_partition": None, "routed_by": "null key: not hashed" if key is None else None,
                "mismatch": False}
    placed = _partitioners(bytes(key), n)
    names = [name for name, p in zip(_PARTITIONER_NAMES, placed) if p == partition]
    if identified:
        routed = names[0] if names else "no known partitioner: chosen by the producer (or N changed since)"
    else:                # no producer id, no client id: a lab appending by hand, or an unknown client
        routed = "unknown producer" + (f"; matches {names[0]}" if names else "")
    return {"hash_partition": placed[0], "routed_by": routed, "mismatch": bool(identified and not names)}


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


def _replicas_of(broker_id: int, state: str, topics: list[dict], log_dir_offline: bool = False) -> list[dict[str, Any]]:
    """The replicas a broker holds, by topic and partition, with the role each plays now:
    ``leader``; ``follower`` (in the ISR); ``out-of-sync`` (a replica not in the ISR on a live
    broker); ``offline`` (the broker is stopped or isolated, its log dir is offline (Kafka's
    offline replicas), or the partition has no leader)."""
    down = state in ("stopped", "isolated") or log_dir_offline   # "not running": no server, maybe a lab's
    out = []
    for t in topics:
        for p in t["partition_stats"]:
            if broker_id not in p["replicas"]:
                continue
            if down or p["leader"] == -1:
                role = "offline"
            elif p["leader"] == broker_id:
                role = "leader"
            elif broker_id in p["isr"]:
                role = "follower"
            else:
                role = "out-of-sync"
            out.append({"topic": t["name"], "partition": p["partition"], "role": role})
    return out


def _active(written: dict[str, tuple[int, int]], groups: list[dict], topics: list[dict]) -> dict[str, Any]:
    """The topic written to most recently (the latest poll that saw it grow, then its newest
    timestamp), and the group touched most recently among those reading it (members or
    commits), else among all: what the page opens on."""
    names = [t["name"] for t in topics]
    topic = max((n for n in names if n in written), key=lambda n: written[n], default=names[0] if names else None)
    reading = [g for g in groups if any(tp[0] == topic for m in g["members"] for tp in m["assignment"])
               or any(c["topic"] == topic for c in g["committed"])]
    group = max(reading or groups, key=lambda g: g["touched"] or (0, 0), default=None)
    return {"topic": topic, "group": group["group_id"] if group else None}


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
        self._txns: dict[tuple[int, str, int], PartitionTxns] = {}   # the decoded replica of each partition
        self._txn_state = TxnStateModel()
        self._old_format: dict[tuple[int, str, int], str] = {}   # partitions refused: old record format
        self._samples: dict[tuple[str, int], deque] = {}
        self.recent_per_topic = recent
        self._recent: dict[str, deque] = {}     # topic -> its last records read (the page filters by topic)
        self._producers: dict[str, dict] = {}
        self._groups = GroupsModel()
        self._share = ShareGroupsModel()
        self._topic_sizes: dict[str, int] = {}
        self._topic_ids: dict[uuid.UUID, str] = {}   # topic id -> name, for consumer groups' records
        self._events: deque = deque(maxlen=MAX_EVENTS)
        self._last_states: Optional[dict] = None
        self._last_leaders: dict = {}
        self._written: dict[str, tuple[int, int]] = {}   # topic -> (poll it last grew in, newest timestamp)
        self._identity: Optional[tuple] = None
        self.wipes = 0
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
            try:
                self._topic_ids[uuid.UUID(hex=str(raw.get("topic_id")))] = topic
            except ValueError:
                pass                # no topic id (written before topics had one): the name is enough
        return topics

    def _read_cluster(self, problems: list[str]) -> Optional[dict[str, Any]]:
        """The controller's ``meta/cluster.json`` of a cluster data dir (brokers with rack and
        state; per partition replicas, leader, ISR), or None for a one-broker data dir."""
        path = os.path.join(self.data_dir, layout.META_DIR, CLUSTER_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                raw = json.load(f)
            brokers = {int(b["id"]): {"rack": b.get("rack"), "state": str(b.get("state")),
                                      **broker_fault_state(b)} for b in raw["brokers"]}
            partitions = {str(t): [{"replicas": [int(r) for r in p["replicas"]], "leader": int(p["leader"]),
                                    "isr": [int(r) for r in p["isr"]]} for p in plist]
                          for t, plist in (raw.get("partitions") or {}).items()}
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"unreadable cluster metadata {path}: {exc}")
            return None
        return {"brokers": brokers, "partitions": partitions}

    def _read_server(self) -> tuple[Optional[dict], dict[int, str]]:
        """The address file of a live ``kafkasim serve`` (None when none serves this data dir) and
        each broker's listener ``host:port`` (a served cluster: one per broker; one broker: 0)."""
        try:
            with open(os.path.join(self.data_dir, ADDRESS_FILE), encoding="utf-8") as f:
                address = json.load(f)
        except (OSError, ValueError):
            return None, {}
        if not isinstance(address, dict) or not _pid_alive(address.get("pid")):
            return None, {}
        listeners = {}
        for b in address.get("brokers") or []:
            if isinstance(b, dict) and isinstance(b.get("id"), int):
                listeners[b["id"]] = f"{b.get('host')}:{b.get('port')}"
        if not listeners:
            listeners[0] = f"{address.get('host')}:{address.get('port')}"
        return address, listeners

    def _read_positions(self, server: Optional[dict]) -> dict[tuple, tuple[int, int]]:
        """``(client id, client host, topic, partition) -> (last fetch offset, at_ms)`` from the
        file a live ``kafkasim serve`` writes (kafkasim/server/positions.py); empty otherwise."""
        if server is None:
            return {}
        try:
            with open(os.path.join(self.data_dir, POSITIONS_FILE), encoding="utf-8") as f:
                raw = json.load(f)
            if raw.get("pid") != server.get("pid"):
                return {}
            return {(r["client_id"], r["client_host"], r["topic"], int(r["partition"])):
                    (int(r["offset"]), int(r["at_ms"])) for r in raw["fetches"]}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def _brokers(self, log_dirs: list[tuple[int, str]], cluster: Optional[dict], server: Optional[dict],
                 listeners: dict[int, str], topics: list[dict]) -> list[dict[str, Any]]:
        """Every broker: id, rack, state, its fault state (:func:`broker_fault_state`), listener
        (``host:port`` while served; a stopped broker's port is closed: ``port_open`` false) and
        the replicas it holds with their role."""
        if cluster is not None:           # the controller's view: every broker, its rack and state
            dirs = dict(log_dirs)
            out = [{"id": bid, "rack": info["rack"], "state": info["state"],
                    "log_dir": dirs.get(bid, os.path.join(self.data_dir, f"broker-{bid}")),
                    **{k: info[k] for k in _FAULT_FIELDS}}
                   for bid, info in sorted(cluster["brokers"].items())]
        else:
            out = [{"id": broker_id, "rack": None, "log_dir": path,
                    "state": "serving" if server is not None else "not running", **broker_fault_state(None)}
                   for broker_id, path in log_dirs]
        for b in out:
            b["serving"] = server is not None
            b["listener"] = listeners.get(b["id"]) if server is not None else None
            b["port_open"] = b["listener"] is not None and b["state"] in ("alive", "serving")
            b["replicas"] = _replicas_of(b["id"], b["state"], topics, b["log_dir_offline"])
        return out

    def _follow_wipes(self) -> None:
        """Forget everything read so far when the data dir was wiped and made again (a lab's
        rerun: ``rmtree`` then ``makedirs``), so the page never mixes two runs. The data dir's
        identity is its inode and the lab marker's mtime (an inode number may be reused)."""
        try:
            st = os.stat(self.data_dir)
            ident: Optional[tuple] = (st.st_dev, st.st_ino)
        except OSError:
            ident = None
        if ident is not None:
            try:
                ident += (os.stat(os.path.join(self.data_dir, LAB_MARKER)).st_mtime_ns,)
            except OSError:
                ident += (None,)
        if self._identity is not None and ident != self._identity:
            self._tails.clear()
            self._txns.clear()
            self._txn_state = TxnStateModel()
            self._old_format.clear()
            self._samples.clear()
            self._recent.clear()
            self._producers.clear()
            self._groups = GroupsModel()
            self._share = ShareGroupsModel()
            self._topic_ids.clear()
            self._events.clear()
            self._last_states, self._last_leaders = None, {}
            self._written.clear()
            self.wipes += 1
        self._identity = ident

    def _clock_kind(self, now: int) -> dict[str, Any]:
        """Whether the data's timestamps are wall-clock time: a lab's data dir (its MockClock
        starts on 2023-11-14) or timestamps more than a day from the view's clock are simulated."""
        if os.path.exists(os.path.join(self.data_dir, LAB_MARKER)):
            return {"simulated": True, "why": "a lab's data dir: its clock is simulated"}
        stamps = ([r[3] for rs in self._recent.values() for r in rs] + list(self._groups.updated.values())
                  + list(self._share.updated.values()))
        newest = max(stamps, default=None)
        if newest is not None and abs(newest - now) > SIMULATED_SKEW_MS:
            return {"simulated": True, "why": "the records' timestamps are more than a day from this clock"}
        return {"simulated": False, "why": "wall-clock time"}

    # -- one look -------------------------------------------------------------------------------
    def poll(self) -> dict[str, Any]:
        """Read what changed since the last poll and return the whole snapshot."""
        now = self.clock.now_ms()
        self._follow_wipes()
        problems: list[str] = []
        topics = self._read_topics(problems)
        self._topic_sizes = topics
        log_dirs = self._log_dirs()
        behind = False
        present: dict[tuple[int, str, int], str] = {}
        scans = list(log_dirs)
        if log_dirs and log_dirs[0][1] != self.data_dir:
            scans.append((ROOT, self.data_dir))   # a cluster keeps its internal topics at the root
        for broker_id, path in scans:
            try:
                partitions = layout.list_partitions(path)
            except OSError as exc:
                if os.path.isdir(self.data_dir):
                    problems.append(f"cannot list {path}: {exc}")
                continue
            for pd, ppath in partitions:
                if broker_id == ROOT and pd.topic not in INTERNAL_TOPICS:
                    continue
                present[(broker_id, pd.topic, pd.partition)] = ppath
        decoded: set[tuple[str, int]] = set()     # records are decoded from one replica only
        for key in sorted(present):
            if key in self._old_format:
                problems.append(self._old_format[key])
                continue
            tail = self._tails.get(key)
            if tail is None:
                try:   # an old-format partition is named with the command that converts it, not read
                    data_format.check_partition(present[key])
                except OldLogFormatError as exc:
                    self._old_format[key] = str(exc)
                    problems.append(str(exc))
                    continue
                tail = self._tails[key] = PartitionTail(present[key], budget=self.budget)
            first = key[1:] not in decoded
            decoded.add(key[1:])
            self._follow(key, tail, first_replica=first)
            behind = behind or tail.behind
            problems.extend(tail.problems)
        for key in [k for k in self._tails if k not in present]:
            del self._tails[key]
            self._txns.pop(key, None)
        self.polls += 1
        return self._snapshot(now, topics, log_dirs, self._read_cluster(problems), behind, problems)

    def _follow(self, key: tuple[int, str, int], tail: PartitionTail, first_replica: bool) -> None:
        _, topic, partition = key
        if topic == TRANSACTION_STATE_TOPIC:
            if not first_replica:
                tail.poll()
                return
            apply_txn = self._txn_state.apply

            def on_state_batch(h, cols) -> None:
                if is_control(h):
                    return
                for k, v in zip(cols[2], cols[3]):
                    apply_txn(k, v, tail.path)
            tail.poll(on_state_batch, decode=True)
            return
        if topic == OFFSETS_TOPIC:
            if not first_replica:
                tail.poll()
                return
            apply, is_share, apply_share = (self._groups.apply, self._share.is_share_group_key,
                                            self._share.apply_group_record)

            def on_offsets_batch(h, cols) -> None:
                deltas, tsds, keys, values, _ = cols
                for d, t, k, v in zip(deltas, tsds, keys, values):
                    if is_share(k):        # a share group's record (types 10..15)
                        apply_share(k, v, h.base_timestamp + t)
                    else:
                        apply(k, v, h.base_timestamp + t, h.base_offset + d)
            tail.poll(on_offsets_batch, decode=True)
            return
        if topic == SHARE_GROUP_STATE_TOPIC:
            if not first_replica:
                tail.poll()
                return
            apply_state = self._share.apply_state_record

            def on_share_state_batch(h, cols) -> None:
                if is_control(h):
                    return
                deltas, tsds, keys, values, _ = cols
                for t, k, v in zip(tsds, keys, values):
                    apply_state(k, v, h.base_timestamp + t)
            tail.poll(on_share_state_batch, decode=True)
            return
        if not first_replica:
            self._txns.pop(key, None)
            tail.poll()
            return
        txns = self._txns.get(key)
        if txns is None:
            txns = self._txns[key] = PartitionTxns()

        def on_batch(h, cols) -> None:
            deltas, tsds, keys, _, headers = cols
            if is_control(h):              # a transaction marker: no record a consumer sees
                done = txns.on_control_batch(h, keys[0] if keys else None, tail.path)
                if done is not None:
                    self._mark_recent(topic, partition, h.producer_id, *done)
                return
            transactional = bool(h.attributes & ATTR_TRANSACTIONAL)
            if transactional:
                txns.on_data_batch(h)
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
            before = self._written.get(topic, (0, h.max_timestamp))
            self._written[topic] = (self.polls, max(before[1], h.max_timestamp))
            recent = self._recent.get(topic)
            if recent is None:
                recent = self._recent[topic] = deque(maxlen=self.recent_per_topic)
            for i in range(max(0, count - self.recent_per_topic), count):   # only what the list keeps
                client = idents[i] if idents else None
                # the row is rendered when a snapshot shows it (_recent_row): while catching up, most
                # rows are pushed out by later batches before any snapshot is taken
                recent.append([topic, partition, h.base_offset + deltas[i], h.base_timestamp + tsds[i],
                               keys[i], n, client or fallback, client is not None or pid is not None, pid,
                               "open" if transactional else None])
        tail.poll(on_batch, decode=True, on_rewind=txns.rewind)   # a segment read again: its transactions too

    def _mark_recent(self, topic: str, partition: int, pid: int, first: int, marker: int, aborted: bool) -> None:
        """The kept rows of the transaction a marker completed: committed, or aborted (a
        read_committed consumer never sees those)."""
        for row in self._recent.get(topic, ()):
            if row[1] == partition and row[8] == pid and first <= row[2] < marker:
                row[9] = "aborted" if aborted else "committed"

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
        names = sorted(set(topics) | {t for t, _ in replicas if t not in INTERNAL_TOPICS})
        out_topics = []
        decoded = {(t, p): txns for (_, t, p), txns in self._txns.items()}
        log_starts: dict[tuple[str, int], int] = {}
        for name in names:
            if name in INTERNAL_TOPICS:
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
                start = log_starts[(name, p)] = best.log_start_offset if best else 0
                in_sync = [t.log_end_offset for b, t in held if b in placed["isr"]]
                hw = min([leo] + in_sync)      # the least log end offset of the ISR (the leader's alone: LEO)
                parts.append({"partition": p, "records": best.records if best else 0,
                              "log_start_offset": start,
                              "log_end_offset": leo, "high_watermark": hw,
                              "last_stable_offset": last_stable_offset(decoded.get((name, p)), start, hw),
                              "segments": best.segment_count if best else 0,
                              "rate": self._rate((name, p), now, leo),
                              "replicas": placed["replicas"], "leader": placed["leader"],
                              "isr": placed["isr"], "held_by": [b for b, _ in held]})
            out_topics.append({"name": name, "partitions": topics.get(name, count),
                               "partition_stats": parts, "records": sum(x["records"] for x in parts)})
        for tp in [tp for tp in self._samples if tp not in leos]:    # deleted partitions
            del self._samples[tp]
        leo_topics = {t for t, _ in leos}
        server, listeners = self._read_server()
        brokers = self._brokers(log_dirs, cluster, server, listeners, out_topics)
        self._note_changes(now, brokers, out_topics)
        groups = sorted(self._groups.to_json(leos, self._read_positions(server), self._topic_ids)
                        + self._share.to_json(leos, self._groups.color_of, self._topic_ids),
                        key=lambda g: g["group_id"])
        active = _active(self._written, groups, out_topics)
        clock = self._clock_kind(now)
        if clock["simulated"]:      # "open for" on the data's own clock: up to the newest time it shows
            ref = max([r[3] for rs in self._recent.values() for r in rs] +
                      [t for t in (self._txn_state.newest_timestamp,) if t is not None], default=now)
        else:
            ref = now
        transactions = open_transactions({tp: x for tp, x in decoded.items() if tp in leos},
                                         self._txn_state, log_starts, ref)
        problems.extend(self._txn_state.problems)
        problems.extend(self._share.problems)
        problems.extend(x.problem for x in self._txns.values() if x.problem)
        faults = fold_fault_events(read_fault_events(self.data_dir, now, FAULT_WINDOW_MS, problems))
        return {
            "version": SNAPSHOT_VERSION, "data_dir": self.data_dir, "now_ms": now, "poll": self.polls,
            "behind": behind, "rate_window_ms": self.rate_window_ms,
            "brokers": brokers,
            "cluster_events": list(reversed(self._events)),
            "faults": faults,
            "topics": out_topics,
            "producers": [dict(p, by_partition=dict(p["by_partition"]))
                          for p in sorted(self._producers.values(), key=lambda p: (-p["records"], p["id"]))],
            "recent": sorted((_recent_row(r) for name in sorted(self._recent) if name in leo_topics
                              for r in reversed(self._recent[name])), key=lambda r: r["timestamp"], reverse=True),
            "groups": groups,
            "active": active,
            "clock": clock,
            "transactions": transactions,
            "rebalances": sorted([*reversed(self._groups.rebalances), *reversed(self._share.rebalances)],
                                 key=lambda r: r["timestamp"], reverse=True),   # stable: newest first on ties
            "problems": problems,
        }
