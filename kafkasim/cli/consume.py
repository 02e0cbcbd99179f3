"""``kafkasim consume TOPIC``: read records like kafka-console-consumer (thin over consumer.console)."""

from __future__ import annotations

import json
import sys

from kafkasim.cli.common import add_broker_options, command, non_negative_int, open_broker, positive_int

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "consume",
                help="read records of a topic (every partition, or as a member of --group)",
                example="kafkasim consume orders --group billing --from-beginning --max 10 --json",
                handler=_consume)
    p.add_argument("topic")
    p.add_argument("--group", default=None,
                   help="consume as a member of this group (commits on exit); without it every "
                        "partition is read and nothing is committed")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the log start when there is no committed offset (default: the end)")
    p.add_argument("--max-messages", "--max", dest="max", type=positive_int, default=None, metavar="N",
                   help="exit after N records (kafka-console-consumer's --max-messages)")
    p.add_argument("--timeout-ms", type=non_negative_int, default=1000, metavar="T",
                   help="exit when no record arrives for T ms once partitions are assigned (default 1000)")
    add_broker_options(p)
    p.add_argument("--json", action="store_true",
                   help="one JSON object per record (JSON lines): topic, partition, offset, timestamp, "
                        "key, value, headers; bytes that are not UTF-8 are base64 with *_base64 true")


def _consume(args) -> int:
    from kafkasim.consumer.console import consume, record_to_json, text_or_base64

    with open_broker(args) as broker:
        for r in consume(broker, args.topic, group_id=args.group, from_beginning=args.from_beginning,
                         max_records=args.max, timeout_ms=args.timeout_ms):
            if args.json:
                sys.stdout.write(json.dumps(record_to_json(r)) + "\n")
            else:
                key, _ = text_or_base64(r.key)
                value, _ = text_or_base64(r.value)
                sys.stdout.write(f"{r.partition}@{r.offset}\t{key if key is not None else ''}\t"
                                 f"{value if value is not None else ''}\n")
    return 0
