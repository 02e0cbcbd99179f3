"""``kafkasim scenario list|run``: the teaching labs in scenarios/ (thin: look up, run, print).

``run NAME`` runs in ``<data dir>/scenarios/<NAME>`` (the data dir as for every command:
``--data-dir``, ``$KAFKASIM_DATA_DIR`` or ``./kafkasim-data``), wiped at start. Without
``--json`` the lab prints its tables as it goes; with ``--json`` only the result dict is
printed. Unknown scenarios and bad ``--param`` values are InvalidArgumentError (exit 1).
"""

from __future__ import annotations

import argparse
import os

from kafkasim.cli.common import add_data_dir, add_json, command, data_dir_of, emit
from kafkasim.cli.output import table

__all__ = ["register"]


def register(sub) -> None:
    sc = sub.add_parser("scenario", help="list and run the teaching labs (scenario scripts)",
                        description="Scenario scripts: small labs on partitioning and consumer groups.",
                        epilog="Example:\n  kafkasim scenario run hot_keys --seed 7 --param partitions=24",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ssub = sc.add_subparsers(dest="scenario_command", metavar="ACTION", required=True)

    p = command(ssub, "list", help="list the scenarios with a one-line description and their params",
                example="kafkasim scenario list --json", handler=_list)
    add_json(p)

    p = command(ssub, "run", help="run one scenario in <data dir>/scenarios/NAME (wiped first) "
                                  "and print what it shows",
                example="kafkasim scenario run group_scaling --seed 42 --json", handler=_run)
    p.add_argument("name", metavar="NAME", help="scenario name (see `kafkasim scenario list`)")
    p.add_argument("--seed", type=int, default=42, help="seed of every random choice (default 42)")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="override a scenario parameter, e.g. partitions=24 (repeatable)")
    add_data_dir(p)
    add_json(p)


def _list(args) -> int:
    from kafkasim.scenarios import list_scenarios

    emit(args, list_scenarios(), _list_text)
    return 0


def _list_text(rows: list[dict]) -> str:
    return table(["NAME", "DESCRIPTION"], [(r["name"], r["description"]) for r in rows])


def _run(args) -> int:
    from kafkasim.scenarios import SCENARIOS, parse_params, run_scenario, scenario_module

    name = args.name if args.name in SCENARIOS else args.name.replace("-", "_")
    if name not in SCENARIOS:
        scenario_module(args.name)              # InvalidArgumentError naming what was typed
    params = parse_params(name, args.param)
    data_dir = os.path.join(data_dir_of(args), "scenarios", name)
    echo = (lambda s: None) if args.json else print
    result = run_scenario(name, data_dir, seed=args.seed, echo=echo, **params)
    emit(args, result, lambda r: f"\n(data: {data_dir})")
    return 0
