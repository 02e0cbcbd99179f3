"""``python -m benchmarks``' runner: a failing benchmark is reported as failed with its error
while the others still run, and the figures are written as they come."""

from __future__ import annotations

import json

from benchmarks.__main__ import main, run_benchmarks


def _figure(value):
    return {"value": value, "unit": "s"}


def test_a_failing_benchmark_is_reported_and_the_others_still_run_and_are_written(tmp_path, capsys):
    out = tmp_path / "bench-results.json"
    seen_on_disk = {}

    def crashes():
        seen_on_disk.update(json.loads(out.read_text()))     # what the first one measured is already written
        raise KeyError("simulated_ms")

    registry = {"bench_first": lambda: {"first_s": _figure(1.0)}, "bench_crash": crashes,
                "bench_last": lambda: {"last_s": _figure(2.0)}}
    assert main([], registry=registry, out=out) == 1
    results = json.loads(out.read_text())
    assert results["first_s"]["value"] == 1.0 and results["last_s"]["value"] == 2.0
    assert results["bench_crash"] == {"failed": True, "error": "KeyError: 'simulated_ms'"}
    assert seen_on_disk == {"first_s": _figure(1.0)}
    captured = capsys.readouterr()
    assert "FAILED" in captured.out and "1 benchmark(s) failed: bench_crash" in captured.err


def test_a_rerun_that_succeeds_clears_the_failure(tmp_path):
    out = tmp_path / "r.json"
    results = {"bench_x": {"failed": True, "error": "boom"}}
    assert run_benchmarks({"bench_x": lambda: {"x_s": _figure(3.0)}}, results, out) == []
    assert json.loads(out.read_text()) == {"x_s": _figure(3.0)}
