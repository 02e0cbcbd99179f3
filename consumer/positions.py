"""Where a consumer reads: kafka-python's position and flow-control calls, as a mixin of
:class:`kafkasim.consumer.consumer.Consumer` (needs ``self._lock``, ``self._subs``,
``self._fetcher``, ``self._iter_batches``, ``self._broker``, ``self.config``,
``self._keep_positions`` and :class:`~kafkasim.consumer.lookups.OffsetLookups`'s
``_list_offset``: a reset or seek to the end goes to the last stable offset under
read_committed, as Kafka's consumer).

- ``position(tp)``: the offset of the next record the application will be handed,
  initialised on first need from the group's committed offset, else by
  ``auto_offset_reset`` (``none`` → NoOffsetForPartitionError);
- ``seek``, ``seek_to_beginning``, ``seek_to_end``, ``pause``, ``resume``, ``paused``:
  each drops the fetcher's buffer of the partitions it touches and the iterator's rest of
  a poll batch, so the next record handed out follows the new position;
- an out-of-range position (retention deleted it, a seek past the end) is reset by
  ``auto_offset_reset`` or raises OffsetOutOfRangeError with ``none``, as Kafka's fetcher.

Thread-safety: as the Consumer (one thread; the lock serialises the heartbeat thread).
"""

from __future__ import annotations

from typing import Optional

from kafkasim.arguments import check_arg, check_topic_partition
from kafkasim.errors import NoOffsetForPartitionError, OffsetOutOfRangeError
from kafkasim.types import TopicPartition
from kafkasim.consumer.lookups import EARLIEST, LATEST, partitions_arg as _partitions_arg, timeout_arg

__all__ = ["Positions"]


class Positions:
    """Positions, seeks and pauses (mixin; see the module docstring)."""

    def _update_positions(self) -> None:
        missing = self._subs.missing_positions()
        committed = {}
        if self._member is not None:
            committed = self._broker.offset_fetch(self.config["group_id"], missing)
        reset = self.config["auto_offset_reset"]
        for tp in missing:
            om = committed.get(tp)
            if om is not None and om.offset >= 0:   # negative: no committed offset (Kafka's consumer)
                self._subs.state(tp).position = om.offset
                continue
            if reset == "none":
                raise NoOffsetForPartitionError(
                    f"Undefined offset with no reset policy for partition: {tp}")
            ts = EARLIEST if reset == "earliest" else LATEST
            self._subs.state(tp).position = self._list_offset(tp, ts)[0]

    def _reset_out_of_range(self, tp: TopicPartition) -> None:
        """Kafka's fetcher on OFFSET_OUT_OF_RANGE: reset by auto_offset_reset, or raise."""
        reset = self.config["auto_offset_reset"]
        state = self._subs.state(tp)
        if reset == "none":
            raise OffsetOutOfRangeError(
                f"Fetch position {state.position} is out of range for partition {tp} "
                "and auto_offset_reset is none")
        ts = EARLIEST if reset == "earliest" else LATEST
        state.position = self._list_offset(tp, ts)[0]
        if self._keep_positions is not None:   # a reset moves the position even then (Kafka's)
            self._keep_positions[tp] = state.position

    def position(self, partition: TopicPartition, timeout_ms: Optional[int] = None) -> int:
        """The offset of the next record this consumer will return for ``partition``."""
        tp = check_topic_partition(partition)
        timeout_arg(timeout_ms)
        with self._lock:
            state = self._subs.state(tp)
            if state.position is None:
                self._update_positions()
            return state.position

    def seek(self, partition: TopicPartition, offset: int) -> None:
        tp = check_topic_partition(partition)
        offset = check_arg("offset", offset, "int", min=0)
        with self._lock:
            self._subs.state(tp).position = offset
            self._fetcher.invalidate(tp)
            self._iter_batches.clear()

    def _seek_to(self, partitions, ts: int) -> None:
        tps = _partitions_arg(partitions)
        with self._lock:
            tps = tps or self._subs.assigned()
            for tp in tps:
                self._subs.state(tp).position = self._list_offset(tp, ts)[0]
                self._fetcher.invalidate(tp)
            self._iter_batches.clear()

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._seek_to(partitions, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._seek_to(partitions, LATEST)

    def pause(self, *partitions: TopicPartition) -> None:
        tps = _partitions_arg(partitions)
        with self._lock:
            for tp in tps:
                self._subs.state(tp).paused = True
                self._fetcher.invalidate(tp)
            self._iter_batches.clear()

    def resume(self, *partitions: TopicPartition) -> None:
        tps = _partitions_arg(partitions)
        with self._lock:
            for tp in tps:
                self._subs.state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._subs.assignment.items() if s.paused}
