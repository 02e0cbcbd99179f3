"""kafkasim benchmarks: ``python -m benchmarks [NAME ...]`` (what ``make bench`` runs).

Each ``benchmarks/bench_<area>.py`` defines ``run() -> dict[str, Figure]``; the runner
imports every such module (or those named), prints one table, and writes
``bench-results.json`` as ``{"<name>": {"value": v, "unit": u, "baseline": b, "ratio": r}}``.
Figures that compare against a baseline measure it in the same run, because the
machines are shared and noisy: the ratio is the figure to read.
"""
