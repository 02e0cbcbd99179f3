"""A transaction that commits group offsets leaves COMMIT/ABORT markers in
``__consumer_offsets``; the offsets store steps over them when the broker reopens (Kafka's
loader skips control batches) instead of warning about an undecodable key."""

from __future__ import annotations

import warnings

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.protocol.offsets import OFFSETS_TOPIC, partition_for_group
from kafkasim.records.framing import ATTR_CONTROL
from kafkasim.types import TopicPartition

TP0 = TopicPartition("t", 0)


def test_reopening_after_transactional_offset_commits_skips_the_markers(tmp_path):
    d = tmp_path / "d"
    with Broker(d, clock=MockClock(1_700_000_000_000)) as b:
        b.create_topic("t", 1)
        pid, epoch = b.init_transactional_producer_id("tx", 60_000)
        b.add_offsets_to_txn("tx", pid, epoch, "g")
        b.txn_offset_commit("tx", "g", pid, epoch, {TP0: 5})
        b.end_txn("tx", pid, epoch, commit=False)               # an ABORT marker
        b.add_offsets_to_txn("tx", pid, epoch, "g")
        b.txn_offset_commit("tx", "g", pid, epoch, {TP0: 7})
        b.end_txn("tx", pid, epoch, commit=True)                # a COMMIT marker, then the offset
        part = partition_for_group("g")
        markers = [h for h, _ in b.log(OFFSETS_TOPIC, part).read_batches(0, 1 << 20)
                   if h.attributes & ATTR_CONTROL]
        assert len(markers) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")                          # no "undecodable key" warning
        with Broker(d, clock=MockClock(1_700_000_000_000)) as b:
            assert b.offset_fetch("g")[TP0].offset == 7
