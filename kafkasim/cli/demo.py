"""``kafkasim demo``: the main job that ``make demo`` runs (see kafkasim/demo.py)."""

from __future__ import annotations

from kafkasim.cli.common import add_json, command, data_dir_of, emit

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "demo", help="run the end-to-end demo on a fresh data dir and print a summary",
                example="kafkasim demo --data-dir /tmp/kafkasim-demo --seed 7", handler=_demo)
    p.add_argument("--data-dir", default=None,
                   help="where the demo writes (default: $KAFKASIM_DATA_DIR or ./kafkasim-data, plus /demo)")
    p.add_argument("--seed", type=int, default=42, help="seed of every random choice (default 42)")
    p.add_argument("--records", type=int, default=None, help="records to produce (default: the demo's own)")
    p.add_argument("--no-spark", action="store_true", help="skip the Spark audits")
    add_json(p)


def _demo(args) -> int:
    import os

    from kafkasim.demo import run_demo

    base = args.data_dir or os.path.join(data_dir_of(args), "demo")
    summary = run_demo(base, seed=args.seed, records=args.records, spark=not args.no_spark,
                       echo=None if args.json else print)
    emit(args, summary, lambda s: "")
    return 0
