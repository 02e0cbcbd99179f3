"""Shared helpers for benchmarks: figures, best-of-N timing, a scratch directory."""

from __future__ import annotations

import shutil
import tempfile
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

__all__ = ["figure", "best_of", "scratch_dir"]


def figure(value: float, unit: str, baseline: Optional[float] = None,
           baseline_name: Optional[str] = None, target: Optional[str] = None,
           higher_is_better: bool = True) -> dict:
    """One bench-results.json entry; ``ratio`` = value / baseline (or baseline / value
    when lower is better, so a ratio above 1 always means 'better than the baseline')."""
    out = {"value": round(value, 4), "unit": unit}
    if baseline is not None:
        out["baseline"] = round(baseline, 4)
        if baseline > 0 and value > 0:
            out["ratio"] = round(value / baseline if higher_is_better else baseline / value, 3)
        if baseline_name:
            out["baseline_name"] = baseline_name
    if target:
        out["target"] = target
    return out


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """Smallest wall time in seconds over ``repeat`` runs of ``fn``."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@contextmanager
def scratch_dir(prefix: str = "kafkasim-bench-") -> Iterator[str]:
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
