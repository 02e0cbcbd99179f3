"""``kafkasim dump-log``: record sizes are the stored byte lengths (not the escaped display
text), and ``--offsets-decoder`` decodes __consumer_offsets records as kafka-dump-log does."""

from __future__ import annotations

import json
import os

from kafkasim.broker import Broker
from kafkasim.cli import main
from kafkasim.consumer import Consumer
from kafkasim.protocol.offsets import OFFSETS_TOPIC, partition_for_group
from kafkasim.types import OffsetAndMetadata, TopicPartition


def segment(data, topic, partition):
    d = os.path.join(data, f"{topic}-{partition}")
    return os.path.join(d, sorted(f for f in os.listdir(d) if f.endswith(".log"))[0])


def test_sizes_are_the_stored_byte_lengths(tmp_path, capsys):
    data = str(tmp_path / "data")
    with Broker(data) as b:
        b.create_topic("t", 1)
        b.append_records("t", 0, [(1000, None, b"\xff\xfe", ()), (1001, b"\xc3\xa9", b"ok", ())])
    assert main(["dump-log", segment(data, "t", 0), "--records"]) == 0
    out = capsys.readouterr().out
    assert "keySize: -1 valueSize: 2 " in out          # "\xff\xfe" displays as 8 characters
    assert "keySize: 2 valueSize: 2 " in out           # "é" is one character, two bytes
    main(["dump-log", segment(data, "t", 0), "--records", "--json"])
    recs = json.loads(capsys.readouterr().out)[0]["records"]
    assert [(r["key_size"], r["value_size"]) for r in recs] == [(-1, 2), (2, 2)]


def test_offsets_decoder_prints_commits_and_group_metadata_as_kafka_dump_log(tmp_path, capsys):
    data = str(tmp_path / "data")
    with Broker(data) as b:
        b.create_topic("orders", 2)
        c = Consumer(b, group_id="billing")
        c.assign([TopicPartition("orders", 0), TopicPartition("orders", 1)])
        c.commit({TopicPartition("orders", 0): OffsetAndMetadata(5, "", -1),
                  TopicPartition("orders", 1): OffsetAndMetadata(7, "batch-9", -1)})
        c.close()
        b.delete_group("billing")
    seg = segment(data, OFFSETS_TOPIC, partition_for_group("billing"))
    assert main(["dump-log", seg, "--offsets-decoder"]) == 0
    out = capsys.readouterr().out
    assert "key: offset_commit::group=billing,partition=orders-0 payload: offset=5\n" in out
    assert "key: offset_commit::group=billing,partition=orders-1 payload: offset=7,metadata=batch-9\n" in out
    assert "payload: <DELETE>" in out                  # the group's deletion wrote tombstones
    main(["dump-log", seg, "--offsets-decoder", "--json"])
    first = json.loads(capsys.readouterr().out)[0]["records"][0]
    assert first["key"].startswith(("offset_commit::group=billing", "group_metadata::group=billing"))


def test_offsets_decoder_prints_consumer_group_records_as_kafka_4(tmp_path, capsys):
    import uuid
    from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest
    data = str(tmp_path / "data")
    member = str(uuid.UUID(int=1))
    with Broker(data) as b:
        b.create_topic("orders", 1)
        b.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
            "kip848", member, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("orders",),
            topic_partitions={}), client_id="app", client_host="/127.0.0.1")
        b.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest("kip848", member, -1))
    seg = segment(data, OFFSETS_TOPIC, partition_for_group("kip848"))
    assert main(["dump-log", seg, "--offsets-decoder"]) == 0
    out = capsys.readouterr().out
    assert ('key: {"type":"3","data":{"groupId":"kip848"}} payload: {"version":"0","data":{"epoch":1}}\n'
            in out)
    assert ('key: {"type":"5","data":{"groupId":"kip848","memberId":"' + member + '"}} payload: '
            '{"version":"0","data":{"instanceId":null,"rackId":null,"clientId":"app","clientHost":"/127.0.0.1",'
            '"subscribedTopicNames":["orders"],"subscribedTopicRegex":null,"rebalanceTimeoutMs":30000,'
            '"serverAssignor":null}}\n') in out
    assert 'key: {"type":"8","data":{"groupId":"kip848","memberId":"' + member + '"}} payload: <DELETE>\n' in out
    assert 'key: {"type":"3","data":{"groupId":"kip848"}} payload: {"version":"0","data":{"epoch":2}}\n' in out
