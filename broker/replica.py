"""One partition's replication state: replicas → logs, leader, ISR, leader epoch, high watermark.

Every partition the broker (or a cluster) hosts is a :class:`PartitionState`; the one-broker
:class:`~kafkasim.broker.broker.Broker` is its one-replica case (replicas ``[broker_id]``,
leader and ISR that broker, epoch 0), so produce and fetch run the same code with one
replica as with three. The rules follow Kafka's ``Partition.scala``:

1. **Leader append** (:meth:`PartitionState.append_as_leader`): ``acks=all`` with an ISR
   smaller than ``min.insync.replicas`` → :class:`~kafkasim.errors.NotEnoughReplicasError`,
   nothing written. The leader stamps its epoch into the batch's ``partitionLeaderEpoch``
   (outside the CRC), appends, and records the epoch's start offset in its
   :class:`~kafkasim.storage.epoch_cache.LeaderEpochCache`.
2. **Follower fetch** (:meth:`PartitionState.replicate`): each follower that can reach the
   leader (the fault view's ``can_replicate``: alive, log directory online, not isolated from
   its peers, on both ends) and whose fetch is due (a slowed follower
   every ``delay_ms``; a healthy one right after each append) copies the leader's batches
   from its own log end offset (LEO), verbatim. A fetch that reaches the leader's LEO sets the
   follower's ``last_caught_up_ms`` to now.
3. **ISR** (Kafka's ``maybeExpandIsr``/``maybeShrinkIsr``): a follower joins when its LEO is
   ≥ the high watermark and ≥ the start offset of the leader's epoch; it leaves when its LEO
   is behind the leader's and it has not been caught up for ``replica.lag.time.max.ms``.
4. **High watermark** = the minimum LEO over the ISR; consumers read only below it.
5. ``acks=all`` completes when the HW reaches the end of the batch, then fails with
   :class:`~kafkasim.errors.NotEnoughReplicasAfterAppendError` if the ISR shrank below
   ``min.insync.replicas`` meanwhile. While a slowed ISR follower lags, the leader waits on
   the injected clock (``clock.sleep``: a MockClock moves), running the follower fetches and
   the ISR check as they fall due, up to the request timeout (30 s) →
   :class:`~kafkasim.errors.RequestTimedOutError`.
6. **Leader change** (:meth:`PartitionState.become_leader`): the epoch goes up by one, the new
   leader records ``(epoch, its LEO)``, every reachable follower truncates
   (:meth:`PartitionState.truncate_follower`, OffsetsForLeaderEpoch: the leader's end offset
   for the follower's latest epoch; truncate to the smaller of it and the follower's own end
   offset for the epoch the leader answered) so no divergent suffix survives.

Invariants: the leader's log is ``self.log`` (None while offline, leader ``-1``); the ISR is
a subset of the replicas and holds the leader while there is one; no follower holds an
offset the leader does not hold once it has fetched.

Thread-safety: the caller holds ``self.lock`` around every mutating call (the broker's
produce lock; the cluster takes it for faults, ticks and reassignment).
"""

from __future__ import annotations

import threading
from typing import Callable, Optional

from kafkasim.clock import Clock
from kafkasim.errors import (
    LeaderNotAvailableError, NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
    NotLeaderOrFollowerError, OffsetOutOfRangeError, RequestTimedOutError,
)
from kafkasim.storage.epoch_cache import UNDEFINED_EPOCH, LeaderEpochCache
from kafkasim.storage.log import Log

from kafkasim.broker.producer_state import ProducerStateTable

__all__ = ["PartitionState", "Replica", "FaultView", "HEALTHY", "REQUEST_TIMEOUT_MS"]

REQUEST_TIMEOUT_MS = 30_000
"""How long an ``acks=all`` produce waits for the ISR (the producer's ``request.timeout.ms`` default)."""
_FETCH_BYTES = 1 << 20


class FaultView:
    """Who can reach whom, and how slow each follower is. The one-broker case: all healthy."""

    def reachable(self, broker_id: int) -> bool:
        return True

    def fetch_delay_ms(self, broker_id: int) -> int:
        return 0

    def can_replicate(self, broker_id: int) -> bool:
        """Whether ``broker_id`` takes part in replication (reachable, not cut off from peers)."""
        return True


HEALTHY = FaultView()


class Replica:
    """One broker's copy of a partition: its log, its epoch cache, its fetch timing."""

    __slots__ = ("broker_id", "log", "epochs", "last_caught_up_ms", "next_fetch_ms")

    def __init__(self, broker_id: int, log: Log, now_ms: int) -> None:
        self.broker_id = broker_id
        self.log = log
        self.epochs = LeaderEpochCache(log.directory)
        self.last_caught_up_ms = now_ms
        self.next_fetch_ms = now_ms


class PartitionState:
    """Replicas, leader, ISR, epoch and HW of one partition (see the module docstring)."""

    __slots__ = ("name", "replicas", "hosted", "leader", "isr", "leader_epoch", "lock", "producers",
                 "log", "faults", "clock", "lag_max_ms", "on_change", "counts", "__weakref__")

    def __init__(self, name: str, replicas: list[int], hosted: dict[int, Log], clock: Clock, *,
                 leader: int, isr: list[int], leader_epoch: int = 0, faults: FaultView = HEALTHY,
                 lag_max_ms: int = 30_000, on_change: Optional[Callable[["PartitionState"], None]] = None) -> None:
        now = clock.now_ms()
        self.name = name
        self.replicas = list(replicas)
        self.hosted = {b: Replica(b, log, now) for b, log in hosted.items()}
        self.leader = leader
        self.isr = list(isr)
        self.leader_epoch = leader_epoch
        self.lock = threading.Lock()
        self.producers = None               # the idempotent-producer table, built on first use
        self.faults = faults
        self.clock = clock
        self.lag_max_ms = lag_max_ms
        self.on_change = on_change
        self.counts = {"isr_shrinks": 0, "isr_expands": 0, "leader_elections": 0}   # since open
        self.log: Optional[Log] = self.hosted[leader].log if leader >= 0 else None

    # -- reads ------------------------------------------------------------------------------
    def logs(self) -> list[Log]:
        """Every hosted replica's log (the broker's flush, maintenance and close go over them)."""
        return [r.log for r in self.hosted.values()]

    def best_log(self) -> Log:
        """The leader's log, else (offline) the hosted replica log with the highest end offset."""
        if self.log is not None:
            return self.log
        return max((r.log for r in self.hosted.values()), key=lambda log: log.log_end_offset)

    def producer_table(self) -> ProducerStateTable:
        """The idempotent-producer table, rebuilt from the leader's active segment on first use
        (and after a leader change)."""
        if self.producers is None:
            log = self.leader_log()
            table = ProducerStateTable(self.name)
            segments = log.segments
            start = max(segments[-1].base_offset if segments else 0, log.log_start_offset)
            table.load(_headers_from(log, start))
            self.producers = table
        return self.producers

    @property
    def high_watermark(self) -> int:
        """The minimum log end offset over the ISR (the leader's LEO with one replica)."""
        if len(self.isr) == 1 and self.log is not None:
            return self.log.log_end_offset
        ends = [self.hosted[b].log.log_end_offset for b in self.isr if b in self.hosted]
        return min(ends) if ends else 0

    def leader_log(self, node: Optional[int] = None) -> Log:
        """The leader's log; ``node`` (the broker a client sent to) must be the leader."""
        if self.leader < 0:
            raise LeaderNotAvailableError(f"{self.name} has no leader (offline): replicas {self.replicas}, "
                                          f"last ISR {self.isr}")
        if node is not None and node != self.leader:
            raise NotLeaderOrFollowerError(f"broker {node} is not the leader of {self.name} "
                                           f"(leader: {self.leader}, epoch {self.leader_epoch})")
        return self.log

    # -- leader append ----------------------------------------------------------------------
    def append_as_leader(self, batch: bytes, header, acks: int, min_isr: int, append) -> object:
        """Append ``batch`` through ``append(batch, leader_epoch)`` (the leader log's
        ``append_batch``, or the idempotence-checked path) with the rules of steps 1, 2 and 5;
        returns its header."""
        self.leader_log()
        if acks == -1 and len(self.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {self.isr} of {self.name} is insufficient to satisfy "
                f"the min.isr requirement of {min_isr}")
        written = append(batch, self.leader_epoch)     # the epoch is stamped as the batch is written
        self.hosted[self.leader].epochs.assign(self.leader_epoch, written.base_offset)
        if len(self.replicas) > 1:
            self.replicate(self.clock.now_ms())
            if acks == -1:
                self._await_isr(written.base_offset + written.last_offset_delta + 1, min_isr)
        return written

    def _await_isr(self, end: int, min_isr: int) -> None:
        deadline = self.clock.now_ms() + REQUEST_TIMEOUT_MS
        while self.high_watermark < end:
            now = self.clock.now_ms()
            due = [self.hosted[b].next_fetch_ms for b in self.isr if b != self.leader]
            due += [self.hosted[b].last_caught_up_ms + self.lag_max_ms + 1 for b in self.isr if b != self.leader]
            wake = min([t for t in due if t > now] or [deadline])
            if wake > deadline:
                raise RequestTimedOutError(f"acks=all produce to {self.name} timed out after "
                                           f"{REQUEST_TIMEOUT_MS} ms waiting for ISR {self.isr}")
            self.clock.sleep(wake - now)
            now = self.clock.now_ms()
            self.replicate(now)
            self.maybe_shrink_isr(now)
            if self.leader < 0:
                raise NotLeaderOrFollowerError(f"{self.name} lost its leader while waiting for acks=all")
        if len(self.isr) < min_isr:
            raise NotEnoughReplicasAfterAppendError(
                f"The size of the current ISR {self.isr} of {self.name} is insufficient to satisfy "
                f"the min.isr requirement of {min_isr} (the records were written, not acknowledged)")

    # -- replication ------------------------------------------------------------------------
    def can_fetch(self, b: int) -> bool:
        return (b != self.leader and self.leader >= 0 and b in self.hosted
                and self.faults.can_replicate(b) and self.faults.can_replicate(self.leader))

    def replicate(self, now: int) -> int:
        """Run every follower fetch that is due (step 2), then the ISR expansion; returns bytes copied."""
        copied = 0
        for b in self.replicas:
            if not self.can_fetch(b):
                continue
            r = self.hosted[b]
            if now < r.next_fetch_ms:
                continue
            copied += self.fetch_into(r, now)
            r.next_fetch_ms = now + self.faults.fetch_delay_ms(b)
        self.maybe_expand_isr()
        return copied

    def fetch_into(self, r: Replica, now: int, max_bytes: Optional[int] = None) -> int:
        """One follower fetch: copy the leader's batches from ``r``'s LEO (up to ``max_bytes``)."""
        leader = self.log
        leo = leader.log_end_offset
        copied = 0
        if r.log.log_end_offset < leader.log_start_offset:
            # The leader deleted what the follower missed. Restart the follower's log at the
            # base offset of the leader's batch holding the log start, which a DeleteRecords
            # may have put inside a batch (Kafka: UnexpectedAppendOffsetException in
            # Partition.appendRecordsToFollowerOrFutureReplica restarts the log there).
            first = leader.read_batches(leader.log_start_offset, 1)
            r.log.restart_at(first[0][0].base_offset if first else leader.log_start_offset)
            r.epochs.clear()
        while r.log.log_end_offset < leo and (max_bytes is None or copied < max_bytes):
            # at least the log start: a restarted follower's end may be the base offset of
            # the batch holding it, and that batch is what reading from the start returns
            batches = leader.read_batches(max(r.log.log_end_offset, leader.log_start_offset), _FETCH_BYTES)
            if not batches:
                break
            for h, raw in batches:
                r.log.append_replica_batch(raw)
                if h.partition_leader_epoch != UNDEFINED_EPOCH:
                    r.epochs.assign(h.partition_leader_epoch, h.base_offset)
                copied += len(raw)
        if r.log.log_start_offset < leader.log_start_offset <= r.log.log_end_offset:
            r.log.increment_log_start_offset(leader.log_start_offset)   # DeleteRecords on the leader
        if r.log.log_end_offset >= leo:
            r.last_caught_up_ms = now
        return copied

    def maybe_expand_isr(self) -> None:
        if self.leader < 0:
            return
        hw = self.high_watermark
        start = self._epoch_start()
        joined = [b for b in self.replicas if b not in self.isr and self.can_fetch(b)
                  and self.hosted[b].log.log_end_offset >= max(hw, start)]
        if joined:
            self.isr = [b for b in self.replicas if b in self.isr or b in joined]
            self.counts["isr_expands"] += len(joined)
            self.notify_changed()

    def _epoch_start(self) -> int:
        entries = self.hosted[self.leader].epochs.entries
        return entries[-1][1] if entries and entries[-1][0] == self.leader_epoch else 0

    def maybe_shrink_isr(self, now: int) -> list[int]:
        """Drop followers behind the leader and not caught up for ``replica.lag.time.max.ms``."""
        if self.leader < 0:
            return []
        leo = self.log.log_end_offset
        out = [b for b in self.isr if b != self.leader and self.hosted[b].log.log_end_offset < leo
               and now - self.hosted[b].last_caught_up_ms > self.lag_max_ms]
        if out:
            self.isr = [b for b in self.isr if b not in out]
            self.counts["isr_shrinks"] += len(out)
            self.notify_changed()
        return out

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords on the leader (Kafka's ``Partition.deleteRecordsOnLeader``): the log start
        offset of the leader and of every reachable follower becomes ``offset`` (a follower
        behind it restarts there; an unreachable one follows when it next fetches). Returns the
        low watermark: the smallest log start offset over the leader and reachable followers."""
        leader = self.leader_log()
        hw = self.high_watermark
        if offset > hw:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {offset} of partition {self.name} since it "
                f"is larger than the high watermark {hw}")
        leader.increment_log_start_offset(offset)
        starts = [leader.log_start_offset]
        for b, r in self.hosted.items():
            if b == self.leader or not self.can_fetch(b):
                continue
            if r.log.log_end_offset < offset:
                r.log.restart_at(offset)
                r.epochs.clear()
            else:
                r.log.increment_log_start_offset(offset)
            starts.append(r.log.log_start_offset)
        return min(starts)

    def add_replica(self, broker_id: int, log: Log) -> Replica:
        """A reassignment adds ``broker_id``'s (empty) replica; it fetches and joins the ISR later."""
        r = self.hosted[broker_id] = Replica(broker_id, log, self.clock.now_ms())
        self.replicas = self.replicas + [broker_id]
        return r

    def set_replicas(self, target: list[int]) -> list[Replica]:
        """The reassignment's end: the replica list becomes ``target`` (in its order), the ISR
        keeps only target members; returns the dropped replicas (their logs still open)."""
        dropped = [self.hosted.pop(b) for b in self.replicas if b not in target]
        self.replicas = list(target)
        self.isr = [b for b in target if b in self.isr]
        self.notify_changed()
        return dropped

    def remove_from_isr(self, broker_id: int) -> None:
        """The controller fenced ``broker_id`` (stopped or isolated): it leaves the ISR."""
        self.isr = [b for b in self.isr if b != broker_id]
        self.counts["isr_shrinks"] += 1
        self.notify_changed()

    def notify_changed(self) -> None:
        """Tell the owner (the cluster's controller state) that leader, ISR or replicas changed."""
        if self.on_change is not None:
            self.on_change(self)

    # -- leadership -------------------------------------------------------------------------
    def become_leader(self, leader: int, isr: list[int], lost: Optional[list] = None) -> None:
        """Make ``leader`` (−1: offline) the leader with ``isr``; the epoch goes up (step 6).

        ``lost`` (an unclean election): every other replica, reachable or not, truncates now,
        and the records removed that the new leader does not hold are appended to ``lost``."""
        now = self.clock.now_ms()
        self.leader_epoch += 1
        self.counts["leader_elections"] += 1
        self.leader = leader
        self.counts["isr_shrinks"] += len(set(self.isr) - set(isr))
        self.isr = [b for b in self.replicas if b in isr]
        self.producers = None          # rebuilt from the new leader's log on first use
        if leader < 0:
            self.log = None
        else:
            r = self.hosted[leader]
            self.log = r.log
            r.epochs.assign(self.leader_epoch, r.log.log_end_offset)
            removed: dict[tuple, object] = {}
            for b in self.replicas:
                if self.can_fetch(b) or (lost is not None and b != leader and b in self.hosted):
                    self.truncate_follower(self.hosted[b], removed if lost is not None else None)
                    self.hosted[b].last_caught_up_ms = now
                    self.hosted[b].next_fetch_ms = now
            if removed:
                kept = {(rec.offset, rec.key) for rec in _records(r.log, min(o for o, _ in removed))}
                lost.extend(rec for k, rec in sorted(removed.items()) if k not in kept)
        self.notify_changed()

    def truncate_follower(self, r: Replica, removed: Optional[dict] = None) -> int:
        """OffsetsForLeaderEpoch truncation of ``r`` against the leader; returns its new LEO.
        ``removed``: gets ``(offset, key) → record`` of every record the truncation drops."""
        leader = self.hosted[self.leader]
        own_end = r.log.log_end_offset
        epoch = r.epochs.latest_epoch
        if epoch == UNDEFINED_EPOCH:
            target = min(own_end, self.high_watermark) if own_end else 0
        else:
            le, leader_end = leader.epochs.end_offset_for(epoch, leader.log.log_end_offset)
            if le == UNDEFINED_EPOCH:
                target = min(own_end, leader.log.log_start_offset)
            elif le == epoch:
                target = min(own_end, leader_end)
            else:
                _, own_epoch_end = r.epochs.end_offset_for(le, own_end)
                target = min(own_epoch_end, leader_end) if own_epoch_end >= 0 else min(own_end, leader_end)
        if target < own_end:
            if removed is not None:
                for rec in _records(r.log, target):
                    removed.setdefault((rec.offset, rec.key), rec)
            r.log.truncate_to(target)
            r.epochs.truncate_from_end(r.log.log_end_offset)
        return r.log.log_end_offset


def _headers_from(log: Log, offset: int):
    end = log.log_end_offset
    while offset < end:
        batches = log.read_batches(offset, 8 * 1024 * 1024)
        if not batches:
            return
        for header, _ in batches:
            yield header
        offset = batches[-1][0].next_offset


def _records(log: Log, offset: int):
    offset = max(offset, log.log_start_offset)
    while offset < log.log_end_offset:
        records = log.read(offset)
        if not records:
            return
        yield from records
        offset = records[-1].offset + 1
