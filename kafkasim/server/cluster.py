"""What the cluster looks like to a client: the one place Metadata's answer comes from.

:func:`describe_cluster` turns the broker's topic descriptions into Metadata's brokers,
controller and topics. Today there is one broker, which leads every partition; a
multi-broker cluster later replaces this function (each partition's leader, replicas and
ISR already come from ``Broker.describe_topic``) and nothing else in the server changes.

For one plain broker, leader epochs are reported as -1 ("unknown"), so clients do not try
to validate their positions with OffsetForLeaderEpoch, which is not served
(docs/differences.md). For a served cluster (a :class:`~kafkasim.server.topology.Topology`
given) the answer is the cluster's: every live broker with its address and rack, the
controller id, and per partition the real leader (-1 with LEADER_NOT_AVAILABLE while
offline), replicas, ISR, offline replicas (those on a stopped or isolated broker) and
leader epoch.

Thread-safety: plain functions over a thread-safe broker; call from any thread.
"""

from __future__ import annotations

import uuid
from typing import Iterable, Optional

from kafkasim.errors import KafkaSimError, LeaderNotAvailableError, UnknownTopicOrPartitionError
from kafkasim.server.api import error_code

__all__ = ["describe_cluster", "describe_topic", "fenced_brokers", "topic_id", "topic_name_for_id"]


def topic_id(description: dict) -> uuid.UUID:
    """The topic's id as a UUID (the broker stores it as 32 hex digits)."""
    try:
        return uuid.UUID(hex=str(description.get("topic_id") or ""))
    except ValueError:
        return uuid.UUID(int=0)


def describe_topic(broker, name: str, topology=None, epochs=None) -> dict:
    """One topic as Metadata shows it (raises UnknownTopicOrPartitionError if missing).
    ``epochs``: ``{(topic, partition): leader epoch}`` of a served cluster."""
    d = broker.describe_topic(name)
    if topology is not None:
        epochs = topology.leader_epochs() if epochs is None else epochs
        return {
            "error_code": 0, "name": d["name"], "topic_id": topic_id(d),
            "is_internal": bool(d.get("internal")),
            "partitions": [{
                "error_code": LeaderNotAvailableError.errno if p["leader"] < 0 else 0,
                "partition_index": p["partition"], "leader_id": p["leader"],
                "leader_epoch": epochs.get((d["name"], p["partition"]), -1),
                "replica_nodes": list(p["replicas"]),
                "isr_nodes": list(p["isr"]),
                "offline_replicas": [b for b in p["replicas"] if not topology.up(b)],
            } for p in d["partitions"]],
        }
    return {
        "error_code": 0, "name": d["name"], "topic_id": topic_id(d),
        "is_internal": bool(d.get("internal")),
        "partitions": [{
            "error_code": 0, "partition_index": p["partition"], "leader_id": p["leader"],
            "leader_epoch": -1, "replica_nodes": list(p["replicas"]), "isr_nodes": list(p["isr"]),
            "offline_replicas": [],
        } for p in d["partitions"]],
    }


def describe_cluster(broker, node, cluster_id: str, names: Optional[Iterable[str]],
                     create_missing=None, topology=None) -> dict:
    """Metadata's answer: brokers, cluster id, controller and the topics asked for.

    ``names`` None means every topic (internal ones included, as Kafka does). A missing
    topic is created with ``create_missing(name)`` when given (auto-creation), else
    reported with its error code.
    """
    if names is None:
        names = broker.list_topics(include_internal=True)
    epochs = topology.leader_epochs() if topology is not None else None
    topics = []
    for name in names:
        try:
            try:
                topics.append(describe_topic(broker, name, topology, epochs))
                continue
            except UnknownTopicOrPartitionError:
                if create_missing is None:
                    raise
            create_missing(name)
            topics.append(describe_topic(broker, name, topology))
        except KafkaSimError as exc:
            topics.append({"error_code": error_code(exc), "name": name,
                           "topic_id": uuid.UUID(int=0), "partitions": []})
    if topology is not None:
        return {"brokers": [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": rack}
                            for n, rack in topology.live_nodes()],
                "cluster_id": cluster_id, "controller_id": topology.controller_id(), "topics": topics}
    return {
        "brokers": [{"node_id": node.node_id, "host": node.host, "port": node.port, "rack": None}],
        "cluster_id": cluster_id, "controller_id": node.node_id, "topics": topics,
    }


def fenced_brokers(topology) -> list[dict]:
    """DescribeCluster v2's fenced brokers: a served cluster's stopped or isolated brokers,
    with their listener address and rack (Metadata leaves them out)."""
    out = []
    for b, info in sorted(topology.cluster.brokers.items()):
        if info.state != "alive" and b in topology.addresses:
            n = topology.node(b)
            out.append({"broker_id": b, "host": n.host, "port": n.port, "rack": info.rack, "is_fenced": True})
    return out


def topic_name_for_id(broker, wanted: uuid.UUID) -> str:
    """The name of the topic whose id is ``wanted`` (UnknownTopicOrPartitionError if none;
    Kafka says UNKNOWN_TOPIC_ID, which kafkasim's errors do not have)."""
    for name in broker.list_topics(include_internal=True):
        try:
            if topic_id(broker.describe_topic(name)) == wanted:
                return name
        except UnknownTopicOrPartitionError:
            continue
    raise UnknownTopicOrPartitionError(f"no topic has id {wanted}")
