"""Kafka 4's consumer group protocol (KIP-848) over the wire: real confluent-kafka consumers
with ``group.protocol=consumer`` against ``kafkasim serve``, and raw frames for the answers
the clients do not show (member epochs, errors, ListGroups v5 types)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

import pytest

from kafkasim.assignors.server import server_assignors
from kafkasim.clock import MockClock
from kafkasim.coordinator.consumer_group import TopicMetadata
from kafkasim.coordinator.consumer_heartbeat import ConsumerGroupCoordinator
from kafkasim.errors import (
    GroupIdNotFoundError, InvalidRequestError, StaleMemberEpochError, UnknownMemberIdError, UnknownServerError,
)
from kafkasim.protocol.consumer_protocol import encode_subscription
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest

from tests.server import raw
from tests.server.conftest import wait_until

TOPIC = "events"
PARTITIONS = 6


def _describe(served, group_id: str):
    with raw.connect(served.host, served.port) as sock:
        resp = raw.call(sock, 69, 1, {"group_ids": [group_id], "include_authorized_operations": False})
    [group] = resp.groups
    return group


def _heartbeat(sock, body: dict, version: int = 1):
    full = {"member_epoch": 0, "instance_id": None, "rack_id": None, "rebalance_timeout": -1,
            "subscribed_topic_names": None, "server_assignor": None, "topic_partitions": None}
    full.update(body)
    return raw.call(sock, 68, version, full)


def _topic_id(served) -> uuid.UUID:
    with raw.connect(served.host, served.port) as sock:
        resp = raw.call(sock, 3, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                      "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
    [topic] = resp.topics
    assert topic.topic_id != uuid.UUID(int=0), "Metadata v12 must carry the topic id"
    return topic.topic_id


def _uniform_targets(topic_id: uuid.UUID, join_order: list[str], leaving: list[str] = ()) -> dict:
    """What the uniform assignor gives when these members join in this order (and then these
    leave): a replay on the in-process coordinator, member -> partitions of TOPIC."""
    coord = ConsumerGroupCoordinator(server_assignors("uniform,range"), MockClock(0),
                                     topics=[TopicMetadata(topic_id, TOPIC, PARTITIONS)])
    for m in join_order:
        coord.heartbeat(ConsumerGroupHeartbeatRequest("g", m, 0, rebalance_timeout_ms=300_000,
                                                      subscribed_topic_names=(TOPIC,), topic_partitions={}))
    for m in leaving:
        coord.heartbeat(ConsumerGroupHeartbeatRequest("g", m, -1))
    left = [m for m in join_order if m not in leaving]
    # one more heartbeat computes the target after a leave
    coord.heartbeat(ConsumerGroupHeartbeatRequest("g", left[0], coord.find_group("g").members[left[0]].member_epoch))
    target = coord.find_group("g").target_assignment
    return {m: set(target.get(m, {}).get(topic_id, ())) for m in left}


class _Member(threading.Thread):
    """One confluent-kafka consumer (group.protocol=consumer) polling until told to stop."""

    def __init__(self, bootstrap: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        from confluent_kafka import Consumer
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "group.protocol": "consumer",
                                  "client.id": name, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": True, "auto.commit.interval.ms": 500})
        self.consumer.subscribe([TOPIC])
        self.received = 0
        self.partitions: set[int] = set()
        self.member_id = ""
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.closed = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                msg = self.consumer.poll(0.1)
                if msg is not None:
                    if msg.error():
                        self.errors.append(str(msg.error()))
                    else:
                        self.received += 1
                self.partitions = {tp.partition for tp in self.consumer.assignment()}
                self.member_id = self.consumer.memberid() or ""
        finally:
            self.consumer.close()
            self.closed.set()


@pytest.mark.slow
def test_three_consumers_share_six_partitions_and_keep_consuming_when_one_leaves(server):
    from confluent_kafka import ConsumerGroupType, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    topic_id = _topic_id(server)

    stop_producing = threading.Event()
    produced = Counter()

    def produce() -> None:
        p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
        i = 0
        while not stop_producing.is_set():
            p.produce(TOPIC, value=b"v%d" % i, partition=i % PARTITIONS)
            produced[i % PARTITIONS] += 1
            i += 1
            p.poll(0)
            time.sleep(0.01)
        p.flush(10)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    members: list[_Member] = []
    try:
        # 1. three members join one after the other; each join settles before the next
        for n in range(3):
            m = _Member(server.bootstrap, f"c{n}")
            m.start()
            members.append(m)
            wait_until(lambda k=n + 1: sum(len(x.partitions) for x in members) == PARTITIONS
                       and all(x.partitions for x in members) and len(members) == k
                       and _describe(server, "g").group_state == "Stable",
                       timeout=60, what=f"{n + 1} member(s) owning all {PARTITIONS} partitions")
        ids = [m.member_id for m in members]
        expected = _uniform_targets(topic_id, ids)
        assert {m.member_id: m.partitions for m in members} == expected
        assert sorted(len(p) for p in expected.values()) == [2, 2, 2]

        # ConsumerGroupDescribe: type CONSUMER, each member's epoch and assignment
        group = _describe(server, "g")
        assert (group.error_code, group.group_state, group.assignor_name) == (0, "Stable", "uniform")
        epochs = {m.member_id: m.member_epoch for m in group.members}
        assert set(epochs) == set(ids) and all(e == group.group_epoch for e in epochs.values())
        assert {m.member_id: {p for t in m.assignment.topic_partitions for p in t.partitions}
                for m in group.members} == expected
        desc = admin.describe_consumer_groups(["g"])["g"].result(30)
        assert desc.type == ConsumerGroupType.CONSUMER
        assert {m.member_id: {tp.partition for tp in m.assignment.topic_partitions} for m in desc.members} == expected

        # 2. one closes: its partitions move to the others, who never stop consuming
        leaving, staying = members[2], members[:2]
        after = _uniform_targets(topic_id, ids, leaving=[leaving.member_id])
        leaving.stop.set()
        assert leaving.closed.wait(30)
        counts = [[m.received for m in staying]]
        deadline = time.monotonic() + 60
        while {m.member_id: m.partitions for m in staying} != after:
            assert time.monotonic() < deadline, "the partitions of the member that left did not move"
            time.sleep(1.0)
            counts.append([m.received for m in staying])
        time.sleep(1.0)
        counts.append([m.received for m in staying])
        for before, later in zip(counts, counts[1:]):
            assert all(b < a for b, a in zip(before, later)), f"a member stopped consuming: {counts}"
        assert sorted(len(p) for p in after.values()) == [3, 3]
        assert not any(m.errors for m in members), [m.errors for m in members]
    finally:
        stop_producing.set()
        producer.join(30)
        for m in members:
            m.stop.set()
        for m in members:
            m.join(30)


def test_heartbeat_errors_and_epochs_over_the_wire(server):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    topic_id = _topic_id(server)
    with raw.connect(server.host, server.port) as sock:
        r = _heartbeat(sock, {"group_id": "g", "member_id": "", "rebalance_timeout": 30_000,
                              "subscribed_topic_names": [TOPIC], "topic_partitions": []})
        assert (r.error_code, r.error_message) == (InvalidRequestError.errno, "MemberId can't be empty.")
        r = _heartbeat(sock, {"group_id": "g", "member_id": "m1", "rebalance_timeout": 30_000,
                              "subscribed_topic_names": [TOPIC], "topic_partitions": []})
        assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval.total_seconds()) == (0, "m1", 1, 5)
        assert [(t.topic_id, list(t.partitions)) for t in r.assignment.topic_partitions] == [
            (topic_id, list(range(PARTITIONS)))]
        r = _heartbeat(sock, {"group_id": "g", "member_id": "m1", "member_epoch": 7})
        assert r.error_code == 110   # FENCED_MEMBER_EPOCH
        r = _heartbeat(sock, {"group_id": "g", "member_id": "nobody", "member_epoch": 1})
        assert r.error_code == UnknownMemberIdError.errno
        # v0 lets the coordinator name a member that comes without an id
        r = _heartbeat(sock, {"group_id": "g0", "member_id": "", "rebalance_timeout": 30_000,
                              "subscribed_topic_names": [TOPIC], "topic_partitions": []}, version=0)
        assert r.error_code == 0 and r.member_id and r.member_epoch == 1

        # OffsetCommit v9 carries the member epoch; below v9 a member is refused
        def commit(version: int, epoch: int, member: str = "m1") -> int:
            resp = raw.call(sock, 8, version, {
                "group_id": "g", "generation_id_or_member_epoch": epoch, "member_id": member,
                "group_instance_id": None, "topics": [
                    {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                     "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
            return resp.topics[0].partitions[0].error_code
        assert commit(9, 0) == StaleMemberEpochError.errno
        assert commit(9, 1, member="nobody") == UnknownMemberIdError.errno
        assert commit(8, 1) == 35      # UNSUPPORTED_VERSION
        assert commit(9, 1) == 0
        resp = raw.call(sock, 9, 9, {"groups": [{"group_id": "g", "member_id": "m1", "member_epoch": 2,
                                                 "topics": None}], "require_stable": False})
        assert resp.groups[0].error_code == StaleMemberEpochError.errno
        resp = raw.call(sock, 9, 9, {"groups": [{"group_id": "g", "member_id": "m1", "member_epoch": 1,
                                                 "topics": None}], "require_stable": False})
        assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                for t in resp.groups[0].topics] == [(TOPIC, [(0, 0)])]

        # one id space: a classic JoinGroup on a consumer group's id joins it (Kafka 4's mixed
        # groups; malformed subscription bytes are Kafka's UNKNOWN_SERVER_ERROR), DescribeGroups,
        # ListGroups v5
        def join(metadata: bytes):
            return raw.call(sock, 11, 7, {"group_id": "g", "session_timeout": 10_000, "rebalance_timeout": 10_000,
                                          "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                          "protocols": [{"name": "range", "metadata": metadata}], "reason": None})
        assert join(b"").error_code == UnknownServerError.errno
        joined = join(encode_subscription({"topics": [TOPIC]}))
        assert (joined.error_code, joined.leader, joined.protocol_name, joined.members) == (0, "", "range", ())
        assert joined.generation_id == 2 and joined.member_id
        described = raw.call(sock, 15, 5, {"groups": ["g"], "include_authorized_operations": False})
        assert (described.groups[0].error_code, described.groups[0].group_state) == (0, "Dead")
        listed = raw.call(sock, 16, 5, {"states_filter": [], "types_filter": ["Consumer"]})
        assert sorted((g.group_id, g.group_type, g.protocol_type) for g in listed.groups) == [
            ("g", "consumer", "consumer"), ("g0", "consumer", "consumer")]
        listed = raw.call(sock, 16, 5, {"states_filter": [], "types_filter": ["classic"]})
        assert listed.groups == ()
    group = _describe(server, "nope")
    assert group.error_code == GroupIdNotFoundError.errno


def test_a_served_cluster_runs_consumer_groups_beside_classic_ones(tmp_path, serve_process):
    """Three brokers: two consumer-protocol members read and commit everything; a classic
    group lives beside them; AdminClient lists both with their types and describes each."""
    from confluent_kafka import Consumer, ConsumerGroupType, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    served = serve_process(tmp_path / "data", "--brokers", "0,1,2")
    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    consumers = [Consumer({"bootstrap.servers": served.bootstrap, "group.id": "g", "group.protocol": "consumer",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False}) for _ in range(2)]
    classic = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "cl", "auto.offset.reset": "earliest"})
    try:
        for c in consumers + [classic]:
            c.subscribe([TOPIC])
        # the members settle first (3 partitions each), so that each commits what it owns
        deadline = time.monotonic() + 60
        while sorted(len(c.assignment()) for c in consumers) != [3, 3]:
            assert time.monotonic() < deadline, "the two members did not settle"
            for c in consumers:
                c.poll(0.1)
        producer = Producer({"bootstrap.servers": served.bootstrap})
        for i in range(60):
            producer.produce(TOPIC, b"%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        got = Counter()
        deadline = time.monotonic() + 60
        while sum(got.values()) < 60 or not classic.assignment():
            assert time.monotonic() < deadline, f"consumed {dict(got)}"
            for i, c in enumerate(consumers):
                msg = c.poll(0.1)
                if msg is not None and not msg.error():
                    got[i] += 1
            classic.poll(0.05)
        for c in consumers:
            c.commit(asynchronous=False)
        committed = {tp.partition: tp.offset for c in consumers for tp in c.committed(c.assignment(), timeout=10)}
        assert committed == {p: 10 for p in range(PARTITIONS)}
        listed = {g.group_id: g.type for g in admin.list_consumer_groups().result(30).valid}
        assert listed == {"g": ConsumerGroupType.CONSUMER, "cl": ConsumerGroupType.CLASSIC}
        desc = admin.describe_consumer_groups(["g", "cl"])
        g, cl = desc["g"].result(30), desc["cl"].result(30)
        assert g.type == ConsumerGroupType.CONSUMER and g.partition_assignor == "uniform"
        assert sorted(len(m.assignment.topic_partitions) for m in g.members) == [3, 3]
        assert cl.type == ConsumerGroupType.CLASSIC and len(cl.members) == 1

        # kafkasim groups (kafka-consumer-groups.sh) over the wire: ConsumerGroupDescribe
        out = subprocess.run([sys.executable, "-m", "kafkasim", "groups", "describe", "g", "--members",
                              "--bootstrap-server", served.bootstrap, "--json"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        described = json.loads(out)
        assert described["state"] == "Stable"
        assert sorted((r["consumer_id"], r["partitions"]) for r in described["rows"]) == sorted(
            (m.member_id, 3) for m in g.members)
    finally:
        for c in consumers + [classic]:
            c.close()
