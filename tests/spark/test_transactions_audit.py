"""Transactions audit: transforms on tiny DataFrames, and a consume-transform-produce log written
by the transactional Producer (commits, aborts, a coordinator timeout abort, a hanging
transaction, inputs emitted twice), every figure checked against a plain-Python recount of the
segment files and against a read_committed Consumer."""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict

import pytest
from pyspark.testing import assertDataFrameEqual

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.producer import Producer
from kafkasim.protocol.txn_log import TxnLogValue, encode_txn_key, encode_txn_value
from kafkasim.records.control import read_control_batch
from kafkasim.records.framing import ATTR_CONTROL, ATTR_TRANSACTIONAL, iter_batches
from kafkasim.records.record_batch import iter_records
from kafkasim.spark_jobs import transactions as tx
from kafkasim.spark_jobs.common import EXIT_VIOLATIONS
from kafkasim.storage import layout
from kafkasim.types import TopicPartition

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
BATCHES = ("topic string, partition int, base_offset long, last_offset long, records int, first_timestamp long, "
           "max_timestamp long, producer_id long, producer_epoch int, transactional boolean, control boolean, "
           "control_type int, coordinator_epoch int")


def _b(p, base, n, pid, *, txn=True, ts=0, ctrl=None):
    """A batch row: ``ctrl`` 1 COMMIT / 0 ABORT makes it a marker."""
    return ("t", p, base, base + n - 1, n, T0 + ts, T0 + ts, pid, 0, txn or ctrl is not None, ctrl is not None,
            ctrl, 0 if ctrl is not None else None)


TINY = [
    _b(0, 0, 2, 5, ts=0), _b(0, 2, 1, -1, txn=False, ts=1), _b(0, 3, 3, 6, ts=2),   # pid 5: committed, pid 6: aborted
    _b(0, 6, 1, 5, ctrl=1, ts=3), _b(0, 7, 2, 6, ts=4), _b(0, 9, 1, 6, ctrl=0, ts=5),
    _b(0, 10, 4, 7, ts=6),                                                           # pid 7: open from 10
    _b(0, 14, 1, 5, ts=7), _b(0, 15, 1, 5, ctrl=1, ts=20_000),                       # committed, above the LSO
]


def test_fates_follow_the_next_marker_of_the_same_producer_id(spark):
    got = tx.batch_fates(spark.createDataFrame(TINY, BATCHES)).select("base_offset", "fate", "marker_offset",
                                                                      "marker_timestamp")
    expected = spark.createDataFrame(
        [(0, "committed", 6, T0 + 3), (2, "non_transactional", None, None), (3, "aborted", 9, T0 + 5),
         (6, "control", None, None), (7, "aborted", 9, T0 + 5), (9, "control", None, None), (10, "open", None, None),
         (14, "committed", 15, T0 + 20_000), (15, "control", None, None)],
        "base_offset long, fate string, marker_offset long, marker_timestamp long")
    assertDataFrameEqual(got, expected)


def test_partition_summary_and_aborted_rows(spark):
    fates = tx.batch_fates(spark.createDataFrame(TINY, BATCHES))
    s = tx.partition_summary(fates).first().asDict()
    assert (s["log_start_offset"], s["log_end_offset"], s["last_stable_offset"]) == (0, 16, 10)
    # committed: 2 (pid 5) + 1 (plain) + 1 (pid 5 at 14, above the LSO); read_committed: the 3 below 10
    assert (s["committed_records"], s["read_committed_records"], s["non_transactional_records"]) == (4, 3, 1)
    assert (s["aborted_records"], s["open_records"], s["markers"]) == (5, 4, 3)
    assert (s["committed_transactions"], s["aborted_transactions"], s["open_transactions"]) == (2, 1, 1)
    ab = tx.aborted_by_producer(tx.aborted_transactions(fates)).collect()
    assert [(r["producer_id"], r["transactions"], r["records"], r["offsets"]) for r in ab] == [(6, 1, 5, [[3, 8]])]
    two = fates.unionByName(spark.createDataFrame([_b(0, 16, 2, 6), _b(0, 18, 1, 6, ctrl=0)], BATCHES)
                            .transform(tx.batch_fates))
    (r,) = tx.aborted_by_producer(tx.aborted_transactions(two), max_offsets=1).collect()
    assert (r["transactions"], r["records"], r["offsets"]) == (2, 7, [[3, 8]])


def test_open_transactions_are_hanging_past_the_recorded_timeout_or_the_option(spark):
    fates = tx.batch_fates(spark.createDataFrame(TINY, BATCHES))
    states = spark.createDataFrame([(7, "app", "Ongoing", 10_000, 7, T0, ["t-0"])], tx.STATES_SCHEMA)
    now = T0 + 6 + 10_001                      # the open batch is at T0 + 6: 10 001 ms open
    r = tx.open_transactions(fates, states, now).first().asDict()
    assert (r["first_offset"], r["records"], r["transactional_id"], r["state"]) == (10, 4, "app", "Ongoing")
    assert (r["open_ms"], r["limit_ms"], r["hanging"], r["coordinator_tracks"]) == (10_001, 10_000, True, True)
    assert not tx.open_transactions(fates, states, now - 2).first()["hanging"]
    assert not tx.open_transactions(fates, states, now, max_transaction_timeout_ms=60_000).first()["hanging"]
    unknown = tx.open_transactions(fates, spark.createDataFrame([(1, "x", "Empty", 1, 1, 0, [])], tx.STATES_SCHEMA),
                                   now).first()
    assert unknown["transactional_id"] is None and not unknown["coordinator_tracks"]
    assert unknown["limit_ms"] == tx.DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN * 60_000


def test_transaction_states_map_every_producer_id_to_the_last_state_of_its_id():
    v1 = TxnLogValue(3, 0, 60_000, 1, (("t", (1, 0)),), 10, 10)
    v2 = TxnLogValue(4, 0, 30_000, 4, (), 20, 10, previous_producer_id=3)
    gone = TxnLogValue(9, 0, 1_000, 5, (), 5, 5)
    recs = [(1, 1, encode_txn_key("a"), encode_txn_value(v2)), (1, 0, encode_txn_key("a"), encode_txn_value(v1)),
            (0, 0, encode_txn_key("b"), encode_txn_value(gone)), (0, 1, encode_txn_key("b"), None)]
    assert tx.transaction_states(recs) == [
        (3, "a", "CompleteCommit", 30_000, 4, 10, []), (4, "a", "CompleteCommit", 30_000, 4, 10, []),
        (9, "b", None, None, None, None, None)]
    assert tx.transaction_states([(1, 0, encode_txn_key("a"), encode_txn_value(v1))])[0][6] == ["t-0", "t-1"]


def test_inputs_named_twice_by_committed_output_are_duplicates(spark):
    h = lambda s: [("kafkasim-input", s)]  # noqa: E731
    recs = spark.createDataFrame(
        [("o", 0, 0, h(b"0:5"), 0), ("o", 0, 1, h(b"0:5"), 0), ("o", 0, 2, h(b"0:6"), 2),
         ("o", 0, 3, h(b"0:6"), 3), ("o", 0, 4, h(b"0:7"), 4), ("o", 0, 5, h(b"bad"), 4), ("o", 0, 6, [], 4)],
        "topic string, partition int, offset long, headers array<struct<key:string,value:binary>>, "
        "batch_base_offset long")
    fates = spark.createDataFrame(     # one transaction ended at T0 + 9 (markers share the time), one at T0 + 12
        [("o", 0, 0, "committed", 1, 0, T0 + 9), ("o", 0, 2, "committed", 1, 0, T0 + 9),
         ("o", 0, 3, "committed", 1, 0, T0 + 12), ("o", 0, 4, "aborted", 1, 0, T0 + 13)],
        "topic string, partition int, base_offset long, fate string, producer_id long, marker_epoch int, "
        "marker_timestamp long")
    refs = tx.input_refs(recs, fates)
    assert refs.count() == 4                    # the aborted batch's records are not committed output
    got = tx.duplicated_inputs(refs).select("in_partition", "in_offset", "records", "transactions", "outputs")
    expected = spark.createDataFrame([(0, 5, 2, 1, [[0, 0], [0, 1]]), (0, 6, 2, 2, [[0, 2], [0, 3]])],
                                     "in_partition int, in_offset long, records long, transactions long, "
                                     "outputs array<array<long>>")
    assertDataFrameEqual(got, expected)


# -- a whole log ------------------------------------------------------------------------------
def _write_pipeline(d: str, seed: int) -> dict:
    """orders (2 partitions, 40 plain records) → totals (3 partitions) by the transactional app
    ``eos-app``: chunks of inputs per transaction, some aborted (and redone), one input
    re-emitted in a later transaction, one emitted twice in one; ``eos-slow`` aborted by the
    coordinator's timeout; ``eos-fenced`` aborted by a new producer with its id (the marker
    carries the bumped epoch); ``eos-zombie`` left open past its timeout. Returns what the
    broker and a read_committed consumer say, for the test."""
    rng = random.Random(seed)
    clock = MockClock(T0)
    hdr = lambda ip, io: [("kafkasim-input", f"{ip}:{io}".encode())]  # noqa: E731
    with Broker(d, clock=clock) as b:
        b.create_topic("orders", 2)
        b.create_topic("totals", 3)
        with Producer(b, clock=clock, linger_ms=0) as p:
            for i in range(40):
                p.send("orders", key=b"k%d" % (i % 7), value=b"v%d" % i, partition=i % 2)
                clock.advance(rng.randint(1, 20))
        inputs = [(i % 2, i // 2) for i in range(40)]
        app = Producer(b, transactional_id="eos-app", clock=clock, linger_ms=0)
        app.init_transactions()
        k, n_txn, done = 0, 0, []
        while k < len(inputs):
            chunk = inputs[k:k + rng.randint(2, 5)]
            commit = rng.random() >= 0.3
            app.begin_transaction()
            emit = list(chunk)
            if commit and n_txn == 3:
                emit.append(done[0])                       # reprocessed in a later transaction
            if commit and n_txn == 5:
                emit.append(chunk[0])                      # emitted twice in one transaction
            for ip, io in emit:
                app.send("totals", value=b"t", partition=rng.randrange(3), headers=hdr(ip, io))
                clock.advance(rng.randint(1, 30))
            if commit:
                app.commit_transaction()
                done += chunk
                k += len(chunk)
                n_txn += 1
            else:
                app.abort_transaction()
            if n_txn == 2 and commit:                      # a producer the coordinator times out
                slow = Producer(b, transactional_id="eos-slow", clock=clock, linger_ms=0, transaction_timeout_ms=2_000)
                slow.init_transactions()
                slow.begin_transaction()
                slow.send("totals", value=b"s", partition=1, headers=hdr(0, 0))
                slow.flush()
                clock.advance(11_000)                      # past the coordinator's 10 s abort check interval
                assert b.tick_transactions() == 1
        fenced = Producer(b, transactional_id="eos-fenced", clock=clock, linger_ms=0)
        fenced.init_transactions()
        fenced.begin_transaction()
        fenced.send("totals", value=b"f", partition=2, headers=hdr(1, 2))
        fenced.flush()
        clock.advance(5)
        Producer(b, transactional_id="eos-fenced", clock=clock, linger_ms=0).init_transactions()  # aborts it
        zombie = Producer(b, transactional_id="eos-zombie", clock=clock, linger_ms=0, transaction_timeout_ms=5_000)
        zombie.init_transactions()
        zombie.begin_transaction()
        zp = rng.randrange(3)
        zombie.send("totals", value=b"z", partition=zp, headers=hdr(1, 0))
        zombie.send("totals", value=b"z", partition=zp, headers=hdr(1, 1))
        zombie.flush()
        clock.advance(rng.randint(6_000, 9_000))           # past its 5 s timeout; nobody ticks
        app.begin_transaction()
        app.send("totals", value=b"t", partition=(zp + 1) % 3, headers=hdr(0, 0))   # one more reprocessed input
        app.commit_transaction()
        desc = {x.transactional_id: x for x in
                b.describe_transactions(["eos-app", "eos-slow", "eos-fenced", "eos-zombie"])}
        seen = {}
        for p in range(3):
            c = Consumer(b, isolation_level="read_committed", auto_offset_reset="earliest")
            c.assign([TopicPartition("totals", p)])
            seen[p] = sum(len(v) for v in c.poll(max_records=100_000).values())
            c.close()
    return {"describe": desc, "read_committed": seen, "zombie_partition": zp, "now": clock.now_ms()}


def _recount(d: str) -> dict:
    """The audit's figures by brute force over the segment files (kafkasim.records only)."""
    out = {}
    for pd, path in layout.list_partitions(d):
        if pd.topic.startswith("__"):
            continue
        batches = []
        for _, seg in layout.list_segments(path):
            with open(seg, "rb") as f:
                buf = f.read()
            for pos, h in iter_batches(buf, where=seg):
                ctrl = read_control_batch(buf, pos, h) if h.attributes & ATTR_CONTROL else None
                batches.append((h, ctrl, [] if ctrl else list(iter_records(buf, pos, h))))
        fate, pending = {}, defaultdict(list)
        for h, ctrl, _ in batches:
            if ctrl:
                for bo in pending.pop(h.producer_id, []):
                    fate[bo] = (ctrl[0].type_name, h.base_offset)
            elif h.attributes & ATTR_TRANSACTIONAL:
                pending[h.producer_id].append(h.base_offset)
            else:
                fate[h.base_offset] = ("PLAIN", None)
        open_ = {bo: pid for pid, bos in pending.items() for bo in bos}
        end = batches[-1][0].last_offset + 1
        lso = min(open_, default=end)
        data = [(h, recs) for h, ctrl, recs in batches if not ctrl]
        committed = [(h, r) for h, recs in data for r in recs if h.base_offset not in open_
                     and fate[h.base_offset][0] in ("COMMIT", "PLAIN")]
        aborted = defaultdict(list)
        for h, recs in data:
            if h.base_offset not in open_ and fate[h.base_offset][0] == "ABORT":
                aborted[h.producer_id] += [r.offset for r in recs]
        opened = defaultdict(list)
        for h, recs in data:
            if h.base_offset in open_:
                opened[h.producer_id].append(h)
        out[(pd.topic, pd.partition)] = {
            "lso": lso, "end": end, "committed": len(committed),
            "read_committed": sum(1 for h, _ in committed if h.base_offset < lso),
            "aborted": dict(aborted), "open": dict(opened),
            "inputs": Counter(dict(r.headers).get("kafkasim-input") for _, r in committed),
            "newest": max(h.max_timestamp for h, _, _ in batches)}
    return out


def test_the_audit_reports_what_a_recount_of_the_segments_finds(spark, tmp_path):
    d = str(tmp_path / "data")
    made = _write_pipeline(d, seed=23)
    out = tmp_path / "txn.json"
    rc = tx.main(["--data-dir", d, "--input-topic", "orders", "--output-topic", "totals", "--json", str(out)],
                 spark=spark)
    rep = json.loads(out.read_text())
    want = _recount(d)
    assert rep["topics"] == ["orders", "totals"] and rc == EXIT_VIOLATIONS
    parts = {(p["topic"], p["partition"]): p for p in rep["partitions"]}
    assert set(parts) == set(want)
    for tp, w in want.items():
        p = parts[tp]
        assert (p["last_stable_offset"], p["log_end_offset"]) == (w["lso"], w["end"]), tp
        assert (p["committed_records"], p["read_committed_records"]) == (w["committed"], w["read_committed"]), tp
        assert p["aborted_records"] == sum(len(v) for v in w["aborted"].values()), tp
        assert p["open_records"] == sum(h.record_count for hs in w["open"].values() for h in hs), tp
    for part, n in made["read_committed"].items():       # a read_committed consumer agrees
        assert parts[("totals", part)]["read_committed_records"] == n
    # aborted records per producer id, with their offsets
    got_ab = {(a["topic"], a["partition"], a["producer_id"]):
              sorted(o for x, y in a["offsets"] for o in range(x, y + 1)) for a in rep["aborted"]}
    assert got_ab == {(*tp, pid): sorted(offs) for tp, w in want.items() for pid, offs in w["aborted"].items()}
    slow_pid = made["describe"]["eos-slow"].producer_id
    assert any(pid == slow_pid for (_, _, pid) in got_ab)        # the coordinator's timeout abort
    fenced_pid = made["describe"]["eos-fenced"].producer_id
    assert any(pid == fenced_pid for (_, _, pid) in got_ab)      # ended by the bumped epoch's marker
    assert len({pid for (_, _, pid) in got_ab}) == 3
    # the hanging transaction, found by its transactional id
    zd = made["describe"]["eos-zombie"]
    (o,) = rep["open_transactions"]
    zp = made["zombie_partition"]
    zh = want[("totals", zp)]["open"][zd.producer_id][0]        # its first batch there
    assert (o["topic"], o["partition"], o["producer_id"], o["first_offset"]) == ("totals", zp, zd.producer_id,
                                                                               want[("totals", zp)]["lso"])
    assert (o["transactional_id"], o["state"], o["hanging"], o["coordinator_tracks"]) == (
        "eos-zombie", "Ongoing", True, True)
    newest = max(w["newest"] for w in want.values())
    assert rep["now_source"] == "newest timestamp in the log" and rep["now_ms"] == newest == made["now"]
    assert (o["open_ms"], o["limit_ms"]) == (newest - zh.base_timestamp, 5_000)
    assert rep["violations"]["hanging_transaction"] == 1
    assert [c["cause"] for c in rep["causes"]][0] == "transaction_timeout_not_enforced"
    # inputs named by more than one committed output record
    named = want[("totals", 0)]["inputs"] + want[("totals", 1)]["inputs"] + want[("totals", 2)]["inputs"]
    dups = {k: n for k, n in named.items() if k is not None and n > 1}
    e = rep["exactly_once"]
    assert {f"{x['in_partition']}:{x['in_offset']}".encode(): x["records"] for x in e["details"]} == dups
    assert e["duplicated_inputs"] == rep["violations"]["input_consumed_twice"] == len(dups) >= 2
    assert e["duplicate_records"] == sum(n - 1 for n in dups.values())
    assert e["committed_output_records"] == sum(want[("totals", p)]["committed"] for p in range(3))
    assert e["inputs_committed"] == 40 and e["inputs_not_found"] == 0 and e["inputs_without_output"] == 0
    assert {c["cause"] for c in rep["causes"]} >= {"input_reprocessed_across_transactions",
                                                    "input_emitted_twice_in_one_transaction"}


def test_same_seed_same_report_and_an_explicit_now(spark, tmp_path):
    reps = []
    for name in ("a", "b"):
        d = str(tmp_path / name)
        _write_pipeline(d, seed=7)
        out = tmp_path / f"{name}.json"
        tx.main(["--data-dir", d, "--output-topic", "totals", "--json", str(out), "--now-ms", str(T0 + 3_600_000),
                 "--max-transaction-timeout", "1"], spark=spark)
        reps.append(json.loads(out.read_text()))
    assert reps[0] == reps[1]
    (o,) = reps[0]["open_transactions"]
    assert (reps[0]["now_source"], reps[0]["now_ms"]) == ("--now-ms", T0 + 3_600_000)
    assert o["limit_ms"] == 60_000 and o["hanging"] and 3_500_000 < o["open_ms"] < 3_600_000
    assert o["transactional_id"] == "eos-zombie" and reps[0]["exactly_once"]["duplicated_inputs"] >= 2


def test_cli_refuses_an_input_topic_without_an_output_topic(tmp_path, capsys):
    from kafkasim.cli import main
    d = str(tmp_path / "data")
    with Broker(d, clock=MockClock()) as b:
        b.create_topic("orders", partitions=1)
    assert main(["audit", "transactions", "--data-dir", d, "--input-topic", "orders"]) == 1
    assert "--input-topic orders needs --output-topic" in capsys.readouterr().err
    assert main(["audit", "transactions", "--data-dir", d, "--output-topic", "nope"]) == 1
    assert "nope" in capsys.readouterr().err


def test_the_batches_mode_reads_the_same_rows_in_spark_tasks_as_in_the_driver(spark, tmp_path):
    from kafkasim.spark_jobs.datasource import read_local_table
    d = str(tmp_path / "data")
    _write_pipeline(d, seed=3)
    cols = [c.split(" ")[0] for c in BATCHES.split(", ")]
    in_tasks = spark.read.format("kafkasim").option("mode", "batches").option("topics", "totals") \
        .option("maxPartitionBytes", "0").load(d)
    local = read_local_table(d, ["totals"], mode="batches").to_pylist()
    assert sorted(tuple(r) for r in in_tasks.select(*cols).collect()) == \
        sorted(tuple(r[c] for c in cols) for r in local)
    markers = [r for r in local if r["control"]]
    assert markers and {r["control_type"] for r in markers} == {0, 1}
    assert all(r["records"] == 1 and r["transactional"] for r in markers)


def test_report_names_a_transaction_the_coordinator_lost_and_prints_it():
    row = {"topic": "t", "partition": 2, "producer_id": 9, "producer_epoch": 0, "first_offset": 40, "last_offset": 41,
           "records": 2, "first_timestamp": T0, "last_timestamp": T0, "transactional_id": None, "state": None,
           "transaction_timeout_ms": None, "coordinator_start_ms": None, "coordinator_tracks": False,
           "open_ms": 1_000_000, "idle_ms": 1_000_000, "limit_ms": 900_000, "hanging": True}
    part = {"topic": "t", "partition": 2, "log_start_offset": 0, "log_end_offset": 42, "last_stable_offset": 40,
            "committed_records": 30, "read_committed_records": 30, "transactional_records": 30,
            "non_transactional_records": 0, "aborted_records": 0, "open_records": 2, "markers": 10,
            "committed_transactions": 10, "aborted_transactions": 0, "open_transactions": 1, "newest_timestamp": T0}
    rep = tx.report([part], [], [row], now_ms=T0 + 1_000_000, now_source="--now-ms")
    assert rep["verdict"] == "failed" and rep["violations"] == {"hanging_transaction": 1, "input_consumed_twice": 0}
    assert rep["causes"] == [{"cause": "coordinator_lost_transaction", "transactional_id": None, "producer_id": 9,
                              "partitions": ["t-2@40"], "explains": {"hanging_transaction": 1}}]
    out = tx.text(rep)
    assert "HANGING: t-2 from offset 40 producer id 9" in out and "no transactional id" in out
    calm = tx.report([dict(part, open_records=0, markers=0)], [], [], now_ms=T0, now_source="--now-ms")
    assert calm["verdict"] == "not enough data" and calm["causes"] == []
    # a log without transactions says so, in words that do not read as a lack of data
    assert calm["no_transactions"] and "no transactional batch in the audited topics: nothing to judge" in tx.text(calm)
    assert "not enough data" not in tx.text(calm)


@pytest.mark.slow
def test_the_audit_agrees_with_the_exactly_once_lab_on_every_guarantee(spark, tmp_path):
    from kafkasim.scenarios import exactly_once
    d = str(tmp_path / "lab")
    lab = exactly_once.run(d, seed=5, echo=lambda *_: None, records=200, crash_after=90, max_poll_records=25)
    for guarantee in exactly_once.GUARANTEES:
        out = tmp_path / f"{guarantee}.json"
        rc = tx.main(["--data-dir", d, "--topic", f"totals-{guarantee}", "--input-topic", "payments",
                      "--output-topic", f"totals-{guarantee}", "--json", str(out)], spark=spark)
        rep, mine = json.loads(out.read_text()), lab[guarantee.replace("-", "_")]
        e = rep["exactly_once"]
        assert (e["committed_output_records"], e["duplicated_inputs"], e["duplicate_records"]) == (
            mine["output_records"], mine["duplicated_inputs"], mine["extra_records"]), guarantee
        assert (e["inputs_without_output"], e["inputs_not_found"]) == (mine["missing"], mine["unknown_refs"])
        out_aborted = sum(p["aborted_records"] for p in rep["partitions"] if p["topic"] == f"totals-{guarantee}")
        assert out_aborted == mine["invisible_records"], guarantee
        assert rep["open_transactions"] == []
        assert (rc == EXIT_VIOLATIONS) == (mine["duplicated_inputs"] > 0), guarantee
    assert lab["transactional"]["duplicated_inputs"] == 0 < lab["at_least_once"]["duplicated_inputs"]
    assert lab["transactional"]["invisible_records"] > 0          # the crashed instance's aborted totals
