"""``Consumer``: kafka-python's ``KafkaConsumer`` API over an in-process broker.

Usage::

    c = Consumer(broker, "orders", group_id="billing", auto_offset_reset="earliest",
                 enable_auto_commit=False)
    while True:
        batch = c.poll(timeout_ms=100)        # {TopicPartition: [ConsumerRecord]}
        process(batch)
        c.commit()                            # commit after processing: at-least-once

Delivery is **at-least-once** when the application commits after processing (manually,
or with auto-commit, which commits at the start of a later ``poll()`` the positions
of records an earlier ``poll()`` returned): a crash between processing and commit
re-delivers the uncommitted records to whoever owns the partition next.

Configs use Kafka's names and defaults (underscored, as kafka-python), defined and
validated once at construction by ``consumer/config.py`` (:data:`DEFAULT_CONFIG`); an
unknown name is an InvalidConfigurationError naming its close matches, and configs
kafka-python accepts that mean nothing in-process (``fetch_min_bytes``, network and
security settings) are accepted with one :class:`~kafkasim.config.IgnoredConfigWarning`.
``isolation_level`` is applied (``consumer/fetcher.py``): ``read_committed`` reads up to the
last stable offset and drops aborted transactions; neither level returns transaction
markers. :meth:`Consumer.group_metadata` is what a transactional producer's
``send_offsets_to_transaction`` takes. kafkasim additions: ``clock`` (injected
Clock), ``heartbeat_thread`` (run Kafka's background heartbeat thread; default on with
the real clock, off with a MockClock, where a scenario calls :meth:`Consumer.tick`
instead) and ``metadata_max_age_ms`` (how often the leader checks partition counts).

``group_protocol="consumer"`` (the Java client's ``group.protocol``; default ``classic``) makes
the group membership Kafka 4's consumer protocol (KIP-848, ``consumer/consumer_membership.py``):
heartbeats, broker-side assignment (``group_remote_assignor``), revoke-then-assign
reconciliation, offsets committed with the member epoch; the API stays the same.

Without a ``group_id`` (kafka-python's default) there is no group and no commit:
``Consumer(broker, "orders")`` or ``subscribe()`` assigns this consumer every partition of
the subscribed topics (partitions added later are picked up on the next metadata refresh,
every ``metadata_max_age_ms``), as kafka-python does; ``assign()`` works as with a group.
``subscribe(pattern="^orders-.*")`` follows the topics the regex matches, refreshed the same way.

Positions, as kafka-python: ``position(tp)`` is the offset of the next record the
application will be handed. ``poll()`` advances it past every record it returns (unless
``update_offsets=False``: the records are returned, positions stay, and the next poll
returns them again); iteration (``for record in consumer``) advances it one record at a
time, as each record is handed out, so ``commit()`` never covers a record the
application has not received. Iteration and ``poll()`` share one fetch path: the
iterator polls with ``update_offsets=False`` and keeps the rest of that batch, which it
drops on ``seek*()``, ``pause()``, ``assign()``, ``subscribe()`` and ``unsubscribe()``;
a buffered record is handed out only while its partition is still assigned in the same
assignment (not revoked or lost since it was fetched), not paused, and the record is not
behind the position (a ``poll()`` in between already returned it).

Positions: a newly assigned partition starts at the group's committed offset, else by
``auto_offset_reset`` (``earliest``, ``latest``, or ``none`` → NoOffsetForPartitionError).
A position that falls outside the log (retention deleted it, or a seek past the end) is
reset the same way, or raises OffsetOutOfRangeError with ``none``, as Kafka's fetcher.

Arguments (topics, partitions, offsets, timeouts) are checked with
:func:`kafkasim.arguments.check_arg`: a wrong type is an InvalidArgumentError naming the
argument and the value, raised before anything changes.

Thread-safety: like KafkaConsumer, use one consumer from one thread; an internal lock
only serialises the optional heartbeat thread with the caller.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from typing import Any, Iterable, Iterator, Optional

from kafkasim.consumer.fetcher import READ_COMMITTED, READ_UNCOMMITTED, ConsumerRecord, Fetcher
from kafkasim.consumer.group_member import ConsumerRebalanceListener, GroupMember, MemberState
from kafkasim.consumer.consumer_membership import ConsumerMembership
from kafkasim.consumer.subscription import AUTO_TOPICS, USER_ASSIGNED, PartitionState, SubscriptionState
from kafkasim.consumer.config import CONSUMER_CONFIGS, DEFAULT_CONFIG, check_group_protocol_configs
from kafkasim.consumer.lookups import OffsetLookups, partitions_arg as _partitions_arg, timeout_arg, \
    topics_arg as _topics_arg
from kafkasim.consumer.positions import Positions
from kafkasim.arguments import bad_arg, check_arg, check_commit_offsets
from kafkasim.clock import Clock, MockClock, SystemClock
from kafkasim.config import parse_configs, warn_ignored
from kafkasim.errors import IllegalStateError, InvalidConfigurationError, KafkaSimError, UnknownTopicOrPartitionError
from kafkasim.types import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

__all__ = ["Consumer", "KafkaConsumer", "DEFAULT_CONFIG", "ConsumerRecord", "ConsumerRebalanceListener"]


def _isolation_level(broker: Any, name: str) -> int:
    """Kafka's isolation level number for the config; read_committed needs the stored
    batches with their aborted transactions (``fetch_batches``)."""
    if name != "read_committed":
        return READ_UNCOMMITTED
    if not callable(getattr(broker, "fetch_batches", None)):
        raise InvalidConfigurationError(
            f"isolation_level='read_committed' needs a broker that returns stored batches (fetch_batches); "
            f"{type(broker).__name__} does not")
    return READ_COMMITTED


class Consumer(Positions, OffsetLookups):
    """A consumer over ``broker`` (see the module docstring); ``topics`` subscribes at once."""

    def __init__(self, broker, *topics: str, **configs: Any) -> None:
        if not all(callable(getattr(broker, n, None))
                   for n in ("fetch_columns", "list_offsets", "partition_count")):
            raise bad_arg("broker", broker, "a kafkasim Broker (an object with the broker API)")
        if isinstance(configs.get("group_protocol"), str):
            configs["group_protocol"] = configs["group_protocol"].lower()   # Java's: case-insensitive
        cfg, ignored = parse_configs("consumer", CONSUMER_CONFIGS, configs)
        check_group_protocol_configs(cfg, configs)
        if cfg["heartbeat_interval_ms"] >= cfg["session_timeout_ms"]:
            raise InvalidConfigurationError(
                f"heartbeat_interval_ms {cfg['heartbeat_interval_ms']} must be lower than "
                f"session_timeout_ms {cfg['session_timeout_ms']}")
        strategy = cfg["partition_assignment_strategy"]
        if isinstance(strategy, str) or not isinstance(strategy, Iterable):
            strategy = [strategy]
        cfg["partition_assignment_strategy"] = list(strategy)
        self.config = cfg
        self._broker = broker
        self._clock: Clock = cfg["clock"] or getattr(broker, "clock", None) or SystemClock()
        self._lock = threading.RLock()
        self._closed = False
        self._subs = SubscriptionState()
        self._fetcher = Fetcher(broker, self._subs,
                                max_partition_fetch_bytes=cfg["max_partition_fetch_bytes"],
                                fetch_max_bytes=cfg["fetch_max_bytes"],
                                key_deserializer=cfg["key_deserializer"],
                                value_deserializer=cfg["value_deserializer"],
                                on_out_of_range=self._reset_out_of_range,
                                client_rack=cfg["client_rack"],
                                retry_backoff_ms=cfg["retry_backoff_ms"],
                                isolation_level=_isolation_level(broker, cfg["isolation_level"]))
        self._member: Optional[GroupMember] = None
        if cfg["group_id"] is not None and cfg["group_protocol"] == "consumer":
            self._member = ConsumerMembership(
                broker, cfg["group_id"], self._subs, clock=self._clock, client_id=cfg["client_id"],
                max_poll_interval_ms=cfg["max_poll_interval_ms"], group_instance_id=cfg["group_instance_id"],
                remote_assignor=cfg["group_remote_assignor"], on_commit_needed=self._commit_on_revoke,
                client_rack=cfg["client_rack"], seed=cfg["seed"])
        elif cfg["group_id"] is not None:
            self._member = GroupMember(
                broker, cfg["group_id"], self._subs, clock=self._clock, client_id=cfg["client_id"],
                assignors=cfg["partition_assignment_strategy"],
                session_timeout_ms=cfg["session_timeout_ms"],
                heartbeat_interval_ms=cfg["heartbeat_interval_ms"],
                max_poll_interval_ms=cfg["max_poll_interval_ms"],
                group_instance_id=cfg["group_instance_id"],
                metadata_max_age_ms=cfg["metadata_max_age_ms"],
                on_commit_needed=self._commit_on_revoke, client_rack=cfg["client_rack"])
        self._next_auto_commit = self._clock.now_ms() + cfg["auto_commit_interval_ms"]
        self._next_metadata_ms: Optional[int] = None   # topics mode: when to refresh metadata next
        self._m = {"records-consumed-total": 0, "commit-total": 0}
        # the iterator's rest of a poll batch: (tp, the PartitionState it was fetched for, records)
        self._iter_batches: deque = deque()
        # where the fetcher left each partition it served: tp -> (PartitionState, position);
        # its buffer is valid only while the partition has that state and position (not
        # after poll(update_offsets=False), a partial iteration, or a reassignment)
        self._fetch_expect: dict[TopicPartition, tuple[PartitionState, int]] = {}
        self._keep_positions: Optional[dict] = None   # during a poll(update_offsets=False)
        self._hb_thread: Optional[threading.Thread] = None
        self._hb_stop = threading.Event()
        use_thread = cfg["heartbeat_thread"]
        if use_thread is None:
            use_thread = not isinstance(self._clock, MockClock)
        if use_thread and self._member is not None:
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                               name=f"kafkasim-heartbeat-{cfg['client_id']}")
            self._hb_thread.start()
        if topics:
            self.subscribe(list(topics))
        warn_ignored("consumer", ignored)

    # ------------------------------------------------------------------ subscription
    def subscribe(self, topics: Iterable[str] = (), pattern: Optional[str] = None,
                  listener: Optional[ConsumerRebalanceListener] = None) -> None:
        """Subscribe to ``topics``, or to every topic matching the regex ``pattern`` (checked
        again on each metadata refresh, every ``metadata_max_age_ms``), replacing any
        previous subscription. With a group_id the group assigns the partitions; without
        one this consumer takes every partition of them (kafka-python's) and commits nothing."""
        if listener is not None and not isinstance(listener, ConsumerRebalanceListener):
            raise TypeError("listener must be a ConsumerRebalanceListener")
        if topics and pattern is not None:
            raise IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        regex = None
        if pattern is not None:
            check_arg("pattern", pattern, "str")
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise bad_arg("pattern", pattern, f"a regular expression ({exc})") from None
        else:
            topics = _topics_arg([topics] if isinstance(topics, str) else topics)
        with self._lock:
            self._check_open()
            before = (self._subs.topics, self._subs.pattern)
            if regex is not None:
                self._subs.subscribe_pattern(regex)
            else:
                self._subs.subscribe(topics)
            self._iter_batches.clear()
            self._next_metadata_ms = None            # refresh (match / assign) on the next poll
            if self._member is not None:
                self._member.listener = listener if listener is not None else self._member.listener
                if (self._subs.topics, self._subs.pattern) != before:
                    self._member.rejoin_needed = True

    def _refresh_metadata(self, now: int) -> None:
        """Topics mode, every ``metadata_max_age_ms``: match the pattern against the broker's
        topics; without a group, assign every partition of the subscribed topics (caller
        holds the lock)."""
        if self._next_metadata_ms is not None and now < self._next_metadata_ms:
            return
        self._next_metadata_ms = now + self.config["metadata_max_age_ms"]
        if self._subs.pattern is None and self.config["allow_auto_create_topics"]:
            for topic in self._subs.topics:          # Kafka's consumer metadata request does this
                try:
                    self._broker.auto_create_topic(topic)
                except UnknownTopicOrPartitionError:
                    pass      # auto.create.topics.enable=false: the topic is waited for, as in Kafka
        if self._subs.pattern is not None and self._subs.match_topics(self._broker.list_topics()) \
                and self._member is not None:
            self._member.rejoin_needed = True
        if self._member is None:
            parts = [TopicPartition(t, p) for t in self._subs.topics for p in range(self._count(t))]
            if set(parts) != set(self._subs.assignment):
                self._subs.set_assignment(parts)   # positions of partitions that stay are kept

    def _count(self, topic: str) -> int:
        try:
            return self._broker.partition_count(topic)
        except UnknownTopicOrPartitionError:
            return 0      # not created yet: kafka-python waits for it in metadata too

    def subscription(self) -> set[str]:
        """The subscribed topics (for a pattern: those it matched at the last refresh)."""
        return set(self._subs.topics)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manually assign partitions (no group membership, no rebalances)."""
        with self._lock:
            self._check_open()
            parts = _partitions_arg(partitions)
            self._subs.assign_from_user(parts)
            self._fetcher.invalidate()
            self._iter_batches.clear()

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.assignment)

    def unsubscribe(self) -> None:
        with self._lock:
            if self._member is not None and self._subs.mode == AUTO_TOPICS:
                self._member.close()      # revoke (on_partitions_revoked), then leave
            self._subs.unsubscribe()
            self._fetcher.invalidate()
            self._iter_batches.clear()

    # ------------------------------------------------------------------ poll
    def poll(self, timeout_ms: int = 0, max_records: Optional[int] = None,
             update_offsets: bool = True) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records since the last poll: ``{TopicPartition: [ConsumerRecord]}``.

        Never blocks while there is work to do; without records it waits up to
        ``timeout_ms`` on the injected clock (a MockClock just advances).
        With ``update_offsets=False`` (kafka-python's) the records are returned but the
        positions do not advance: the next poll returns them again.
        """
        check_arg("timeout_ms", timeout_ms, "number", min=0)
        max_records = check_arg("max_records", max_records, "int", min=1, none_ok=True) \
            or self.config["max_poll_records"]
        clock = self._clock
        deadline = clock.now_ms() + timeout_ms
        while True:
            with self._lock:
                self._check_open()
                if self._subs.mode not in (AUTO_TOPICS, USER_ASSIGNED):
                    raise IllegalStateError("Consumer is not subscribed to any topics or assigned any partitions")
                now = clock.now_ms()
                if self._subs.mode == AUTO_TOPICS:
                    self._refresh_metadata(now)
                    if self._member is not None:
                        self._member.poll(now)
                self._maybe_auto_commit(now)
                if self._subs.missing_positions():
                    self._update_positions()
                records = self._fetch(max_records, update_offsets)
            if records:
                return records
            now = clock.now_ms()
            if now >= deadline:
                return {}
            clock.sleep(min(deadline - now, self.config["retry_backoff_ms"]))

    def _fetch(self, max_records: int, update_offsets: bool) -> dict:
        """The one fetch path of poll() and iteration (caller holds the lock)."""
        assignment = self._subs.assignment
        for tp, (state, pos) in list(self._fetch_expect.items()):
            if assignment.get(tp) is not state or state.position != pos:
                self._fetcher.invalidate(tp)   # its buffer was filled for another position
                del self._fetch_expect[tp]
        before = None if update_offsets else {tp: s.position for tp, s in assignment.items()}
        self._keep_positions = before         # an out-of-range reset updates it (below)
        try:
            records = self._fetcher.fetch(max_records)
        finally:
            self._keep_positions = None
        for tp, recs in records.items():
            state = assignment[tp]
            self._fetch_expect[tp] = (state, state.position)
            if before is not None:
                state.position = before[tp]
            else:
                self._m["records-consumed-total"] += len(recs)
        return records

    def tick(self) -> None:
        """Do what Kafka's background heartbeat thread would do now (for stepped scenarios)."""
        with self._lock:
            if self._member is not None and not self._closed:
                self._member.heartbeat_tick(self._clock.now_ms())

    def _heartbeat_loop(self) -> None:
        interval = max(10, min(self.config["heartbeat_interval_ms"], 1000)) / 1000.0
        while not self._hb_stop.wait(interval):
            try:
                self.tick()
            except KafkaSimError:
                pass   # surfaced to the application by its next poll()

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        """The next record, advancing its partition's position past it (kafka-python's
        iterator); stops after ``consumer_timeout_ms`` without records."""
        rec = self._next_buffered()
        if rec is not None:
            return rec
        timeout = self.config["consumer_timeout_ms"]
        deadline = self._clock.now_ms() + timeout if timeout != float("inf") else None
        while True:
            wait = 100 if deadline is None else max(0, min(100, deadline - self._clock.now_ms()))
            batch = self.poll(timeout_ms=int(wait), update_offsets=False)
            with self._lock:
                assignment = self._subs.assignment
                self._iter_batches = deque((tp, assignment.get(tp), deque(recs))
                                           for tp, recs in batch.items())
            rec = self._next_buffered()
            if rec is not None:
                return rec
            if deadline is not None and self._clock.now_ms() >= deadline:
                raise StopIteration

    def _next_buffered(self) -> Optional[ConsumerRecord]:
        """Hand out the next still-valid buffered record and advance its position past it."""
        with self._lock:
            batches = self._iter_batches
            while batches:
                tp, state, recs = batches[0]
                if self._subs.assignment.get(tp) is state and not state.paused:
                    while recs:
                        rec = recs.popleft()
                        if rec.offset < state.position:
                            continue            # already returned by a poll() in between
                        state.position = rec.offset + 1
                        self._m["records-consumed-total"] += 1
                        return rec
                batches.popleft()               # drained, revoked, reassigned or paused
            return None

    # ------------------------------------------------------------------ commits
    def _consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(s.position) for tp, s in self._subs.assignment.items()
                if s.position is not None}

    def commit(self, offsets: Optional[dict] = None, timeout_ms: Optional[int] = None) -> None:
        """Commit ``offsets`` ({TopicPartition: OffsetAndMetadata | int}, the *next* offset to
        read), default: the position of every assigned partition. CommitFailedError if this
        member is no longer in the group's generation. ``timeout_ms``: kafka-python's; the
        in-process commit completes before it could expire."""
        offsets = None if offsets is None else check_commit_offsets(offsets)
        timeout_arg(timeout_ms)
        with self._lock:
            self._check_open()
            if self.config["group_id"] is None:
                raise IllegalStateError("commit() needs a group_id")
            if offsets is None:
                offsets = self._consumed_offsets()
            if not offsets:
                return
            if self._member is not None and self._subs.mode == AUTO_TOPICS:
                self._member.check_poll_timeout(self._clock.now_ms())
                self._member.commit(offsets)
            else:
                self._broker.offset_commit(self.config["group_id"], "", -1, offsets)
            self._m["commit-total"] += 1

    def commit_async(self, offsets: Optional[dict] = None, callback=None) -> None:
        """Commit without raising: the outcome goes to ``callback(offsets, exception_or_None)``.

        kafkasim's broker is in-process, so the commit completes before this returns.
        """
        with self._lock:
            snapshot = self._consumed_offsets() if offsets is None else offsets
            try:
                self.commit(snapshot)
            except KafkaSimError as exc:
                if callback is not None:
                    callback(snapshot, exc)
                return
            if callback is not None:
                callback(snapshot, None)

    def _commit_on_revoke(self) -> None:
        if self.config["enable_auto_commit"]:
            try:
                offsets = self._consumed_offsets()
                if offsets:
                    self._member.commit(offsets)
            except KafkaSimError:
                pass   # as Kafka: an auto-commit failing before a rebalance is only logged

    def _maybe_auto_commit(self, now: int) -> None:
        if not self.config["enable_auto_commit"] or self.config["group_id"] is None:
            return
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.config["auto_commit_interval_ms"]
        if self._member is not None and self._member.state != MemberState.STABLE \
                and self._subs.mode == AUTO_TOPICS:
            return
        self.commit_async()

    # ------------------------------------------------------------------ group info / close
    @property
    def member_id(self) -> Optional[str]:
        return None if self._member is None else self._member.member_id

    @property
    def generation_id(self) -> Optional[int]:
        return None if self._member is None else self._member.generation_id

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This consumer's group membership (kafka-python's, KIP-447), to pass to
        ``Producer.send_offsets_to_transaction()``: the group id, generation, member id and
        group instance id; ``group_id`` None without a group."""
        if self._member is None:
            return ConsumerGroupMetadata(None)
        return ConsumerGroupMetadata(self.config["group_id"], self._member.generation_id, self._member.member_id,
                                     self.config["group_instance_id"])

    @property
    def member_state(self) -> Optional[MemberState]:
        return None if self._member is None else self._member.state

    @property
    def rebalance_pending(self) -> bool:
        """True while this member is not Stable in a generation or knows it must rejoin."""
        return self._member is not None and (
            self._member.state != MemberState.STABLE or self._member.rejoin_needed)

    @property
    def rebalance_protocol(self) -> Optional[str]:
        return None if self._member is None else self._member.protocol

    def close(self, autocommit: bool = True) -> None:
        """Commit (if auto-commit), then leave the group; a static member does not leave."""
        with self._lock:
            if self._closed:
                return
            try:
                if autocommit and self.config["enable_auto_commit"] and self._member is not None \
                        and self._member.state == MemberState.STABLE:
                    self.commit_async()
                if self._member is not None and self._subs.mode == AUTO_TOPICS:
                    self._member.close()
            finally:
                self._closed = True
                self._hb_stop.set()
        if self._hb_thread is not None and self._hb_thread is not threading.current_thread():
            self._hb_thread.join(timeout=2)

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()



KafkaConsumer = Consumer
"""kafka-python's name: ``KafkaConsumer(broker, 'topic', group_id=...)`` is :class:`Consumer`."""
