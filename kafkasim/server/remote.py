"""A broker over the wire: the :class:`~kafkasim.broker.Broker` API, spoken to ``kafkasim serve``.

While ``kafkasim serve`` holds a data dir (and its lock), every other ``kafkasim`` command
reaches the data through the server instead of opening the data dir itself.
:class:`RemoteBroker` implements :class:`kafkasim.broker.protocol.BrokerAPI` (checked by
tests/broker/test_protocol_conformance.py): the methods the CLI, :class:`~kafkasim.producer.Producer`,
:class:`~kafkasim.consumer.Consumer` and :mod:`kafkasim.admin` call on a ``Broker``
(broker/API.md), each made of one or a few Kafka requests on one blocking TCP connection,
encoded and decoded with the server's own codec (kio, generated from Kafka's schemas):

=====================================  =================================================
Broker call                            Kafka requests
=====================================  =================================================
create_topic / delete_topic            CreateTopics / DeleteTopics, then describe_topic
create_partitions                      CreatePartitions, then describe_topic
alter_topic_configs                    IncrementalAlterConfigs (SET, DELETE), then describe_topic
list_topics / partition_count          Metadata (never auto-creates)
describe_topic                         Metadata, ListOffsets (earliest, latest),
                                       DescribeConfigs (overrides), DescribeLogDirs (sizes)
topic_config                           DescribeConfigs (every effective config)
produce                                Produce (the kafkasim batch re-encoded as a v2 batch,
                                       producer id, epoch and base sequence kept)
fetch / fetch_columns                  Fetch (no wait: ``max_wait`` 0), v2 batches decoded
list_offsets / init_producer_id        ListOffsets / InitProducerId
join_group / sync_group / heartbeat /  JoinGroup / SyncGroup / Heartbeat / LeaveGroup
leave_group                            (subscriptions and assignments as the consumer
                                       protocol's bytes, :mod:`kafkasim.protocol.consumer_protocol`)
offset_commit / offset_fetch           OffsetCommit / OffsetFetch
list_groups / describe_group /         ListGroups / DescribeGroups + OffsetFetch + ListOffsets
delete_group                           / DeleteGroups
delete_offsets                         OffsetDelete
delete_records                         DeleteRecords (to the partition's leader)
elect                                  ElectLeaders
alter_partition_reassignments /        AlterPartitionReassignments /
list_partition_reassignments           ListPartitionReassignments
describe_transactions / list_trans-    DescribeTransactions / ListTransactions /
actions / describe_producers /         DescribeProducers / WriteTxnMarkers
write_txn_marker                       (:mod:`kafkasim.server.remote_txn`)
share_group_heartbeat / share_fetch /  ShareGroupHeartbeat / ShareFetch / ShareAcknowledge
share_acknowledge / share_session_close (the member's share session kept per group and
                                       member, :mod:`kafkasim.server.remote_share`)
share_group_describe / list_share_     ShareGroupDescribe / ListGroups (type share) /
groups / delete_share_group            DeleteGroups
describe / alter / delete_share_group_ DescribeShareGroupOffsets / AlterShareGroupOffsets /
offsets                                DeleteShareGroupOffsets
=====================================  =================================================

Versions are negotiated: the connection starts with ApiVersions and each request uses the
newest version both sides serve (:data:`CLIENT_VERSIONS`). Errors come back as the class
of :mod:`kafkasim.errors` that the response's error code names (``errors.for_code``), with
the server's message when the response carries one, so a command fails the same way in
both modes. A connection that breaks raises :class:`~kafkasim.errors.NetworkError`; the
next call reconnects.

What a remote broker cannot do like an embedded one (docs/differences.md): ``flush()``
does not fsync the server's logs (the server flushes by its own policy and on shutdown);
``log()``, ``tick()`` and ``run_log_maintenance()`` are in-process only; the replication
factor reported is the replica count; a group's generation and leader are not in
DescribeGroups (None); a partition's segment count is read from the log dir the server
reports when that directory is on this machine (else None).

:func:`kafkasim.server.routing.open_broker` picks the mode (remote or embedded) and
imports this module only when a server is to be spoken to.

Thread-safety: one lock serialises the request/response exchanges of a RemoteBroker, so
the producer's sender thread and the consumer's heartbeat thread can share it.
"""


from __future__ import annotations

from kafkasim.errors import InvalidArgumentError
from kafkasim.server.remote_conn import CLIENT_VERSIONS, RemoteConnection
from kafkasim.server.remote_features import FeatureCalls
from kafkasim.server.remote_groups import GroupCalls
from kafkasim.server.remote_share import ShareCalls
from kafkasim.server.remote_topics import TopicCalls
from kafkasim.server.remote_txn import TxnAdminCalls

__all__ = ["RemoteBroker", "parse_bootstrap", "CLIENT_VERSIONS"]


def parse_bootstrap(text: str) -> tuple[str, int]:
    """``"127.0.0.1:9092"`` (or the first of a comma-separated list) → ``(host, port)``."""
    first = text.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise InvalidArgumentError(f"--bootstrap-server {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9092")
    return host, int(port)


class RemoteBroker(GroupCalls, ShareCalls, TopicCalls, TxnAdminCalls, FeatureCalls, RemoteConnection):
    """The Broker API over one connection to a Kafka-protocol server (see the module docstring).

    Example::

        with RemoteBroker("127.0.0.1", 9092) as b:        # doctest: +SKIP
            b.create_topic("orders", 3)
            b.list_offsets("orders", 0, -1)
    """
