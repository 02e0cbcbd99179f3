"""The main job ``make demo`` runs: one end-to-end story, from keys to a Spark audit.

``run_demo(data_dir, seed)`` wipes ``data_dir`` (only a previous demo's dir or an empty
one) and tells, on MockClocks and seeded RNGs:

- **the cluster** (``data_dir/cluster``, :mod:`kafkasim.demo.cluster_story`): steps 1–5 —
  3 brokers over racks, replicated Zipf traffic with ``acks=all`` from an in-process
  producer and from kafka-python through ``kafkasim serve``'s listeners
  (:mod:`kafkasim.demo.wire`), a group scaling out, a broker failure with no acknowledged
  loss, a reassignment after adding a broker (``balance.png``);
- **the shop's topic on one broker** (``data_dir/shop``): step 2 again with three
  Java-default in-process producers; group ``billing`` scales out (step 3); then
  step 6: ``orders`` grows from 6 to 8 partitions while traffic goes on (keys move) and a
  librdkafka-style producer (``consistent_random``) writes some orders (the mixed-client bug);
- **step 7**: Spark, reading only the segment files of ``data_dir/shop``, audits ordering,
  skew and lag in one session (``kafkasim audit all``): ``reports/audits.json`` and charts.
  (The Spark data source reads a one-broker data dir; the cluster's replica dirs are
  checked by the cluster itself: acked vs readable, balance.)

Every long step shows rich progress on an interactive stderr. Returns a JSON-able summary
(also written to ``reports/summary.json``) whose ``files`` lists the pictures and reports
written. The same seed gives the same summary, apart from ``wall_s``, ``phases_s`` (wall time per
long step) and paths. Not
thread-safe (one demo per data dir).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import threading
import time
from typing import Callable, Optional

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import InvalidArgumentError
from kafkasim.producer import Producer

from kafkasim.demo.traffic import VALUE_SERIALIZER, Merchants, group_member, owned_text, produce, scale_out

__all__ = ["run_demo", "MARKER"]

MARKER = ".kafkasim-demo"
START_MS = 1_700_000_000_000
TOPIC = "orders"
GROUP = "billing"


def run_demo(data_dir: str, *, seed: int = 42, records: Optional[int] = None, spark: bool = True,
             echo: Optional[Callable[[str], None]] = print, progress=None, spark_session=None) -> dict:
    """Run the story (module docstring); ``records`` is the shop topic's in-process traffic
    (default 30,000; the cluster gets a third of it, and the real client a tenth of that). The audits
    use a local SparkSession started on a thread at the beginning (overlapping the JVM's
    start with the story) and stopped at the end, unless ``spark_session`` is given (left running)."""
    from kafkasim.demo.cluster_story import run_cluster
    from kafkasim.spark_jobs.progress import Progress

    say = echo or (lambda _s: None)
    prog = progress or Progress()
    n = 30_000 if records is None else records
    if not isinstance(n, int) or isinstance(n, bool) or n < 100:
        raise InvalidArgumentError(f"the demo needs at least 100 records, got records={n!r}")
    t0 = time.perf_counter()
    _fresh(data_dir)
    reports = os.path.join(data_dir, "reports")
    os.makedirs(reports)
    summary: dict = {"data_dir": data_dir, "seed": seed, "records": n}

    early = _EarlySpark() if spark and spark_session is None else None
    try:
        say("The cluster")
        summary["cluster"] = run_cluster(os.path.join(data_dir, "cluster"), seed=seed, records=max(n // 3, 100),
                                         start_ms=START_MS, say=say, progress=prog)
        _plot_balance(os.path.join(reports, "balance.png"), summary["cluster"]["reassignment"])

        shop = os.path.join(data_dir, "shop")
        say(f"The shop's topic on one broker ({shop})")
        summary.update(_shop(shop, seed, n, say, prog))

        if spark:
            summary["audits"] = _audit(shop, reports, say, prog, spark_session or early)
    finally:
        if early is not None:
            early.stop()
    summary["files"] = sorted(os.path.join(reports, f) for f in os.listdir(reports)) \
        + [os.path.join(reports, "summary.json")]
    summary["wall_s"] = round(time.perf_counter() - t0, 1)
    summary["phases_s"] = {name: round(took, 1) for name, took in prog.timings}
    with open(os.path.join(reports, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, default=str)
    say("Pictures and reports written:")
    for path in summary["files"]:
        say(f"   {path}")
    return summary


def _shop(path: str, seed: int, n: int, say, prog) -> dict:
    out: dict = {}
    rng = random.Random(seed)
    clock = MockClock(START_MS)
    merchants = Merchants(rng)
    with Broker(path, clock=clock) as broker:
        broker.create_topic(TOPIC, partitions=6, configs={"segment.bytes": str(256 * 1024)})
        producers = [Producer(broker, client_id=f"checkout-{i}", clock=clock, seed=seed + i,
                              value_serializer=VALUE_SERIALIZER, stamp_headers=True) for i in range(3)]
        group = [group_member(broker, clock, TOPIC, GROUP, "billing-a"),
                 group_member(broker, clock, TOPIC, GROUP, "billing-b")]
        first = int(n * 0.7)
        with prog.phase("shop traffic", f"{first} records"):
            produce(producers, TOPIC, merchants, clock, first)
        say(f"2. topic {TOPIC} (6 partitions): three Java-default in-process producers sent {first} orders "
            "for 2,000 merchants (Zipf traffic)")

        with prog.phase("consumer group", "2 members, then 3"):
            g = scale_out(group, lambda: group_member(broker, clock, TOPIC, GROUP, "billing-c"), clock, TOPIC,
                          rounds=(20, 10))
        gens, before, after, consumed = g["generations"], g["owners_before"], g["owners_after"], g["consumed"]
        say(f"3. group {GROUP} (cooperative-sticky): 2 members, generation {gens[0]}: {owned_text(before)}; "
            f"scaled out to 3, generation {gens[1]}: {owned_text(after)}; {consumed} records processed and committed")

        broker.create_partitions(TOPIC, 8)
        clock.advance(300_000)   # past metadata.max.age.ms: the producers see 8 partitions
        late = n - first - n // 20
        rdkafka = Producer(broker, client_id="legacy-rdkafka", clock=clock, seed=seed,
                           partitioner="consistent_random", value_serializer=VALUE_SERIALIZER,
                           stamp_headers=True)
        with prog.phase("partition change", "6 → 8 partitions, a librdkafka-style producer"):
            produce(producers, TOPIC, merchants, clock, late)
            produce([rdkafka], TOPIC, merchants, clock, n // 20)
        say(f"6. grew {TOPIC} to 8 partitions and sent {late} more orders (keys move to new partitions); "
            f"a librdkafka-style producer (consistent_random) sent {n // 20}: the same keys, other partitions")
        for p in producers + [rdkafka]:
            p.close()
        for c in group:
            c.close()
        parts = broker.describe_topic(TOPIC)["partitions"]
    out["partitions"] = [{k: p[k] for k in ("partition", "log_end_offset", "segments", "size_bytes")}
                         for p in parts]
    out["generations"] = gens
    out["owners"] = {"before": before, "after": after}
    out["consumed"] = consumed
    say("   records per partition: " + ", ".join(f"p{p['partition']} {p['log_end_offset']}" for p in parts))
    return out


def _fresh(data_dir: str) -> None:
    if os.path.isdir(data_dir) and os.listdir(data_dir):
        if not os.path.exists(os.path.join(data_dir, MARKER)):
            raise InvalidArgumentError(
                f"refusing to wipe {data_dir!r}: it is not empty and was not made by the demo "
                f"(no {MARKER} file); pass an empty or new --data-dir")
        shutil.rmtree(data_dir)
    os.makedirs(data_dir, exist_ok=True)
    open(os.path.join(data_dir, MARKER), "w").close()


def _plot_balance(path: str, rep: dict) -> None:
    """PNG: replicas per broker before and after the reassignment, with the average drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    brokers = sorted(rep["after"]["replicas"])
    width = 0.4
    for shift, key, color in ((-width / 2, "before", "#C44E52"), (width / 2, "after", "#4C72B0")):
        values = [rep[key]["replicas"].get(b, 0) for b in brokers]
        ax.bar([i + shift for i in range(len(brokers))], values, width, color=color,
               label=f"{key} the reassignment")
    avg = sum(rep["after"]["replicas"].values()) / len(brokers)
    ax.axhline(avg, color="grey", linestyle="--", label=f"average {avg:.1f}")
    ax.set_xticks(range(len(brokers)))
    ax.set_xticklabels([f"broker {b}" for b in brokers])
    ax.set_ylabel("replicas held (partitions)")
    ax.set_title(f"Replicas per broker after broker {rep['added_broker']} joined: "
                 f"{rep['replica_moves']} moves, {rep['bytes_moved']:,} bytes copied")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


class _EarlySpark:
    """The demo's own SparkSession, started on a thread while the in-process story runs
    (the JVM's start is most of a small audit's time); :meth:`stop` stops it if it started."""

    def __init__(self) -> None:
        self.session = None
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._start, name="kafkasim-demo-spark", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        from kafkasim.spark_jobs.session import build_session
        try:
            self.session = build_session("kafkasim-demo", master="local[*]")
        except BaseException as exc:   # re-raised in the caller's thread by get()
            self.error = exc

    def get(self):
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.session

    def stop(self) -> None:
        self._thread.join()
        if self.session is not None:
            self.session.stop()


def _audit(shop: str, reports: str, say, prog, spark) -> dict:
    """``kafkasim audit all`` over the shop's topic: one session, one scan, three reports.
    ``spark`` is a SparkSession (left running) or the demo's :class:`_EarlySpark`."""
    from kafkasim.spark_jobs import audit_all, common, options

    say(f"7. Spark audits over the segment files of {shop} (no broker running): kafkasim audit all")
    args = common.job_parser("audit_all", "", "")
    options.all_audits(args)
    args = args.parse_args(["--data-dir", shop, "--topic", TOPIC, "--plot-dir", reports, "--max-details", "20"])
    topics = common.check_inputs(shop, [TOPIC])
    if isinstance(spark, _EarlySpark):
        with prog.phase("spark session", "started while the story ran"):
            spark = spark.get()
        spark.conf.set("spark.sql.shuffle.partitions", str(common.shuffle_partitions_for(
            common.input_bytes(shop, topics), spark.sparkContext.defaultParallelism)))
    rep = audit_all.build_report(spark, shop, topics, args, prog)
    common.write_json(rep, os.path.join(reports, "audits.json"))
    for line in audit_all.text(rep).splitlines():
        say("   " + line)
    return _findings(rep)


def _findings(rep: dict) -> dict:
    """What the audits found, in the terms of the story (the full report is audits.json)."""
    causes = rep["ordering"].get("causes", [])
    change = [c for c in causes if c["cause"] == "partition_count_change"]
    mixed = [c for c in causes if c["cause"] == "producer_partitioner"]
    return {"ordering_violations": rep["ordering"]["violations"],
            "max_over_avg": rep["skew"]["max_over_avg"], "gini": rep["skew"]["gini"],
            "partition_change": [{"from": c["from_partitions"], "to": c["to_partitions"],
                                  "moved_keys": c["explains"]["key_in_multiple_partitions"]} for c in change],
            "mixed_clients": [{"client_id": c["client_id"], "partitioners": c["partitioners"],
                               "records": c["records"]} for c in mixed],
            "causes": [c["cause"] for c in causes]}
