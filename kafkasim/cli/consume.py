"""``kafkasim consume TOPIC``: read records like kafka-console-consumer (thin over consumer.console).

Runs until Ctrl-C, ``--max-messages`` or ``--timeout-ms`` without a message; then prints
``Processed a total of N messages`` to stderr and exits 0, as Kafka's tool does. Option
rules are Kafka's (``--offset`` needs ``--partition``; ``--partition`` excludes ``--group``;
``--offset`` excludes ``--from-beginning``). ``--isolation-level read_committed`` reads only
committed transactional records (default ``read_uncommitted``, as Kafka's tool).
``--share-group G`` consumes as a member of share group G (KIP-932; Kafka's
kafka-console-share-consumer), accepting each record shown; it excludes ``--group``,
``--partition``, ``--offset`` and ``--from-beginning`` (a share group starts where its group
config ``share.auto.offset.reset`` says).
"""

from __future__ import annotations

import json
import sys

from kafkasim.cli.common import add_broker_options, command, key_values, non_negative_int, open_broker, \
    positive_int
from kafkasim.errors import InvalidArgumentError, KafkaTimeoutError

__all__ = ["register", "ISOLATION_LEVELS"]

ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


def register(sub) -> None:
    p = command(sub, "consume",
                help="read records of a topic until Ctrl-C, as kafka-console-consumer does",
                example="kafkasim consume orders --from-beginning --property print.key=true "
                        "--property print.offset=true --max-messages 10",
                handler=_consume)
    p.add_argument("topic")
    p.add_argument("--group", default=None,
                   help="consume as a member of this group (commits on exit); without it every "
                        "partition is read and nothing is committed")
    p.add_argument("--share-group", default=None, metavar="GROUP",
                   help="consume as a member of this share group (KIP-932): records are shared with the "
                        "group's other members and each one shown is accepted (implicit acknowledgement)")
    p.add_argument("--partition", type=non_negative_int, default=None, metavar="P",
                   help="read only partition P (no group); starts at --offset, else the end "
                        "(the beginning with --from-beginning)")
    p.add_argument("--offset", default=None, metavar="OFFSET",
                   help="with --partition: earliest, latest or an offset to start at")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the log start when there is no committed offset (default: the end)")
    p.add_argument("--max-messages", "--max", dest="max", type=positive_int, default=None, metavar="N",
                   help="exit after N records (kafka-console-consumer's --max-messages)")
    p.add_argument("--timeout-ms", type=non_negative_int, default=None, metavar="T",
                   help="exit when no record arrives for T ms once partitions are assigned "
                        "(default: run until Ctrl-C)")
    p.add_argument("--property", action="append", default=[], metavar="NAME=VALUE",
                   help="formatter property, as kafka-console-consumer's: print.timestamp, "
                        "print.partition, print.offset, print.headers, print.key, print.value (true/false), "
                        "key.separator, line.separator, headers.separator, null.literal "
                        "(default: the value only)")
    p.add_argument("--isolation-level", default="read_uncommitted", metavar="LEVEL",
                   help="read_committed to filter out transactional records that are not committed; "
                        "read_uncommitted to read all records (default: read_uncommitted)")
    add_broker_options(p)
    p.add_argument("--json", action="store_true",
                   help="one JSON object per record (JSON lines): topic, partition, offset, timestamp, "
                        "key, value, headers; bytes that are not UTF-8 are base64 with *_base64 true")


def _consume(args) -> int:
    from kafkasim.consumer.console import MessageFormatter, consume, parse_offset, record_to_json

    # Kafka's option rules, checked before any I/O
    offset = None
    if args.share_group is not None:
        if args.group is not None:
            raise InvalidArgumentError("Options share-group and group cannot be specified together "
                                       "(a consumer group or a share group, not both).")
        for option, given in (("partition", args.partition is not None), ("offset", args.offset is not None),
                              ("from-beginning", args.from_beginning)):
            if given:
                raise InvalidArgumentError(f"Options share-group and {option} cannot be specified together "
                                           f"(a share group reads where its group config share.auto.offset.reset "
                                           f"says).")
        if args.isolation_level != "read_uncommitted":
            raise InvalidArgumentError("Options share-group and isolation-level cannot be specified together "
                                       "(a share group's isolation level is its group config share.isolation.level).")
    if args.partition is not None:
        if args.group is not None:
            raise InvalidArgumentError("Options group and partition cannot be specified together.")
        if args.from_beginning and args.offset is not None:
            raise InvalidArgumentError("Options from-beginning and offset cannot be specified together.")
        if args.offset is not None:
            offset = parse_offset(args.offset)
    elif args.offset is not None:
        raise InvalidArgumentError("The partition is required when offset is specified.")
    if args.isolation_level not in ISOLATION_LEVELS:
        raise InvalidArgumentError(f"Invalid value {args.isolation_level} for configuration isolation.level: "
                                   f"String must be one of: {', '.join(ISOLATION_LEVELS)}")
    formatter = MessageFormatter(key_values(args.property, "--property"))
    out = getattr(sys.stdout, "buffer", None)
    n = 0
    with open_broker(args) as broker:
        records = consume(broker, args.topic, group_id=args.group, partition=args.partition, offset=offset,
                          from_beginning=args.from_beginning, max_records=args.max,
                          timeout_ms=args.timeout_ms, isolation_level=args.isolation_level,
                          share_group_id=args.share_group,
                          on_wait=lambda text: print(f"kafkasim consume: {text}", file=sys.stderr, flush=True))
        try:
            for r in records:
                if args.json:
                    sys.stdout.write(json.dumps(record_to_json(r)) + "\n")
                elif out is not None:
                    out.write(formatter.format(r))
                else:
                    sys.stdout.write(formatter.format(r).decode("utf-8", "backslashreplace"))
                n += 1
                if n % 100 == 0 or args.max is not None:
                    sys.stdout.flush()
        except KafkaTimeoutError as exc:
            print(f"ERROR Error processing message, terminating consumer process: "
                  f"TimeoutException: {exc}", file=sys.stderr)
        except KeyboardInterrupt:
            pass                          # Ctrl-C: a clean exit, as Kafka's shutdown hook
        finally:
            records.close()               # leaves the group (commits first with --group, accepts with --share-group)
            sys.stdout.flush()
            print(f"Processed a total of {n} messages", file=sys.stderr)
    return 0
