"""The ``kafkasim`` command line: thin commands over the library.

Each command module in :data:`COMMAND_MODULES` defines ``register(subparsers)``,
adding its commands; a command's handler opens the library object, calls one
method and prints the result (``--json`` wherever data is printed). Library
errors (``KafkaSimError``) become a one-line message on stderr and exit code 1;
usage errors exit 2; Ctrl-C (SIGINT) ends any command with one line on stderr and exit
code 130, as a shell expects of an interrupted program (128 + SIGINT), never a traceback.
A command that runs until Ctrl-C by design (``consume``, ``serve``, ``view``) handles it
itself and exits 0, as Kafka's tools do. Only this package imports every layer.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional, Sequence

from kafkasim.errors import KafkaSimError

__all__ = ["main", "build_parser", "COMMAND_MODULES", "EXIT_INTERRUPTED"]

EXIT_INTERRUPTED = 130
"""Exit code of a command stopped by Ctrl-C: 128 + SIGINT, what a shell reports for it."""

COMMAND_MODULES = [
    "kafkasim.cli.topics",
    "kafkasim.cli.logtools",
    "kafkasim.cli.demo",
    "kafkasim.cli.audit",
    "kafkasim.cli.assign", "kafkasim.cli.replicas", "kafkasim.cli.cluster",
    "kafkasim.cli.consume", "kafkasim.cli.fault", "kafkasim.cli.features", "kafkasim.cli.groups", "kafkasim.cli.offsets",
    "kafkasim.cli.partition", "kafkasim.cli.produce",
    "kafkasim.cli.spark",
    "kafkasim.cli.scenario",
    "kafkasim.cli.serve", "kafkasim.cli.share_groups",
    "kafkasim.cli.transactions",
    "kafkasim.cli.view",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkasim",
        description="A Kafka partitioning simulator with a segmented on-disk log.",
        epilog="Example:\n  kafkasim --data-dir ./lab topics create orders --partitions 6\n"
               "Run 'kafkasim COMMAND --help' for each command's options and an example.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    # global options, accepted before the command too; the command's own value wins
    parser.add_argument("--data-dir", dest="global_data_dir", default=None, metavar="DIR",
                        help="data directory for every command (default: $KAFKASIM_DATA_DIR or ./kafkasim-data)")
    parser.add_argument("--json", dest="global_json", action="store_true", help="print JSON wherever data is printed")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


class _VersionAction(argparse.Action):
    """``--version``, computed only when asked for (it imports the record codec)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())
        parser.exit()


def _version() -> str:
    from kafkasim import __version__
    from kafkasim.records.record_batch import C_CODEC

    return f"kafkasim {__version__} (record codec: {'C' if C_CODEC else 'pure Python'})"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)     # as given: a warm client reruns it
    if getattr(args, "data_dir", None) is None and args.global_data_dir is not None:
        args.data_dir = args.global_data_dir
    if args.global_json and hasattr(args, "json"):
        args.json = True
    try:
        try:
            rc = args.handler(args)
        except KafkaSimError as exc:
            print(f"kafkasim {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        except BrokenPipeError:  # e.g. `kafkasim consume ... | head`
            return 0
    except KeyboardInterrupt:    # also a second Ctrl-C while the handler was cleaning up
        _interrupted(args.command)
        return EXIT_INTERRUPTED
    return int(rc or 0)


def _interrupted(command: str) -> None:
    """One line for Ctrl-C; a further Ctrl-C while printing it changes nothing."""
    try:
        print(f"kafkasim {command}: interrupted (Ctrl-C)", file=sys.stderr, flush=True)
    except (KeyboardInterrupt, OSError):
        pass
