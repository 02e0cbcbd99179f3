"""``kafkasim audit all``: every figure it reports equals a brute-force recount over the decoded
records (tests/spark/recount.py: plain Python loops, no Spark) of a log with known faults."""

from __future__ import annotations

import json

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.spark_jobs import audit_all, lag, ordering, skew, transactions
from kafkasim.spark_jobs.common import EXIT_VIOLATIONS, shuffle_partitions_for
from kafkasim.producer.producer import LOST_REQUEST
from kafkasim.partitioning.partitioners import partition_for_key
from kafkasim.types import OffsetAndMetadata, TopicPartition
from . import logs, recount

pytestmark = pytest.mark.spark


def _strip(rep: dict) -> dict:
    return {k: v for k, v in rep.items() if k not in ("chart",)}


def _write_gapped(data_dir: str, topic: str = "gapped", partitions: int = 3) -> dict:
    """A lost request that is not retried (idempotence off, retries=0): the record with
    sequence 2 of key acct-3 never reaches the log, so its sequences read 0, 1, 3, 4."""
    clock = MockClock(logs.START_MS)

    def inject(tp, batch_no, attempt):
        return LOST_REQUEST if batch_no == 2 else None

    with Broker(data_dir, clock=clock) as b:
        b.create_topic(topic, partitions=partitions)
        with logs._producer(b, clock, enable_idempotence=False, acks=1, batch_size=1, retries=0,
                            max_in_flight_requests_per_connection=1, fault_injector=inject) as p:
            futures = [p.send(topic, key=b"acct-3", value=b"z%d" % i) for i in range(5)]
            p.flush()
    assert [f.exception is not None for f in futures] == [False, False, True, False, False]
    return {"sequence_gap": 1}


def _write_faulty_log(d: str) -> dict:
    """Four topics, each with a fault whose count follows from how it was injected
    (tests/spark/logs.py), and commits of two groups, one of them deleted (a tombstone)."""
    grown = logs.write_grown_with_librdkafka(d)                     # orders: keys moved, c-app's crc32
    logs.write_reordered(d, topic="reordered")                      # one sequence inversion
    logs.write_duplicated(d, topic="duplicated")                    # one duplicate
    _write_gapped(d)                                                # one sequence gap
    now = logs.START_MS + 10_000
    with Broker(d, clock=MockClock(now)) as b:
        orders = [TopicPartition(logs.TOPIC, p) for p in range(2)]
        b.offset_commit("billing", "", -1, {orders[0]: OffsetAndMetadata(2), orders[1]: OffsetAndMetadata(1)})
        b.delete_offsets("billing", [orders[1]])                    # a tombstone: no commit for orders-1
        dup = TopicPartition("duplicated", partition_for_key(b"acct-2", 3))
        gap = TopicPartition("gapped", partition_for_key(b"acct-3", 3))
        b.offset_commit("audit", "", -1, {dup: OffsetAndMetadata(7),     # its end: 6 records + the duplicate
                                          gap: OffsetAndMetadata(1)})
    return {"key_in_multiple_partitions": grown["moved_keys"], "sequence_inversion": 1, "sequence_gap": 1,
            "duplicate": 1, "partitioner_mismatch": grown["c_mismatches"], "input_order_inversion": 0}


def _approx(rows: list[dict], fields) -> list[dict]:
    return [{f: (pytest.approx(r[f]) if isinstance(r[f], float) else r[f]) for f in fields} for r in rows]


@pytest.mark.slow
def test_audit_all_reports_what_a_brute_force_recount_of_the_segments_finds(spark, tmp_path, capsys):
    d = str(tmp_path / "data")
    injected = _write_faulty_log(d)
    out, plots = tmp_path / "all.json", tmp_path / "plots"
    rc = audit_all.main(["--data-dir", d, "--json", str(out), "--plot-dir", str(plots)], spark=spark)
    text = capsys.readouterr().out
    rep = json.loads(out.read_text())
    assert rc == EXIT_VIOLATIONS and rep["verdict"] == "failed"
    assert "audit all: ordering failed, skew" in text

    data, metas = recount.read_partitions(d), recount.topic_meta(d)
    topics = sorted(t for t in metas if not t.startswith("__"))
    assert topics == ["duplicated", "gapped", "orders", "reordered"]

    # ordering: the violations by kind; the recount itself agrees with the injected faults
    counted = recount.ordering_violations(data, metas, topics)
    assert counted == injected
    assert rep["ordering"]["violations"] == counted
    assert rep["ordering"]["records"] == sum(len(r) for (t, _), r in data.items() if t in topics)

    # skew: per-partition counts and bytes, the ratios overall, per topic and in bytes, windows, hot keys
    sk, got = recount.skew(data, metas, topics, window_ms=60_000, top_k=10), rep["skew"]
    assert _approx(got["partitions"], ("topic", "partition", "records", "bytes", "share", "byte_share")) == \
        sk["partitions"]
    ratios = ("max_over_avg", "max_over_min", "drift_pct", "cv", "gini")
    assert got["records"] == sk["overall"]["total"]
    assert {k: got[k] for k in ratios} == {k: pytest.approx(v) for k, v in sk["overall"].items() if k in ratios}
    assert got["bytes"] == {k: pytest.approx(sk["bytes"][k]) for k in ("max_over_avg", "gini")}
    assert {t["topic"]: {k: t[k] for k in ("partitions", "total", *ratios)} for t in got["topics"]} == \
        {t: {k: pytest.approx(v) if isinstance(v, float) else v for k, v in s.items()} for t, s in sk["topics"].items()}
    assert _approx(got["windows"]["rows"], ("topic", "window_start", "records", "max_partition_records",
                                           "max_over_avg")) == sk["windows"]
    assert [(h["topic"], h["key"], h["records"], h["bytes"], h["partitions"]) for h in got["hot_keys"]] == \
        [(h["topic"], h["key"].decode(), h["records"], h["bytes"], h["partitions"]) for h in sk["hot_keys"]]
    assert [h["share"] for h in got["hot_keys"]] == [pytest.approx(h["share"]) for h in sk["hot_keys"]]

    # lag: per group and partition, and the partitions of a committed topic without a commit
    lg = recount.lag(data, metas, topics)
    assert [{k: r[k] for k in lg["partitions"][0]} for r in rep["lag"]["partitions"]] == lg["partitions"]
    assert rep["lag"]["no_commit"] == lg["no_commit"]
    assert [(r["topic"], r["partition"]) for r in lg["no_commit"] if r["group"] == "billing"] == \
        [(logs.TOPIC, p) for p in range(1, 6)]                      # orders-1's commit was deleted
    assert {g["group"]: g["lag_records"] for g in rep["lag"]["groups"]} == \
        {g: sum(r["lag_records"] for r in lg["partitions"] if r["group"] == g) for g in ("audit", "billing")}
    assert any(r["lag_records"] == 0 for r in lg["partitions"]) and any(r["lag_ms"] > 0 for r in lg["partitions"])

    # the wiring: each audit of audit all equals its job run alone (same options, same scan rules)
    alone = {}
    for name, job in (("ordering", ordering), ("skew", skew), ("lag", lag)):
        path = tmp_path / f"{name}.json"
        job.main(["--data-dir", d, "--json", str(path)], spark=spark)
        alone[name] = json.loads(path.read_text())
    capsys.readouterr()
    for name in ("ordering", "skew"):
        assert _strip(rep[name]) == alone[name], name
    assert {k: v for k, v in rep["lag"].items() if k != "history"} == \
        {k: v for k, v in alone["lag"].items() if k != "history"}
    assert (plots / "skew.png").read_bytes()[:4] == b"\x89PNG" and (plots / "lag.png").exists()
    assert {"checking inputs", "starting Spark", "reading", "auditing", "ordering", "skew", "lag", "transactions"} == \
        set(rep["timings_s"])
    # transactions: the log holds no transactional batch
    tx_alone = tmp_path / "transactions.json"
    transactions.main(["--data-dir", d, "--json", str(tx_alone)], spark=spark)
    capsys.readouterr()
    assert rep["transactions"] == json.loads(tx_alone.read_text())
    assert rep["transactions"]["verdict"] == "not enough data" and rep["transactions"]["open_transactions"] == []
    assert "transactions none ->" in audit_all.text(rep).splitlines()[-1]


def test_a_small_input_gets_the_small_session_settings_and_a_large_one_does_not():
    from kafkasim.spark_jobs.common import LOCAL_SCAN_BYTES, SMALL_INPUT_CONF, session_conf_for
    assert session_conf_for(LOCAL_SCAN_BYTES, 2) == SMALL_INPUT_CONF
    assert SMALL_INPUT_CONF["spark.sql.shuffle.partitions"] == "1"
    assert session_conf_for(1 << 30, 2) == {"spark.sql.shuffle.partitions": "8"}


def test_shuffle_partitions_follow_the_input_size():
    assert shuffle_partitions_for(1 << 20, 2) == 2                 # small log: one per core
    assert shuffle_partitions_for(1 << 30, 2) == 8                 # 1 GiB: one per 128 MiB
    assert shuffle_partitions_for(1 << 40, 2) == 200               # capped at Spark's default


class _Tty:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


def test_progress_names_each_phase_on_a_terminal_and_prints_nothing_elsewhere():
    from kafkasim.spark_jobs.progress import Progress
    for tty in (True, False):
        stream = _Tty(tty)
        progress = Progress(stream)
        with progress.phase("reading", "1 topic(s)"):
            pass
        with progress.phase("skew"):
            pass
        assert [name for name, _ in progress.timings] == ["reading", "skew"]
        if tty:
            import re
            shown = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", stream.text)   # rich's colours and cursor moves
            assert "✓ reading: 1 topic(s)" in shown and "✓ skew" in shown
        else:
            assert stream.text == ""
