"""``kafkasim features describe|upgrade|downgrade|disable``: kafka-features.sh over the broker's
features (``Broker.supported_features`` / ``finalized_features`` / ``update_features``).

Subcommands, options and messages are Kafka's ``FeatureCommand``'s: ``describe`` prints one
line per supported feature (``Feature: transaction.version\\tSupportedMinVersion: 0\\t...``,
level 0 when not finalized); ``upgrade``/``downgrade`` take ``--feature NAME=LEVEL``
(repeatable; ``downgrade --unsafe`` is an unsafe downgrade), ``disable`` takes ``--feature
NAME`` (level 0); ``--dry-run`` validates only. Each feature's outcome is one line
(``transaction.version was downgraded to 1.``, ``Could not upgrade transaction.version to 3.
<why>``); any failure ends with ``N out of M operation(s) failed.`` on stderr and exit 1.
Works on the data dir (embedded) or against a running ``kafkasim serve``
(``--bootstrap-server``, or the server holding the data dir: ApiVersions and UpdateFeatures).
"""

from __future__ import annotations

import argparse
import sys

from kafkasim.cli.common import add_broker_options, add_json, command, emit, open_broker
from kafkasim.errors import InvalidArgumentError, KafkaSimError

__all__ = ["register"]


def register(sub) -> None:
    fx = sub.add_parser("features", help="describe and change finalized feature levels (kafka-features.sh)",
                        description="This tool manages feature flags in Kafka (here: transaction.version, "
                                    "which tells clients to use KIP-890's transactions at level 2).",
                        epilog="Example:\n  kafkasim features downgrade --feature transaction.version=1",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    fsub = fx.add_subparsers(dest="features_command", metavar="COMMAND", required=True)

    p = command(fsub, "describe", help="describes the current active feature flags",
                example="kafkasim features describe", handler=_describe)
    add_broker_options(p)
    add_json(p)

    for op, help_text in (("upgrade", "upgrade one or more feature flags"),
                          ("downgrade", "downgrade one or more feature flags")):
        p = command(fsub, op, help=help_text, example=f"kafkasim features {op} --feature transaction.version="
                    f"{2 if op == 'upgrade' else 1}", handler=_update)
        p.add_argument("--feature", action="append", default=[], metavar="NAME=LEVEL",
                       help=f"a feature to {op}, with its new level (repeatable)")
        if op == "downgrade":
            p.add_argument("--unsafe", action="store_true",
                           help="perform this downgrade even if it may irreversibly destroy metadata")
        p.add_argument("--dry-run", action="store_true", help=f"validate this {op}, but do not perform it")
        add_broker_options(p)
        add_json(p)

    p = command(fsub, "disable", help="disable one or more feature flags (set their level to 0)",
                example="kafkasim features disable --feature transaction.version", handler=_update)
    p.add_argument("--feature", action="append", default=[], metavar="NAME", help="a feature to disable (repeatable)")
    p.add_argument("--unsafe", action="store_true",
                   help="disable this feature flag even if it may irreversibly destroy metadata")
    p.add_argument("--dry-run", action="store_true", help="perform a dry-run of this disable operation")
    add_broker_options(p)
    add_json(p)


def _describe(args) -> int:
    with open_broker(args) as b:
        supported, finalized, epoch = b.supported_features, b.finalized_features, b.finalized_features_epoch
    rows = [{"feature": name, "supported_min_version": lo, "supported_max_version": hi,
             "finalized_version_level": finalized.get(name, 0), "epoch": epoch if epoch >= 0 else None}
            for name, (lo, hi) in sorted(supported.items())]
    emit(args, rows, lambda rs: "\n".join(
        f"Feature: {r['feature']}\tSupportedMinVersion: {r['supported_min_version']}\t"
        f"SupportedMaxVersion: {r['supported_max_version']}\tFinalizedVersionLevel: "
        f"{r['finalized_version_level']}\tEpoch: {'-' if r['epoch'] is None else r['epoch']}" for r in rs))
    return 0


def _parse(args, op: str) -> dict[str, int]:
    """The ``--feature`` values as ``{name: level}``, with Kafka's messages for bad ones."""
    updates: dict[str, int] = {}
    for item in args.feature:
        if op == "disable":
            name, level = item.strip(), 0
        else:
            name, sep, text = item.partition("=")
            if not sep:
                raise InvalidArgumentError(f"Can't parse feature=level string {item}: equals sign not found.")
            name, text = name.strip(), text.strip()
            try:
                level = int(text)
                if not -32768 <= level <= 32767:
                    raise ValueError(text)
            except ValueError:
                raise InvalidArgumentError(f"Can't parse feature=level string {item}: "
                                           f"unable to parse {text} as a short.") from None
        if name in updates:
            raise InvalidArgumentError(f"Feature {name} was specified more than once.")
        updates[name] = level
    if not updates:
        raise InvalidArgumentError(f"You must specify at least one feature to {op}")
    return updates


def _update(args) -> int:
    op = args.features_command
    updates = _parse(args, op)
    kind = "upgrade" if op == "upgrade" else ("unsafe_downgrade" if args.unsafe else "safe_downgrade")
    error = None
    with open_broker(args) as b:
        try:
            b.update_features(updates, upgrade_types={name: kind for name in updates}, validate_only=args.dry_run)
        except KafkaSimError as exc:         # all or none: every feature shares the error, as Kafka's admin
            error = exc
    rows = [{"feature": name, "level": level, "error": None if error is None else _message(error)}
            for name, level in sorted(updates.items())]

    def text(rs) -> str:
        lines = []
        for r in rs:
            if r["error"] is not None:
                what = f"disable {r['feature']}" if op == "disable" else f"{op} {r['feature']} to {r['level']}"
                lines.append(f"{'Can not' if args.dry_run else 'Could not'} {what}. {r['error']}")
            else:
                done = "disabled." if op == "disable" else f"{op}d to {r['level']}."
                lines.append(f"{r['feature']}{' can be ' if args.dry_run else ' was '}{done}")
        return "\n".join(lines)
    emit(args, rows, text)
    if error is not None:
        print(f"{len(rows)} out of {len(rows)} operation(s) failed.", file=sys.stderr)
        return 1
    return 0


def _message(exc: BaseException) -> str:
    """The error's message without kafkasim's ``ClassName:`` prefix (the wire adds one)."""
    text = str(exc)
    prefix = f"{type(exc).__name__}: "
    return text[len(prefix):] if text.startswith(prefix) else text
