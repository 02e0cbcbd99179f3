"""``kafkasim produce TOPIC``: send stdin lines (``key<TAB>value`` or JSON) through a Producer."""

from __future__ import annotations

import sys
import uuid

from kafkasim.cli.common import add_data_dir, add_json, command, data_dir_of, emit

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "produce",
                help="produce stdin lines (key<TAB>value, or JSON objects) to a topic",
                example="printf 'merchant_1\\t{\"amount\": 5}\\n' | kafkasim produce orders --json",
                handler=_produce)
    p.add_argument("topic")
    p.add_argument("--partition", type=int, default=None, help="send every record to this partition")
    p.add_argument("--partitioner", default="murmur2",
                   help="partitioner name (default murmur2, Kafka's Java default); see docs/partitioners.md")
    p.add_argument("--acks", default="all", choices=["0", "1", "all", "-1"], help="acks (default all)")
    p.add_argument("--client-id", default=None,
                   help="producer identity stamped in the kafkasim.producer header "
                        "(default: kafkasim-produce-<random>, unique per run)")
    p.add_argument("--no-stamp-headers", action="store_true",
                   help="do not add the kafkasim.producer / kafkasim.seq audit headers")
    add_data_dir(p)
    add_json(p)


def _produce(args) -> int:
    from kafkasim.broker import Broker
    from kafkasim.producer.lines import produce_lines
    from kafkasim.producer.producer import Producer

    client_id = args.client_id or f"kafkasim-produce-{uuid.uuid4().hex[:8]}"
    broker = Broker(data_dir_of(args))
    try:
        producer = Producer(broker, client_id=client_id, partitioner=args.partitioner,
                            acks=args.acks, stamp_headers=not args.no_stamp_headers)
        try:
            summary = produce_lines(producer, args.topic, sys.stdin, partition=args.partition)
        finally:
            producer.close()
    finally:
        broker.close()
    summary["client_id"] = client_id
    emit(args, summary, _text)
    return 0


def _text(s: dict) -> str:
    lines = [f"Produced {s['records']} record(s) to {s['topic']} as {s['client_id']}"]
    for p, d in s["partitions"].items():
        lines.append(f"  partition {p}: {d['count']} record(s), offsets {d['first_offset']}..{d['last_offset']}")
    return "\n".join(lines)
