"""``kafkasim scenario list|show|run``: the teaching labs in scenarios/ (thin: look up, run, print).

``list`` shows every lab in teaching order with its old names (aliases); ``show NAME``
prints the lab text (what you will see, why, the claim and the parameters); ``run NAME``
runs the lab in ``<data dir>/scenarios/<NAME>`` (the data dir as for every command:
``--data-dir``, ``$KAFKASIM_DATA_DIR`` or ``./kafkasim-data``), wiped at start, with the
options of :func:`kafkasim.scenarios.add_run_options` (``--seed``, ``--plot-dir``,
``--json [OUT]``, ``--param``). NAME may be a lab name, an alias or a module name. Unknown
labs and bad ``--param`` values are InvalidArgumentError, a claim that does not hold is
ClaimFailedError (exit 1 either way).
"""

from __future__ import annotations

import argparse
import os

from kafkasim.cli.common import add_data_dir, add_json, command, data_dir_of, emit
from kafkasim.cli.output import table

__all__ = ["register"]


def register(sub) -> None:
    sc = sub.add_parser("scenario", help="list, read and run the teaching labs",
                        description="The teaching labs: small runs on partitioning and consumer "
                                    "groups, each with its text, pictures and a claim it checks.",
                        epilog="Example:\n  kafkasim scenario run hot-partition --plot-dir pics",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ssub = sc.add_subparsers(dest="scenario_command", metavar="ACTION", required=True)

    p = command(ssub, "list", help="list the labs in teaching order with their old names (aliases)",
                example="kafkasim scenario list --json", handler=_list)
    add_json(p)

    p = command(ssub, "show", help="print a lab's text: what you will see, why, its claim and params",
                example="kafkasim scenario show rebalance-protocols", handler=_show)
    p.add_argument("name", metavar="NAME", help="lab name or alias (see `kafkasim scenario list`)")
    add_json(p)

    from kafkasim.scenarios import add_run_options      # light: the registry imports no lab

    p = command(ssub, "run", help="run one lab in <data dir>/scenarios/NAME (wiped first), print "
                                  "what it shows and check its claim",
                example="kafkasim scenario run consumer-scaling --seed 7 --plot-dir pics "
                        "--json result.json", handler=_run)
    p.add_argument("name", metavar="NAME", help="lab name or alias (see `kafkasim scenario list`)")
    add_run_options(p)
    add_data_dir(p)


def _list(args) -> int:
    from kafkasim.scenarios import list_scenarios

    emit(args, list_scenarios(), _list_text)
    return 0


def _list_text(rows: list[dict]) -> str:
    return table(["#", "NAME", "ALIASES", "DESCRIPTION"],
                 [(r["number"], r["name"], ", ".join(r["aliases"]) or None, r["description"])
                  for r in rows])


def _show(args) -> int:
    from kafkasim.scenarios import lab_text, resolve, scenario_module

    name = resolve(args.name)
    module = scenario_module(name)
    emit(args, {"name": name, "text": lab_text(name), "claim": module.CLAIM,
                "params": dict(module.PARAMS)}, lambda d: d["text"])
    return 0


def _run(args) -> int:
    from kafkasim.scenarios import resolve
    from kafkasim.scenarios._common import run_with_options

    name = resolve(args.name)
    data_dir = os.path.join(data_dir_of(args), "scenarios", name)
    run_with_options(name, data_dir, args)
    if args.json != "-":
        print(f"(data: {data_dir})")
    return 0
