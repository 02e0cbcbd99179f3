"""`kafkasim topics ...`: the CLI a user types, through main() and as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kafkasim.cli import build_parser, main


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_topics_lifecycle_with_json(tmp_path, capsys):
    d = str(tmp_path / "data")
    rc, out, _ = run(capsys, "topics", "create", "orders", "--partitions", "3",
                     "--config", "retention.ms=60000", "--data-dir", d)
    assert rc == 0 and "Created topic orders with 3 partition(s)." in out
    rc, out, _ = run(capsys, "topics", "list", "--json", "--data-dir", d)
    assert json.loads(out) == ["orders"]
    rc, out, _ = run(capsys, "topics", "describe", "orders", "--json", "--data-dir", d)
    desc = json.loads(out)
    assert desc["configs"] == {"retention.ms": 60000} and len(desc["partitions"]) == 3
    rc, out, _ = run(capsys, "topics", "add-partitions", "orders", "--partitions", "5", "--data-dir", d)
    assert rc == 0 and "5 partitions" in out
    rc, out, _ = run(capsys, "topics", "describe", "orders", "--data-dir", d)
    assert "PartitionCount: 5" in out and "Partition: 4" in out
    rc, out, _ = run(capsys, "topics", "delete", "orders", "--data-dir", d)
    rc, out, _ = run(capsys, "topics", "list", "--json", "--data-dir", d)
    assert json.loads(out) == []


def test_bad_input_exits_non_zero_naming_the_value(tmp_path, capsys):
    d = str(tmp_path / "data")
    rc, _, err = run(capsys, "topics", "create", "../../etc", "--data-dir", d)
    assert rc == 1 and "InvalidTopicError" in err and "../../etc" in err
    rc, _, err = run(capsys, "topics", "create", "t", "--config", "segment.bytes=1", "--data-dir", d)
    assert rc == 1 and "segment.bytes" in err and "at least 14" in err
    rc, _, err = run(capsys, "topics", "create", "t", "--config", "oops", "--data-dir", d)
    assert rc == 1 and "'oops'" in err
    rc, _, err = run(capsys, "topics", "describe", "missing", "--data-dir", d)
    assert rc == 1 and "UnknownTopicOrPartitionError" in err and "missing" in err
    assert sorted(os.listdir(d)) == [".lock", "meta"]


def test_data_dir_from_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KAFKASIM_DATA_DIR", str(tmp_path / "envdir"))
    rc, _, _ = run(capsys, "topics", "create", "t")
    assert rc == 0 and (tmp_path / "envdir" / "t-0").is_dir()


def test_every_command_has_an_example():
    parser = build_parser()

    def walk(p, path):
        subs = [a for a in p._actions if a.__class__.__name__ == "_SubParsersAction"]
        if not subs:
            yield path, p
        for a in subs:
            for name, child in a.choices.items():
                yield from walk(child, path + [name])

    leaves = list(walk(parser, []))
    assert len(leaves) >= 6
    for path, p in leaves:
        assert p.epilog and "Example:" in p.epilog and "kafkasim" in p.epilog, path


def test_installed_entry_point_runs(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kafkasim", "topics", "create", "x", "--partitions", "2",
                           "--data-dir", str(tmp_path / "d")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "kafkasim", "topics", "create", "x",
                           "--data-dir", str(tmp_path / "d")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "TopicAlreadyExistsError" in proc.stderr
