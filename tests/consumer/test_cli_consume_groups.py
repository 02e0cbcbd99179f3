"""``kafkasim consume`` and ``kafkasim groups`` through their argparse handlers (real broker, real files)."""

from __future__ import annotations

import argparse
import json

import pytest

from kafkasim.broker import Broker
from kafkasim.cli import consume as consume_cli, groups as groups_cli
from kafkasim.errors import GroupIdNotFoundError, UnknownTopicOrPartitionError


def run(argv):
    parser = argparse.ArgumentParser(prog="kafkasim")
    sub = parser.add_subparsers(dest="command", required=True)
    consume_cli.register(sub)
    groups_cli.register(sub)
    args = parser.parse_args(argv)
    return args.handler(args)


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    with Broker(d) as b:
        b.create_topic("t", 3)
        for p in range(3):
            b.append_records("t", p, [(1000 + i, f"k{i}".encode(), f"v{p}-{i}".encode(),
                                       (("h", b"\xff"),)) for i in range(4)])
        b.append_records("t", 0, [(2000, None, b"\x00\xff\xfe", ())])
    return str(d)


def test_consume_json_lines_from_beginning_without_group(data, capsys):
    assert run(["consume", "t", "--from-beginning", "--json", "--timeout-ms", "300", "--data-dir", data]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 13
    first = next(r for r in lines if r["partition"] == 1 and r["offset"] == 0)
    assert first == {"topic": "t", "partition": 1, "offset": 0, "timestamp": 1000, "key": "k0",
                     "key_base64": False, "value": "v1-0", "value_base64": False,
                     "headers": [{"key": "h", "value": "/w==", "value_base64": True}]}
    binary = next(r for r in lines if r["partition"] == 0 and r["offset"] == 4)
    assert binary["key"] is None and binary["value_base64"] and binary["value"] == "AP/+"
    with Broker(data) as b:                                # no group: nothing committed
        assert b.list_groups() == []


def test_consume_max_and_latest_default(data, capsysbinary):
    run(["consume", "t", "--from-beginning", "--max", "5", "--data-dir", data])
    captured = capsysbinary.readouterr()
    assert len(captured.out.splitlines()) == 5
    assert captured.err.endswith(b"Processed a total of 5 messages\n")
    run(["consume", "t", "--timeout-ms", "200", "--data-dir", data])   # latest: nothing new
    captured = capsysbinary.readouterr()
    assert captured.out == b""
    assert b"TimeoutException" in captured.err and captured.err.endswith(b"Processed a total of 0 messages\n")


def test_consume_with_group_commits_and_groups_describe_shows_lag(data, capsys):
    run(["consume", "t", "--group", "billing", "--from-beginning", "--max", "7", "--json",
         "--timeout-ms", "500", "--data-dir", data])
    assert len(capsys.readouterr().out.splitlines()) == 7
    run(["groups", "list", "--json", "--data-dir", data])
    assert json.loads(capsys.readouterr().out) == [
        {"group_id": "billing", "protocol_type": "consumer", "state": "Empty", "type": "classic"}]
    run(["groups", "describe", "billing", "--json", "--data-dir", data])
    d = json.loads(capsys.readouterr().out)
    assert d["state"] == "Empty" and all(r["consumer_id"] is None for r in d["rows"])
    rows = {r["partition"]: r for r in d["rows"]}
    assert sum(r["current_offset"] for r in rows.values()) == 7
    assert sum(r["lag"] for r in rows.values()) == 13 - 7
    assert rows[0]["log_end_offset"] == 5
    run(["groups", "describe", "billing", "--data-dir", data])
    captured = capsys.readouterr()
    assert "Consumer group 'billing' has no active members." in captured.err
    assert "LOG-END-OFFSET" in captured.out
    # the same group resumes where it committed
    run(["consume", "t", "--group", "billing", "--json", "--timeout-ms", "500", "--data-dir", data])
    assert len(capsys.readouterr().out.splitlines()) == 6


def test_consume_of_a_missing_topic_creates_it_as_kafkas_console_consumer_does(data):
    """The broker's auto.create.topics.enable (default true) applies to the CLI as to serve:
    the console consumer's first metadata request creates the topic (num.partitions = 1)."""
    run(["consume", "nope", "--timeout-ms", "200", "--data-dir", data])
    with Broker(data) as b:
        assert b.partition_count("nope") == 1


def test_consume_of_a_missing_topic_with_auto_creation_off_is_an_error(tmp_path):
    from kafkasim.broker import Broker
    from kafkasim.consumer.console import consume

    with Broker(tmp_path / "d", broker_configs={"auto.create.topics.enable": False}) as b:
        with pytest.raises(UnknownTopicOrPartitionError, match="auto.create.topics.enable=false"):
            list(consume(b, "nope", timeout_ms=100))


def test_describe_unknown_group_is_an_error(data):
    with pytest.raises(GroupIdNotFoundError, match="Consumer group 'ghost' does not exist."):
        run(["groups", "describe", "ghost", "--json", "--data-dir", data])
