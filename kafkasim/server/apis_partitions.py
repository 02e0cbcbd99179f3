"""Handlers for the cluster-admin APIs: DescribeCluster, DeleteRecords, ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments.

Each translates the typed request into one broker call per partition (``Broker.delete_records``,
``Broker.elect``, ``Broker.alter_partition_reassignments``, ``Broker.list_partition_reassignments``;
a served cluster's :class:`~kafkasim.broker.cluster.Cluster` has the same methods) and the
result into the response dict (see :mod:`kafkasim.server.api`). DescribeCluster's brokers,
cluster id and controller come from :func:`kafkasim.server.cluster.describe_cluster`, the
one function Metadata answers from. ElectLeaders and the reassignment APIs go to the
controller in Kafka; every listener of a served cluster answers them (kafkasim's controller
is in-process). Loop-thread coroutines; the broker calls run on the executor.
"""

from __future__ import annotations

from kafkasim.errors import InvalidRequestError, MismatchedEndpointTypeError
from kafkasim.server import cluster
from kafkasim.server.api import api, error_code, error_message
from kafkasim.types import TopicPartition

__all__: list[str] = []

ENDPOINT_BROKERS = 1
ELECTION_TYPES = {0: "preferred", 1: "unclean"}
NO_AUTHORIZED_OPERATIONS = -2147483648     # Kafka's "not requested" (INT32 min)


@api(60, "DescribeCluster", 0, 2)
async def describe_cluster(ctx, req):
    """The brokers (host, port, rack), cluster id and controller id as Metadata shows them;
    v2's ``include_fenced_brokers`` adds the stopped/isolated brokers of a cluster with
    ``is_fenced``. A request for the controllers' endpoints (type 2) is MISMATCHED_ENDPOINT_TYPE."""
    body = req.body
    endpoint_type = getattr(body, "endpoint_type", ENDPOINT_BROKERS)
    if endpoint_type != ENDPOINT_BROKERS:
        exc = MismatchedEndpointTypeError(
            f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type {endpoint_type}")
        return {"error_code": error_code(exc), "error_message": error_message(exc), "endpoint_type": ENDPOINT_BROKERS,
                "cluster_id": ctx.options.cluster_id, "controller_id": -1, "brokers": [],
                "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS}
    meta = await ctx.call(cluster.describe_cluster, ctx.broker, ctx.node, ctx.options.cluster_id, [],
                          None, ctx.topology)
    brokers = [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"],
                "is_fenced": False} for b in meta["brokers"]]
    if getattr(body, "include_fenced_brokers", False) and ctx.topology is not None:
        brokers += await ctx.call(cluster.fenced_brokers, ctx.topology)
        brokers.sort(key=lambda b: b["broker_id"])
    return {"error_code": 0, "error_message": None, "endpoint_type": ENDPOINT_BROKERS,
            "cluster_id": meta["cluster_id"], "controller_id": meta["controller_id"], "brokers": brokers,
            "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS}


@api(21, "DeleteRecords", 0, 2)
async def delete_records(ctx, req):
    """``Broker.delete_records`` per partition: the new low watermark, or Kafka's error
    (OFFSET_OUT_OF_RANGE above the high watermark, NOT_LEADER_OR_FOLLOWER off the leader, ...)."""
    out = []
    for t in req.body.topics:
        rows = []
        for p in t.partitions:
            low, code, _ = await ctx.attempt(ctx.broker.delete_records, t.name, p.partition_index, p.offset,
                                             node=ctx.node_id)
            rows.append({"partition_index": p.partition_index, "error_code": code,
                         "low_watermark": -1 if code else low})
        out.append({"name": t.name, "partitions": rows})
    ctx.data_waker.notify()
    return {"topics": out}


def _results(results: dict) -> list[dict]:
    """``{TopicPartition: None | error}`` → ElectLeaders' ``replica_election_results``."""
    by_topic: dict[str, list] = {}
    for tp, exc in results.items():
        by_topic.setdefault(tp.topic, []).append({
            "partition_id": tp.partition, "error_code": 0 if exc is None else error_code(exc),
            "error_message": None if exc is None else str(exc)})
    return [{"topic": t, "partition_result": rows} for t, rows in by_topic.items()]


@api(43, "ElectLeaders", 0, 2)
async def elect_leaders(ctx, req):
    """``Broker.elect``: preferred (0) or unclean (1, v1+); null partitions = every partition."""
    body = req.body
    kind = ELECTION_TYPES.get(int(getattr(body, "election_type", 0)))
    if kind is None:
        exc = InvalidRequestError(f"Unknown election type {int(body.election_type)}")
        return {"error_code": error_code(exc), "replica_election_results": []}
    partitions = None
    if body.topic_partitions is not None:
        partitions = [TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions]
    results, code, _ = await ctx.attempt(ctx.broker.elect, kind, partitions)
    if code:
        return {"error_code": code, "replica_election_results": []}
    ctx.data_waker.notify()
    return {"error_code": 0, "replica_election_results": _results(results)}


@api(45, "AlterPartitionReassignments", 0, 1)
async def alter_partition_reassignments(ctx, req):
    """``Broker.alter_partition_reassignments``: per partition NONE (done: kafkasim's
    reassignment completes within the call), NO_REASSIGNMENT_IN_PROGRESS for a cancel,
    INVALID_REPLICA_ASSIGNMENT, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICATION_FACTOR (v1)."""
    body = req.body
    allow = getattr(body, "allow_replication_factor_change", True)
    targets = {TopicPartition(t.name, p.partition_index): (None if p.replicas is None else list(p.replicas))
               for t in body.topics for p in t.partitions}
    results, code, message = await ctx.attempt(ctx.broker.alter_partition_reassignments, targets,
                                               allow_replication_factor_change=allow)
    if code:
        return {"error_code": code, "error_message": message, "allow_replication_factor_change": allow,
                "responses": []}
    ctx.data_waker.notify()
    rows: dict[str, list] = {}
    for tp, exc in results.items():
        rows.setdefault(tp.topic, []).append({
            "partition_index": tp.partition, "error_code": 0 if exc is None else error_code(exc),
            "error_message": None if exc is None else str(exc)})
    return {"error_code": 0, "error_message": None, "allow_replication_factor_change": allow,
            "responses": [{"name": t, "partitions": ps} for t, ps in rows.items()]}


@api(46, "ListPartitionReassignments", 0, 0)
async def list_partition_reassignments(ctx, req):
    """``Broker.list_partition_reassignments``: the reassignments in progress (none: they
    complete within AlterPartitionReassignments)."""
    topics = req.body.topics
    partitions = None if topics is None else [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]
    ongoing, code, message = await ctx.attempt(ctx.broker.list_partition_reassignments, partitions)
    if code:
        return {"error_code": code, "error_message": message, "topics": []}
    by_topic: dict[str, list] = {}
    for tp, r in sorted(ongoing.items()):
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, **r})
    return {"error_code": 0, "error_message": None,
            "topics": [{"name": t, "partitions": rows} for t, rows in by_topic.items()]}
