"""``kafkasim produce TOPIC``: kafka-console-producer over stdin (a thin call into producer.lines).

Lines are sent as they are read; see :mod:`kafkasim.producer.lines` for the formats and
for exactly what a failing line leaves behind (the summary names the line and says how
many records before it were acknowledged, and how many after it were written anyway;
the exit status is then 1).
"""

from __future__ import annotations

import sys
import uuid

from kafkasim.cli.common import add_broker_options, add_json, command, emit, key_values, open_broker

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "produce",
                help="produce stdin lines to a topic, as kafka-console-producer does",
                example="printf 'merchant_1:{\"amount\": 5}\\n' | "
                        "kafkasim produce orders --property parse.key=true --property key.separator=:",
                handler=_produce)
    p.add_argument("topic")
    p.add_argument("--property", action="append", default=[], metavar="NAME=VALUE",
                   help="line reader property, as kafka-console-producer's: parse.key, key.separator, "
                        "parse.headers, headers.delimiter, headers.separator, headers.key.separator, "
                        "null.marker, ignore.error (default: each line is a value with a null key)")
    p.add_argument("--producer-property", action="append", default=[], metavar="NAME=VALUE",
                   help="producer config, e.g. linger.ms=0 or batch.size=1 (Kafka's dotted names)")
    p.add_argument("--input-format", choices=["line", "json"], default="line",
                   help="line (default, Kafka's) or json: one {\"key\", \"value\", \"headers\", "
                        "\"partition\", \"timestamp\"} object per line")
    p.add_argument("--partition", type=int, default=None, help="send every record to this partition")
    p.add_argument("--partitioner", default="murmur2",
                   help="partitioner name (default murmur2, Kafka's Java default); see docs/partitioners.md")
    p.add_argument("--acks", "--request-required-acks", dest="acks", default="all",
                   choices=["0", "1", "all", "-1"], help="acks (default all)")
    p.add_argument("--client-id", default=None,
                   help="producer client id (default: kafkasim-produce-<random>, unique per run)")
    p.add_argument("--stamp-headers", action="store_true",
                   help="add the kafkasim.producer / kafkasim.seq audit headers (off by default)")
    add_broker_options(p)
    add_json(p)


def _produce(args) -> int:
    from kafkasim.config import from_kafka_names
    from kafkasim.producer.config import PRODUCER_CONFIGS
    from kafkasim.producer.lines import LineReader, produce_lines
    from kafkasim.producer.producer import Producer

    reader = LineReader(key_values(args.property, "--property"))   # bad properties fail before any I/O
    configs = from_kafka_names("producer", PRODUCER_CONFIGS,
                               key_values(args.producer_property, "--producer-property"))
    client_id = args.client_id or f"kafkasim-produce-{uuid.uuid4().hex[:8]}"
    stdin = getattr(sys.stdin, "buffer", sys.stdin)      # bytes when there are bytes: UTF-8 is checked per line
    broker = open_broker(args)
    try:
        producer = Producer(broker, **{"client_id": client_id, "partitioner": args.partitioner,
                                       "acks": args.acks, "stamp_headers": args.stamp_headers, **configs})
        try:
            summary = produce_lines(producer, args.topic, stdin, reader=reader,
                                    input_format=args.input_format, partition=args.partition)
        finally:
            producer.close()
    finally:
        broker.close()
    summary["client_id"] = client_id
    emit(args, summary, _text)
    err = summary["error"]
    if err:
        after = summary["after_error"]
        then = (f"{after} record(s) of later lines were already sent and were written too" if after
                else "nothing after it was sent")
        print(f"kafkasim produce: line {err['line']}: {err['type']}: {err['message']} "
              f"({summary['records']} record(s) before it were acknowledged; {then})",
              file=sys.stderr)
        return 1
    return 0


def _text(s: dict) -> str:
    lines = [f"Produced {s['records']} record(s) to {s['topic']} as {s['client_id']}"]
    for p, d in s["partitions"].items():
        lines.append(f"  partition {p}: {d['count']} record(s), offsets {d['first_offset']}..{d['last_offset']}")
    return "\n".join(lines)
