"""The teaching labs: each runs on a real broker in tmp_path and shows what its lab teaches.

Every test names the behaviour a lab's text promises (4 idle consumers at 10 and no more
throughput; eager revokes everything, cooperative only what moves; 32→64 moves exactly
the keys murmur2 moves and breaks their totals; retries reorder only without idempotence;
a zombie's commit fails ...), that each lab asserts its claim (a run whose parameters
remove the effect raises ClaimFailedError), determinism (same seed → same text, same
JSON, same PNG bytes), the registry with its aliases, the data-dir safety rule and the CLI.
Small params keep each lab run to a few seconds; the slowest ones carry ``slow``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkasim.scenarios
from kafkasim.cli import main
from kafkasim.clock import MockClock
from kafkasim.errors import ClaimFailedError, InvalidArgumentError
from kafkasim.partitioning.hashing import murmur2
from kafkasim.scenarios import (
    ALIASES, SCENARIOS, lab_text, list_scenarios, parse_params, resolve, run_scenario,
    scenario_module,
)
from kafkasim.scenarios._common import MARKER, check_claim, fresh_broker

OURS = ["hot-partition", "partition-count-change", "consumer-scaling", "rebalance-protocols",
        "broker-side-assignment", "mixed-clients", "retry-reorder", "consumer-crash"]

SMALL = {
    "hot-partition": {"records": 6000, "keys": 500},
    "partition-count-change": {"keys": 200, "before": 8, "after": 16, "records_before": 2,
                               "records_after": 2},
    "consumer-scaling": {"measure_s": 8},
    "rebalance-protocols": {"trials": 2},
    "broker-side-assignment": {},
    "mixed-clients": {"keys": 300},
    "retry-reorder": {"records": 200},
    "consumer-crash": {"records_per_partition": 20},
}

BREAKS_THE_CLAIM = {
    "hot-partition": {"zipf_s": 0.0},                            # uniform keys: no hot partition
    "partition-count-change": {"records_after": 0},              # nothing written after the change
    "consumer-scaling": {"process_ms": 10},                      # faster than a step: the model's capacity is wrong
    "rebalance-protocols": {"partitions": 6, "restore_ms": 0},   # few partitions, no state: eager wins the join
    "broker-side-assignment": {"partitions": [4, 4, 4]},          # equal topics: range balances too
    "mixed-clients": {"partitions": 1},                          # one partition: nothing can split
    "retry-reorder": {"fault_rate": 0.0},                        # no lost requests: nothing to reorder
}

SLOW = {"hot-partition"}


def _param(name):
    return pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name


def _run(name, tmp_path, seed=42, plot_dir=None, **extra):
    lines = []
    result = run_scenario(name, str(tmp_path / name), seed=seed, echo=lines.append,
                          plot_dir=plot_dir, **{**SMALL[name], **extra})
    return result, lines


_FIRST: dict = {}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """Each lab's first run with SMALL params and pictures, shared by the module's tests
    (``(result, lines, {png name: bytes})``): the suite runs every lab once plus once more
    for determinism."""
    def get(name):
        if name not in _FIRST:
            base = tmp_path_factory.mktemp(name)
            result, lines = _run(name, base, plot_dir=str(base / "pics"))
            _FIRST[name] = (result, lines, {os.path.basename(p): open(p, "rb").read()
                                            for p in result["pictures"]})
        return _FIRST[name]
    yield get
    _FIRST.clear()


def _p(key: bytes, n: int) -> int:
    """Kafka's BuiltInPartitioner.partitionForKey, written out: toPositive(murmur2) % n."""
    return (murmur2(key) & 0x7FFFFFFF) % n


# ---------------------------------------------------------------------- registry

def test_registry_lists_our_labs_in_course_order_with_lab_text_claim_and_params():
    names = list(SCENARIOS)
    assert [n for n in names if n in OURS] == OURS
    numbers = [r["number"] for r in list_scenarios()]
    assert numbers == sorted(numbers)
    for name in OURS:
        mod = scenario_module(name)
        assert callable(mod.run) and isinstance(mod.PARAMS, dict)
        assert mod.__doc__ and "What you will see" in mod.__doc__ and "Kafka" in mod.__doc__
        assert isinstance(mod.CLAIM, str) and mod.CLAIM.endswith(".")
        assert set(SMALL[name]) <= set(mod.PARAMS)


def test_old_names_and_module_names_are_aliases_of_the_new_names():
    assert ALIASES["hot_keys"] == "hot-partition"
    assert ALIASES["add_partitions"] == "partition-count-change"
    assert ALIASES["group_scaling"] == "consumer-scaling"
    assert ALIASES["eager_vs_cooperative"] == "rebalance-protocols"
    assert resolve("mixed_clients") == resolve("mixed-clients") == "mixed-clients"
    rows = {r["name"]: r for r in list_scenarios()}
    assert rows["retry-reorder"]["aliases"] == ["retry_reorder"]


def test_lab_text_shows_the_docstring_claim_and_params():
    text = lab_text("hot_keys")
    assert "What you will see" in text and "Why" in text
    assert scenario_module("hot-partition").CLAIM in text
    assert "zipf_s = 1.2" in text


def test_unknown_lab_and_bad_params_raise_invalid_argument_naming_them(tmp_path):
    with pytest.raises(InvalidArgumentError, match="nope"):
        scenario_module("nope")
    with pytest.raises(InvalidArgumentError, match="'bogus'"):
        parse_params("hot_keys", ["bogus=1"])
    with pytest.raises(InvalidArgumentError, match="'partitions'.*integer"):
        parse_params("hot-partition", ["partitions=many"])
    with pytest.raises(InvalidArgumentError, match="'bogus'"):
        run_scenario("mixed_clients", str(tmp_path / "x"), bogus=2)
    assert parse_params("consumer-scaling", ["sizes=1,4", "assignor=range"]) == {
        "sizes": [1, 4], "assignor": "range"}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=8), st.integers(-10**9, 10**9))
def test_params_parse_with_the_type_of_their_default(sizes, n):
    parsed = parse_params("consumer-scaling", ["sizes=" + ",".join(map(str, sizes)), f"partitions={n}"])
    assert parsed == {"sizes": sizes, "partitions": n}


def test_data_dir_is_wiped_only_when_a_lab_made_it(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(InvalidArgumentError, match="refusing to wipe"):
        fresh_broker(str(precious), MockClock())
    assert (precious / "notes.txt").read_text() == "keep me"
    lab = tmp_path / "lab"
    fresh_broker(str(lab), MockClock()).close()
    (lab / "stale").write_text("old run")
    fresh_broker(str(lab), MockClock()).close()
    assert (lab / MARKER).exists() and not (lab / "stale").exists()


def test_check_claim_raises_claim_failed_naming_claim_and_evidence():
    check_claim(True, "X holds.", "fine")
    with pytest.raises(ClaimFailedError, match=r"X holds\. Evidence: 3 != 4"):
        check_claim(False, "X holds.", "3 != 4")


# ---------------------------------------------------------------------- the labs

@pytest.mark.slow
def test_hot_partition_fires_the_alert_and_each_fix_quiets_it_at_its_price(first_run):
    r, lines, _ = first_run("hot-partition")
    n = r["partitions"]
    base, comp, hot, vip = r["fixes"]
    assert [f["fix"] for f in r["fixes"]] == ["murmur2 (no fix)", "composite key",
                                              "hot-key partitioner", "VIP topic"]
    for f in r["fixes"]:
        assert sum(sum(t["counts"]) for t in f["topics"].values()) == r["records"]
    top = r["hottest"][0]
    assert top["partition"] == _p(top["key"].encode(), n)
    skew = base["topics"]["orders-murmur2"]
    assert skew["counts"][top["partition"]] >= top["orders"]     # all of a key's orders, one partition
    assert skew["max_over_avg"] > r["alert_rule"]["threshold"] == 5.0
    fired = base["alert_fired_at_s"]["orders-murmur2"]
    assert fired is not None and fired >= r["alert_rule"]["for_s"]  # held for `for:` first
    for f in (comp, hot, vip):
        assert all(at is None for at in f["alert_fired_at_s"].values())
    assert hot["keys_on_several_partitions"] == 3                  # exactly the hot merchants
    assert comp["keys_on_several_partitions"] > hot["keys_on_several_partitions"]
    assert vip["keys_on_several_partitions"] == 0
    assert vip["topics"]["orders-vip"]["counts"] == [h["orders"] for h in r["hottest"][:3]]
    assert any("KafkaHotPartition" in line and "fired" in line for line in lines)


def test_partition_count_change_breaks_totals_of_exactly_the_moved_keys_and_mirroring_does_not(first_run):
    r, lines, _ = first_run("partition-count-change")
    keys = kafkasim.scenarios.add_partitions.make_keys(42, SMALL["partition-count-change"]["keys"])
    n0, n1 = r["before"], r["after"]
    assert n1 == 2 * n0
    direct = sum(1 for k in keys if _p(k, n0) != _p(k, n1))
    assert r["moved_keys"] == direct and r["moved_equals_prediction"]
    assert r["expected_moved_fraction"] == 0.5            # doubling: a key stays on p or goes to p + n0
    grid = r["move_grid"]
    assert all(grid[a][b] == 0 for a in range(n0) for b in range(n1) if b not in (a, a + n0))
    fwd, mirror = r["ways"]["forward_only"], r["ways"]["mirror"]
    assert fwd["keys_wrong_total"] == direct > 0
    assert mirror["keys_wrong_total"] == 0 and mirror["keys_out_of_order"] == 0
    ex = r["example"]
    old_t, new_t = (ex["forward_only_store_totals"][str(p)]
                    for p in (ex["old_partition"], ex["new_partition"]))
    assert (old_t, new_t) == (sum(ex["amounts"][:2]), sum(ex["amounts"][2:]))   # split in two
    assert ex["forward_only_total"] in (old_t, new_t) and ex["mirror_total"] == ex["true_total"]


def test_consumer_scaling_idle_members_and_throughput_ceiling(first_run):
    r, lines, _ = first_run("consumer-scaling")
    steps = {s["consumers"]: s for s in r["steps"]}
    assert list(steps) == [1, 2, 3, 10]
    assert [s["idle_count"] for s in steps.values()] == [0, 0, 0, 4]
    for s in steps.values():
        owned = sorted(p for tps in s["assignment"].values() for p in tps)
        assert owned == list(range(6))                       # each partition exactly once
    assert steps[2]["assignment"] == {"c00": [0, 1, 2], "c01": [3, 4, 5]}   # RangeAssignor's ranges
    cap = r["member_capacity_per_s"]
    assert [steps[c]["throughput_per_s"] for c in (1, 2, 3)] == [cap, 2 * cap, 3 * cap]
    assert abs(steps[10]["throughput_per_s"] - 6 * cap) <= 0.05 * 6 * cap
    assert all(steps[10]["processed_per_member"][c] == 0 for c in steps[10]["idle"])
    assert steps[1]["final_lag"] > steps[10]["final_lag"] > 0
    assert any("4 idle" in line for line in lines)


def test_rebalance_protocols_eager_revokes_everything_cooperative_only_what_moves(first_run):
    r, lines, _ = first_run("rebalance-protocols")
    n = r["partitions"]
    for event in ("join", "crash"):
        eager, coop = r["events"][event]["range"], r["events"][event]["cooperative-sticky"]
        for t in coop["trials"]:
            assert sorted(p for ps in t["after"].values() for p in ps) == list(range(n))
            assert t["revoked_count"] < n
        assert coop["mean_paused_partition_seconds"] < eager["mean_paused_partition_seconds"]
    join_e, join_c = r["events"]["join"]["range"], r["events"]["join"]["cooperative-sticky"]
    assert join_e["rebalance_rounds"] == [1] and join_c["rebalance_rounds"] == [2]
    assert all(t["revoked_count"] == n for t in join_e["trials"])
    for t in join_c["trials"]:                               # only partitions that changed owner
        assert t["revoked_count"] == len(t["moved_partitions"]) > 0
    crash_e = r["events"]["crash"]["range"]
    for t in crash_e["trials"]:                              # nobody notices before the session timeout
        assert t["longest_pause_s"] >= (10_000 - 3_000) / 1000


def test_rebalance_protocols_explains_a_result_against_the_claim(first_run):
    # the default run explains why cooperative's longest pause on a join is longer
    r, lines, _ = first_run("rebalance-protocols")
    joins = [e for e in r["against_the_claim"] if e["event"] == "join"]
    assert joins and all(e["text"] in lines for e in joins)
    assert any("two rounds" in e["text"] for e in joins)


def test_mixed_clients_split_keys_match_crc32_versus_murmur2(first_run):
    r, _, _ = first_run("mixed-clients")
    keys = kafkasim.scenarios.mixed_clients.make_keys(42, SMALL["mixed-clients"]["keys"])
    n = r["partitions"]
    direct = sum(1 for k in keys if zlib.crc32(k) % n != _p(k, n))
    crc, compatible = r["pairs"]
    assert crc["other"] == "consistent_random" and crc["split_keys"] == direct
    assert sum(crc["key_grid"][a][b] for a in range(n) for b in range(n) if a != b) == direct
    assert compatible["other"] == "murmur2_random" and compatible["split_keys"] == 0
    assert set(crc["records_per_producer"].values()) == {len(keys) * 2}


def test_retries_reorder_and_duplicate_only_without_idempotence(first_run):
    r, lines, _ = first_run("retry-reorder")
    plain, idem = r["not_idempotent"], r["idempotent"]
    assert plain["injected_faults"] > 0 and idem["injected_faults"] > 0
    assert plain["out_of_order"] > 0 and plain["duplicates"] > 0 and plain["lost"] == 0
    assert idem["in_order"] and idem["lost"] == 0
    assert idem["sequences_in_log"] == list(range(r["records"]))
    assert idem["duplicate_batches_detected_by_broker"] > 0
    assert not any("[" in line for line in lines)            # no Python lists in the prose


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 30), max_size=60))
def test_audit_log_counts_duplicates_and_order_of_first_copies(seqs):
    a = kafkasim.scenarios.retry_reorder.audit_log(seqs, 31)
    assert a["duplicates"] == len(seqs) - len(set(seqs))
    assert a["lost"] == 31 - len(set(seqs))
    firsts = list(dict.fromkeys(seqs))
    assert (a["out_of_order"] == 0) == (firsts == sorted(firsts))


def test_consumer_crash_eviction_redelivery_and_zombie_commit_rejected(first_run):
    r, lines, _ = first_run("consumer-crash")
    timeout = r["session_timeout_ms"]
    assert timeout - 3_000 <= r["evicted_after_ms"] <= timeout + 100
    assert r["generations"][1] > r["generations"][0]
    survivors = r["assignment_after"]
    assert r["victim"] not in survivors
    assert sorted(p for ps in survivors.values() for p in ps) == list(range(r["partitions"]))
    assert r["redelivered"] == r["victim_uncommitted"] > 0       # at-least-once, exactly those
    assert all(p in r["victim_partitions"] for p, _ in r["redelivered_records"])
    twice = [(p, o) for p, row in enumerate(r["times_processed"]) for o, c in enumerate(row) if c == 2]
    assert twice == [tuple(x) for x in r["redelivered_records"]]
    assert r["every_record_processed"] and r["committed_end"]
    assert r["zombie_commit"]["error"] == "CommitFailedError"
    assert not any("[" in line or "(0," in line for line in lines)


def test_consumer_crash_refuses_a_group_with_nobody_to_take_over(tmp_path):
    with pytest.raises(InvalidArgumentError, match="consumers=1"):
        _run("consumer-crash", tmp_path, consumers=1)


def test_fmt_records_groups_offsets_into_ranges():
    fmt = kafkasim.scenarios.consumer_crash.fmt_records
    assert fmt([(4, 9), (4, 8), (4, 10), (5, 3), (4, 12)]) == \
        "partition 4 offsets 8-10, 12, partition 5 offset 3"
    assert fmt([]) == "none"


# ---------------------------------------------------------------------- the contract

@pytest.mark.parametrize("name", [_param(n) for n in OURS])
def test_same_seed_gives_the_same_text_json_and_pictures(tmp_path, first_run, name):
    first, text1, bytes1 = first_run(name)
    pics = tmp_path / "pics"
    second, text2 = _run(name, tmp_path, plot_dir=str(pics))
    bytes2 = {os.path.basename(p): open(p, "rb").read() for p in second["pictures"]}
    strip = lambda r: {k: v for k, v in r.items() if k != "pictures"}     # noqa: E731
    assert strip(first) == strip(second) and text1 == text2
    assert json.loads(json.dumps(second)) == second               # JSON-able, nothing lost
    assert second["claim"] == scenario_module(name).CLAIM
    assert bytes1 == bytes2 and len(bytes1) >= 1                  # deterministic PNGs
    for p in second["pictures"]:
        assert os.path.dirname(p) == str(pics)                    # only inside plot_dir
        assert open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert sorted(os.listdir(pics)) == sorted(bytes2)             # no temp files left behind


@pytest.mark.parametrize("name", [_param(n) for n in BREAKS_THE_CLAIM])
def test_a_run_that_does_not_show_the_claim_raises_claim_failed(tmp_path, name):
    with pytest.raises(ClaimFailedError, match="claim did not hold"):
        _run(name, tmp_path, **BREAKS_THE_CLAIM[name])


def test_a_different_seed_changes_the_traffic(tmp_path):
    a, _ = _run("mixed-clients", tmp_path, seed=1)
    b, _ = _run("mixed-clients", tmp_path, seed=2)
    assert a["pairs"][0]["key_grid"] != b["pairs"][0]["key_grid"]


# ---------------------------------------------------------------------- CLI

def test_cli_scenario_list_json_has_aliases(capsys):
    assert main(["scenario", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list(SCENARIOS)
    assert all(r["description"] and r["claim"] for r in rows)
    hot = next(r for r in rows if r["name"] == "hot-partition")
    assert hot["aliases"] == ["hot_keys"] and hot["params"]["partitions"] == 24
    assert main(["scenario", "list"]) == 0
    assert "hot_keys" in capsys.readouterr().out


def test_cli_scenario_show_prints_the_lab_text(capsys):
    assert main(["scenario", "show", "eager_vs_cooperative"]) == 0
    out = capsys.readouterr().out
    assert "What you will see" in out and scenario_module("rebalance-protocols").CLAIM in out


def test_cli_scenario_run_json_out_plot_dir_and_data_dir_subfolder(tmp_path, capsys):
    argv = ["scenario", "run", "mixed_clients", "--data-dir", str(tmp_path), "--seed", "3",
            "--param", "keys=50"]
    assert main(argv + ["--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result == run_scenario("mixed-clients", str(tmp_path / "other"), seed=3,
                                  echo=lambda s: None, keys=50)
    assert result["pictures"] == []                               # no --plot-dir, no pictures
    assert (tmp_path / "scenarios" / "mixed-clients" / MARKER).exists()
    out_file, pics = tmp_path / "result.json", tmp_path / "pics"
    assert main(argv + ["--json", str(out_file), "--plot-dir", str(pics)]) == 0
    out = capsys.readouterr().out
    assert "keys on two partitions" in out and f"picture: {pics / 'mixed-clients.png'}" in out
    saved = json.loads(out_file.read_text())
    assert saved["pictures"] == [str(pics / "mixed-clients.png")]
    assert {k: v for k, v in saved.items() if k != "pictures"} == \
        {k: v for k, v in result.items() if k != "pictures"}


def test_cli_unknown_lab_bad_param_or_failed_claim_exits_1_naming_it(tmp_path, capsys):
    assert main(["scenario", "run", "no_such_lab", "--data-dir", str(tmp_path)]) == 1
    assert "no_such_lab" in capsys.readouterr().err
    assert main(["scenario", "run", "hot_keys", "--data-dir", str(tmp_path), "--param", "speed=9"]) == 1
    assert "'speed'" in capsys.readouterr().err
    assert main(["scenario", "run", "retry-reorder", "--data-dir", str(tmp_path),
                 "--param", "fault_rate=0", "--param", "records=50"]) == 1
    assert "ClaimFailedError" in capsys.readouterr().err


def test_python_dash_m_runs_a_lab_with_the_same_options(tmp_path):
    out = subprocess.run([sys.executable, "-m", "kafkasim.scenarios.mixed_clients", "--json", "--seed", "5",
                          "--data-dir", str(tmp_path / "m"), "--param", "keys=40",
                          "--plot-dir", str(tmp_path / "pics")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["keys"] == 40 and os.path.exists(result["pictures"][0])
