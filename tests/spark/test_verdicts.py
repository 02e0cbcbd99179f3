"""Verdicts that explain: checks with limit and value, "not enough data", causes of
ordering violations, and the lag audit's partitions without a commit."""

from __future__ import annotations

import json

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.partitioning.partitioners import partition_for_key
from kafkasim.producer import Producer
from kafkasim.spark_jobs import lag, ordering, skew
from kafkasim.spark_jobs.common import EXIT_OK, EXIT_VIOLATIONS
from kafkasim.types import OffsetAndMetadata, TopicPartition
from . import logs

pytestmark = pytest.mark.spark


def _two_records(d: str, topic: str = "tiny") -> None:
    clock = MockClock(logs.START_MS)
    with Broker(d, clock=clock) as b:
        b.create_topic(topic, partitions=3)
        with Producer(b, clock=clock, linger_ms=0, stamp_headers=True, client_id="app") as p:
            p.send(topic, key=b"k", value=b"1")
            p.send(topic, key=b"k", value=b"2")
            p.flush()


def test_two_records_are_not_enough_data_for_skew_but_the_check_says_limit_and_value(spark, tmp_path, capsys):
    d = str(tmp_path / "data")
    _two_records(d)
    out = tmp_path / "s.json"
    rc = skew.main(["--data-dir", d, "--json", str(out)], spark=spark)
    rep = json.loads(out.read_text())
    assert rc == EXIT_OK and rep["verdict"] == "not enough data"
    assert rep["sample"]["records"] == 2 and rep["sample"]["partitions"] == 3
    assert rep["sample"]["min_records_per_partition"] == 20 and not rep["sample"]["enough"]
    (c,) = [c for c in rep["checks"] if c["name"] == "max/avg"]
    assert c == {"name": "max/avg", "limit": 1.3, "value": pytest.approx(3.0), "passed": False}
    assert "NOT ENOUGH DATA" in capsys.readouterr().out
    # with the floor off, the same log fails, and the text names the limit and the value
    rc = skew.main(["--data-dir", d, "--min-records-per-partition", "0"], spark=spark)
    text = capsys.readouterr().out
    assert rc == EXIT_VIOLATIONS
    assert "FAILED max/avg 3.000 > limit 1.3" in text and "SKEW ABOVE LIMITS" in text


def test_two_records_are_not_enough_data_for_ordering(spark, tmp_path):
    d = str(tmp_path / "data")
    _two_records(d)
    out = tmp_path / "o.json"
    rc = ordering.main(["--data-dir", d, "--json", str(out)], spark=spark)
    rep = json.loads(out.read_text())
    assert rc == EXIT_OK and rep["verdict"] == "not enough data"
    assert all(c["passed"] for c in rep["checks"])
    assert {c["name"] for c in rep["checks"]} >= set(ordering.KINDS)


def test_violations_are_facts_at_any_sample_size(spark, tmp_path, capsys):
    d = str(tmp_path / "data")
    exp = logs.write_duplicated(d, "dup")          # 7 records on 3 partitions: below the floor
    out = tmp_path / "o.json"
    rc = ordering.main(["--data-dir", d, "--json", str(out)], spark=spark)
    rep = json.loads(out.read_text())
    assert rc == EXIT_VIOLATIONS and rep["verdict"] == "failed" and not rep["sample"]["enough"]
    assert {c["name"]: c["value"] for c in rep["checks"] if not c["passed"]} == exp
    assert "FAILED duplicate 1 > limit 0" in capsys.readouterr().out


@pytest.fixture(scope="module")
def grown(spark, tmp_path_factory):
    d = str(tmp_path_factory.mktemp("causes") / "data")
    exp = logs.write_grown_with_librdkafka(d, "grown")
    out = tmp_path_factory.mktemp("out") / "ordering.json"
    rc = ordering.main(["--data-dir", d, "--json", str(out)], spark=spark)
    return rc, json.loads(out.read_text()), exp


def test_a_partition_count_change_is_reported_with_the_offsets_where_it_took_effect(grown):
    rc, rep, exp = grown
    assert rc == EXIT_VIOLATIONS and rep["verdict"] == "failed"
    (change,) = [c for c in rep["causes"] if c["cause"] == "partition_count_change"]
    assert (change["topic"], change["from_partitions"], change["to_partitions"]) == ("grown", 3, 6)
    assert {e["partition"]: e["offset"] for e in change["effective"]} == exp["effective"]
    assert change["explains"]["key_in_multiple_partitions"] == exp["moved_keys"] > 0
    assert rep["violations"]["key_in_multiple_partitions"] == exp["moved_keys"]


def test_a_librdkafka_producer_is_named_with_its_partitioner(grown):
    _, rep, exp = grown
    prods = [c for c in rep["causes"] if c["cause"] == "producer_partitioner"]
    assert [p["client_id"] for p in prods] == ["c-app"]          # java-app is explained by murmur2
    (p,) = prods
    assert "consistent_random" in p["partitioners"] and "murmur2" not in p["partitioners"]
    assert p["producer_id"] is not None and p["records"] == 3 * 12
    assert p["explains"]["partitioner_mismatch"] == exp["c_mismatches"] == rep["violations"]["partitioner_mismatch"]
    line = ordering.cause_text(p)
    assert "client_id=c-app" in line and "consistent_random" in line


@pytest.mark.parametrize("write,explains", [
    (logs.write_duplicated, {"duplicate": 1, "sequence_inversion": 0}),
    (logs.write_reordered, {"duplicate": 0, "sequence_inversion": 1}),
])
def test_retries_without_idempotence_are_named_with_the_producer(spark, tmp_path, write, explains):
    d = str(tmp_path / "data")
    write(d)
    out = tmp_path / "ordering.json"
    assert ordering.main(["--data-dir", d, "--json", str(out)], spark=spark) == EXIT_VIOLATIONS
    rep = json.loads(out.read_text())
    (cause,) = rep["causes"]
    assert (cause["cause"], cause["client_id"], cause["producer_id"], cause["keys"]) == \
        ("retries_without_idempotence", "app", None, 1)
    assert cause["explains"] == explains
    assert "retried without idempotence" in ordering.text(rep)


def test_an_idempotent_producer_is_never_blamed_for_retries(grown):
    _, rep, _ = grown
    assert not [c for c in rep["causes"] if c["cause"] == "retries_without_idempotence"]


def test_details_show_every_kind_round_robin(grown):
    _, rep, _ = grown
    kinds = [d["kind"] for d in rep["details"][:2]]
    assert sorted(kinds) == ["key_in_multiple_partitions", "partitioner_mismatch"]
    text = ordering.text(rep)
    assert "partition count changed 3 -> 6" in text and "uses consistent_random" in text


def test_java_hashcode_partitioner():
    got = ordering.java_hashcode_partitions([b"a", b"hello", None, b"polygenelubricants"], 10**9).tolist()
    assert got == [97, 99162322, -1, -1]         # "polygenelubricants".hashCode() == Integer.MIN_VALUE
    assert partition_for_key(b"hello", 7) >= 0   # the named ones stay reachable alongside


def test_lag_lists_partitions_without_a_commit(spark, tmp_path, capsys):
    d = str(tmp_path / "data")
    clock = MockClock(logs.START_MS)
    with Broker(d, clock=clock) as b:
        b.create_topic("orders", partitions=3)
        with Producer(b, clock=clock, linger_ms=0) as p:
            for i in range(6):
                p.send("orders", value=b"v", partition=i % 2)     # 3 on p0, 3 on p1, p2 empty
            p.flush()
        c = Consumer(b, group_id="billing", clock=clock, enable_auto_commit=False)
        c.commit({TopicPartition("orders", 0): OffsetAndMetadata(1)})
        c.close()
    out = tmp_path / "lag.json"
    assert lag.main(["--data-dir", d, "--json", str(out)], spark=spark) == EXIT_OK
    rep = json.loads(out.read_text())
    assert [(r["partition"], r["lag_records"]) for r in rep["partitions"]] == [(0, 2)]
    assert rep["no_commit"] == [{"group": "billing", "topic": "orders", "partition": 1, "log_end_offset": 3},
                                {"group": "billing", "topic": "orders", "partition": 2, "log_end_offset": 0}]
    assert rep["verdict"] == "ok"
    text = capsys.readouterr().out
    assert "orders-1" in text and "(no commit)" in text
    # a limit is a check with its value
    assert lag.main(["--data-dir", d, "--max-lag-records", "1"], spark=spark) == EXIT_VIOLATIONS
    assert "FAILED lag records 2 > limit 1" in capsys.readouterr().out
