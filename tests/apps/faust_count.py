"""A faust-streaming app counting records per key in a table, run by
tests/server/test_apps.py against ``kafkasim serve`` with ``.venv-apps/faust/bin/python``
(faust brings its own aiokafka range, apart from the project's).

Each record of the ``words`` topic adds one to ``counts[key]``: a faust Table (in-memory
store) whose changelog topic ``counter-counts-changelog`` is the durable copy a worker
recovers from when a rebalance hands it a partition. Run one worker per process::

    FAUST_COUNT_BOOTSTRAP=127.0.0.1:9092 FAUST_COUNT_DATADIR=/tmp/worker-a \\
        .venv-apps/faust/bin/python tests/apps/faust_count.py worker --loglevel=info

SIGTERM stops a worker cleanly (it leaves the group, so the others rebalance at once).
"""

from __future__ import annotations

import os

import faust

PARTITIONS = int(os.environ.get("FAUST_COUNT_PARTITIONS", "4"))

app = faust.App(
    "counter",
    broker=f"kafka://{os.environ.get('FAUST_COUNT_BOOTSTRAP', '127.0.0.1:9092')}",
    datadir=os.environ.get("FAUST_COUNT_DATADIR", "faust-count-data"),
    store="memory://",
    topic_partitions=PARTITIONS,
    web_enabled=False,
    broker_session_timeout=10.0,
    broker_heartbeat_interval=1.0,
    broker_commit_interval=0.5,
    table_standby_replicas=0,
)

words = app.topic("words", key_serializer="raw", value_serializer="raw", partitions=PARTITIONS)
counts = app.Table("counts", default=int, partitions=PARTITIONS, key_type=str, value_type=int)


@app.agent(words)
async def count(stream):
    async for key, _value in stream.items():
        counts[key.decode()] += 1


if __name__ == "__main__":
    app.main()
