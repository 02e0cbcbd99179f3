"""Options and output helpers shared by every CLI command.

The data dir comes from ``--data-dir``, else ``$KAFKASIM_DATA_DIR``, else
``./kafkasim-data``. Output goes through :func:`emit`: JSON with ``--json``,
else the command's text renderer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Sequence

from kafkasim.errors import InvalidArgumentError

__all__ = ["command", "add_data_dir", "add_broker_options", "add_json", "data_dir_of", "emit", "key_values", "open_broker", "existing_data_dir",
           "positive_int", "non_negative_int", "DEFAULT_DATA_DIR"]

DEFAULT_DATA_DIR = "./kafkasim-data"


def command(sub, name: str, *, help: str, example: str, handler: Callable, **kw) -> argparse.ArgumentParser:
    """Add a subcommand whose help ends with ``Example:`` and bind its handler."""
    p = sub.add_parser(name, help=help, description=help,
                       epilog=f"Example:\n  {example}",
                       formatter_class=argparse.RawDescriptionHelpFormatter, **kw)
    p.set_defaults(handler=handler)
    return p


def add_data_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=None,
                   help=f"broker data directory (default: $KAFKASIM_DATA_DIR or {DEFAULT_DATA_DIR})")


def add_broker_options(p: argparse.ArgumentParser) -> None:
    """``--data-dir`` and ``--bootstrap-server``: the options of every command that talks to
    a broker (embedded, or a running ``kafkasim serve``; see :func:`open_broker`)."""
    add_data_dir(p)
    p.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT",
                   help="talk to the Kafka-protocol server at HOST:PORT (e.g. a 'kafkasim serve') "
                        "instead of the data dir; without it, a server running on the data dir "
                        "(its .server.json) is used when it answers")


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def data_dir_of(args: argparse.Namespace) -> str:
    return args.data_dir or os.environ.get("KAFKASIM_DATA_DIR") or DEFAULT_DATA_DIR


def emit(args: argparse.Namespace, data: Any, text: Callable[[Any], str]) -> None:
    """Print ``data`` as JSON when ``--json`` was given, else ``text(data)``."""
    if getattr(args, "json", False):
        json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
        sys.stdout.write("\n")
    else:
        out = text(data)
        if out:
            print(out)


def key_values(items: Sequence[str], option: str) -> dict[str, str]:
    """``["a=1", "b=x=y"]`` → ``{"a": "1", "b": "x=y"}``; an item without ``=`` is an error naming it."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InvalidArgumentError(f"{option} {item!r}: expected NAME=VALUE")
        out[name] = value
    return out


def open_broker(args: argparse.Namespace, *, create: bool = False, read_only: bool = False):
    """The broker the command talks to (:func:`kafkasim.server.routing.open_broker`): the
    server at ``--bootstrap-server``; else the ``kafkasim serve`` running on the data dir
    when its address file names one that answers; else the data dir itself, embedded (a
    cluster's data dir as its :class:`~kafkasim.broker.cluster.Cluster`; a stale address
    file gets a one-line notice on stderr). Only commands that create things pass
    ``create=True``; for every other command a missing data dir is an error naming it, so
    a mistyped ``--data-dir`` never leaves a new data dir behind. ``read_only=True`` (commands
    that only read groups) reads a one-broker data dir no server holds from its files
    (:class:`kafkasim.view.readonly.ReadOnlyDataDir`): no lock, no fsync, a writer never blocked."""
    from kafkasim.server.routing import open_broker as open_any

    bootstrap = getattr(args, "bootstrap_server", None)
    if bootstrap:
        return open_any(None, bootstrap=bootstrap)
    path = data_dir_of(args) if create else existing_data_dir(args)
    if read_only:
        from kafkasim.server.address import server_for

        info, _ = server_for(path)
        if info is None and not os.path.exists(os.path.join(path, "meta", "cluster.json")):
            from kafkasim.view.readonly import ReadOnlyDataDir

            return ReadOnlyDataDir(path)       # no lock, no Log, no write, no fsync
    return open_any(path, notice=lambda text: print(f"kafkasim {args.command}: {text}", file=sys.stderr))


def existing_data_dir(args: argparse.Namespace) -> str:
    """The command's data dir, which must exist: an error naming it otherwise."""
    path = data_dir_of(args)
    if not os.path.isdir(path):
        raise InvalidArgumentError(
            f"data dir {path} does not exist (check --data-dir / $KAFKASIM_DATA_DIR; "
            f"'kafkasim topics create' makes a new one)")
    return path


def _int_at_least(low: int, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is not {what}")
        return value
    return parse


positive_int = _int_at_least(1, "a positive integer")
non_negative_int = _int_at_least(0, "zero or more")
