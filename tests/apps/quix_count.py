"""A Quix Streams app counting records per key, run by tests/server/test_apps.py against
``kafkasim serve`` with ``.venv-apps/quix/bin/python`` (quixstreams pins its own
confluent-kafka, apart from the project's).

The count lives in Quix's state store (RocksDB under ``--state-dir``) with its changelog
topic on the broker; each input record emits ``{"count": n}`` under its key to the output
topic. At-least-once processing by default; ``--exactly-once`` runs the app with
``processing_guarantee="exactly-once"`` (a transactional producer; each checkpoint commits the
outputs, the changelog writes and the consumed offsets in one transaction). It stops after ``--expect`` outputs (``Application.run``'s
``count``) or ``--idle-timeout`` seconds without a new record, then prints one JSON line:
``{"outputs": N}``.

    .venv-apps/quix/bin/python tests/apps/quix_count.py --bootstrap 127.0.0.1:9092 \\
        --group counter --input words --output counts --state-dir /tmp/state --expect 300
"""

from __future__ import annotations

import argparse
import json

from quixstreams import Application


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--expect", type=int, required=True, help="stop after this many outputs")
    parser.add_argument("--idle-timeout", type=float, default=30.0)
    parser.add_argument("--exactly-once", action="store_true",
                        help='processing_guarantee="exactly-once" (default: at-least-once)')
    parser.add_argument("--loglevel", default="INFO")
    parser.add_argument("--session-timeout-ms", type=int, default=None,
                        help="the consumer's session.timeout.ms (librdkafka's default: 45000)")
    parser.add_argument("--transaction-timeout-ms", type=int, default=None,
                        help="the producer's transaction.timeout.ms (librdkafka's default: 60000)")
    args = parser.parse_args(argv)

    consumer_extra = {}
    if args.session_timeout_ms is not None:
        consumer_extra["session.timeout.ms"] = args.session_timeout_ms
    producer_extra = {}
    if args.transaction_timeout_ms is not None:
        producer_extra["transaction.timeout.ms"] = args.transaction_timeout_ms
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once" if args.exactly_once else "at-least-once",
        state_dir=args.state_dir,
        commit_interval=1.0,
        loglevel=args.loglevel,
        consumer_extra_config=consumer_extra or None,
        producer_extra_config=producer_extra or None,
    )
    source = app.topic(args.input, key_deserializer="str", value_deserializer="str")
    sink = app.topic(args.output, key_serializer="str", value_serializer="json")

    def count(value, state):
        n = state.get("count", 0) + 1
        state.set("count", n)
        return {"count": n}

    app.dataframe(source).apply(count, stateful=True).to_topic(sink)
    outputs = app.run(count=args.expect, timeout=args.idle_timeout)
    print(json.dumps({"outputs": len(outputs)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
