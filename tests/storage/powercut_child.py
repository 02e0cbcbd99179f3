"""Child process of the power-cut test: a real broker running a seeded schedule until the power goes.

Usage: python powercut_child.py DATA_DIR SEED CYCLE CLOCK_MS [broker|cluster]

Opens :class:`kafkasim.broker.broker.Broker` on DATA_DIR (on the power-cut file system of
powercut_fs.py) with a MockClock at CLOCK_MS — or, with ``cluster``, a
:class:`kafkasim.broker.cluster.Cluster` of three brokers whose topics have two or three
replicas and whose produces use ``acks=all`` — and runs a schedule drawn from SEED: produce,
flush (the broker, or one log), clock moves with ``tick()`` (flush.ms, retention,
compaction), forced retention and compaction passes, DeleteRecords, topic creation, config
changes, partition growth, topic deletion, producer-id blocks, and clean close + reopen.
Small ``segment.bytes`` makes it roll often. It stops at the first error (after the power
cut every operation fails with EIO) or after MAX_STEPS.

Every line on stdout is one JSON array, written (and flushed) *before* an operation starts
(lower-case tags: what may or may not have happened) or *after* it returned (upper-case:
what the broker acknowledged):

- ``["I", topic, p, base, [[key, value], ...]]`` before a produce, with the offsets the
  records will get (values are strings, None for a tombstone);
  ``["A", topic, p, base, n]`` after it, on a topic whose ``flush.messages`` is 1
  (acknowledged durable), ``["W", topic, p, base, n]`` otherwise (written, not durable yet);
- ``["F"]`` after ``Broker.flush()`` or a clean ``close()`` (everything written is durable),
  ``["FP", topic, p]`` after one log's ``flush()``;
- ``["m"]`` before a retention/compaction pass (``tick`` or ``run_log_maintenance``),
  ``["M", {"topic/p": log start offset}]`` after it;
- ``["r", topic, p, offset]`` / ``["R", topic, p, log start]`` around DeleteRecords;
- ``["c", topic]`` / ``["C", topic, partitions, configs]`` around a topic creation,
  ``["a", topic, partitions, configs]`` / ``["AC", topic, partitions, configs]`` around a config change
  or a partition growth (the metadata the broker describes before / after),
  ``["d", topic]`` / ``["D", topic]`` around a deletion;
- ``["PID", id]`` after ``init_producer_id`` (a restarted broker must never hand it out again);
- ``["X", error]``: the error that stopped it.
"""

from __future__ import annotations

import json
import random
import sys
import warnings

from kafkasim.broker.broker import Broker
from kafkasim.broker.cluster import Cluster
from kafkasim.clock import MockClock
from kafkasim.records import record_batch as rb

MAX_STEPS = 2500
TOPICS = ["t0", "t1", "t2", "t3", "t4"]
KEYS = [f"k{i}" for i in range(8)]
DEFAULTS = {"segment.bytes": "1500", "index.interval.bytes": "100"}
BROKER_CONFIGS = {"log.retention.check.interval.ms": 60_000}
CLUSTER_BROKERS = [(0, "r1"), (1, "r2"), (2, "r3")]


def open_broker(data_dir: str, clock: MockClock, mode: str):
    """The broker (or cluster) the child runs and the test reopens."""
    if mode == "cluster":
        return Cluster(data_dir, CLUSTER_BROKERS, clock=clock, default_configs=DEFAULTS,
                       broker_configs=BROKER_CONFIGS)
    return Broker(data_dir, clock=clock, default_configs=DEFAULTS, broker_configs=BROKER_CONFIGS)


def emit(*fields) -> None:
    sys.stdout.write(json.dumps(list(fields)) + "\n")
    sys.stdout.flush()


def topic_configs(rng: random.Random) -> dict:
    policy = rng.choice(["delete", "delete", "compact", "compact,delete"])
    cfg = {"segment.bytes": str(rng.choice([1000, 1500, 4000])), "cleanup.policy": policy,
           "retention.bytes": str(rng.choice([-1, -1, 3000, 8000])),
           "retention.ms": str(rng.choice([-1, 600_000, 86_400_000]))}
    if rng.random() < 0.5:
        cfg["flush.messages"] = "1"
    if "compact" in policy:
        cfg.update({"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100000000000"})
    return cfg


class Schedule:
    def __init__(self, data_dir: str, seed: int, cycle: int, clock_ms: int, mode: str) -> None:
        self.rng = random.Random(seed)
        self.mode = mode
        self.cycle = cycle
        self.data_dir = data_dir
        self.clock = MockClock(clock_ms)
        self.n = 0
        self.open()

    def open(self) -> None:
        self.broker = open_broker(self.data_dir, self.clock, self.mode)

    def topics(self) -> list[str]:
        return self.broker.list_topics()

    def describe(self, topic: str) -> tuple[int, dict]:
        d = self.broker.describe_topic(topic)
        return len(d["partitions"]), d["configs"]

    # -- the steps -------------------------------------------------------------------------
    def produce(self) -> None:
        rng = self.rng
        topic = rng.choice(self.topics())
        parts, configs = self.describe(topic)
        p = rng.randrange(parts)
        base = self.broker.log(topic, p).log_end_offset
        now = self.clock.now_ms()
        recs = []
        for i in range(rng.randint(1, 6)):
            self.n += 1
            key = rng.choice(KEYS)
            value = None if "compact" in configs.get("cleanup.policy", "") and rng.random() < 0.08 else \
                f"c{self.cycle}.{self.n}." + "v" * rng.randint(0, 100)
            recs.append([key, value])
        emit("I", topic, p, base, recs)
        batch = rb.encode_batch(0, [(i, now, k.encode(), None if v is None else v.encode(), ())
                                    for i, (k, v) in enumerate(recs)])
        got = self.broker.produce(topic, p, batch, acks="all" if self.mode == "cluster" else 1)
        if got.base_offset != base:
            emit("X", f"{topic}-{p}: produce landed at {got.base_offset}, expected {base}")
            raise SystemExit(2)
        emit("A" if str(configs.get("flush.messages")) == "1" else "W", topic, p, base, len(recs))

    def flush(self) -> None:
        self.broker.flush()
        emit("F")

    def flush_one(self) -> None:
        topic = self.rng.choice(self.topics())
        p = self.rng.randrange(self.describe(topic)[0])
        self.broker.log(topic, p).flush()
        emit("FP", topic, p)

    def starts(self) -> dict:
        return {f"{t}/{p['partition']}": p["log_start_offset"]
                for t in self.topics() for p in self.broker.describe_topic(t)["partitions"]}

    def tick(self) -> None:
        self.clock.advance(self.rng.choice([1_000, 60_000, 300_000]))
        emit("m")
        self.broker.tick()
        emit("M", self.starts())

    def maintenance(self) -> None:
        emit("m")
        self.broker.run_log_maintenance()
        emit("M", self.starts())

    def delete_records(self) -> None:
        topic = self.rng.choice(self.topics())
        parts, configs = self.describe(topic)
        if "delete" not in configs.get("cleanup.policy", "delete"):
            return
        p = self.rng.randrange(parts)
        log = self.broker.log(topic, p)
        start, end = log.log_start_offset, log.log_end_offset
        if end <= start:
            return
        offset = self.rng.randint(start, min(end, start + 20))
        emit("r", topic, p, offset)
        got = self.broker.delete_records(topic, p, offset)
        emit("R", topic, p, got)

    def create_topic(self) -> None:
        free = [t for t in TOPICS if t not in self.topics()]
        if not free:
            return
        topic = self.rng.choice(free)
        parts, configs = self.rng.randint(1, 3), topic_configs(self.rng)
        emit("c", topic)
        self.broker.create_topic(topic, partitions=parts, configs=configs,
                                 replication_factor=self.rng.choice([2, 3]) if self.mode == "cluster" else 1)
        emit("C", topic, *self.describe(topic))

    def alter(self) -> None:
        topic = self.rng.choice(self.topics())
        before = self.describe(topic)
        if self.rng.random() < 0.4 and before[0] < 4:
            emit("a", topic, *before)
            self.broker.create_partitions(topic, before[0] + 1)
        else:
            change = self.rng.choice([{"flush.messages": "1"}, {"flush.messages": None},
                                      {"retention.bytes": str(self.rng.choice([2000, 6000, -1]))},
                                      {"segment.bytes": str(self.rng.choice([1000, 2500]))}])
            emit("a", topic, *before)
            self.broker.alter_topic_configs(topic, change)
        emit("AC", topic, *self.describe(topic))

    def delete_topic(self) -> None:
        if len(self.topics()) <= 1:
            return
        topic = self.rng.choice(self.topics())
        emit("d", topic)
        self.broker.delete_topic(topic)
        emit("D", topic)

    def producer_id(self) -> None:
        pid, _ = self.broker.init_producer_id()
        emit("PID", pid)

    def reopen(self) -> None:
        self.broker.close()
        emit("F")
        self.open()

    def run(self) -> None:
        steps = [(self.produce, 60), (self.flush, 8), (self.flush_one, 5), (self.tick, 7),
                 (self.maintenance, 4), (self.delete_records, 2), (self.create_topic, 3), (self.alter, 3),
                 (self.delete_topic, 1), (self.producer_id, 2), (self.reopen, 1)]
        funcs, weights = zip(*steps)
        while len(self.topics()) < 2:
            self.create_topic()
        for _ in range(MAX_STEPS):
            self.rng.choices(funcs, weights)[0]()


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")      # recovery reports arrive as RuntimeWarnings
    data_dir, seed, cycle, clock_ms = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    mode = argv[4] if len(argv) > 4 else "broker"
    try:
        Schedule(data_dir, seed, cycle, clock_ms, mode).run()
    except Exception as exc:          # the power cut (EIO), or a bug: the parent tells them apart
        emit("X", f"{type(exc).__name__}: {exc}")
        return 3
    emit("END")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
