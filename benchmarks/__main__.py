"""Run the benchmarks, print a table, write bench-results.json (see benchmarks/__init__.py).

Each benchmark runs on its own: one that raises is reported as failed, with its error
(``{"bench_<name>": {"failed": true, "error": "..."}}`` in the results), and the others
still run. The results file is rewritten (atomically) after every benchmark, so the
figures measured before a crash or a Ctrl-C are kept. Exit code 1 when any failed.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Mapping

import benchmarks

__all__ = ["main", "run_benchmarks"]


def _registry() -> dict[str, Callable[[], dict]]:
    names = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
    return {name: (lambda name=name: importlib.import_module(f"benchmarks.{name}").run()) for name in names}


def main(argv: list[str], registry: Mapping[str, Callable[[], dict]] | None = None,
         out: Path = Path("bench-results.json")) -> int:
    registry = _registry() if registry is None else registry
    wanted = [a if a.startswith("bench_") else f"bench_{a}" for a in argv]
    unknown = [w for w in wanted if w not in registry]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(registry)}", file=sys.stderr)
        return 2
    results: dict[str, dict] = {}
    if wanted and out.exists():
        results = json.loads(out.read_text())
    failed = run_benchmarks({n: registry[n] for n in (wanted or registry)}, results, out)
    print(f"\n{'figure':34} {'value':>14} {'unit':12} {'baseline':>14} {'ratio':>7}  target")
    for k in sorted(results):
        print(_row(k, results[k]))
    print(f"\nwrote {out}")
    if failed:
        print(f"{len(failed)} benchmark(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def run_benchmarks(registry: Mapping[str, Callable[[], dict]], results: dict, out: Path) -> list[str]:
    """Run each benchmark of ``registry`` (name → function returning its figures) in turn,
    merging its figures into ``results`` and writing ``out`` after each one; a benchmark
    that raises is recorded as ``{name: {"failed": True, "error": ...}}`` and the rest
    still run. Returns the names of the failed ones."""
    failed = []
    for name, run in registry.items():
        t0 = time.perf_counter()
        print(f"== {name}", flush=True)
        results.pop(name, None)                 # a failure recorded by an earlier run
        try:
            figures = run()
        except Exception as exc:                # noqa: BLE001  (reported, and the others still run)
            failed.append(name)
            results[name] = {"failed": True, "error": f"{type(exc).__name__}: {exc}"}
            print(f"   FAILED: {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc(file=sys.stderr)
        else:
            results.update(figures)
            for k, f in figures.items():
                print(f"   {_row(k, f)}", flush=True)
        print(f"   ({time.perf_counter() - t0:.1f} s)", flush=True)
        _write(out, results)
    return failed


def _write(out: Path, results: dict) -> None:
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, out)


def _row(name: str, f: dict) -> str:
    if f.get("failed"):
        return f"{name:34} {'FAILED':>14} {f.get('error', '')}"
    base = f.get("baseline")
    ratio = f.get("ratio")
    return (f"{name:34} {f['value']:>14,.3f} {f['unit']:12} "
            f"{'' if base is None else format(base, ',.3f'):>14} "
            f"{'' if ratio is None else format(ratio, '.2f'):>7}  {f.get('target', '')}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
