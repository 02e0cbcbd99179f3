"""``ShareConsumer``: a member of a share group (KIP-932, Kafka's queues) over the broker API.

Usage::

    c = ShareConsumer(broker, group_id="workers", share_acknowledgement_mode="explicit")
    c.subscribe(["jobs"])
    while True:
        for record in c.poll(timeout_ms=100):        # [ShareConsumerRecord], delivery_count included
            ok = handle(record)
            c.acknowledge(record, AcknowledgeType.ACCEPT if ok else AcknowledgeType.RELEASE)
        c.commit_sync()                              # or let the next poll() carry them

Consumers of one share group share the partitions of the topics they subscribe to, record by
record: each ``poll()`` **acquires** records under a time-limited lock
(``group.share.record.lock.duration.ms``, the broker's), and each record is then
**acknowledged**: ACCEPT (done), RELEASE (deliver it again, to anyone; its delivery count goes
up) or REJECT (never deliver it again). A record whose lock expires, or whose holder leaves,
is released; after ``group.share.delivery.count.limit`` deliveries it is archived. There is
no committed offset and no position: where a share group starts reading is the group config
``share.auto.offset.reset``.

The API follows confluent-kafka's ``ShareConsumer`` and the Java client's
``KafkaShareConsumer`` (names in Python style, times in ms like :class:`Consumer`):

- ``poll(timeout_ms)`` returns a list of :class:`ShareConsumerRecord` (``ConsumerRecord``'s
  fields plus ``delivery_count``), at most ``max_poll_records``; records acquired beyond that
  are kept, still locked, for the next poll. It heartbeats (joining the group on the first
  poll), sends the pending acknowledgements on the same ShareFetch (on a ShareAcknowledge
  when it returns kept records without fetching), decodes the stored
  batches through :mod:`kafkasim.records` and keeps only the acquired offsets;
- ``share_acknowledgement_mode="implicit"`` (default): the next ``poll()``,
  ``commit_sync()``, ``commit_async()`` or ``close()`` accepts every record the previous
  poll returned; ``acknowledge()`` raises IllegalStateError ("Implicit acknowledgement of
  delivery is being used.");
- ``"explicit"``: ``acknowledge(record, type)`` / ``acknowledge_offset(topic, partition,
  offset, type)`` mark each record; a ``poll()`` while a returned record is unacknowledged
  raises IllegalStateError ("All records must be acknowledged in explicit acknowledgement
  mode."); acknowledging a record twice, or one that is not in flight (never returned, or
  already sent), raises IllegalStateError ("The record cannot be acknowledged."), as Java's
  ``IllegalStateException``; a bad type is an InvalidArgumentError naming it;
- acknowledgements go to the broker on the next ShareFetch (``poll()``), or at once with
  ``commit_sync()`` (returns ``{TopicPartition: None | KafkaError}``, e.g.
  InvalidRecordStateError when the lock had expired) or ``commit_async()`` (the outcome goes
  to the callback of ``set_acknowledgement_commit_callback(cb)``: ``cb({tp: {offsets}},
  error_or_None)``, per partition, as the acknowledgements of a poll's ShareFetch do too);
- acquired offsets that hold no record (compaction gaps, transaction markers) are
  acknowledged as GAP on their own (``consumer/share_fetch.py``);
- ``close()`` accepts (implicit mode) and sends the pending acknowledgements, closes the
  share session (the broker releases every record this member still holds) and leaves the
  group (heartbeat epoch -1); ``unsubscribe()`` does the same and keeps the consumer usable.

Heartbeats (``consumer/share_membership.py``) run on the injected clock at the interval the
broker answers with (``group.share.heartbeat.interval.ms``): from ``poll()``, from
:meth:`tick` in a stepped simulation (a MockClock), or from a background thread with the
real clock (``heartbeat_thread``, as :class:`Consumer`). Configs: ``consumer/share_config.py``
(Kafka's names, dotted or underscored).

The broker is anything with the share group API (``broker/protocol.py``'s
``ShareGroupAPI``): a Broker, a Cluster, or a ``RemoteBroker``.

Thread-safety: like KafkaShareConsumer, one consumer per thread; an internal lock only
serialises the optional heartbeat thread with the caller.
"""

from __future__ import annotations

import enum
import threading
from collections import deque
from typing import Any, Callable, Iterable, Optional

from kafkasim.arguments import bad_arg, check_arg
from kafkasim.clock import Clock, MockClock, SystemClock
from kafkasim.consumer.share_config import EXPLICIT, IMPLICIT, parse_share_configs
from kafkasim.consumer.share_fetch import ShareConsumerRecord, acquired_records
from kafkasim.consumer.share_membership import ShareMembership
from kafkasim.errors import FencedMemberEpochError, IllegalStateError, KafkaSimError, UnknownMemberIdError
from kafkasim.protocol.share_group import (
    ACKNOWLEDGE_ACCEPT, ACKNOWLEDGE_GAP, ACKNOWLEDGE_REJECT, ACKNOWLEDGE_RELEASE, AcknowledgementBatch,
)
from kafkasim.types import TopicPartition

__all__ = ["ShareConsumer", "KafkaShareConsumer", "AcknowledgeType", "ShareConsumerRecord"]

_SHARE_METHODS = ("share_group_heartbeat", "share_fetch", "share_acknowledge", "share_session_close")


class AcknowledgeType(enum.IntEnum):
    """Kafka's ``AcknowledgeType`` (and confluent-kafka's): what an acknowledgement does."""

    ACCEPT = ACKNOWLEDGE_ACCEPT      # processed: never delivered again
    RELEASE = ACKNOWLEDGE_RELEASE    # not processed: deliver again (delivery count + 1)
    REJECT = ACKNOWLEDGE_REJECT      # unprocessable: never delivered again (archived)


_ACK_KINDS = {t: int(t) for t in AcknowledgeType}


def _ack_type(value: Any) -> int:
    """An application's acknowledge type (AcknowledgeType, 1-3, or its name) as its number."""
    if isinstance(value, str) and value.upper() in AcknowledgeType.__members__:
        return int(AcknowledgeType[value.upper()])
    if isinstance(value, int) and not isinstance(value, bool) and value in (1, 2, 3):
        return int(value)
    raise bad_arg("type", value, "an AcknowledgeType: ACCEPT (1), RELEASE (2) or REJECT (3)")


def acknowledgement_batches(acks: dict[int, int]) -> list[AcknowledgementBatch]:
    """``{offset: type}`` as the wire's AcknowledgementBatches: one batch per run of contiguous
    offsets with one type (``{3: 1, 4: 1, 5: 2, 9: 1}`` → ``[3-4 ACCEPT, 5 RELEASE, 9 ACCEPT]``)."""
    out: list[AcknowledgementBatch] = []
    first = last = kind = None
    for off in sorted(acks):
        t = acks[off]
        if first is not None and off == last + 1 and t == kind:
            last = off
            continue
        if first is not None:
            out.append(AcknowledgementBatch(first, last, (kind,)))
        first = last = off
        kind = t
    if first is not None:
        out.append(AcknowledgementBatch(first, last, (kind,)))
    return out


class ShareConsumer:
    """A share group member over ``broker`` (see the module docstring)."""

    def __init__(self, broker, group_id: Optional[str] = None, **configs: Any) -> None:
        if not all(callable(getattr(broker, n, None)) for n in _SHARE_METHODS):
            raise bad_arg("broker", broker, "a kafkasim Broker with the share group API ("
                          + ", ".join(_SHARE_METHODS) + ")")
        if group_id is not None:
            configs["group_id"] = group_id
        cfg = parse_share_configs(configs)
        self.config = cfg
        self._broker = broker
        self._clock: Clock = cfg["clock"] or getattr(broker, "clock", None) or SystemClock()
        self._explicit = cfg["share_acknowledgement_mode"] == EXPLICIT
        self._lock = threading.RLock()
        self._closed = False
        self._member = ShareMembership(broker, cfg["group_id"], client_id=cfg["client_id"],
                                       rack_id=cfg["client_rack"], seed=cfg["seed"],
                                       max_poll_interval_ms=cfg["max_poll_interval_ms"])
        self._in_flight: dict[TopicPartition, set[int]] = {}     # returned by the last poll, unacknowledged
        self._pending: dict[TopicPartition, dict[int, int]] = {}  # acknowledgements to send: offset -> type
        self._buffer: deque[ShareConsumerRecord] = deque()        # acquired, not returned yet
        self._callback: Optional[Callable] = None
        self._losses = 0                                          # the membership's, when the buffer was filled
        self._m = {"records-consumed-total": 0, "acknowledgements-sent-total": 0}
        self._hb_stop = threading.Event()
        self._hb_thread: Optional[threading.Thread] = None
        use_thread = cfg["heartbeat_thread"]
        if use_thread is None:
            use_thread = not isinstance(self._clock, MockClock)
        if use_thread:
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                               name=f"kafkasim-share-heartbeat-{cfg['client_id']}")
            self._hb_thread.start()

    # ------------------------------------------------------------------ subscription
    def subscribe(self, topics: Iterable[str]) -> None:
        """Subscribe to ``topics``, replacing the subscription; an empty list unsubscribes.
        Records still buffered for a topic no longer subscribed are released."""
        if isinstance(topics, str) or not isinstance(topics, Iterable):
            raise bad_arg("topics", topics, "a list of topic names")
        topics = list(topics)
        for t in topics:
            if not isinstance(t, str) or not t.strip():
                raise bad_arg("topics", topics, "a list of non-empty topic names")
        if len(set(topics)) != len(topics):
            raise bad_arg("topics", topics, "a list of topic names without duplicates")
        if not topics:
            self.unsubscribe()
            return
        with self._lock:
            self._check_open()
            keep = set(topics)
            for r in [r for r in self._buffer if r.topic not in keep]:
                self._pending.setdefault(TopicPartition(r.topic, r.partition), {})[r.offset] = ACKNOWLEDGE_RELEASE
            self._buffer = deque(r for r in self._buffer if r.topic in keep)
            self._member.subscribe(topics)

    def subscription(self) -> list[str]:
        """The subscribed topics, sorted."""
        with self._lock:
            self._check_open()
            return list(self._member.topics)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the share group assigned this member (others may share them)."""
        return set(self._member.assignment)

    def unsubscribe(self) -> None:
        """Accept (implicit mode) and send the pending acknowledgements, release what this
        member holds (share session closed) and leave the group; ``subscribe()`` joins again."""
        with self._lock:
            self._check_open()
            self._let_go()
            self._member.unsubscribe()

    def _let_go(self) -> None:
        """Send what is acknowledged, then close the share session: the broker releases every
        record still held (returned unacknowledged, or buffered). Caller holds the lock."""
        if not self._explicit:
            self._accept_in_flight()
        acks = self._take_pending()
        if acks and self._member.member_epoch > 0:
            self._send_acknowledge(acks)
        if self._member.member_epoch > 0:
            try:
                self._broker.share_session_close(self.config["group_id"], self._member.member_id)
            except KafkaSimError:
                pass        # the member is gone already: the broker released its records then
        self._in_flight.clear()
        self._buffer.clear()

    # ------------------------------------------------------------------ poll
    def poll(self, timeout_ms: int = 0, max_records: Optional[int] = None) -> list[ShareConsumerRecord]:
        """Records acquired for this consumer, at most ``max_records`` (default
        ``max_poll_records``; the rest of what was acquired stays locked for the next poll); waits
        up to ``timeout_ms`` on the injected clock when there are none (a MockClock just advances)."""
        check_arg("timeout_ms", timeout_ms, "number", min=0)
        limit = check_arg("max_records", max_records, "int", min=1, none_ok=True) or self.config["max_poll_records"]
        clock = self._clock
        with self._lock:
            self._check_open()
            if not self._member.topics:
                raise IllegalStateError("Consumer is not subscribed to any topics.")
            if self._explicit:
                if any(self._in_flight.values()):
                    raise IllegalStateError("All records must be acknowledged in explicit acknowledgement mode.")
            else:
                self._accept_in_flight()
            self._in_flight.clear()
        deadline = clock.now_ms() + timeout_ms
        while True:
            with self._lock:
                self._check_open()
                self._member.poll(clock.now_ms())
                if self._member.losses != self._losses:     # left or fenced: the broker released them
                    self._losses = self._member.losses
                    self._buffer.clear()
                if not self._buffer:
                    self._buffer.extend(self._fetch())
                elif self._pending:          # no ShareFetch to carry them: a ShareAcknowledge
                    self._send_acknowledge(self._take_pending())
                records = [self._buffer.popleft() for _ in range(min(limit, len(self._buffer)))]
                if records:
                    in_flight = self._in_flight       # keyed by TopicPartition, looked up by (topic, partition)
                    for r in records:
                        held = in_flight.get((r.topic, r.partition))
                        if held is None:
                            held = in_flight[TopicPartition(r.topic, r.partition)] = set()
                        held.add(r.offset)
                    self._m["records-consumed-total"] += len(records)
                    return records
            now = clock.now_ms()
            if now >= deadline:
                return []
            clock.sleep(min(deadline - now, self.config["retry_backoff_ms"]))

    def _fetch(self) -> list[ShareConsumerRecord]:
        """One ShareFetch for the assigned partitions, carrying the pending acknowledgements
        (a ShareAcknowledge when nothing is assigned). Caller holds the lock."""
        parts = sorted(self._member.assignment)
        acks = self._take_pending()
        if not parts:
            if acks:
                self._send_acknowledge(acks)
            return []
        cfg = self.config
        try:
            answer = self._broker.share_fetch(
                cfg["group_id"], self._member.member_id, parts, max_records=cfg["max_poll_records"],
                max_bytes=cfg["fetch_max_bytes"], batch_size=cfg["max_poll_records"],
                acknowledgements=acks or None)
        except (UnknownMemberIdError, FencedMemberEpochError) as exc:
            self._member.fenced()           # its records were released by the broker
            self._report(acks, {tp: exc for tp in acks})
            return []
        except KafkaSimError as exc:
            if not exc.retriable:
                raise
            self._report(acks, {tp: exc for tp in acks})
            return []
        self._report(acks, {tp: answer[tp].acknowledge_error if tp in answer else None for tp in acks})
        records: list[ShareConsumerRecord] = []
        for tp in parts:
            part = answer.get(tp)
            if part is None or part.error is not None or not part.acquired:
                continue          # e.g. NOT_LEADER_OR_FOLLOWER: asked again at the next poll
            recs, gaps = acquired_records(tp.topic, tp.partition, part.records, part.acquired,
                                          key_deserializer=cfg["key_deserializer"],
                                          value_deserializer=cfg["value_deserializer"])
            for off in gaps:
                self._pending.setdefault(tp, {})[off] = ACKNOWLEDGE_GAP
            records.extend(recs)
        return records

    # ------------------------------------------------------------------ acknowledgements
    def acknowledge(self, record: ShareConsumerRecord, type: Any = AcknowledgeType.ACCEPT) -> None:
        """Mark ``record`` (returned by the last ``poll()``) ACCEPT (default), RELEASE or REJECT;
        sent with the next poll or commit. Explicit mode only (see the module docstring)."""
        if record.__class__ is ShareConsumerRecord:
            # the hot path: a record poll() built has checked coordinates; the in-flight check
            # below still refuses one this consumer did not return
            kind = _ACK_KINDS[type] if type.__class__ is AcknowledgeType else _ack_type(type)
            self._acknowledge(record.topic, record.partition, record.offset, kind)
            return
        for field in ("topic", "partition", "offset"):
            if not hasattr(record, field):
                raise bad_arg("record", record, "a record returned by ShareConsumer.poll()")
        self.acknowledge_offset(record.topic, record.partition, record.offset, type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int, type: Any = AcknowledgeType.ACCEPT) -> None:
        """:meth:`acknowledge` by coordinates (confluent-kafka's ``acknowledge_offset``)."""
        check_arg("topic", topic, "str")
        check_arg("partition", partition, "int", min=0)
        check_arg("offset", offset, "int", min=0)
        self._acknowledge(topic, partition, offset, _ack_type(type))

    def _acknowledge(self, topic: str, partition: int, offset: int, kind: int) -> None:
        with self._lock:
            self._check_open()
            if not self._explicit:
                raise IllegalStateError("Implicit acknowledgement of delivery is being used.")
            key = (topic, partition)        # equal to (and hashed as) the TopicPartition keys
            held = self._in_flight.get(key)
            if not held or offset not in held:
                raise IllegalStateError(
                    f"The record cannot be acknowledged. ({topic}-{partition} offset {offset} is not in flight: "
                    f"not returned by the last poll, or acknowledged already)")
            held.discard(offset)
            pending = self._pending.get(key)
            if pending is None:
                pending = self._pending[TopicPartition(topic, partition)] = {}
            pending[offset] = kind

    def _accept_in_flight(self) -> None:
        for tp, offsets in self._in_flight.items():
            pending = self._pending.setdefault(tp, {})
            for off in offsets:
                pending[off] = ACKNOWLEDGE_ACCEPT
        self._in_flight.clear()

    def _take_pending(self) -> dict[TopicPartition, list[AcknowledgementBatch]]:
        acks = {tp: acknowledgement_batches(offs) for tp, offs in sorted(self._pending.items()) if offs}
        self._pending = {}
        return acks

    def _send_acknowledge(self, acks) -> dict:
        try:
            results = self._broker.share_acknowledge(self.config["group_id"], self._member.member_id, acks)
        except KafkaSimError as exc:
            if isinstance(exc, (UnknownMemberIdError, FencedMemberEpochError)):
                self._member.fenced()
            elif not exc.retriable:
                raise
            results = {tp: exc for tp in acks}
        results = {tp: results.get(tp) for tp in acks}
        self._report(acks, results)
        return results

    def _report(self, acks, results: dict) -> None:
        """The acknowledgement commit callback, once per partition sent, with its offsets."""
        sent = {tp: {off for b in batches for off in range(b.first_offset, b.last_offset + 1)}
                for tp, batches in acks.items()}
        self._m["acknowledgements-sent-total"] += sum(map(len, sent.values()))
        cb = self._callback
        if cb is None:
            return
        for tp in acks:
            cb({tp: sent[tp]}, results.get(tp))

    def set_acknowledgement_commit_callback(self, callback: Optional[Callable]) -> None:
        """``callback({TopicPartition: {offsets}}, error_or_None)`` after each partition's
        acknowledgements were answered (confluent-kafka's); None clears it."""
        if callback is not None and not callable(callback):
            raise bad_arg("callback", callback, "a callable or None")
        with self._lock:
            self._check_open()
            self._callback = callback

    def commit_sync(self, timeout_ms: Optional[int] = None) -> dict[TopicPartition, Optional[KafkaSimError]]:
        """Send the pending acknowledgements now (ShareAcknowledge; implicit mode accepts the last
        poll's records first) and return each partition's outcome: None, or the error (e.g.
        InvalidRecordStateError); ``{}`` when nothing was pending. ``timeout_ms``: the in-process
        broker answers before it could expire."""
        check_arg("timeout_ms", timeout_ms, "number", min=0, none_ok=True)
        with self._lock:
            self._check_open()
            if not self._explicit:
                self._accept_in_flight()
            acks = self._take_pending()
            if not acks:
                return {}
            return self._send_acknowledge(acks)

    def commit_async(self) -> None:
        """:meth:`commit_sync` whose outcome goes only to the acknowledgement commit callback."""
        self.commit_sync()

    # ------------------------------------------------------------------ heartbeats / info
    def tick(self) -> None:
        """Do what Kafka's background thread would do now: heartbeat when due (stepped scenarios)."""
        with self._lock:
            if not self._closed:
                self._member.tick(self._clock.now_ms())

    def _heartbeat_loop(self) -> None:
        while not self._hb_stop.wait(0.1):
            try:
                self.tick()
            except KafkaSimError:
                pass        # a fatal error is raised by the application's next poll()

    @property
    def member_id(self) -> str:
        return self._member.member_id

    @property
    def member_epoch(self) -> int:
        return self._member.member_epoch

    @property
    def acknowledgement_mode(self) -> str:
        return EXPLICIT if self._explicit else IMPLICIT

    def metrics(self) -> dict[str, int]:
        return dict(self._m)

    # ------------------------------------------------------------------ close
    def close(self) -> None:
        """Accept (implicit mode) and send the pending acknowledgements, release what this
        member still holds (share session closed) and leave the group (epoch -1)."""
        with self._lock:
            if self._closed:
                return
            try:
                self._let_go()
                self._member.leave()
            finally:
                self._closed = True
                self._hb_stop.set()
        if self._hb_thread is not None and self._hb_thread is not threading.current_thread():
            self._hb_thread.join(timeout=2)

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")

    def __enter__(self) -> "ShareConsumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


KafkaShareConsumer = ShareConsumer
"""The Java client's name: ``KafkaShareConsumer(broker, group_id=...)`` is :class:`ShareConsumer`."""
