"""Handlers for the producer-state APIs of ``kafka-transactions.sh``: DescribeProducers (61)
and WriteTxnMarkers (27).

Each partition is one call into the broker (:mod:`kafkasim.broker.producers_api`), whose
errors carry Kafka's codes, answered per partition as Kafka does:

- **DescribeProducers v0**: the active producers of each partition's replica on this broker
  (on a served cluster a follower answers too, as in Kafka; a broker with no replica:
  NOT_LEADER_OR_FOLLOWER; an unknown partition: UNKNOWN_TOPIC_OR_PARTITION), with the
  error's message in ``error_message``;
- **WriteTxnMarkers v1**: a COMMIT or ABORT marker per partition on its leader (Kafka's
  coordinator sends it; so does ``Admin.abortTransaction``). v2 (KIP-890's
  ``transaction_version``) is not served: kafkasim does not advertise transaction version 2.

Loop-thread coroutines; the broker calls run on the executor.
"""

from __future__ import annotations

from kafkasim.server.api import api

__all__: list[str] = []


def _at(node) -> dict:
    return {} if node is None else {"node": node}


@api(61, "DescribeProducers", 0, 0)
async def describe_producers(ctx, req):
    topics = []
    for t in req.body.topics:
        partitions = []
        for p in t.partition_indexes:
            states, code, message = await ctx.attempt(ctx.broker.describe_producers, t.name, p, **_at(ctx.node_id))
            partitions.append({"partition_index": p, "error_code": code, "error_message": message,
                               "active_producers": [
                                   {"producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
                                    "last_sequence": s.last_sequence, "last_timestamp": s.last_timestamp,
                                    "coordinator_epoch": s.coordinator_epoch,
                                    "current_txn_start_offset": s.current_txn_start_offset}
                                   for s in states or ()]})
        topics.append({"name": t.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


@api(27, "WriteTxnMarkers", 1, 1)
async def write_txn_markers(ctx, req):
    markers = []
    written = False
    for m in req.body.markers:
        topics = []
        for t in m.topics:
            partitions = []
            for p in t.partition_indexes:
                _, code, _ = await ctx.attempt(ctx.broker.write_txn_marker, t.name, p, int(m.producer_id),
                                               int(m.producer_epoch), int(m.coordinator_epoch),
                                               bool(m.transaction_result), **_at(ctx.node_id))
                written = written or not code
                partitions.append({"partition_index": p, "error_code": code})
            topics.append({"name": t.name, "partitions": partitions})
        markers.append({"producer_id": m.producer_id, "topics": topics})
    if written:
        ctx.data_waker.notify()                # a marker moved the LSO: wake read_committed fetches
    return {"markers": markers}
