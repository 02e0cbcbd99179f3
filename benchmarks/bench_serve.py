"""``kafkasim serve`` benchmarks: real clients (confluent-kafka / librdkafka) over loopback.

Figures (baseline measured in the same run, cases interleaved and alternating which goes first,
best of N):

- ``serve_produce_records_per_s`` — a confluent-kafka ``Producer`` (acks=all, linger 5 ms,
  librdkafka's default batching, idempotence off) sends 300,000 100-byte values with keys from
  10,000 merchant ids to a 4-partition topic, until ``flush()`` returns: every record
  acknowledged by the server, i.e. appended to the data dir's logs.
- ``serve_consume_records_per_s`` — a confluent-kafka ``Consumer`` assigned every partition
  from the beginning reads the first 100,000 of them back (``consume(1000)`` batches).

- ``serve_consume_kafka_python_records_per_s`` — a kafka-python 3.0.12 ``KafkaConsumer``
  (assigned every partition from the beginning, ``poll(max_records=1000)``) reads the first
  100,000 of those records with incremental fetch sessions (KIP-227, its default). Baseline: the same consumer
  with ``enable_incremental_fetch_sessions=False`` (full fetches), against the same server in
  the same run. librdkafka never opens fetch sessions (its Fetch always carries session id 0,
  epoch -1), so the confluent-kafka figures do not depend on them.

- ``serve_produce_one_rule_records_per_s`` — the same producer run against a server with one
  fault rule installed that matches nothing it sends (kafkasim.faults; a Produce rule for a
  client id that never connects), so every request runs the hooks' matching path. Baseline:
  the same server with no rule (the idle path), cases interleaved in the same run, best of
  N, 300,000 records a run; issue 26 asks for a ratio >= 0.95 (the hooks cost nothing worth measuring when idle).
  That server is ``python -m benchmarks.fault_rule_server`` (``kafkasim serve`` through
  ``runner.serve(faults=...)``, the rule switched on and off over its stdin).

Baseline of the first two: the same clients, the same records, against librdkafka's in-process mock
cluster (``test.mock.num.brokers=1``: an in-memory Kafka inside the client library, reached
over loopback sockets too). Ratio = kafkasim serve / mock cluster (>1: faster than the mock).

The server runs as ``kafkasim serve`` in a subprocess on 127.0.0.1 (a free port), over a
scratch data dir. Run: ``python -m benchmarks serve``. Takes a minute or two.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from benchmarks.common import figure, scratch_dir

__all__ = ["run"]

N_RECORDS = 300_000
"""Records per produce/consume run: at 100,000 a run took 0.13 s against the mock cluster's
0.12 s and the ratio swung from 0.66 to 1.10 between runs on a shared machine; three times as
many average out more of the other tenants' bursts (the one-rule pair below found the same)."""
CONSUME_RECORDS = 100_000
"""Records per consume run (the first 100,000 of each topic): librdkafka's mock cluster keeps
only the newest ~165,000 of the 300,000 produced (it drops old message sets), so a consumer
from the beginning can count on 100,000; a consume run is 0.6 s, long enough to be steady."""
PARTITIONS = 4
REPEAT = 9
"""Rounds of the serve/mock pairs (best of each): both sides are bound by the client's own
Python loop, so a round's time is mostly the other tenants' bursts; at 5 rounds the produce
ratio of one unchanged build went from 0.78 to 1.20 between runs."""
RULE_REPEAT = 7
RULE_RECORDS = 300_000
"""Records per run of the one-rule comparison: 0.1 s runs swung its ratio from 0.84 to 1.03 on
a shared machine; a run three times as long averages out more of the other tenants' bursts."""
"""Rounds of the fault-rule pair: a run is a fraction of a second, so more rounds than the others."""
VALUE = b"x" * 100


def _keys() -> list[bytes]:
    return [b"merchant_%06d" % (i % 10_000) for i in range(N_RECORDS)]


def _start_server(data_dir: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "kafkasim", "serve", "--data-dir", data_dir,
                             "--listen", "127.0.0.1:0", "--json", "--num-partitions", str(PARTITIONS)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    info = json.loads(line)
    return proc, f"{info['host']}:{info['port']}"


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _start_fault_rule_server(data_dir: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.fault_rule_server", data_dir, str(PARTITIONS)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    info = json.loads(proc.stdout.readline())
    return proc, f"{info['host']}:{info['port']}"


def _rule(proc: subprocess.Popen, command: str) -> None:
    """``rule`` or ``clear`` on the fault rule server; waits for its ``ok``."""
    proc.stdin.write(command + "\n")
    proc.stdin.flush()
    answer = proc.stdout.readline().strip()
    if answer != "ok":
        raise RuntimeError(f"fault rule server answered {answer!r} to {command!r}")


def _produce(bootstrap: str, topic: str, keys: list[bytes], extra: dict) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                  "enable.idempotence": False, "queue.buffering.max.messages": 1_000_000, **extra})
    # connected, and the topic auto-created (4 partitions on both sides: the server runs with
    # --num-partitions 4, the mock cluster's default is 4) before the clock starts
    md = p.list_topics(topic, timeout=10)
    if len(md.topics[topic].partitions) != PARTITIONS:
        raise RuntimeError(f"{bootstrap}: {topic} has {len(md.topics[topic].partitions)} partitions")
    produce, poll = p.produce, p.poll
    t0 = time.perf_counter()
    for i, k in enumerate(keys):
        produce(topic, VALUE, k)
        if i % 10_000 == 0:
            poll(0)
    left = p.flush(60)
    elapsed = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not acknowledged by {bootstrap}")
    return elapsed


def _consume(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 120
    while got < n and time.perf_counter() < deadline:
        for m in c.consume(1000, 1.0):
            if not m.error():
                got += 1
    elapsed = time.perf_counter() - t0
    c.close()
    if got < n:
        raise RuntimeError(f"consumed {got} of {n} records from {bootstrap}")
    return elapsed


def _consume_kafka_python(bootstrap: str, topic: str, n: int, sessions: bool) -> float:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      fetch_max_wait_ms=100, enable_incremental_fetch_sessions=sessions)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 120
    while got < n and time.perf_counter() < deadline:
        for records in c.poll(timeout_ms=1000, max_records=1000).values():
            got += len(records)
    elapsed = time.perf_counter() - t0
    c.close()
    if got < n:
        raise RuntimeError(f"kafka-python consumed {got} of {n} records from {bootstrap}")
    return elapsed


def _mock_cluster():
    """A librdkafka mock cluster (kept alive by the returned producer) and its bootstrap."""
    from confluent_kafka import Producer

    holder = Producer({"test.mock.num.brokers": 1})
    md = holder.list_topics(timeout=10)
    broker = next(iter(md.brokers.values()))
    return holder, f"{broker.host}:{broker.port}"


def run() -> dict:
    keys = _keys()
    best = {"serve_produce": float("inf"), "serve_consume": float("inf"),
            "mock_produce": float("inf"), "mock_consume": float("inf"),
            "kp_sessions": float("inf"), "kp_full": float("inf")}
    with scratch_dir() as d:
        proc, serve_bootstrap = _start_server(os.path.join(d, "data"))
        holder, mock_bootstrap = _mock_cluster()
        try:
            pair = (("serve", serve_bootstrap), ("mock", mock_bootstrap))
            for i in range(REPEAT):          # interleaved, each first in every other round
                for name, bootstrap in (pair if i % 2 == 0 else pair[::-1]):
                    topic = f"bench-{i}"
                    best[f"{name}_produce"] = min(best[f"{name}_produce"], _produce(bootstrap, topic, keys, {}))
                    best[f"{name}_consume"] = min(best[f"{name}_consume"], _consume(bootstrap, topic, CONSUME_RECORDS))
                topic = f"bench-{i}"
                for case, sessions in (("kp_sessions", True), ("kp_full", False)):
                    best[case] = min(best[case], _consume_kafka_python(serve_bootstrap, topic, CONSUME_RECORDS, sessions))
        finally:
            del holder
            _stop(proc)
        proc, bootstrap = _start_fault_rule_server(os.path.join(d, "faults-data"))
        rule_keys = keys[:RULE_RECORDS]
        try:
            cases = (("no_rule", "clear"), ("one_rule", "rule"))
            for i in range(RULE_REPEAT):     # interleaved, each case first in every other round
                for case, command in (cases if i % 2 == 0 else cases[::-1]):
                    _rule(proc, command)
                    best[case] = min(best.get(case, float("inf")),
                                     _produce(bootstrap, f"rules-{case}-{i}", rule_keys, {}))
        finally:
            proc.stdin.close()
            _stop(proc)
    return {
        "serve_produce_records_per_s": figure(
            N_RECORDS / best["serve_produce"], "records/s", N_RECORDS / best["mock_produce"],
            "the same confluent-kafka producer against librdkafka's mock cluster (in memory)"),
        "serve_consume_records_per_s": figure(
            CONSUME_RECORDS / best["serve_consume"], "records/s", CONSUME_RECORDS / best["mock_consume"],
            "the same confluent-kafka consumer against librdkafka's mock cluster (in memory)"),
        "serve_produce_one_rule_records_per_s": figure(
            RULE_RECORDS / best["one_rule"], "records/s", RULE_RECORDS / best["no_rule"],
            "the same producer and server with no fault rule installed, same run",
            target="ratio >= 0.95 (issue 26: the fault hooks cost nothing when idle)"),
        "serve_consume_kafka_python_records_per_s": figure(
            CONSUME_RECORDS / best["kp_sessions"], "records/s", CONSUME_RECORDS / best["kp_full"],
            "the same kafka-python consumer without fetch sessions (full fetches), same server and run"),
    }
