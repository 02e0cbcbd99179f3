"""``kafkasim consume`` as kafka-console-consumer: Kafka's formatter properties and formats,
--partition/--offset with Kafka's option rules, the "Processed a total of N messages" line,
and a clean exit 0 on Ctrl-C (SIGINT) of a consumer that would otherwise run forever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from kafkasim.broker import Broker
from kafkasim.cli import main
from kafkasim.consumer.console import MessageFormatter
from kafkasim.consumer.fetcher import ConsumerRecord
from kafkasim.errors import InvalidArgumentError


def rec(key, value, headers=(), partition=2, offset=7, ts=1234):
    return ConsumerRecord("t", partition, -1, offset, ts, 0, key, value, headers, None, -1, -1, -1)


def test_the_default_format_is_the_value_only():
    assert MessageFormatter({}).format(rec(b"k", b"v")) == b"v\n"
    assert MessageFormatter({}).format(rec(b"k", None)) == b"null\n"


def test_every_print_property_in_kafkas_order_and_format():
    f = MessageFormatter({"print.timestamp": "true", "print.partition": "true", "print.offset": "true",
                          "print.headers": "true", "print.key": "true", "key.separator": " | "})
    line = f.format(rec(b"k1", b"v1", (("h1", b"a"), ("h2", None))))
    assert line == b"CreateTime:1234 | Partition:2 | Offset:7 | h1:a,h2:null | k1 | v1\n"
    assert f.format(rec(None, b"v")) == b"CreateTime:1234 | Partition:2 | Offset:7 | NO_HEADERS | null | v\n"


def test_separators_null_literal_and_value_off():
    f = MessageFormatter({"print.key": "true", "print.value": "false", "line.separator": ";",
                          "null.literal": "<none>", "headers.separator": "/", "print.headers": "TRUE"})
    assert f.format(rec(None, b"v", (("a", b"1"), ("b", b"2")))) == b"a:1/b:2\t<none>;"


def test_an_unknown_property_names_the_close_match():
    with pytest.raises(InvalidArgumentError, match="did you mean print.key"):
        MessageFormatter({"print.keys": "true"})


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    with Broker(d) as b:
        b.create_topic("t", 2)
        for p in range(2):
            b.append_records("t", p, [(1000 + i, f"k{i}".encode(), f"p{p}-{i}".encode(), ()) for i in range(5)])
    return str(d)


def test_partition_and_offset_read_one_partition_from_there(data, capsysbinary):
    assert main(["consume", "t", "--partition", "1", "--offset", "3", "--timeout-ms", "200",
                 "--property", "print.offset=true", "--data-dir", data]) == 0
    out = capsysbinary.readouterr()
    assert out.out == b"Offset:3\tp1-3\nOffset:4\tp1-4\n"
    assert out.err.endswith(b"Processed a total of 2 messages\n")
    main(["consume", "t", "--partition", "0", "--from-beginning", "--max-messages", "1", "--data-dir", data])
    assert capsysbinary.readouterr().out == b"p0-0\n"
    main(["consume", "t", "--partition", "0", "--offset", "latest", "--timeout-ms", "100", "--data-dir", data])
    assert capsysbinary.readouterr().out == b""


@pytest.mark.parametrize("argv, message", [
    (["--offset", "3"], "The partition is required when offset is specified."),
    (["--partition", "0", "--group", "g"], "Options group and partition cannot be specified together."),
    (["--partition", "0", "--offset", "3", "--from-beginning"],
     "Options from-beginning and offset cannot be specified together."),
    (["--partition", "0", "--offset", "-3"],
     "The provided offset value '-3' is incorrect. Valid values are 'earliest', 'latest', or a non-negative long."),
    (["--partition", "5"], "partition 5 of topic t does not exist"),
])
def test_kafkas_option_rules(data, capsys, argv, message):
    assert main(["consume", "t", *argv, "--data-dir", data]) == 1
    assert message in capsys.readouterr().err


def test_ctrl_c_exits_0_after_printing_the_count(data):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "kafkasim", "consume", "t", "--from-beginning",
                             "--data-dir", data], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        lines = [proc.stdout.readline() for _ in range(10)]     # every record, then it waits for more
        assert sorted(lines) == sorted(f"p{p}-{i}\n".encode() for p in range(2) for i in range(5))
        time.sleep(0.3)
        assert proc.poll() is None                               # still running: no timeout by default
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 0
    assert proc.stderr.read().decode().strip().endswith("Processed a total of 10 messages")


def test_a_group_consumer_says_once_that_it_waits_for_its_group(data, capsys):
    assert main(["consume", "t", "--group", "g", "--from-beginning", "--max-messages", "1",
                 "--data-dir", data]) == 0
    err = capsys.readouterr().err
    assert err.count("kafkasim consume: waiting for group g to assign partitions") == 1, err
    assert "group.initial.rebalance.delay.ms" in err
