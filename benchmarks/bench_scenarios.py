"""Benchmark of the scenario labs: wall time of each lab at its default params.

Each figure is the wall-clock seconds of one ``run_scenario(name)`` (best of 1: the labs
are deterministic, so one run is representative) against the simulated time the lab
covers on its MockClock, measured in the same run: ``ratio`` = simulated / wall, i.e.
how much faster than real time the lab replays (for the producer-only labs the
simulated span is short, so their ratio is small; a lab whose result has no
``simulated_ms``, e.g. ``rack-aware-placement``, gets no baseline). Target: every lab ≤ 5 s wall.
"""

from __future__ import annotations

import os
import time

from benchmarks.common import figure, scratch_dir

__all__ = ["run"]


def run() -> dict:
    from kafkasim.scenarios import SCENARIOS, run_scenario

    out = {}
    with scratch_dir("kafkasim-bench-scenarios-") as d:
        for name in SCENARIOS:
            t0 = time.perf_counter()
            result = run_scenario(name, os.path.join(d, name), echo=lambda s: None)
            wall = time.perf_counter() - t0
            simulated_ms = result.get("simulated_ms")      # a lab that covers no clock time has none
            out[f"scenario_{name}_s"] = figure(
                wall, "s", baseline=None if simulated_ms is None else simulated_ms / 1000.0,
                baseline_name="simulated seconds covered (MockClock)", target="<= 5 s wall",
                higher_is_better=False)
    return out
