"""The ``kafkasim`` command line: thin commands over the library.

Each command module in :data:`COMMAND_MODULES` defines ``register(subparsers)``,
adding its commands; a command's handler opens the library object, calls one
method and prints the result (``--json`` wherever data is printed). Library
errors (``KafkaSimError``) become a one-line message on stderr and exit code 1;
usage errors exit 2. Only this package imports every layer.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional, Sequence

from kafkasim.errors import KafkaSimError

__all__ = ["main", "build_parser", "COMMAND_MODULES"]

COMMAND_MODULES = [
    "kafkasim.cli.topics",
    "kafkasim.cli.logtools",
    "kafkasim.cli.demo",
    "kafkasim.cli.audit",
    "kafkasim.cli.assign",
    "kafkasim.cli.consume", "kafkasim.cli.groups",
    "kafkasim.cli.partition", "kafkasim.cli.produce",
    "kafkasim.cli.scenario",
    "kafkasim.cli.serve",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkasim",
        description="A single-process Kafka partitioning simulator with a segmented on-disk log.",
        epilog="Example:\n  kafkasim topics create orders --partitions 6\n"
               "Run 'kafkasim COMMAND --help' for each command's options and an example.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.handler(args)
    except KafkaSimError as exc:
        print(f"kafkasim {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `kafkasim consume ... | head`
        return 0
    return int(rc or 0)
