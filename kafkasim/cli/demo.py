"""``kafkasim demo``: the main job that ``make demo`` runs (see kafkasim/demo/story.py).

Thin: parses the options and calls :func:`kafkasim.demo.run_demo`, which prints the story
(stdout), shows progress on an interactive stderr and returns the summary (``--json``).
"""

from __future__ import annotations

from kafkasim.cli.common import add_json, command, data_dir_of, emit

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "demo",
                help="run the whole story on a fresh data dir: a rack-aware cluster, real and in-process "
                     "clients, a group scaling out, a broker failure, a reassignment, the partition-count "
                     "change and mixed-client bug, and the Spark audits that find them",
                example="kafkasim demo --data-dir /tmp/kafkasim-demo --seed 7", handler=_demo)
    p.add_argument("--data-dir", default=None,
                   help="where the demo writes (default: $KAFKASIM_DATA_DIR or ./kafkasim-data, plus /demo); "
                        "wiped first, but only if empty or made by a previous demo")
    p.add_argument("--seed", type=int, default=42, help="seed of every random choice (default 42)")
    p.add_argument("--records", type=int, default=None,
                   help="in-process records of the shop's topic (default 30000; the cluster gets a third, "
                        "its real client a tenth of that)")
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
