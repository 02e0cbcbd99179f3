"""ShareConsumer against a real in-process Broker on a MockClock: Kafka's share group semantics
as a client sees them (KIP-932) - delivery counts, implicit and explicit acknowledgement,
release, reject, lock expiry, close and unsubscribe releasing what a member holds, several
members sharing one partition, heartbeats on the clock."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.consumer import AcknowledgeType, Consumer, ShareConsumer
from kafkasim.errors import GroupIdNotFoundError, IllegalStateError, InvalidArgumentError, InvalidRecordStateError
from kafkasim.types import TopicPartition

TP = TopicPartition("jobs", 0)
LOCK_MS = 15_000


@pytest.fixture
def broker(tmp_path, clock):
    b = Broker(tmp_path / "data", clock=clock, broker_configs={
        "share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": LOCK_MS})
    b.create_topic("jobs", 1)
    b.append_records("jobs", 0, [(clock.now_ms() + i, f"k{i}".encode(), f"v{i}".encode(), ()) for i in range(10)])
    yield b
    b.close()


def share(broker, name="c1", **kw):
    c = ShareConsumer(broker, group_id="workers", client_id=name, seed=7, **kw)
    c.subscribe(["jobs"])
    return c


def poll_until(c, n, polls=20, **kw):
    """Poll until ``n`` records came back (or ``polls`` polls): the records, in order."""
    out = []
    for _ in range(polls):
        out.extend(c.poll(timeout_ms=100, **kw))
        if len(out) >= n:
            break
    return out


def spso(broker):
    return broker.describe_share_group_offsets("workers")[TP]["start_offset"]


def test_poll_delivers_every_record_once_and_the_next_poll_accepts_them(broker):
    c = share(broker)
    recs = poll_until(c, 10)
    assert [r.offset for r in recs] == list(range(10))
    assert {r.delivery_count for r in recs} == {1}
    assert (recs[3].topic, recs[3].partition, recs[3].key, recs[3].value) == ("jobs", 0, b"k3", b"v3")
    assert c.assignment() == {TP} and c.member_epoch > 0
    assert c.poll(timeout_ms=100) == []           # implicit: accepts 0..9 on its ShareFetch
    assert spso(broker) == 10
    c.close()


def test_max_poll_records_keeps_the_rest_locked_for_the_next_poll(broker):
    c = share(broker, max_poll_records=4)
    assert [r.offset for r in c.poll(timeout_ms=100)] == [0, 1, 2, 3]
    assert [r.offset for r in c.poll(timeout_ms=100, max_records=2)] == [4, 5]
    assert spso(broker) == 4          # 0..3 accepted by that poll although it fetched nothing
    other = share(broker, "other")
    assert other.poll(timeout_ms=100) == []        # 4..9 are still this consumer's
    c.close()
    other.close()


def test_explicit_release_redelivers_with_delivery_count_2_and_reject_never(broker):
    c = share(broker, share_acknowledgement_mode="explicit")
    recs = poll_until(c, 10)
    for r in recs:
        kind = {2: AcknowledgeType.RELEASE, 5: AcknowledgeType.REJECT}.get(r.offset, AcknowledgeType.ACCEPT)
        c.acknowledge(r, kind)
    again = poll_until(c, 1)          # the acknowledgements ride on this ShareFetch
    assert [(r.offset, r.delivery_count) for r in again] == [(2, 2)]
    c.acknowledge(again[0])
    assert c.commit_sync() == {TP: None}
    assert c.poll(timeout_ms=100) == []
    assert spso(broker) == 10
    c.close()


def test_explicit_mode_refuses_what_kafka_refuses(broker):
    c = share(broker, share_acknowledgement_mode="explicit")
    with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
        c.acknowledge_offset("jobs", 0, 0)                     # nothing returned yet
    recs = poll_until(c, 10)
    with pytest.raises(IllegalStateError, match="^All records must be acknowledged in explicit acknowledgement mode.$"):
        c.poll()
    with pytest.raises(InvalidArgumentError, match="type must be an AcknowledgeType"):
        c.acknowledge(recs[0], 7)
    c.acknowledge(recs[0], "release")
    with pytest.raises(IllegalStateError, match="The record cannot be acknowledged"):
        c.acknowledge(recs[0])                                 # twice
    with pytest.raises(InvalidArgumentError, match="record must be"):
        c.acknowledge("not a record")
    c.close()
    with pytest.raises(IllegalStateError, match="already been closed"):
        c.poll()


def test_implicit_mode_has_no_acknowledge(broker):
    c = share(broker)
    recs = poll_until(c, 10)
    with pytest.raises(IllegalStateError, match="^Implicit acknowledgement of delivery is being used.$"):
        c.acknowledge(recs[0])
    c.close()


def test_commit_sync_sends_the_acknowledgements_and_the_callback_hears_the_outcome(broker):
    c = share(broker)
    heard = []
    c.set_acknowledgement_commit_callback(lambda offsets, exc: heard.append((offsets, exc)))
    poll_until(c, 10)
    assert c.commit_sync() == {TP: None}           # implicit: the last poll's records, accepted
    assert heard == [({TP: set(range(10))}, None)]
    assert spso(broker) == 10
    assert c.commit_sync() == {}                   # nothing pending
    c.close()


def test_a_record_whose_lock_expired_goes_to_another_consumer_and_the_late_ack_fails(broker, clock):
    a = share(broker, "a", share_acknowledgement_mode="explicit")
    b = share(broker, "b")
    held = poll_until(a, 10)
    assert len(held) == 10
    assert b.poll(timeout_ms=100) == []            # all 10 locked by a
    clock.advance(LOCK_MS + 1)
    broker.tick()                                  # lock expiry = release
    got = poll_until(b, 10)
    assert [(r.offset, r.delivery_count) for r in got] == [(o, 2) for o in range(10)]
    for r in held:
        a.acknowledge(r)
    outcome = a.commit_sync()
    assert isinstance(outcome[TP], InvalidRecordStateError)   # b holds them now
    a.close()
    b.close()


def test_a_poison_record_is_archived_after_the_delivery_count_limit(broker):
    c = share(broker, share_acknowledgement_mode="explicit")
    counts = []
    for _ in range(8):
        recs = c.poll(timeout_ms=100)
        for r in recs:
            if r.offset == 4:
                counts.append(r.delivery_count)
                c.acknowledge(r, AcknowledgeType.RELEASE)      # the handler fails on it, every time
            else:
                c.acknowledge(r)
    assert counts == [1, 2, 3, 4, 5]              # group.share.delivery.count.limit=5, then archived
    assert c.commit_sync() == {} and spso(broker) == 10
    c.close()


def test_close_releases_what_an_explicit_consumer_did_not_acknowledge(broker):
    a = share(broker, "a", share_acknowledgement_mode="explicit")
    held = poll_until(a, 10)
    a.acknowledge(held[0])
    a.close()                                      # 0 accepted; 1..9 released
    b = share(broker, "b")
    got = poll_until(b, 9)
    assert [(r.offset, r.delivery_count) for r in got] == [(o, 2) for o in range(1, 10)]
    b.close()


def test_close_in_implicit_mode_accepts_and_leaves(broker):
    a = share(broker, "a")
    poll_until(a, 10)
    a.close()
    assert spso(broker) == 10
    (desc,) = broker.share_group_describe(["workers"])
    assert desc["members"] == []
    b = share(broker, "b")
    assert b.poll(timeout_ms=500) == []
    b.close()


def test_unsubscribe_releases_and_leaves_then_subscribe_joins_again(broker):
    a = share(broker, "a", share_acknowledgement_mode="explicit")
    poll_until(a, 10)
    a.unsubscribe()
    (desc,) = broker.share_group_describe(["workers"])
    assert desc["members"] == [] and a.assignment() == set()
    with pytest.raises(IllegalStateError, match="not subscribed"):
        a.poll()
    a.subscribe(["jobs"])
    got = poll_until(a, 10)
    assert {r.delivery_count for r in got} == {2}
    for r in got:
        a.acknowledge(r)
    a.close()


@pytest.mark.parametrize("members", [2, 4])
def test_consumers_of_one_share_group_share_one_partition(broker, clock, members):
    # one record per batch: a ShareFetch of max.poll.records=3 acquires 3 (whole batches are acquired)
    for i in range(30):
        broker.append_records("jobs", 0, [(clock.now_ms(), None, f"more{i}".encode(), ())])
    cs = [share(broker, f"c{i}", max_poll_records=3) for i in range(members)]
    seen = {i: [] for i in range(members)}
    for _ in range(40):
        for i, c in enumerate(cs):
            seen[i].extend(r.offset for r in c.poll(timeout_ms=10))
    every = sorted(o for offs in seen.values() for o in offs)
    assert every == list(range(40))                # each record delivered once, to one member
    assert all(len(offs) >= 6 for offs in seen.values())   # every member got a share of the 30
    assert all(c.assignment() == {TP} for c in cs)  # the one partition, assigned to each
    for c in cs:
        c.close()
    assert spso(broker) == 40


def test_heartbeats_on_the_clock_keep_the_member_and_silence_fences_it(broker, clock):
    c = share(broker)
    poll_until(c, 10)
    member = c.member_id
    for _ in range(20):                            # 100 s of ticks every 5 s: never fenced
        clock.advance(5_000)
        c.tick()
        broker.tick()
    (desc,) = broker.share_group_describe(["workers"])
    assert [m["member_id"] for m in desc["members"]] == [member]
    clock.advance(46_000)                          # silent past group.share.session.timeout.ms
    broker.tick()
    (desc,) = broker.share_group_describe(["workers"])
    assert desc["members"] == []
    c.poll(timeout_ms=100)                         # joins again, with the same member id
    (desc,) = broker.share_group_describe(["workers"])
    assert [m["member_id"] for m in desc["members"]] == [member] and c.member_epoch > 0
    c.close()


def test_a_member_that_stops_polling_leaves_at_max_poll_interval_and_its_next_poll_joins_again(broker, clock):
    a = share(broker, "a", max_poll_interval_ms=60_000)
    heard = []
    a.set_acknowledgement_commit_callback(lambda offsets, exc: heard.append(exc))
    poll_until(a, 10)
    for _ in range(11):                            # the background heartbeats go on, the polls stop
        clock.advance(5_000)
        a.tick()
        broker.tick()
    (desc,) = broker.share_group_describe(["workers"])
    assert [m["member_id"] for m in desc["members"]] == [a.member_id]   # 55 s: still a member
    clock.advance(6_000)
    a.tick()
    (desc,) = broker.share_group_describe(["workers"])
    assert desc["members"] == [] and a.assignment() == set()            # 61 s > max.poll.interval.ms
    a.tick()                                       # no poll yet: it stays out
    assert broker.share_group_describe(["workers"])[0]["members"] == []
    got = poll_until(a, 10)                        # joins again; its late acceptance is refused
    assert [m["member_id"] for m in broker.share_group_describe(["workers"])[0]["members"]] == [a.member_id]
    assert [(r.offset, r.delivery_count) for r in got] == [(o, 2) for o in range(10)]
    assert len(heard) == 1 and isinstance(heard[0], InvalidRecordStateError)
    a.close()


def test_a_consumer_group_id_is_not_a_share_group(broker):
    k = Consumer(broker, "jobs", group_id="workers", group_protocol="consumer")
    k.poll(timeout_ms=100)
    c = share(broker)
    with pytest.raises(GroupIdNotFoundError, match="not a share group"):
        c.poll(timeout_ms=100)
    k.close()


def test_a_broker_without_the_share_api_is_named():
    with pytest.raises(InvalidArgumentError, match="broker must be a kafkasim Broker with the share group API"):
        ShareConsumer(object(), group_id="g")


def test_the_docs_snippet_prints_what_its_comments_promise(tmp_path):
    import os
    import re
    import subprocess
    import sys

    doc = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "share-consumer.md")
    with open(doc, encoding="utf-8") as f:
        (snippet,) = re.findall(r"```python\n(.*?)```", f.read(), re.DOTALL)[:1]
    done = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["{TopicPartition(topic='jobs', partition=0): None}", "[(2, 2)]"]


def test_bad_arguments_are_named(broker):
    c = ShareConsumer(broker, group_id="workers")
    with pytest.raises(IllegalStateError, match="^Consumer is not subscribed to any topics.$"):
        c.poll()
    with pytest.raises(InvalidArgumentError, match="topics must be a list of topic names, got str: 'jobs'"):
        c.subscribe("jobs")
    with pytest.raises(InvalidArgumentError, match="without duplicates"):
        c.subscribe(["jobs", "jobs"])
    with pytest.raises(InvalidArgumentError, match="non-empty topic names"):
        c.subscribe(["jobs", ""])
    c.subscribe(["jobs"])
    with pytest.raises(InvalidArgumentError, match="timeout_ms"):
        c.poll(timeout_ms=-1)
    with pytest.raises(InvalidArgumentError, match="max_records"):
        c.poll(max_records=0)
    assert c.subscription() == ["jobs"]
    c.subscribe([])                                # Kafka: an empty list unsubscribes
    assert c.subscription() == []
    c.close()


def test_after_a_broker_restart_only_unaccepted_records_come_back_with_their_counts(tmp_path, clock):
    configs = {"share.auto.offset.reset": "earliest"}
    b = Broker(tmp_path / "restart", clock=clock, broker_configs=configs)
    b.create_topic("jobs", 1)
    b.append_records("jobs", 0, [(clock.now_ms(), None, f"v{i}".encode(), ()) for i in range(10)])
    c = share(b, share_acknowledgement_mode="explicit")
    for r in poll_until(c, 10):
        if r.offset < 5:
            c.acknowledge(r)
    assert c.commit_sync() == {TP: None}           # 0..4 accepted; 5..9 still acquired by c
    b.close()                                      # the broker goes down under the consumer
    b = Broker(tmp_path / "restart", clock=clock, broker_configs=configs)
    try:
        assert b.describe_share_group_offsets("workers")[TP]["start_offset"] == 5
        d = share(b, "d")
        got = poll_until(d, 5)
        # locks do not survive a restart: 5..9 are available again, their first delivery counted
        assert [(r.offset, r.delivery_count) for r in got] == [(o, 2) for o in range(5, 10)]
        d.close()
    finally:
        b.close()
