"""Read-only group commands neither fsync nor block a writer (issue 21): with no server,
``groups describe`` and ``groups list`` read the data dir's files (kafkasim.view.readonly)
and answer exactly what the embedded broker answers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kafkasim.admin import groups as admin
from kafkasim.broker import Broker
from kafkasim.cli import main
from kafkasim.consumer import Consumer
from kafkasim.types import TopicPartition
from kafkasim.view.readonly import ReadOnlyDataDir


@pytest.fixture
def data(tmp_path):
    d = str(tmp_path / "data")
    with Broker(d) as b:
        b.create_topic("t", 3)
        for p in range(3):
            b.append_records("t", p, [(1000 + i, b"k", b"v", ()) for i in range(p + 2)])
        c = Consumer(b, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False)
        c.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
        c.poll(timeout_ms=0)
        c.commit({TopicPartition("t", 0): 1, TopicPartition("t", 1): -2})     # -2: a tool's sentinel
        c.close()
    return d


def _files(d: str) -> dict:
    out = {}
    for root, _, names in os.walk(d):
        for n in names:
            st = os.stat(os.path.join(root, n))
            out[os.path.join(root, n)] = (st.st_size, st.st_mtime_ns)
    return out


def test_describe_and_list_make_no_fsync_and_change_no_file(data, monkeypatch, capsys):
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd) or real(fd))
    before = _files(data)
    for argv in (["groups", "describe", "g"], ["groups", "describe", "g", "--members"],
                 ["groups", "describe", "g", "--state"], ["groups", "list", "--state"]):
        assert main([*argv, "--data-dir", data]) in (0, None)
    assert calls == []
    assert _files(data) == before
    assert "g" in capsys.readouterr().out


def test_the_files_answer_what_the_embedded_broker_answers(data):
    ro = ReadOnlyDataDir(data)
    answers = [admin.describe(ro, "g"), admin.members(ro, "g"), admin.state(ro, "g"), ro.list_groups()]
    with Broker(data) as b:
        assert answers == [admin.describe(b, "g"), admin.members(b, "g"), admin.state(b, "g"), b.list_groups()]
    rows = {r["partition"]: r for r in answers[0]["rows"]}
    assert (rows[0]["current_offset"], rows[0]["lag"]) == (1, 1)
    assert 1 not in rows                  # the sentinel reads as no offset: a committed-only row is not shown


def test_a_writer_holding_the_data_dir_does_not_block_describe(data):
    with Broker(data):          # the data dir's exclusive lock, as a writer holds it
        out = subprocess.run([sys.executable, "-m", "kafkasim", "groups", "describe", "g", "--json",
                              "--data-dir", data], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"group": "g"' in out.stdout
