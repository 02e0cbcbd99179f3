"""``make demo``'s story holds: what the printed sentences claim, checked on the returned summary."""

from __future__ import annotations

import os

import pytest

from kafkasim.demo import MARKER, run_demo
from kafkasim.errors import InvalidArgumentError

VOLATILE = ("data_dir", "wall_s", "phases_s", "files")


def _stable(summary: dict) -> dict:
    out = {k: v for k, v in summary.items() if k not in VOLATILE}
    out["cluster"] = {k: v for k, v in out["cluster"].items() if k != "path"}
    return out


@pytest.mark.slow
@pytest.mark.spark
def test_the_story_claims_hold_and_the_audits_find_the_bugs(tmp_path, spark):
    s = run_demo(str(tmp_path / "demo"), seed=3, records=1_500, echo=None, spark_session=spark)
    cluster = s["cluster"]
    # 1. replication factor 3 over three racks: every partition on all three brokers
    assert all(sorted(r) == [0, 1, 2] for r in cluster["placement"].values())
    # 3. the group scaled out from 2 to 3 members, every partition owned each time
    group = cluster["group"]
    assert len(group["owners_before"]) == 2 and len(group["owners_after"]) == 3
    assert sorted(p for ps in group["owners_after"].values() for p in ps) == list(range(6))
    # 4. a leader stopped mid-traffic; acks=all with min ISR 2: every acknowledged record is readable
    wire = cluster["real_client"]
    failure = cluster["failure"]
    assert failure["acked"] == failure["sent"] == cluster["records"] + wire["sent"]
    assert failure["acked_lost"] == 0 and failure["readable"] == failure["acked"]
    assert failure["new_leaders"] and failure["stopped_broker"] not in failure["new_leaders"].values()
    assert failure["under_replicated_after_restart"] == 0
    # 5. the new broker held nothing, then the plan balanced replicas within one, nothing lost
    re = cluster["reassignment"]
    assert re["before"]["replicas"][3] == 0 and re["before"]["replicas_ratio"] is None
    assert re["balanced"] and max(re["after"]["replicas"].values()) - min(re["after"]["replicas"].values()) <= 1
    assert re["replica_moves"] > 0 and re["bytes_moved"] > 0 and re["verified"] and re["acked_lost"] == 0
    # 2. kafka-python went through serve's listeners (one per broker) and agrees with murmur2
    assert wire["listeners"] == 3 and wire["acked"] == wire["sent"] == 50 and wire["not_murmur2"] == 0
    # the group on the shop topic processed what was sent before it scaled out
    assert s["consumed"] == int(1_500 * 0.7)
    # 7. the audits found and explained the partition change and the librdkafka producer
    audits = s["audits"]
    assert {"from": 6, "to": 8} == {k: audits["partition_change"][0][k] for k in ("from", "to")}
    assert [m["client_id"] for m in audits["mixed_clients"]] == ["legacy-rdkafka"]
    assert "consistent_random" in audits["mixed_clients"][0]["partitioners"]
    assert audits["max_over_avg"] > 1.3     # Zipf merchants: the skew audit fires
    names = {os.path.basename(f) for f in s["files"]}
    assert {"audits.json", "balance.png", "skew.png", "summary.json"} <= names
    assert all(os.path.getsize(f) > 0 for f in s["files"])


@pytest.mark.slow
def test_the_same_seed_tells_the_same_story(tmp_path):
    a = run_demo(str(tmp_path / "a"), seed=5, records=600, spark=False, echo=None)
    b = run_demo(str(tmp_path / "b"), seed=5, records=600, spark=False, echo=None)
    assert _stable(a) == _stable(b)
    c = run_demo(str(tmp_path / "c"), seed=6, records=600, spark=False, echo=None)
    assert _stable(c)["partitions"] != _stable(a)["partitions"]


def test_refuses_to_wipe_a_directory_it_did_not_make(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    with pytest.raises(InvalidArgumentError, match="refusing to wipe"):
        run_demo(str(precious), records=100, spark=False, echo=None)
    assert (precious / "thesis.tex").read_text() == "do not delete"
    assert not (precious / MARKER).exists()


def test_too_few_records_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(InvalidArgumentError, match="records=99"):
        run_demo(str(tmp_path / "d"), records=99, spark=False, echo=None)
    assert not (tmp_path / "d").exists()


@pytest.mark.slow
def test_cli_prints_the_summary_as_json_and_refuses_a_foreign_dir(tmp_path, capsys):
    import json

    from kafkasim.cli import main

    assert main(["demo", "--data-dir", str(tmp_path / "d"), "--records", "300", "--no-spark", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["cluster"]["failure"]["acked_lost"] == 0 and "audits" not in summary
    assert os.path.exists(os.path.join(tmp_path, "d", "reports", "summary.json"))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    assert main(["demo", "--data-dir", str(tmp_path / "mine"), "--no-spark"]) != 0
    assert "refusing to wipe" in capsys.readouterr().err


def test_order_values_are_msgpack_maps_from_the_in_process_producers_and_kafka_python(tmp_path):
    # value_serializer=msgpack.dumps, as kafka-python's README: the shop's and the cluster's
    # orders, including those kafka-python sent through kafkasim serve, decode as maps
    import msgpack

    from kafkasim.broker import Broker
    from kafkasim.broker.cluster import Cluster
    from kafkasim.consumer import Consumer
    from kafkasim.types import TopicPartition

    s = run_demo(str(tmp_path / "demo"), seed=5, records=300, spark=False, echo=None)

    def raw(node, topic, partitions):
        c = Consumer(node, auto_offset_reset="earliest", enable_auto_commit=False)
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        out = [r.value for recs in c.poll(timeout_ms=0, max_records=100_000).values() for r in recs]
        c.close()
        return out

    with Broker(str(tmp_path / "demo" / "shop")) as b:
        shop = [msgpack.loads(v) for v in raw(b, "orders", 8)]
    assert len(shop) == 300 and all(set(v) == {"order", "amount"} for v in shop)
    with Cluster(str(tmp_path / "demo" / "cluster")) as c:
        paid = [msgpack.loads(v) for v in raw(c, "payments", 6)]
    web = [v for v in paid if set(v) == {"order", "channel"}]
    assert len(web) == s["cluster"]["real_client"]["acked"] == 10 and all(v["channel"] == "web" for v in web)
    assert len(paid) - len(web) == s["cluster"]["records"] and all(set(v) == {"order", "amount"}
                                                                   for v in paid if v not in web)
