"""The lag audit's decoding step (``commit_rows``, pyarrow only, no Spark session) reads the
offset commits of a data dir that also holds KIP-848 consumer group records."""

from __future__ import annotations

import uuid

import pyarrow as pa

from kafkasim.broker import Broker
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kafkasim.protocol.offsets import OFFSETS_TOPIC, partition_for_group
from kafkasim.records import record_batch as rb
from kafkasim.spark_jobs.offset_commits import commit_rows
from kafkasim.types import TopicPartition


def test_commit_rows_skips_consumer_group_records(tmp_path):
    member = str(uuid.UUID(int=1))
    with Broker(tmp_path / "d") as b:
        b.create_topic("t", 1)
        r = b.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
            "g", member, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), topic_partitions={}))
        b.offset_commit("g", member, r.member_epoch, {TopicPartition("t", 0): 3})
        log = b.log(OFFSETS_TOPIC, partition_for_group("g"))
        records = [rec for h, buf in log.read_batches(0, 1 << 20) for rec in rb.iter_records(buf, 0, h, where="t")]
    batch = pa.RecordBatch.from_pydict({
        "partition": [partition_for_group("g")] * len(records), "offset": [rec.offset for rec in records],
        "key": [bytes(rec.key) for rec in records],
        "value": [None if rec.value is None else bytes(rec.value) for rec in records]})
    assert len(records) > 1
    rows = commit_rows(batch).to_pylist()
    assert [(x["group"], x["topic"], x["partition"], x["committed_offset"]) for x in rows] == [("g", "t", 0, 3)]
