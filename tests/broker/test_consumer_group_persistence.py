"""KIP-848 groups survive a broker restart: the broker appends Kafka's consumer group records
to ``__consumer_offsets`` and replays them when it opens the same data dir again."""

from __future__ import annotations

import uuid

from kafkasim.broker import Broker
from kafkasim.broker.cluster import Cluster
from kafkasim.clock import MockClock
from kafkasim.errors import GroupIdNotFoundError
from kafkasim.protocol import consumer_group_log as cgl
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kafkasim.protocol.offsets import OFFSETS_TOPIC, partition_for_group
from kafkasim.records import record_batch as rb

import pytest

T0 = 1_700_000_000_000
A, B = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))


def _join(b, member, group="g"):
    return b.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        group, member, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), topic_partitions={}),
        client_id="cid-" + member[-1], client_host="/127.0.0.1")


def _beat(b, member, epoch, owned, group="g"):
    return b.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(group, member, epoch, topic_partitions=owned),
                                      client_id="cid-" + member[-1], client_host="/127.0.0.1")


def _snapshot(b, group="g"):
    [d] = b.consumer_group_describe([group])
    return d


def _records(b, group="g"):
    """(type, member, value) of every consumer group record in the group's partition, in order."""
    log = b.log(OFFSETS_TOPIC, partition_for_group(group))
    out = []
    for h, buf in log.read_batches(log.log_start_offset, 1 << 22):
        for rec in rb.iter_records(buf, 0, h, where="test"):
            if cgl.is_consumer_group_key(rec.key):
                k = cgl.decode_key(rec.key)
                out.append((k.type, k.member_id, cgl.decode_value(k.type, rec.value)))
    return out


@pytest.fixture
def setup(tmp_path):
    clock = MockClock(T0)
    b = Broker(tmp_path / "d", clock=clock)
    b.create_topic("t", 4)
    yield tmp_path / "d", clock, b
    b.close()


@pytest.mark.parametrize("kind", [Broker, Cluster], ids=lambda c: c.__name__)
def test_a_stable_group_is_back_after_a_restart_and_its_member_heartbeats_on(tmp_path, kind):
    data, clock = tmp_path / "d", MockClock(T0)
    b = kind(data, clock=clock, **({"brokers": [0, 1, 2]} if kind is Cluster else {}))
    b.create_topic("t", 4)
    r = _join(b, A)
    owned = dict(r.assignment)
    r = _beat(b, A, r.member_epoch, owned)
    before = _snapshot(b)
    assert before["state"] == "Stable" and before["group_epoch"] == 1
    b.close()
    b2 = kind(data, clock=clock)
    try:
        after = _snapshot(b2)
        assert after == before
        assert after["members"][0]["client_id"] == "cid-1"
        r2 = _beat(b2, A, r.member_epoch, owned)     # no rejoin: the same epoch is accepted
        assert r2.member_epoch == before["members"][0]["member_epoch"] == 1
        assert _snapshot(b2)["group_epoch"] == 1
    finally:
        b2.close()


def test_a_restart_mid_reconciliation_keeps_epochs_targets_and_pending_revocations(setup):
    data, clock, b = setup
    ra = _join(b, A)
    a_owned = dict(ra.assignment)
    ra = _beat(b, A, ra.member_epoch, a_owned)
    rb_ = _join(b, B)              # A must now revoke half: the group is reconciling
    assert _snapshot(b)["state"] == "Reconciling"
    ra = _beat(b, A, ra.member_epoch, a_owned)
    before = _snapshot(b)
    b.close()
    b2 = Broker(data, clock=clock)
    try:
        after = _snapshot(b2)
        assert after == before and after["state"] == "Reconciling"
        group = b2.consumer_group_coordinator.group("g")
        assert {m: (x.member_epoch, x.state.value, dict(x.partitions_pending_revocation))
                for m, x in group.members.items()} == \
            {m: (x.member_epoch, x.state.value, dict(x.partitions_pending_revocation))
             for m, x in b.consumer_group_coordinator.group("g").members.items()}
        # A revokes what it was asked to give up; B then gets it: the reconciliation finishes.
        a_now = {t: frozenset(ps) for t, ps in (ra.assignment or a_owned).items()}
        ra2 = _beat(b2, A, ra.member_epoch, a_now)
        rb2 = _beat(b2, B, rb_.member_epoch, dict(rb_.assignment or {}))
        rb2 = _beat(b2, B, rb2.member_epoch, dict(rb2.assignment or {}))
        ra2 = _beat(b2, A, ra2.member_epoch, dict(ra2.assignment or a_now))
        assert _snapshot(b2)["state"] == "Stable"
        assert _snapshot(b2)["group_epoch"] == before["group_epoch"]
    finally:
        b2.close()


def test_sessions_restart_on_load_and_a_fenced_member_is_tombstoned(setup):
    data, clock, b = setup
    r = _join(b, A)
    _beat(b, A, r.member_epoch, dict(r.assignment))
    b.close()
    clock.advance(60_000)                       # longer than the session timeout (45 s)
    b2 = Broker(data, clock=clock)
    try:
        assert b2.tick_consumer_groups() == []  # the session was re-armed at load
        clock.advance(45_000)
        assert [f.member_id for f in b2.tick_consumer_groups()] == [A]
        assert [(t, m, v) for t, m, v in _records(b2)[-5:]] == [(8, A, None), (7, A, None), (5, A, None),
                                                              (4, None, cgl.PartitionMetadata(())), (3, None, cgl.GroupEpoch(2))]
    finally:
        b2.close()
    b3 = Broker(data, clock=clock)
    try:
        d = _snapshot(b3)
        assert d["members"] == [] and d["state"] == "Empty" and d["group_epoch"] == 2
        b3.delete_consumer_group("g")
        assert [t for t, _, v in _records(b3)[-3:] if v is None] == [6, 4, 3]
    finally:
        b3.close()
    b4 = Broker(data, clock=clock)
    try:
        [d] = b4.consumer_group_describe(["g"])
        assert isinstance(d["error"], GroupIdNotFoundError)
    finally:
        b4.close()


def test_the_first_join_writes_kafkas_records_in_kafkas_order(setup):
    data, clock, b = setup
    _join(b, A)
    topic_id = uuid.UUID(hex=b.describe_topic("t")["topic_id"])
    recs = _records(b)
    assert [(t, m) for t, m, _ in recs] == [(5, A), (4, None), (3, None), (7, A), (6, None), (8, A)]
    assert recs[0][2] == cgl.MemberMetadata(None, None, "cid-1", "/127.0.0.1", ("t",), None, 30_000, None)
    assert recs[2][2] == cgl.GroupEpoch(1) and recs[4][2] == cgl.TargetAssignmentEpoch(1)
    assert recs[3][2] == cgl.TargetAssignmentMember({topic_id: (0, 1, 2, 3)})
    assert recs[5][2] == cgl.CurrentMemberAssignment(1, 0, 0, {topic_id: (0, 1, 2, 3)}, {})
