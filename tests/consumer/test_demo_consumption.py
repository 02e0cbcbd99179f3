"""The demo's group processes exactly what was sent before it scales out: its settle
loop polls with ``update_offsets=False``, which must not consume (kafka-python's)."""

from __future__ import annotations

from kafkasim.demo import run_demo


def test_demo_group_processes_and_commits_every_record_sent(tmp_path):
    summary = run_demo(str(tmp_path / "demo"), records=2_000, spark=False, echo=None)
    assert summary["consumed"] == int(2_000 * 0.7)
