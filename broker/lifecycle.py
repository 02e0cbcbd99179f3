"""Broker lifecycle: open (lock the data dir, recover, load), periodic maintenance, flush, close.

:class:`Lifecycle` is one of the parts of :class:`kafkasim.broker.broker.Broker` (state and
lookups in :class:`~kafkasim.broker.core.BrokerCore`).

Opening, in order: create the data dir; take an exclusive ``flock`` on ``<data_dir>/.lock``
(as Kafka does: a second broker on the same dir, in any process, gets
``KafkaStorageError``); remove ``-delete`` leftovers of an interrupted topic deletion;
load topic metadata; open every partition's Log (which recovers an unflushed tail and
reports what it repaired, surfaced as ``RuntimeWarning``); start periodic maintenance.

Periodic maintenance (Kafka's scheduler tasks, with Kafka's broker config names, see
:data:`kafkasim.config.BROKER_CONFIGS`): when ``log.cleaner.enable`` (default true), a
:class:`kafkasim.storage.cleaner.LogCleaner` pass runs every
``log.retention.check.interval.ms`` (default 300000): for each log, the ``flush.ms`` check
(a log whose oldest unflushed record is older than ``flush.ms`` is fsynced even if no
append comes), retention (``delete`` policy) and compaction (``compact`` policy, once
``min.cleanable.dirty.ratio`` is reached).

- With a real clock the LogCleaner's own daemon thread runs the passes.
- With a :class:`~kafkasim.clock.MockClock` no thread is started, so nothing acts on its
  own and a simulation stays deterministic: the simulation calls :meth:`Lifecycle.tick`
  after moving the clock, and a pass runs iff the interval has passed on the clock
  (the same rule as the consumer's and the coordinator's ``tick()``).
  :meth:`Lifecycle.run_log_maintenance` forces one retention + compaction pass at any time.

Closing stops the maintenance first (outside the broker lock: a pass may be waiting
for it), then flushes and closes every log and releases the lock file. Afterwards every
call raises :class:`~kafkasim.errors.BrokerNotAvailableError` (group calls:
``CoordinatorNotAvailableError``).

Thread-safety: ``close`` is idempotent and may race other calls; ``tick`` serialises
its passes with a lock of its own; the cleaner thread reads the partition list under
the broker lock and each Log guards itself. The thread holds the broker only weakly,
so a broker dropped without ``close()`` can still be garbage collected.
"""

from __future__ import annotations

import os
import shutil
import threading
import weakref
from typing import Any, Mapping, Optional, Self

from kafkasim.arguments import check_arg
from kafkasim.clock import Clock, MockClock, SystemClock
from kafkasim.config import BROKER_CONFIGS, LogConfig, parse_configs
from kafkasim.errors import KafkaStorageError
from kafkasim.storage.cleaner import LogCleaner
from kafkasim.storage.files import lock_data_dir, make_dirs, storage_errors
from kafkasim.storage.layout import META_DIR
from kafkasim.storage.log import Log

from kafkasim.broker.core import BrokerCore
from kafkasim.broker.metadata import MetadataStore

__all__ = ["Lifecycle"]

_FLUSH_THREADS = 8


class Lifecycle(BrokerCore):
    """Open/close, the data-dir lock, periodic maintenance and flush (see the module docstring)."""

    broker_config: dict[str, Any]
    _cleaner: Optional[LogCleaner]

    def _open(self, data_dir: str | os.PathLike, clock: Optional[Clock], broker_id: int,
              default_configs: Optional[Mapping[str, Any]],
              broker_configs: Optional[Mapping[str, Any]]) -> None:
        # every argument is checked before anything touches the disk (kafkasim.arguments)
        self.data_dir = os.path.abspath(check_arg("data_dir", data_dir, "path"))
        self.clock = check_arg("clock", clock, Clock, none_ok=True) or SystemClock()
        self.broker_id = check_arg("broker_id", broker_id, "int", min=0)
        self.default_config = LogConfig.from_overrides(check_arg(
            "default_configs", default_configs, "mapping", none_ok=True, what="a mapping of topic configs") or {})
        self.broker_config, _ = parse_configs("broker", BROKER_CONFIGS, check_arg(
            "broker_configs", broker_configs, "mapping", none_ok=True, what="a mapping of broker configs") or {})
        self._check_consumer_group_configs()    # the group.consumer.* cross-checks, at start as Kafka
        self._check_share_group_configs()       # the group.share.* cross-checks, at start as Kafka
        if os.path.exists(self.data_dir) and not os.path.isdir(self.data_dir):
            raise KafkaStorageError(f"data dir {self.data_dir} exists and is not a directory")
        with storage_errors("create data dir", self.data_dir):
            make_dirs(self.data_dir)
        self._lock = threading.RLock()
        self._closed = False
        self._cleaner = None
        self._lock_file = lock_data_dir(self.data_dir)
        try:
            self._meta = MetadataStore(self.data_dir)
            self._load_controller()        # a cluster's controller state (the one broker: none)
            self._remove_deleted_dirs()
            self._topics = self._meta.load_topics(self.default_config)   # checked as on create
            self._partitions = {}
            self._next_producer_id = self._meta.load_next_producer_id()
            self._finalized_levels, self._finalized_features_epoch = self._meta.load_features()
            self._producer_id_limit = self._next_producer_id
            for meta in self._topics.values():
                config = self._config_of(meta)
                for p in range(meta.partitions):
                    self._open_partition(meta.name, p, config)
        except BaseException:
            for part in getattr(self, "_partitions", {}).values():
                for log in part.logs():
                    log.close()
            self._lock_file.close()
            raise
        self._start_maintenance()

    def _load_controller(self) -> None:
        """Hook: :class:`kafkasim.broker.cluster.Cluster` loads ``meta/cluster.json`` here. The
        one broker refuses a cluster's data dir (its replicas live under ``broker-<id>/``)."""
        if os.path.exists(os.path.join(self.data_dir, META_DIR, "cluster.json")):
            raise KafkaStorageError(f"{self.data_dir} holds a cluster (meta/cluster.json): open it with "
                                    "kafkasim.broker.cluster.Cluster, or 'kafkasim cluster ...'")

    # ------------------------------------------------------------ maintenance

    def _start_maintenance(self) -> None:
        self._tick_lock = threading.Lock()
        interval = self.broker_config["log.retention.check.interval.ms"]
        self._maintenance_interval_ms = interval
        self._next_maintenance_ms = self.clock.now_ms() + interval
        if not self.broker_config["log.cleaner.enable"]:
            return
        ref = weakref.ref(self)

        def logs() -> list[Log]:
            broker = ref()
            return [] if broker is None else broker._open_logs()

        self._cleaner = LogCleaner(logs, self.clock, interval_ms=interval)
        if not isinstance(self.clock, MockClock):
            self._cleaner.start()
            weakref.finalize(self, self._cleaner.stop, 0)   # a broker dropped without close()

    def _open_logs(self) -> list[Log]:
        with self._lock:
            return [] if self._closed else [log for part in self._partitions.values() for log in part.logs()]

    @property
    def log_cleaner(self) -> Optional[LogCleaner]:
        """The broker's LogCleaner (None when ``log.cleaner.enable`` is false): ``passes``, ``errors``."""
        return self._cleaner

    def tick(self) -> Optional[dict[str, int]]:
        """Run the periodic maintenance that is due by the injected clock.

        A LogCleaner pass (flush.ms check, retention, compaction: see the module
        docstring) runs when ``log.retention.check.interval.ms`` has passed on the clock
        since the broker opened or since the previous pass run by ``tick()``; returns its
        totals (``segments_deleted``, ``logs_compacted``, ``flushes``), or None when
        nothing was due (or ``log.cleaner.enable`` is false). With a MockClock this is the
        only way maintenance runs; with a real clock the cleaner thread also runs it.

        First it runs the transaction coordinator's periodic tasks that are due
        (:meth:`~kafkasim.broker.txn_api.TxnApi.tick_transactions`: abort transactions past
        ``transaction.timeout.ms`` every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``,
        10 s by default; expire idle transactional ids; retry markers waiting for a leader), as Kafka's
        scheduler does whatever the log cleaner does. Then it fences the consumer group
        (KIP-848) members whose session or rebalance timeout ran out
        (:meth:`~kafkasim.broker.consumer_group_api.ConsumerGroupApi.tick_consumer_groups`), and the
        share group (KIP-932) members whose session ran out, releasing their records and the
        record locks that expired
        (:meth:`~kafkasim.broker.share_group_api.ShareGroupApi.tick_share_groups`).
        """
        self._check_open()
        self.tick_transactions()      # the transaction coordinator's own intervals decide what is due
        self.tick_consumer_groups()   # consumer group (KIP-848) session and rebalance timeouts
        self.tick_share_groups()      # share group (KIP-932) sessions and record lock expiry
        if self._cleaner is None:
            return None
        with self._tick_lock:
            now = self.clock.now_ms()
            if now < self._next_maintenance_ms:
                return None
            self._next_maintenance_ms = now + self._maintenance_interval_ms
            return self._cleaner.run_once()

    def run_log_maintenance(self) -> dict[str, int]:
        """One retention and compaction pass over every log (Kafka's log cleaner and
        retention check), by the injected clock. Returns counts of what was done."""
        self._check_open()
        deleted = compacted = 0
        for tp in self.partitions():
            part = self._partitions.get(tp)
            for log in part.logs() if part is not None else ():
                config = log.config
                if config.delete:
                    deleted += log.delete_old_segments()
                if config.compact:
                    log.compact()
                    compacted += 1
        return {"segments_deleted": deleted, "logs_compacted": compacted}

    # ------------------------------------------------------------ flush / close

    def flush(self) -> None:
        """fsync every log; when this returns every log is flushed.

        The logs are flushed concurrently by up to ``_FLUSH_THREADS`` short-lived threads
        (``fsync`` releases the GIL, and the filesystem commits concurrent fsyncs
        together: 8 partitions flush in ~12 ms instead of ~65 ms on the dev VM). Every
        log is attempted; the error of the first failing log (in partition order) is
        raised afterwards.
        """
        logs = [log for part in map(self._partitions.get, self.partitions()) if part is not None
                for log in part.logs()]
        if len(logs) <= 1:
            for log in logs:
                log.flush()
            return
        errors: list[tuple[int, BaseException]] = []
        k = min(_FLUSH_THREADS, len(logs))

        def work(first: int) -> None:
            for i in range(first, len(logs), k):
                try:
                    logs[i].flush()
                except BaseException as exc:  # re-raised by the caller's thread below
                    errors.append((i, exc))

        threads = [threading.Thread(target=work, args=(j,), name=f"kafkasim-flush-{j}", daemon=True)
                   for j in range(k)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise min(errors, key=lambda e: e[0])[1]

    def close(self) -> None:
        """Stop the maintenance, flush and close every log (a clean shutdown). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._cleaner is not None:
            self._cleaner.stop()          # outside the lock: a running pass may be waiting for it
        with self._lock:
            try:
                for part in self._partitions.values():
                    for log in part.logs():
                        log.close()
                self._partitions.clear()
            finally:
                self._lock_file.close()  # releases the flock

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _remove_deleted_dirs(self) -> None:
        with storage_errors("list", self.data_dir):
            entries = list(os.scandir(self.data_dir))
        for entry in entries:
            if entry.is_dir() and entry.name.endswith("-delete"):
                shutil.rmtree(entry.path, ignore_errors=True)
