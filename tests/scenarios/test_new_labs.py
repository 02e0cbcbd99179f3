"""The five newer labs: partitions-basics, assignor-comparison, crash-recovery,
null-key-batching and co-partitioning.

Each is run on a real broker in tmp_path and checked for what its lab text promises (the
numbers a student is told to expect, recomputed here independently where possible), for
determinism (same seed → same printed text, same JSON and same PNG bytes), for its pictures,
and for its claim check: a parameter that removes the effect must make the lab raise
ClaimFailedError instead of printing a conclusion the run did not show.
"""

from __future__ import annotations

import json
import os

import pytest

from kafkasim.cli import main
from kafkasim.errors import ClaimFailedError, InvalidArgumentError, KafkaTimeoutError
from kafkasim.partitioning.hashing import murmur2
from kafkasim.scenarios import SCENARIOS, resolve, run_scenario, scenario_module

NEW_LABS = ["partitions-basics", "assignor-comparison", "crash-recovery", "null-key-batching",
            "co-partitioning"]

BREAKING = {
    # a parameter that removes the lab's effect; the lab must refuse its conclusion
    "partitions-basics": {"partitioner": "round_robin_all"},   # keys ignored: spread everywhere
    "assignor-comparison": {"leaving": "C1"},                  # roundrobin moves nothing either
    "crash-recovery": {"torn_fraction": 0.0},                  # no torn tail: nothing to cut
    "null-key-batching": {"records": 1500},                    # too few sticky switches to even out
    "co-partitioning": {"mismatched_partitions": 6},           # both topics co-partitioned
}


def _p(key: bytes, n: int) -> int:
    """Kafka's BuiltInPartitioner.partitionForKey, written out: toPositive(murmur2) % n."""
    return (murmur2(key) & 0x7FFFFFFF) % n


def _run(name, tmp_path, tag="a", **params):
    lines: list[str] = []
    result = run_scenario(name, str(tmp_path / f"data-{tag}"), seed=42, echo=lines.append,
                          plot_dir=str(tmp_path / f"plots-{tag}"), **params)
    return result, lines


def _comparable(result: dict) -> str:
    return json.dumps({**result, "pictures": [os.path.basename(p) for p in result["pictures"]]},
                      sort_keys=True)


# ---------------------------------------------------------------- the contract, for all five

def test_the_five_labs_are_registered_by_dashed_name_in_course_order():
    names = list(SCENARIOS)
    for name in NEW_LABS:
        assert name in names and resolve(name.replace("-", "_")) == name
    assert names[0] == "partitions-basics"
    order = [names.index(n) for n in ["assignor-comparison", "crash-recovery", "null-key-batching",
                                      "co-partitioning"]]
    assert order == sorted(order)


@pytest.mark.slow          # two full runs with pictures: 2-7 s on a busy 2-core machine
@pytest.mark.parametrize("name", NEW_LABS)
def test_same_seed_gives_the_same_text_json_and_pictures_and_the_claim_holds(name, tmp_path):
    first, text1 = _run(name, tmp_path, "a")
    second, text2 = _run(name, tmp_path, "b")
    assert text1 == text2 and text1
    assert _comparable(first) == _comparable(second)
    assert first["claim"] == scenario_module(name).CLAIM
    assert first["pictures"], "a lab writes at least one picture"
    for a, b in zip(first["pictures"], second["pictures"]):
        assert os.path.dirname(a) == str(tmp_path / "plots-a")
        with open(a, "rb") as fa, open(b, "rb") as fb:
            data = fa.read()
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
            assert data == fb.read(), f"{os.path.basename(a)} differs between two runs"
    prose = "\n".join(text1)
    assert "[" not in prose and "(TopicPartition" not in prose and "b'" not in prose


@pytest.mark.parametrize("name", NEW_LABS)
def test_a_parameter_that_removes_the_effect_makes_the_claim_check_fail(name, tmp_path):
    with pytest.raises(ClaimFailedError) as err:
        run_scenario(name, str(tmp_path / "data"), echo=lambda s: None, **BREAKING[name])
    assert scenario_module(name).CLAIM in str(err.value) and "Evidence:" in str(err.value)


# ---------------------------------------------------------------- what each lab promises

def test_partitions_basics_each_key_on_its_murmur2_partition_order_per_key_not_global(tmp_path):
    r, _ = _run("partitions-basics", tmp_path)
    n = r["partitions"]
    for row in r["keys"]:
        assert row["partitions"] == [_p(row["key"].encode(), n)]
    assert len(r["consumed"]) == r["records"]
    seen: dict[str, int] = {}
    for c in r["consumed"]:
        assert c["key_seq"] == seen.get(c["key"], -1) + 1     # each key read exactly in send order
        seen[c["key"]] = c["key_seq"]
    send_order = [c["send_no"] for c in r["consumed"]]
    assert send_order != sorted(send_order) and r["global_order_breaks"] > 0
    assert sorted(send_order) == list(range(r["records"]))


def test_assignor_comparison_matches_kafkas_javadoc_example_on_real_groups(tmp_path):
    r, text = _run("assignor-comparison", tmp_path)
    a = r["assignors"]
    # AbstractStickyAssignor / StickyAssignor javadoc (C0: t0; C1: t0, t1; C2: t0, t1, t2)
    assert a["roundrobin"]["before"] == {"C0": ["t0p0"], "C1": ["t1p0"],
                                         "C2": ["t1p1", "t2p0", "t2p1", "t2p2"]}
    assert a["sticky"]["before"] == {"C0": ["t0p0"], "C1": ["t1p0", "t1p1"],
                                     "C2": ["t2p0", "t2p1", "t2p2"]}
    assert a["roundrobin"]["after"] == {"C1": ["t0p0", "t1p1"], "C2": ["t1p0", "t2p0", "t2p1", "t2p2"]}
    assert a["sticky"]["after"] == {"C1": ["t0p0", "t1p0", "t1p1"], "C2": ["t2p0", "t2p1", "t2p2"]}
    assert (a["roundrobin"]["kept"], a["sticky"]["kept"]) == (3, 5)     # "preserves 3" / "preserves 5"
    assert a["roundrobin"]["moved"] == ["t1p0", "t1p1"] and a["sticky"]["moved"] == []
    for run in a.values():
        assert run["forced"] == ["t0p0"]
        assert run["before"] == run["pure_before"] and run["after"] == run["pure_after"]
    assert any("C1: t0p0, t1p1; C2: t1p0, t2p0, t2p1, t2p2" in line for line in text)


def test_assignor_comparison_rejects_an_unknown_leaving_member(tmp_path):
    with pytest.raises(InvalidArgumentError, match="C9"):
        run_scenario("assignor-comparison", str(tmp_path / "d"), echo=lambda s: None, leaving="C9")


def test_crash_recovery_truncates_the_torn_tail_and_keeps_every_acknowledged_record(tmp_path):
    r, text = _run("crash-recovery", tmp_path, flushed_records=50, unflushed_records=30)
    flushed, acked, killed, reopened = r["steps"]
    assert r["exit_status"] == -9                                    # SIGKILL, no clean shutdown
    assert (flushed["log_end_offset"], acked["log_end_offset"]) == (50, 80)
    assert killed["size_bytes"] == acked["size_bytes"] + r["torn_bytes"] > acked["size_bytes"]
    assert reopened["log_end_offset"] == 80 and reopened["size_bytes"] == acked["size_bytes"]
    assert r["records_read"] == 80 and r["records_intact"]
    assert any(f"truncated {r['torn_bytes']} bytes" in line for line in r["recovery_report"])
    assert r["warnings"] >= 1                                        # the broker warned as well
    assert not any(str(tmp_path) in line for line in text)           # paths shown relative


def test_null_key_batching_sticky_batches_are_bigger_and_even_out_over_time(tmp_path):
    r, _ = _run("null-key-batching", tmp_path, records=6000)
    rr, st = r["partitioners"]["round_robin"], r["partitioners"]["murmur2"]
    for run in (rr, st):                       # the batches read back hold every record once
        assert sum(run["batch_record_counts"]) == sum(run["records_per_partition"]) == 6000
    assert st["records_per_batch_avg"] > 2 * rr["records_per_batch_avg"]
    windows = [st["imbalance"][str(w)] for w in r["windows_ms"]] + [st["imbalance_whole_run"]]
    assert windows == sorted(windows, reverse=True)            # longer windows: more even
    assert windows[0] > 3 and rr["imbalance"]["10"] < 1.5
    assert max(rr["records_per_partition"]) - min(rr["records_per_partition"]) <= 1


def test_co_partitioning_finds_exactly_the_keys_whose_two_partitions_agree(tmp_path):
    r, _ = _run("co-partitioning", tmp_path, customers=200)
    n, m = r["orders_partitions"], r["mismatched_partitions"]
    s = r["summary"]
    assert s["matching"]["matches_found"] == s["matching"]["matches_exist"] == r["paid"]
    assert s["mismatched"]["matches_exist"] == r["paid"]
    found_by_task = {t["task"]: t["matches_found"] for t in r["tasks"]["mismatched"]}
    # independently: a paid key is found only if murmur2 puts it on the same number in both topics
    paid = [k.encode() for k in r["paid_customers"]]
    assert len(paid) == r["paid"]
    agree = sum(1 for k in paid if _p(k, n) == _p(k, m))
    assert s["mismatched"]["matches_found"] == agree < len(paid)
    assert sum(found_by_task.values()) == agree
    assert all(found_by_task[t] == 0 for t in range(n, m))           # tasks without orders
    # the fix: a copy of the mismatched payments with the orders' count joins completely again
    assert r["repartitioned_records"] == len(paid)
    assert s["repartitioned"]["matches_found"] == s["repartitioned"]["matches_exist"] == len(paid)


def test_cli_runs_a_new_lab_with_json_and_pictures(tmp_path, capsys):
    out = tmp_path / "result.json"
    rc = main(["scenario", "run", "co-partitioning", "--data-dir", str(tmp_path / "d"),
               "--plot-dir", str(tmp_path / "pics"), "--json", str(out), "--param", "customers=100"])
    assert rc == 0
    result = json.loads(out.read_text())
    assert result["customers"] == 100 and os.path.exists(result["pictures"][0])
    assert "matches" in capsys.readouterr().out


@pytest.mark.parametrize("name,params,bad", [
    ("partitions-basics", {"keys": 0}, "keys"),
    ("co-partitioning", {"customers": 0}, "customers"),
    ("null-key-batching", {"windows_ms": [0]}, "windows_ms"),
    ("crash-recovery", {"torn_fraction": 1.5}, "torn_fraction"),
])
def test_a_bad_parameter_is_refused_by_name_before_anything_is_written(name, params, bad, tmp_path):
    with pytest.raises(InvalidArgumentError, match=bad):
        run_scenario(name, str(tmp_path / "data"), echo=lambda s: None, **params)
    assert not (tmp_path / "data").exists()


def test_crash_recovery_reports_a_writer_that_never_wrote(tmp_path, monkeypatch):
    import kafkasim.scenarios.crash_recovery as lab

    monkeypatch.setattr(lab.sys, "executable", "/bin/false")      # the writer exits at once
    with pytest.raises(KafkaTimeoutError, match="writer process"):
        run_scenario("crash-recovery", str(tmp_path / "d"), echo=lambda s: None)


@pytest.mark.parametrize("name", NEW_LABS)
def test_kafkasim_scenario_show_prints_the_lab_text_with_its_claim(name, capsys):
    assert main(["scenario", "show", name]) == 0
    text = capsys.readouterr().out
    module = scenario_module(name)
    for part in ("What you will see", "Why", "Claim", module.CLAIM, *module.PARAMS):
        assert part in text


def test_python_dash_m_runs_a_new_lab(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "kafkasim.scenarios.partitions_basics", "--data-dir",
                          str(tmp_path / "d"), "--json", "--param", "records=30"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["records"] == 30 and result["claim"] == scenario_module("partitions-basics").CLAIM


def _raw_values(data_dir: str, topic: str) -> list:
    """Every value of ``topic`` as stored (a consumer without a deserializer)."""
    from kafkasim.broker import Broker
    from kafkasim.consumer import Consumer
    from kafkasim.types import TopicPartition

    with Broker(data_dir) as b:
        c = Consumer(b, auto_offset_reset="earliest", enable_auto_commit=False)
        tps = [TopicPartition(topic, p) for p in range(len(b.describe_topic(topic)["partitions"]))]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        out = [r.value for recs in c.poll(timeout_ms=0, max_records=100_000).values() for r in recs]
        c.close()
    return out


@pytest.mark.parametrize("name, topic, fields", [
    ("partitions-basics", "clicks", {"send_no", "key_seq"}),
    ("crash-recovery", "payments", {"payment", "amount", "currency"}),
])
def test_structured_lab_values_are_msgpack_maps_as_kafka_pythons_readme_serializes_them(name, topic, fields, tmp_path):
    import msgpack

    r, _ = _run(name, tmp_path)
    values = _raw_values(str(tmp_path / "data-a"), topic)
    assert values and len(values) == r.get("records", r.get("records_read"))
    decoded = [msgpack.loads(v) for v in values]          # bytes as stored: value_serializer=msgpack.dumps
    assert all(isinstance(d, dict) and set(d) == fields for d in decoded)
