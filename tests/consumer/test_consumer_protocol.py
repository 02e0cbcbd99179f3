"""In-process ``Consumer(group_protocol="consumer")`` (KIP-848) on a MockClock, real broker."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkasim.broker import Broker
from kafkasim.consumer import Consumer, ConsumerRebalanceListener
from kafkasim.errors import CommitFailedError, InvalidConfigurationError, StaleMemberEpochError
from kafkasim.types import OffsetAndMetadata, TopicPartition

HB = 5_000     # the broker's group.consumer.heartbeat.interval.ms default


def _broker(path, clock, topics=(("t", 6),)):
    b = Broker(path, clock=clock)
    for name, n in topics:
        b.create_topic(name, n)
    return b


def _fill(b, clock, topic, n, per=5):
    for p in range(n):
        b.append_records(topic, p, [(clock.now_ms(), None, f"{topic}-{p}-{i}".encode(), ()) for i in range(per)])


class Recorder(ConsumerRebalanceListener):
    def __init__(self, name, log):
        self.name, self.log = name, log

    def on_partitions_revoked(self, revoked):
        self.log.append((self.name, "revoked", [str(tp) for tp in revoked]))

    def on_partitions_assigned(self, assigned):
        self.log.append((self.name, "assigned", [str(tp) for tp in assigned]))

    def on_partitions_lost(self, lost):
        self.log.append((self.name, "lost", [str(tp) for tp in lost]))


def _consumer(b, clock, name, *topics, **kw):
    kw.setdefault("enable_auto_commit", False)
    return Consumer(b, *topics, group_id="g", group_protocol="consumer", client_id=name, seed=1,
                    auto_offset_reset="earliest", clock=clock, **kw)


def _settle(consumers, clock, rounds=6, step=HB):
    for _ in range(rounds):
        for c in consumers:
            c.poll()
        clock.advance(step)


@pytest.fixture
def broker(tmp_path, clock):
    b = _broker(tmp_path / "data", clock)
    _fill(b, clock, "t", 6)
    yield b
    b.close()


def test_three_members_split_six_partitions_and_a_leave_only_grows_the_others(broker, clock):
    log = []
    cs = []
    for name in ("a", "b", "c"):
        c = _consumer(broker, clock, name)
        c.subscribe(["t"], listener=Recorder(name, log))
        cs.append(c)
    _settle(cs, clock)
    sizes = sorted(len(c.assignment()) for c in cs)
    assert sizes == [2, 2, 2]
    assert set().union(*(c.assignment() for c in cs)) == {TopicPartition("t", p) for p in range(6)}
    desc = broker.consumer_group_describe(["g"])[0]
    assert desc["assignor_name"] == "uniform" and desc["state"] == "Stable"
    a, b, c = cs
    before_b, before_c = b.assignment(), c.assignment()
    a_parts = a.assignment()
    mark = len(log)
    a.close()
    seen = {"b": set(before_b), "c": set(before_c)}
    for _ in range(6):
        for name, cons in (("b", b), ("c", c)):
            now = cons.assignment()
            assert seen[name] <= now          # never loses a partition: no stop-the-world
            seen[name] = now
            cons.poll()
        _fill(broker, clock, "t", 6, per=1)
        clock.advance(HB)
    assert b.assignment() | c.assignment() == {TopicPartition("t", p) for p in range(6)}
    assert (b.assignment() | c.assignment()) - (before_b | before_c) == a_parts
    assert sorted([len(b.assignment()), len(c.assignment())]) == [3, 3]
    # b and c never saw a revocation; a revoked its partitions on close
    assert not [e for e in log[mark:] if e[0] in "bc" and e[1] in ("revoked", "lost")]
    assert [e[1] for e in log[mark:] if e[0] == "b"] == ["assigned"]
    assert ("a", "revoked", sorted(str(tp) for tp in a_parts)) in log


def test_b_and_c_keep_reading_records_throughout_the_rebalance(broker, clock):
    cs = [_consumer(broker, clock, n, "t") for n in "abc"]
    _settle(cs, clock)
    cs[0].close()
    got = {"b": 0, "c": 0}
    for i in range(4):
        _fill(broker, clock, "t", 6, per=1)
        for name, cons in zip("bc", cs[1:]):
            n = sum(len(r) for r in cons.poll().values())
            assert n > 0, f"{name} read nothing in round {i}"
            got[name] += n
        clock.advance(HB)


def test_listener_order_revoke_before_assign_and_commit_before_revoke(broker, clock):
    log = []
    a = _consumer(broker, clock, "a", enable_auto_commit=True)
    committed_at_revoke = {}

    class L(Recorder):
        def on_partitions_revoked(self, revoked):
            committed_at_revoke.update(broker.offset_fetch("g", list(revoked)))
            super().on_partitions_revoked(revoked)

    a.subscribe(["t"], listener=L("a", log))
    _settle([a], clock, rounds=2)
    assert log == [("a", "assigned", [str(TopicPartition("t", p)) for p in range(6)])]
    for _ in range(3):
        a.poll()                             # read every record: positions at 5
    b = _consumer(broker, clock, "b", "t")
    _settle([a, b], clock, rounds=4)
    kinds = [e[1] for e in log if e[0] == "a"]
    assert kinds[:3] == ["assigned", "revoked", "assigned"]
    revoked = log[1][2]
    assert len(revoked) == 3 and log[2][2] == []     # a gives up 3, gains none
    # auto-commit ran before on_partitions_revoked
    assert all(committed_at_revoke[tp].offset == 5 for tp in committed_at_revoke if str(tp) in revoked)
    assert len(b.assignment()) == 3


def test_a_fenced_member_loses_its_partitions_and_rejoins_with_epoch_0(broker, clock):
    log = []
    a = _consumer(broker, clock, "a")
    a.subscribe(["t"], listener=Recorder("a", log))
    b = _consumer(broker, clock, "b", "t")
    _settle([a, b], clock)
    old_epoch = a.generation_id
    owned = sorted(str(tp) for tp in a.assignment())
    assert old_epoch > 0 and len(owned) == 3
    # a stops heartbeating past the session timeout: the broker fences it, b takes over
    for _ in range(10):
        b.poll()
        clock.advance(HB)
        broker.tick()
    assert len(b.assignment()) == 6
    a.poll()                                 # FENCED/UNKNOWN_MEMBER_ID: lost, rejoin at epoch 0
    assert log[-2:] == [("a", "lost", owned), ("a", "assigned", [])] or log[-1] == ("a", "lost", owned)
    assert a.assignment() == set()
    _settle([a, b], clock)
    assert len(a.assignment()) == 3 and len(b.assignment()) == 3
    assert a.generation_id > old_epoch


def test_commits_carry_the_member_epoch(broker, clock):
    a = _consumer(broker, clock, "a", "t")
    _settle([a], clock, rounds=2)
    a.poll()
    a.commit({TopicPartition("t", 0): OffsetAndMetadata(3)})
    assert broker.offset_fetch("g", [TopicPartition("t", 0)])[TopicPartition("t", 0)].offset == 3
    with pytest.raises(StaleMemberEpochError):    # the broker checks the epoch the consumer sends
        broker.offset_commit("g", a.member_id, a.generation_id + 1, {TopicPartition("t", 0): 4})
    a.close()
    c2 = _consumer(broker, clock, "c2", "t")
    with pytest.raises(CommitFailedError):        # not joined yet: no epoch to commit with
        c2.commit({TopicPartition("t", 0): OffsetAndMetadata(4)})


def test_regex_subscription_picks_up_a_new_topic(tmp_path, clock):
    b = _broker(tmp_path / "d", clock, topics=(("orders-eu", 2), ("other", 2)))
    a = _consumer(b, clock, "a")
    a.subscribe(pattern="orders-.*")
    _settle([a], clock, rounds=2)
    assert a.assignment() == {TopicPartition("orders-eu", 0), TopicPartition("orders-eu", 1)}
    b.create_topic("orders-us", 1)
    _settle([a], clock, rounds=2)
    assert TopicPartition("orders-us", 0) in a.assignment()
    assert not any(tp.topic == "other" for tp in a.assignment())
    b.close()


def test_classic_only_configs_are_rejected_with_the_consumer_protocol(broker):
    for name, value in (("partition_assignment_strategy", ["range"]), ("session_timeout_ms", 10_000),
                        ("heartbeat_interval_ms", 1_000)):
        with pytest.raises(InvalidConfigurationError,
                           match=f"^{name} cannot be set when group_protocol=CONSUMER .*{name}="):
            Consumer(broker, group_id="g", group_protocol="consumer", **{name: value})
    with pytest.raises(InvalidConfigurationError, match="^partition_assignment_strategy, session_timeout_ms "
                                                        "cannot be set when group_protocol=CONSUMER"):
        Consumer(broker, group_id="g", group_protocol="CONSUMER", session_timeout_ms=10_000,
                 partition_assignment_strategy=["range"])
    with pytest.raises(InvalidConfigurationError, match="^group_remote_assignor cannot be set when "
                                                        "group_protocol=CLASSIC .*'range'"):
        Consumer(broker, group_id="g", group_remote_assignor="range")
    with pytest.raises(InvalidConfigurationError, match="'eager' for configuration group_protocol"):
        Consumer(broker, group_id="g", group_protocol="eager")
    Consumer(broker, group_id="g", group_protocol="consumer", group_remote_assignor="range").close()


def test_remote_assignor_range_is_used(broker, clock):
    cs = [_consumer(broker, clock, n, "t", group_remote_assignor="range") for n in "ab"]
    _settle(cs, clock)
    assert broker.consumer_group_describe(["g"])[0]["assignor_name"] == "range"
    assert sorted(sorted(tp.partition for tp in c.assignment()) for c in cs) == [[0, 1, 2], [3, 4, 5]]


def _run(tmp_path, clock):
    b = _broker(tmp_path, clock)
    _fill(b, clock, "t", 6)
    log = []
    cs = []
    for n in "abc":
        c = _consumer(b, clock, n)
        c.subscribe(["t"], listener=Recorder(n, log))
        cs.append(c)
    _settle(cs, clock)
    cs[1].close()
    _settle([cs[0], cs[2]], clock)
    out = (log, [(c.member_id, sorted(map(str, c.assignment()))) for c in cs])
    b.close()
    return out


def test_same_seed_and_clock_give_the_same_run(tmp_path):
    from kafkasim.clock import MockClock
    assert _run(tmp_path / "1", MockClock(1_000)) == _run(tmp_path / "2", MockClock(1_000))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["join", "leave", "crash", "resub", "poll"]), st.integers(0, 3)),
                min_size=3, max_size=25))
def test_no_partition_is_ever_held_by_two_consumers(tmp_path_factory, ops):
    from kafkasim.clock import MockClock
    clock = MockClock(1_000)
    b = _broker(tmp_path_factory.mktemp("p"), clock, topics=(("t", 6), ("u", 3)))
    slots: dict[int, Consumer] = {}
    n = 0

    def check():
        held: dict = {}
        for i, c in slots.items():
            for tp in c.assignment():
                assert tp not in held, f"{tp} held by {held.get(tp)} and {i}"
                held[tp] = i

    for op, i in ops:
        c = slots.get(i)
        if op == "join" and c is None:
            n += 1
            slots[i] = _consumer(b, clock, f"m{n}", "t")
        elif op == "leave" and c is not None:
            c.close()
            del slots[i]
        elif op == "crash" and c is not None:
            del slots[i]                     # the process dies: no leave, no more heartbeats
        elif op == "resub" and c is not None:
            c.subscribe(["t", "u"] if c.subscription() == {"t"} else ["t"])
        for j, cons in sorted(slots.items()):
            cons.poll()
            check()
        clock.advance(2_000)
        b.tick()
        check()
    b.close()


def test_a_static_member_leaves_with_epoch_minus_2_and_keeps_its_partitions_until_the_session_ends(broker, clock):
    a = _consumer(broker, clock, "a", "t", group_instance_id="host-a")
    b = _consumer(broker, clock, "b", "t")
    _settle([a, b], clock)
    a_parts = a.assignment()
    a.close()
    members = {m["instance_id"]: m for m in broker.consumer_group_describe(["g"])[0]["members"]}
    assert members["host-a"]["member_epoch"] == -2
    _settle([b], clock, rounds=3)              # 15 s < the 45 s session: b does not get a's partitions
    assert b.assignment().isdisjoint(a_parts)
    for _ in range(8):
        b.poll()
        clock.advance(HB)
        broker.tick()
    assert len(b.assignment()) == 6            # the session ran out: a's partitions moved


def test_unsubscribe_leaves_and_subscribe_rejoins(broker, clock):
    a = _consumer(broker, clock, "a", "t")
    b = _consumer(broker, clock, "b", "t")
    _settle([a, b], clock)
    a.unsubscribe()
    assert a.assignment() == set()
    _settle([b], clock, rounds=2)
    assert len(b.assignment()) == 6
    a.subscribe(["t"])
    _settle([a, b], clock)
    assert len(a.assignment()) == 3 and len(b.assignment()) == 3


def test_past_max_poll_interval_the_member_leaves_and_rejoins_on_its_next_poll(broker, clock):
    log = []
    a = _consumer(broker, clock, "a", max_poll_interval_ms=20_000)
    a.subscribe(["t"], listener=Recorder("a", log))
    b = _consumer(broker, clock, "b", "t", max_poll_interval_ms=20_000)
    _settle([a, b], clock)
    owned = sorted(str(tp) for tp in a.assignment())
    for _ in range(5):                      # a's application is busy; its heartbeat thread runs
        clock.advance(HB)
        a.tick()
        b.poll()
    assert ("a", "lost", owned) in log and a.assignment() == set()
    assert len(b.assignment()) == 6
    _settle([a, b], clock)
    assert len(a.assignment()) == 3 and len(b.assignment()) == 3


def test_a_second_static_member_with_the_same_instance_id_gets_unreleased_instance_id(broker, clock):
    from kafkasim.errors import UnreleasedInstanceIdError
    a = _consumer(broker, clock, "a", "t", group_instance_id="host-1")
    _settle([a], clock, rounds=2)
    twin = _consumer(broker, clock, "twin", "t", group_instance_id="host-1")
    with pytest.raises(UnreleasedInstanceIdError):
        twin.poll()
    with pytest.raises(UnreleasedInstanceIdError):     # fatal: the consumer stays unusable
        twin.poll()
    assert len(a.assignment()) == 6
