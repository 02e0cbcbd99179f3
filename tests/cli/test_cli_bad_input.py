"""The CLI's answer to bad input: a message naming the bad value and a non-zero exit, and
nothing written (hardening issue: read-only commands, --max, huge assign specs)."""

from __future__ import annotations

import io
import json

import pytest

import kafkasim.cli as cli


def run(capsys, monkeypatch, *argv, stdin=""):
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    try:
        rc = cli.main(list(argv))
    except SystemExit as exc:     # argparse usage errors
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv", [
    ["topics", "list"], ["topics", "describe", "t"], ["topics", "delete", "t"],
    ["groups", "list"], ["groups", "describe", "g"],
    ["consume", "t"], ["produce", "t"], ["verify-log"],
])
def test_a_mistyped_data_dir_is_an_error_and_is_not_created(tmp_path, capsys, monkeypatch, argv):
    missing = tmp_path / "kafkasim-dta"
    rc, _, err = run(capsys, monkeypatch, *argv, "--data-dir", str(missing), stdin="v\n")
    assert rc == 1
    assert f"data dir {missing} does not exist" in err
    assert not missing.exists()


def test_topics_create_still_makes_a_new_data_dir(tmp_path, capsys, monkeypatch):
    d = tmp_path / "new"
    rc, _, err = run(capsys, monkeypatch, "topics", "create", "t", "--data-dir", str(d))
    assert rc == 0, err
    assert d.is_dir()


@pytest.mark.parametrize("value", ["-1", "0", "x"])
def test_consume_max_messages_must_be_positive(tmp_path, capsys, monkeypatch, value):
    rc, out, err = run(capsys, monkeypatch, "consume", "t", "--max", value, "--data-dir", str(tmp_path))
    assert rc == 2 and out == ""
    assert "argument --max-messages/--max: " in err and value in err


def test_assign_refuses_a_partition_count_no_topic_can_have(capsys, monkeypatch):
    spec = {"partitions_per_topic": {"t0": 10**9}, "subscriptions": {"C0": ["t0"]}}
    rc, out, err = run(capsys, monkeypatch, "assign", "--strategy", "range", "--spec", "-", stdin=json.dumps(spec))
    assert rc == 1 and out == ""
    assert "partitions_per_topic.t0" in err and "1000000000 partitions is more than a kafkasim topic can have" in err


def test_config_typos_are_suggested_in_the_spelling_typed(tmp_path, capsys):
    from kafkasim.cli import main

    data = str(tmp_path / "data")
    assert main(["topics", "create", "t", "--config", "segment.byte=1048576", "--data-dir", data]) == 1
    assert "Unknown topic config name: segment.byte (did you mean segment.bytes" in capsys.readouterr().err
    assert main(["topics", "create", "t", "--data-dir", data]) == 0
    capsys.readouterr()
    import io
    import sys
    stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(b"x\n"))
    try:
        assert main(["produce", "t", "--producer-property", "lingr.ms=1", "--data-dir", data]) == 1
    finally:
        sys.stdin = stdin
    err = capsys.readouterr().err
    assert "Unrecognized producer config 'lingr.ms' (did you mean 'linger.ms'?)" in err, err
    assert "linger_ms" not in err
