"""KIP-447: a transactional offset commit carries the consumer's group metadata and the
group coordinator checks it (Kafka's ``validateTransactionalOffsetCommit``, classic group;
the cases of ClassicGroupTest/GroupMetadataManagerTest): the coordinator alone, then the
broker's TxnOffsetCommit, then the in-process Producer's ``send_offsets_to_transaction``
with a zombie consumer's metadata."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.coordinator.coordinator import COMPLETE, GroupCoordinator
from kafkasim.coordinator.group import Group, GroupState
from kafkasim.errors import (
    CommitFailedError, CoordinatorNotAvailableError, FencedInstanceIdError, IllegalGenerationError,
    InvalidArgumentError, UnknownMemberIdError,
)
from kafkasim.producer import Producer
from kafkasim.types import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

T0 = 1_700_000_000_000
TP0 = TopicPartition("t", 0)
PROTOS = [("range", {"topics": ["t"]})]


def join(gc, member_id="", **kw):
    kw.setdefault("session_timeout_ms", 10_000)
    kw.setdefault("rebalance_timeout_ms", 20_000)
    return gc.join_group("g", member_id, protocols=PROTOS, **kw)


@pytest.fixture
def clock():
    return MockClock(T0)


@pytest.fixture
def gc(clock):
    return GroupCoordinator(clock=clock)


def stable(gc, clock, **kw):
    """One member in a Stable generation 1; its join result."""
    a = join(gc, client_id="a", **kw)
    clock.advance(3_000)                         # group.initial.rebalance.delay.ms
    a = join(gc, a.member_id, **kw)
    assert a.status == COMPLETE and a.generation_id == 1
    gc.sync_group("g", a.member_id, 1, {a.member_id: [TP0]}, group_instance_id=kw.get("group_instance_id"))
    return a


def test_without_a_group_only_a_commit_without_generation_is_accepted(gc):
    gc.validate_txn_offset_commit("g")                                   # a simple consumer: accepted
    gc.validate_txn_offset_commit("g", "", -1, None)
    with pytest.raises(IllegalGenerationError):
        gc.validate_txn_offset_commit("g", "m-1", 1)                     # a group that is gone


def test_a_member_of_the_current_generation_is_accepted_and_a_zombie_is_not(gc, clock):
    a = stable(gc, clock)
    gc.validate_txn_offset_commit("g", a.member_id, 1)
    gc.validate_txn_offset_commit("g", "", -1)       # no group metadata (TxnOffsetCommit v0-2): accepted
    with pytest.raises(UnknownMemberIdError):
        gc.validate_txn_offset_commit("g", "someone-else", 1)
    with pytest.raises(UnknownMemberIdError):
        gc.validate_txn_offset_commit("g", "", 1)                        # a generation without a member
    with pytest.raises(IllegalGenerationError):
        gc.validate_txn_offset_commit("g", a.member_id, 0)
    b = join(gc, client_id="b")                                          # a rebalance starts
    a2 = join(gc, a.member_id)
    assert a2.status == COMPLETE and a2.generation_id == 2
    # CompletingRebalance: a transactional commit of the new generation is not refused
    # (OffsetCommit would get REBALANCE_IN_PROGRESS), the old generation is
    gc.validate_txn_offset_commit("g", a.member_id, 2)
    with pytest.raises(IllegalGenerationError):
        gc.validate_txn_offset_commit("g", a.member_id, 1)
    assert b.member_id


def test_static_members_are_checked_by_their_instance_id(gc, clock):
    a = stable(gc, clock, group_instance_id="i-1")
    gc.validate_txn_offset_commit("g", a.member_id, 1, "i-1")
    with pytest.raises(FencedInstanceIdError):
        gc.validate_txn_offset_commit("g", "old-member", 1, "i-1")       # a restarted instance's zombie
    with pytest.raises(UnknownMemberIdError):
        gc.validate_txn_offset_commit("g", a.member_id, 1, "i-2")        # no member holds that instance id


def test_an_empty_group_accepts_only_commits_without_a_member(gc, clock):
    a = stable(gc, clock)
    gc.leave_group("g", a.member_id)
    gc.validate_txn_offset_commit("g", "", -1)
    with pytest.raises(UnknownMemberIdError):
        gc.validate_txn_offset_commit("g", a.member_id, 1)


def test_a_dead_group_answers_coordinator_not_available(gc):
    gc._groups["g"] = Group("g", state=GroupState.DEAD)      # a group being deleted (no public way in)
    with pytest.raises(CoordinatorNotAvailableError):
        gc.validate_txn_offset_commit("g", "", -1)


# ----------------------------------------------------------------------------- the broker

@pytest.fixture
def b(tmp_path, clock):
    with Broker(tmp_path / "d", clock=clock) as broker:
        broker.create_topic("t", 2)
        yield broker


def test_the_brokers_txn_offset_commit_refuses_a_zombie_and_stages_nothing(b, clock):
    a = join(b.group_coordinator, client_id="a")
    clock.advance(3_000)
    a = join(b.group_coordinator, a.member_id)
    b.sync_group("g", a.member_id, 1, {a.member_id: [TP0]})
    pid, epoch = b.init_transactional_producer_id("tx", 60_000)
    b.add_offsets_to_txn("tx", pid, epoch, "g")
    with pytest.raises(IllegalGenerationError):
        b.txn_offset_commit("tx", "g", pid, epoch, {TP0: 5}, member_id=a.member_id, generation_id=0)
    with pytest.raises(UnknownMemberIdError):
        b.txn_offset_commit("tx", "g", pid, epoch, {TP0: 6}, member_id="zombie", generation_id=1)
    with pytest.raises(InvalidArgumentError, match="generation_id"):
        b.txn_offset_commit("tx", "g", pid, epoch, {TP0: 6}, member_id=a.member_id, generation_id="1")
    b.end_txn("tx", pid, epoch, commit=True)
    assert b.offset_fetch("g") == {}                       # the refused offsets were not staged
    b.add_offsets_to_txn("tx", pid, epoch, "g")
    b.txn_offset_commit("tx", "g", pid, epoch, {TP0: 7}, member_id=a.member_id, generation_id=1)
    b.end_txn("tx", pid, epoch, commit=True)
    assert b.offset_fetch("g")[TP0].offset == 7


def test_send_offsets_to_transaction_from_a_consumer_rebalanced_out_fails_and_must_abort(b, clock):
    """The consumer's metadata of generation N is stale once the group moved on: the
    transaction gets CommitFailedError (kafka-python's mapping of ILLEGAL_GENERATION),
    must be aborted, and the group keeps the offsets of the member that is current."""
    c = Consumer(b, "t", group_id="g", enable_auto_commit=False)
    while not c.assignment() or c.rebalance_pending:
        c.poll(timeout_ms=100)
    stale = c.group_metadata()
    assert stale.generation_id >= 1 and stale.member_id
    zombie = ConsumerGroupMetadata("g", stale.generation_id, stale.member_id, None)
    d = Consumer(b, "t", group_id="g", enable_auto_commit=False)      # a second member: a rebalance
    for _ in range(200):
        c.poll(timeout_ms=100)
        d.poll(timeout_ms=100)
        if not (c.rebalance_pending or d.rebalance_pending) and c.group_metadata().generation_id > stale.generation_id:
            break
    current = c.group_metadata()
    assert current.generation_id > stale.generation_id

    p = Producer(b, transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"out", partition=1)
    with pytest.raises(CommitFailedError, match="IllegalGenerationError"):
        p.send_offsets_to_transaction({TP0: OffsetAndMetadata(3, "")}, zombie)
    with pytest.raises(Exception, match="must be aborted"):
        p.commit_transaction()
    p.abort_transaction()
    assert b.offset_fetch("g") == {}
    p.begin_transaction()                                  # the producer is usable again
    p.send_offsets_to_transaction({TP0: OffsetAndMetadata(4, "")}, current)
    p.commit_transaction()
    assert b.offset_fetch("g")[TP0].offset == 4
