"""Run the benchmarks, print a table, write bench-results.json (see benchmarks/__init__.py)."""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import time
from pathlib import Path

import benchmarks


def main(argv: list[str]) -> int:
    names = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
    wanted = [a if a.startswith("bench_") else f"bench_{a}" for a in argv]
    unknown = [w for w in wanted if w not in names]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(names)}", file=sys.stderr)
        return 2
    results: dict[str, dict] = {}
    out = Path("bench-results.json")
    if wanted and out.exists():
        results = json.loads(out.read_text())
    for name in wanted or names:
        t0 = time.perf_counter()
        print(f"== {name}", flush=True)
        figures = importlib.import_module(f"benchmarks.{name}").run()
        results.update(figures)
        for k, f in figures.items():
            print(f"   {_row(k, f)}", flush=True)
        print(f"   ({time.perf_counter() - t0:.1f} s)", flush=True)
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"\n{'figure':34} {'value':>14} {'unit':12} {'baseline':>14} {'ratio':>7}  target")
    for k in sorted(results):
        print(_row(k, results[k]))
    print(f"\nwrote {out}")
    return 0


def _row(name: str, f: dict) -> str:
    base = f.get("baseline")
    ratio = f.get("ratio")
    return (f"{name:34} {f['value']:>14,.3f} {f['unit']:12} "
            f"{'' if base is None else format(base, ',.3f'):>14} "
            f"{'' if ratio is None else format(ratio, '.2f'):>7}  {f.get('target', '')}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
