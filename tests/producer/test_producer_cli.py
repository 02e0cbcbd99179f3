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


def test_produce_reads_tab_and_json_lines_and_stamps_headers(tmp_path, capsys, monkeypatch):
    d = str(tmp_path / "data")
    run(capsys, monkeypatch, "topics", "create", "orders", "--partitions", "4", "--data-dir", d)
    lines = "m1\tone\nm1\ttwo\n\n" + json.dumps({"key": "m2", "value": "three", "headers": {"h": "x"}}) + "\n"
    rc, out, err = run(capsys, monkeypatch, "produce", "orders", "--data-dir", d, "--json",
                       "--client-id", "cli-test", stdin=lines)
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["records"] == 3 and summary["client_id"] == "cli-test"
    b = Broker(d)
    try:
        p1 = partition_for_key(b"m1", 4)
        recs = b.fetch("orders", p1, 0).records
        m1 = [r for r in recs if r.key == b"m1"]
        assert [r.value for r in m1] == [b"one", b"two"]
        assert [dict(r.headers)[SEQUENCE_HEADER] for r in m1] == [b"0", b"1"]
        assert dict(m1[0].headers)[PRODUCER_HEADER] == b"cli-test"
        p2 = partition_for_key(b"m2", 4)
        m2 = [r for r in b.fetch("orders", p2, 0).records if r.key == b"m2"][0]
        assert dict(m2.headers)["h"] == b"x"
    finally:
        b.close()


@pytest.mark.parametrize("stdin,message", [
    ("a\tb\nno separator here\n", "No key separator found on line number 2: 'no separator here'"),
    ('a\tb\n{"key": "k", "value": 1}\n', "line 2: JSON field 'value' must be a string or null"),
    ('{"key": "k", "colour": "red"}\n', "line 1: unknown JSON field(s) colour"),
    ("{not json\n", "line 1: invalid JSON"),
])
def test_produce_bad_line_names_the_line_and_writes_nothing(tmp_path, capsys, monkeypatch, stdin, message):
    d = str(tmp_path / "data")
    run(capsys, monkeypatch, "topics", "create", "t", "--data-dir", d)
    rc, _, err = run(capsys, monkeypatch, "produce", "t", "--data-dir", d, stdin=stdin)
    assert rc == 1 and message in err
    b = Broker(d)
    try:
        assert b.fetch("t", 0, 0).records == []
    finally:
        b.close()


def test_produce_explicit_partition_and_no_headers(tmp_path, capsys, monkeypatch):
    d = str(tmp_path / "data")
    run(capsys, monkeypatch, "topics", "create", "t", "--partitions", "3", "--data-dir", d)
    rc, out, err = run(capsys, monkeypatch, "produce", "t", "--partition", "2", "--no-stamp-headers",
                       "--data-dir", d, stdin="a\t1\nb\t2\n")
    assert rc == 0, err
    assert "partition 2: 2 record(s), offsets 0..1" in out
    rc, _, err = run(capsys, monkeypatch, "produce", "t", "--partition", "3", "--data-dir", d, stdin="a\t1\n")
    assert rc == 1 and "Invalid partition given with record: 3 is not in the range [0...3)" in err
