"""The partition-count history a broker keeps: recorded on create_partitions (broker and
cluster), persisted with the topic metadata, checked on load, shown by describe_topic."""

from __future__ import annotations

import json
import os

import pytest

from kafkasim.broker import Broker
from kafkasim.broker.cluster import Cluster
from kafkasim.clock import MockClock
from kafkasim.errors import InvalidPartitionsError, KafkaStorageError

START = 1_700_000_000_000


def _fill(b, topic: str, counts: list[int]) -> None:
    for p, n in enumerate(counts):
        for i in range(n):
            b.append_records(topic, p, [(START, b"k%d" % i, b"v", [])])


def _meta_file(data_dir: str) -> str:
    (name,) = os.listdir(os.path.join(data_dir, "meta", "topics"))
    return os.path.join(data_dir, "meta", "topics", name)


def test_create_partitions_records_counts_time_and_log_end_offsets_and_they_survive_a_restart(tmp_path):
    d, clock = str(tmp_path / "data"), MockClock(START)
    with Broker(d, clock=clock) as b:
        b.create_topic("t", partitions=2)
        _fill(b, "t", [3, 5])
        clock.advance(1000)
        desc = b.create_partitions("t", 4)
        _fill(b, "t", [1, 0, 2, 0])
        clock.advance(500)
        b.create_partitions("t", 5)
        assert desc["partition_history"] == [
            {"from_partitions": 2, "to_partitions": 4, "time_ms": START + 1000, "log_end_offsets": [3, 5]}]
    with Broker(d, clock=clock) as b:
        hist = b.describe_topic("t")["partition_history"]
    assert hist == [
        {"from_partitions": 2, "to_partitions": 4, "time_ms": START + 1000, "log_end_offsets": [3, 5]},
        {"from_partitions": 4, "to_partitions": 5, "time_ms": START + 1500, "log_end_offsets": [4, 5, 2, 0]}]


def test_a_refused_create_partitions_records_nothing(tmp_path):
    with Broker(str(tmp_path / "data"), clock=MockClock(START)) as b:
        b.create_topic("t", partitions=3)
        with pytest.raises(InvalidPartitionsError):
            b.create_partitions("t", 2)
        assert b.describe_topic("t")["partition_history"] == []


def test_a_metadata_file_without_history_still_loads(tmp_path):
    d = str(tmp_path / "data")
    with Broker(d, clock=MockClock(START)) as b:
        b.create_topic("t", partitions=2)
    path = _meta_file(d)
    doc = json.load(open(path))
    del doc["partition_history"]
    with open(path, "w") as f:
        json.dump(doc, f)
    with Broker(d, clock=MockClock(START)) as b:
        assert b.describe_topic("t")["partition_history"] == []
        b.create_partitions("t", 3)
        assert b.describe_topic("t")["partition_history"][0]["from_partitions"] == 2


@pytest.mark.parametrize("history,message", [
    ([{"from_partitions": 2, "to_partitions": 3, "time_ms": 0, "log_end_offsets": [0, 0]}],
     "the last entry grows the topic to 3 partitions, but it has 4"),
    ([{"from_partitions": 2, "to_partitions": 4, "time_ms": 0, "log_end_offsets": [0]}],
     "partition_history[0].log_end_offsets: expected a list of 2 offsets"),
    ([{"from_partitions": 2, "to_partitions": 4, "time_ms": 0, "log_end_offsets": [0, -1]}],
     "partition_history[0].log_end_offsets[1]: -1 is not an int >= 0"),
    ([{"from_partitions": 1, "to_partitions": 2, "time_ms": 5, "log_end_offsets": [0]},
      {"from_partitions": 3, "to_partitions": 4, "time_ms": 6, "log_end_offsets": [0, 0, 0]}],
     "partition_history[1].from_partitions: 3 is not the previous entry's to_partitions 2"),
    ("nope", "partition_history: expected a list"),
])
def test_a_broken_history_is_refused_on_load_naming_the_file_and_the_field(tmp_path, history, message):
    d = str(tmp_path / "data")
    with Broker(d, clock=MockClock(START)) as b:
        b.create_topic("t", partitions=4)
    path = _meta_file(d)
    doc = json.load(open(path))
    doc["partition_history"] = history
    with open(path, "w") as f:
        json.dump(doc, f)
    with pytest.raises(KafkaStorageError) as exc:
        Broker(d, clock=MockClock(START))
    assert path in str(exc.value) and message in str(exc.value)


def test_a_cluster_records_the_leaders_log_end_offsets(tmp_path):
    d, clock = str(tmp_path / "data"), MockClock(START)
    with Cluster(d, [(0, "r1"), (1, "r2"), (2, "r3")], clock=clock, seed=7) as c:
        c.create_topic("t", partitions=2, replication_factor=2)
        _fill(c, "t", [2, 4])
        clock.advance(7)
        c.create_partitions("t", 3)
    with Cluster(d, clock=clock) as c:
        assert c.describe_topic("t")["partition_history"] == [
            {"from_partitions": 2, "to_partitions": 3, "time_ms": START + 7, "log_end_offsets": [2, 4]}]


def test_the_cli_add_partitions_then_describe_json_shows_the_history(tmp_path, capsys):
    from kafkasim.cli import main
    d = str(tmp_path / "data")
    assert main(["topics", "create", "orders", "--partitions", "6", "--data-dir", d]) == 0
    assert main(["topics", "add-partitions", "orders", "--partitions", "8", "--data-dir", d]) == 0
    capsys.readouterr()
    assert main(["topics", "describe", "orders", "--json", "--data-dir", d]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["partition_history"]
    assert (entry["from_partitions"], entry["to_partitions"], entry["log_end_offsets"]) == (6, 8, [0] * 6)
