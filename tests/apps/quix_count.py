"""A Quix Streams app counting records per key, run by tests/server/test_apps.py against
``kafkasim serve`` with ``.venv-apps/quix/bin/python`` (quixstreams pins its own
confluent-kafka, apart from the project's).

The count lives in Quix's state store (RocksDB under ``--state-dir``) with its changelog
topic on the broker; each input record emits ``{"count": n}`` under its key to the output
topic. At-least-once processing. It stops after ``--expect`` outputs (``Application.run``'s
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
    args = parser.parse_args(argv)

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        processing_guarantee="at-least-once",
        state_dir=args.state_dir,
        commit_interval=1.0,
        loglevel="INFO",
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
