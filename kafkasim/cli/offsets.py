"""``kafkasim get-offsets``: kafka-get-offsets, thin over kafkasim.admin.offsets."""

from __future__ import annotations

from kafkasim.cli.common import add_broker_options, add_json, command, emit, open_broker

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "get-offsets", help="the offset of each partition at a time (latest, earliest or ms)",
                example="kafkasim get-offsets --topic orders --time -2", handler=_get)
    p.add_argument("--topic", default=None, help="topic name or regular expression (default: every topic)")
    p.add_argument("--partitions", default=None, metavar="P,P", help="comma-separated partition ids")
    p.add_argument("--time", default="latest",
                   help="-1 or latest (default), -2 or earliest, or a timestamp in ms: the first offset "
                        "whose record timestamp is at or after it")
    p.add_argument("--exclude-internal-topics", action="store_true")
    add_broker_options(p)
    add_json(p)


def _get(args) -> int:
    from kafkasim.admin.offsets import get_offsets, parse_time

    parse_time(args.time)                  # a bad --time fails before the data dir is opened
    with open_broker(args) as b:
        rows = get_offsets(b, topic=args.topic, partitions=args.partitions, time=args.time,
                           exclude_internal=args.exclude_internal_topics)
    emit(args, rows, lambda rs: "\n".join(f"{r['topic']}:{r['partition']}:{r['offset']}" for r in rs))
    return 0
