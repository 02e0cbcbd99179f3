"""``kafkasim serve`` over a 3-broker cluster: what replication costs a real producer.

Figure (baseline measured in the same run, cases interleaved, best of N):

- ``serve_cluster_produce_records_per_s`` — a confluent-kafka ``Producer`` (acks=all, linger
  5 ms, idempotence off) sends 100,000 100-byte values with keys from 10,000 merchant ids to a
  4-partition topic with replication factor 3 and ``min.insync.replicas=2`` on a
  ``kafkasim serve --brokers 0:r1,1:r2,2:r3``, until ``flush()`` returns (every record on
  the leader and both followers' logs).

Baseline: the same producer and records against a one-broker ``kafkasim serve`` (replication
factor 1). Ratio = cluster / one broker. Measured 1.13 (233k vs 207k records/s, 2 shared
cores): the leaders are spread over three listeners, so the producer sends on three
connections at once, and a follower's copy is an in-process append, cheaper than the
extra parallelism gains.

Run: ``python -m benchmarks serve_cluster``. Takes about a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarks.bench_serve import PARTITIONS, _produce, _stop
from benchmarks.common import figure, scratch_dir

__all__ = ["run"]

N_RECORDS = 100_000
REPEAT = 3


def _start(data_dir: str, *extra: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "kafkasim", "serve", "--data-dir", data_dir,
                             "--listen", "127.0.0.1:0", "--json", "--num-partitions", str(PARTITIONS), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    info = json.loads(proc.stdout.readline())
    brokers = info.get("brokers") or [info]
    return proc, ",".join(f"{b['host']}:{b['port']}" for b in brokers)


def _create(bootstrap: str, topic: str, rf: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, rf, topic_configs={"min.insync.replicas": str(min(rf, 2))})])
    finally:
        admin.close()


def run() -> dict:
    keys = [b"merchant_%06d" % (i % 10_000) for i in range(N_RECORDS)]
    best = {"cluster": float("inf"), "single": float("inf")}
    with scratch_dir() as d:
        cluster, cluster_bootstrap = _start(os.path.join(d, "cluster"), "--brokers", "0:r1,1:r2,2:r3")
        single, single_bootstrap = _start(os.path.join(d, "single"))
        try:
            for i in range(REPEAT):
                for name, bootstrap, rf in (("cluster", cluster_bootstrap, 3), ("single", single_bootstrap, 1)):
                    topic = f"bench-{i}"
                    _create(bootstrap, topic, rf)
                    best[name] = min(best[name], _produce(bootstrap, topic, keys, {}))
        finally:
            _stop(cluster)
            _stop(single)
    return {
        "serve_cluster_produce_records_per_s": figure(
            N_RECORDS / best["cluster"], "records/s", N_RECORDS / best["single"],
            "the same confluent-kafka producer against a one-broker kafkasim serve (RF 1)"),
    }
