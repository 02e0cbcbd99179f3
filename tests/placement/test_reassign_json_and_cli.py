"""Kafka's reassignment JSON (kafkasim.placement.reassign_json) and the `kafkasim replicas`
CLI's --policy striped and --rebalance."""

from __future__ import annotations

import json

import pytest

import kafkasim.cli as cli
from kafkasim.errors import InvalidArgumentError
from kafkasim.placement.reassign_json import dumps_reassignment, loads_reassignment, loads_reassignment_with_log_dirs
from kafkasim.types import TopicPartition as TP

KAFKA_PROPOSED = ('{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[1],"log_dirs":["any"]},'
                  '{"topic":"foo","partition":0,"replicas":[1],"log_dirs":["any"]},'
                  '{"topic":"foo","partition":1,"replicas":[1],"log_dirs":["any"]}]}')


def test_round_trip_is_byte_for_byte_kafkas_generate_output():
    plan = loads_reassignment(KAFKA_PROPOSED)
    assert plan == {TP("bar", 0): [1], TP("foo", 0): [1], TP("foo", 1): [1]}
    assert dumps_reassignment(plan) == KAFKA_PROPOSED
    unsorted = {TP("foo", 10): [3, 1, 2], TP("foo", 9): [2, 3, 1]}
    text = dumps_reassignment(unsorted, {TP("foo", 10): ["any", "/data/a", "any"]})
    assert text.index('"partition":9') < text.index('"partition":10')
    assert loads_reassignment_with_log_dirs(text)[1][TP("foo", 10)] == ["any", "/data/a", "any"]


def test_optional_fields_default_as_in_kafka():
    plan, dirs = loads_reassignment_with_log_dirs('{"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}')
    assert plan == {TP("foo", 0): [1, 2]} and dirs == {TP("foo", 0): ["any", "any"]}


@pytest.mark.parametrize("text, message", [
    ("", "The input string shouldn't be empty"),
    ("[]", "Expected JSON object, received []"),
    ('{"version":2}', "Not supported version field value 2"),
    ('{"version":"1"}', 'Expected `Integer` value, received "1"'),
    ('{"partitions":{}}', "Expected JSON array, received {}"),
    ('{"partitions":[]}', "Partition reassignment list cannot be empty"),
    ('{"partitions":[{"topic":"foo","partition":0}]}', "No such field exists: `replicas`"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[]}]}', "Partition replica list cannot be empty"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
     "Size of replicas list [1, 2] is different from size of log dirs list [any] for partition foo-0"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[1]},{"topic":"foo","partition":0,"replicas":[1]},'
     '{"topic":"bar","partition":1,"replicas":[1]},{"topic":"bar","partition":1,"replicas":[1]}]}',
     "Partition reassignment contains duplicate topic partitions: bar-1,foo-0"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[1,1,2,2]},{"topic":"bar","partition":0,"replicas":[3,3]}]}',
     "Partition replica lists may not contain duplicate entries: foo-0 contains multiple entries for 1,2. "
     "bar-0 contains multiple entries for 3"),
    ('{"partitions":[{"topic":"foo","partition":"0","replicas":[1]}]}', "partitions[0]: field `partition` must be int"),
    ('{"partitions":[{"topic":"foo","partition":0,"replicas":[1,"x"]}]}', "partitions[0] (foo-0): field `replicas`"),
    ("{", "The input string is not a valid JSON"),
])
def test_malformed_files_fail_with_a_message_naming_the_field(text, message):
    with pytest.raises(InvalidArgumentError) as info:
        loads_reassignment(text)
    assert message in str(info.value)


def test_cli_striped_policy_matches_kafkas_placer(capsys):
    assert cli.main(["replicas", "--brokers", "0,1,2,3", "--partitions", "3", "--replication-factor", "3",
                     "--policy", "striped", "--seed", "7", "--json"]) == 0
    from kafkasim.placement.java_random import JavaRandom
    from kafkasim.placement.striped import UsableBroker, striped_place
    expected = striped_place([UsableBroker(b) for b in range(4)], 3, 3, rng=JavaRandom(7))
    assert json.loads(capsys.readouterr().out) == {"assignment": {str(p): r for p, r in expected.items()}}
    assert cli.main(["replicas", "--brokers", "0,1,2", "--partitions", "2", "--replication-factor", "1",
                     "--policy", "striped", "--fenced", "0,1,2"]) == 1
    assert "All brokers are currently fenced." in capsys.readouterr().err
    assert cli.main(["replicas", "--brokers", "0,1,2", "--partitions", "2", "--replication-factor", "1",
                     "--policy", "striped", "--start-index", "0"]) == 1
    assert "--start-index" in capsys.readouterr().err
    assert cli.main(["replicas", "--brokers", "0,1", "--partitions", "2", "--replication-factor", "1",
                     "--policy", "striped", "--fenced", "5"]) == 1
    assert "--fenced '5'" in capsys.readouterr().err


def test_cli_rebalance_prints_the_minimal_plan(tmp_path, capsys):
    current = {TP("orders", p): [p % 3, (p + 1) % 3, (p + 2) % 3] for p in range(9)}
    path = tmp_path / "current.json"
    path.write_text(dumps_reassignment(current))
    assert cli.main(["replicas", "--brokers", "0,1,2,3", "--rebalance", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["replica_moves"] == out["lower_bound_moves"] == 6
    assert out["skew_before"]["idle"] == [3] and out["skew_after"]["idle"] == []
    proposed = loads_reassignment(json.dumps(out["proposed"]))
    assert sum(3 in r for r in proposed.values()) == 6
    assert cli.main(["replicas", "--brokers", "0,1,2,3", "--rebalance", str(path)]) == 0
    text = capsys.readouterr().out
    assert "Proposed partition reassignment configuration" in text and "replica moves: 6 (lower bound 6)" in text
    assert cli.main(["replicas", "--brokers", "0,1", "--rebalance", str(tmp_path / "missing.json")]) == 1
    assert "missing.json" in capsys.readouterr().err
    assert cli.main(["replicas", "--brokers", "0,1"]) == 1
    assert "--partitions is required" in capsys.readouterr().err
