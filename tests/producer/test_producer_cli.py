"""`kafkasim partition` and `kafkasim produce` through main(), on a real data dir."""

from __future__ import annotations

import io
import json

import pytest

import kafkasim.cli as cli
from kafkasim.broker import Broker
from kafkasim.types import PRODUCER_HEADER, SEQUENCE_HEADER
from kafkasim.partitioning.partitioners import partition_for_key


def test_both_commands_are_registered():
    assert {"kafkasim.cli.partition", "kafkasim.cli.produce"} <= set(cli.COMMAND_MODULES)
    help_text = cli.build_parser().format_help()
    assert "partition" in help_text and "produce" in help_text


def run(capsys, monkeypatch, *argv, stdin=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_partition_json_prints_kafka_partition_and_signed_hash(capsys, monkeypatch):
    rc, out, _ = run(capsys, monkeypatch, "partition", "21", "abc", "", "--partitions", "64", "--json")
    assert rc == 0
    assert json.loads(out) == [
        {"key": "21", "partition": (-973932308 & 0x7FFFFFFF) % 64, "hash": -973932308},
        {"key": "abc", "partition": 479470107 % 64, "hash": 479470107},
        {"key": "", "partition": (0x106E08D9 & 0x7FFFFFFF) % 64, "hash": 0x106E08D9},
    ]


def test_partition_hex_keys_and_other_partitioners(capsys, monkeypatch):
    rc, out, _ = run(capsys, monkeypatch, "partition", "536865657444a53", "--hex", "--partitions", "2")
    assert rc == 1    # odd-length hex
    rc, out, _ = run(capsys, monkeypatch, "partition", "5368656574", "--hex", "--partitions", "100",
                     "--partitioner", "consistent", "--json")
    assert json.loads(out)[0]["partition"] == partition_for_key(b"Sheet", 100, "consistent")
    rc, out, _ = run(capsys, monkeypatch, "partition", "SheetJS", "--partitions", "100",
                     "--partitioner", "consistent_random")
    assert rc == 0 and "26" in out and "2647669026" in out


def test_partition_rejects_a_non_key_pure_partitioner(capsys, monkeypatch):
    rc, _, err = run(capsys, monkeypatch, "partition", "k", "--partitions", "3", "--partitioner", "hot_keys")
    assert rc == 1 and "not a pure function of the key" in err


def _records(d, topic, partitions):
    """Every record of ``topic``, with ``offset`` replaced by ``(partition, offset)``."""
    b = Broker(d)
    try:
        return [r._replace(offset=(p, r.offset)) for p in range(partitions) for r in b.fetch(topic, p, 0).records]
    finally:
        b.close()


def test_produce_bare_lines_are_values_with_null_keys_as_in_kafka(tmp_path, capsys, monkeypatch):
    d = str(tmp_path / "data")
    run(capsys, monkeypatch, "topics", "create", "t", "--partitions", "1", "--data-dir", d)
    rc, out, err = run(capsys, monkeypatch, "produce", "t", "--data-dir", d, stdin="hello\n{\"a\": 1}\n\nk\tv\n")
    assert rc == 0, err
    recs = _records(d, "t", 1)
    assert [(r.key, r.value) for r in recs] == [(None, b"hello"), (None, b'{"a": 1}'), (None, b""),
                                                (None, b"k\tv")]
    assert all(r.headers == () for r in recs)           # audit headers are opt-in


def test_produce_parse_key_with_a_separator_and_opt_in_audit_headers(tmp_path, capsys, monkeypatch):
    d = str(tmp_path / "data")
    run(capsys, monkeypatch, "topics", "create", "orders", "--partitions", "4", "--data-dir", d)
    rc, out, err = run(capsys, monkeypatch, "produce", "orders", "--data-dir", d, "--json", "--client-id", "cli-test",
                       "--property", "parse.key=true", "--property", "key.separator=:", "--stamp-headers",
                       stdin="m1:one\nm1:two\nm2:x:y\n")
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["records"] == 3 and summary["client_id"] == "cli-test" and summary["error"] is None
    recs = _records(d, "orders", 4)
    m1 = [r for r in recs if r.key == b"m1"]
    assert [r.value for r in m1] == [b"one", b"two"]
    assert {r.offset[0] for r in m1} == {partition_for_key(b"m1", 4)}
    assert [dict(r.headers)[SEQUENCE_HEADER] for r in m1] == [b"0", b"1"]
    assert dict(m1[0].headers)[PRODUCER_HEADER] == b"cli-test"
    assert [r.value for r in recs if r.key == b"m2"] == [b"x:y"]


def test_produce_json_input_format(tmp_path, capsys, monkeypatch):
    d = str(tmp_path / "data")
    run(capsys, monkeypatch, "topics", "create", "t", "--partitions", "2", "--data-dir", d)
    line = json.dumps({"key": "m2", "value": "three", "headers": {"h": "x"}, "partition": 1})
    rc, out, err = run(capsys, monkeypatch, "produce", "t", "--data-dir", d, "--input-format", "json",
                       stdin=line + "\n\n")
    assert rc == 0, err
    (rec,) = _records(d, "t", 2)
    assert (rec.offset, rec.key, rec.value, rec.headers) == ((1, 0), b"m2", b"three", (("h", b"x"),))


@pytest.mark.parametrize("args,stdin,message", [
    (["--property", "parse.key=true"], "a\tb\nc\td\nno separator here\n",
     "line 3: InvalidArgumentError: No key separator found on line number 3: 'no separator here'"),
    (["--input-format", "json"], '{"value": "a"}\n{"value": "b"}\n{"key": "k", "value": 1}\n',
     "line 3: InvalidArgumentError: line 3: JSON field 'value' must be a string or null"),
    (["--partition", "0"], "a\nb\n" + "x" * 2_000_000 + "\n", "line 3: RecordTooLargeError"),
    (["--input-format", "json"], '{"value": "a"}\n{"value": "b"}\n{"partition": 99}\n',
     "line 3: InvalidArgumentError: Invalid partition given with record: 99"),
])
def test_produce_failing_line_is_named_with_what_was_acknowledged_before_it(tmp_path, capsys, monkeypatch,
                                                                         args, stdin, message):
    """Lines stream as in kafka-console-producer: the two lines before the bad one are written,
    the error names the line and says so, nothing after it is sent, and the exit is 1."""
    d = str(tmp_path / "data")
    run(capsys, monkeypatch, "topics", "create", "t", "--partitions", "1", "--data-dir", d)
    rc, out, err = run(capsys, monkeypatch, "produce", "t", "--data-dir", d, *args, stdin=stdin + "after\n")
    assert rc == 1
    assert message in err
    assert "(2 record(s) before it were acknowledged; nothing after it was sent)" in err
    assert "Traceback" not in err
    assert [r.value for r in _records(d, "t", 1)] == [b"a", b"b"] if "parse.key=true" not in args \
        else [r.value for r in _records(d, "t", 1)] == [b"b", b"d"]


def test_produce_non_utf8_input_is_a_clear_error(tmp_path, capsys, monkeypatch):
    d = str(tmp_path / "data")
    run(capsys, monkeypatch, "topics", "create", "t", "--partitions", "1", "--data-dir", d)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"ok\nbad \xff line\n")))
    rc = cli.main(["produce", "t", "--data-dir", d])
    out, err = capsys.readouterr()
    assert rc == 1 and "Traceback" not in err
    assert "line 2: InvalidArgumentError: line 2: not valid UTF-8 (invalid start byte: byte 0xff at byte 5" in err
    assert [r.value for r in _records(d, "t", 1)] == [b"ok"]


@pytest.mark.parametrize("args,message", [
    (["--property", "parse.key"], "--property 'parse.key': expected NAME=VALUE"),
    (["--property", "colour=red"], "unknown reader property colour"),
    (["--property", "headers.separator=:"], "headers.separator and headers.key.separator may not be equal"),
])
def test_produce_bad_reader_properties_fail_before_writing(tmp_path, capsys, monkeypatch, args, message):
    d = str(tmp_path / "data")
    rc, _, err = run(capsys, monkeypatch, "produce", "t", "--data-dir", d, *args, stdin="a\n")
    assert rc == 1 and message in err
    assert not (tmp_path / "data").exists()


def test_produce_explicit_partition(tmp_path, capsys, monkeypatch):
    d = str(tmp_path / "data")
    run(capsys, monkeypatch, "topics", "create", "t", "--partitions", "3", "--data-dir", d)
    rc, out, err = run(capsys, monkeypatch, "produce", "t", "--partition", "2", "--data-dir", d, stdin="1\n2\n")
    assert rc == 0, err
    assert "partition 2: 2 record(s), offsets 0..1" in out
    rc, _, err = run(capsys, monkeypatch, "produce", "t", "--partition", "3", "--data-dir", d, stdin="a\n")
    assert rc == 1 and "Invalid partition given with record: 3 is not in the range [0...3)" in err


def test_produce_json_timestamp_is_checked_by_the_record_rule(tmp_path, capsys, monkeypatch):
    d = str(tmp_path / "data")
    run(capsys, monkeypatch, "topics", "create", "t", "--partitions", "1", "--data-dir", d)
    stdin = '{"value": "a", "timestamp": 5}\n{"value": "b", "timestamp": 9223372036854775808}\n{"value": "c"}\n'
    rc, _, err = run(capsys, monkeypatch, "produce", "t", "--data-dir", d, "--input-format", "json", stdin=stdin)
    assert rc == 1 and "Traceback" not in err
    assert "line 2: InvalidTimestampError: line 2: Invalid timestamp: 9223372036854775808" in err
    assert "(1 record(s) before it were acknowledged; nothing after it was sent)" in err
    assert [(r.value, r.timestamp) for r in _records(d, "t", 1)] == [(b"a", 5)]


def test_a_record_the_broker_refuses_fails_alone_and_the_summary_stays_exact(tmp_path):
    """Over the topic's max.message.bytes: the producer splits its batch, the line fails alone,
    and the lines after it, already on their way, are written and counted as such."""
    from kafkasim.clock import MockClock
    from kafkasim.producer import Producer
    from kafkasim.producer.lines import produce_lines

    with Broker(tmp_path / "data", clock=MockClock(1_700_000_000_000)) as b:
        b.create_topic("t", 1, configs={"max.message.bytes": "2000"})
        p = Producer(b, linger_ms=60_000)
        summary = produce_lines(p, "t", ["a\n", "b\n", "x" * 5000 + "\n", "after\n", "after2\n"])
        p.close()
        assert summary["error"]["line"] == 3 and summary["error"]["type"] == "RecordTooLargeError"
        assert summary["records"] == 2 and summary["after_error"] == 2
        assert summary["partitions"] == {0: {"count": 2, "first_offset": 0, "last_offset": 1}}
        assert [r.value for r in b.fetch("t", 0, 0).records] == [b"a", b"b", b"after", b"after2"]


def test_produce_reports_records_written_after_a_refused_line(tmp_path, capsys, monkeypatch):
    d = str(tmp_path / "data")
    run(capsys, monkeypatch, "topics", "create", "t", "--partitions", "1", "--config", "max.message.bytes=2000",
        "--data-dir", d)
    rc, _, err = run(capsys, monkeypatch, "produce", "t", "--data-dir", d,
                     stdin="a\nb\n" + "x" * 5000 + "\nafter\n")
    assert rc == 1 and "line 3: RecordTooLargeError" in err and "Traceback" not in err
    assert "(2 record(s) before it were acknowledged; " in err
    written = [r.value for r in _records(d, "t", 1)]
    assert written[:2] == [b"a", b"b"]
    if written[2:]:         # "after" was already on its way when the failure came back
        assert "1 record(s) of later lines were already sent and were written too" in err
    else:
        assert "nothing after it was sent" in err
