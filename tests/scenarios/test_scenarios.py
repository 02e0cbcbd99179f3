"""The scenario labs: each runs on a real broker in tmp_path and shows what its lab teaches.

Every test names the behaviour a lab's text promises (4 idle consumers at 10; eager
revokes everything, cooperative only what moves; 6→8 moves the keys murmur2 says it
moves; retries reorder only without idempotence; a zombie's commit fails ...), plus
determinism (same seed → same result and same printed text), the registry, the data-dir
safety rule and the CLI. Small params keep the module well under a minute.
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
from kafkasim.errors import InvalidArgumentError
from kafkasim.partitioning.hashing import murmur2
from kafkasim.scenarios import SCENARIOS, list_scenarios, parse_params, run_scenario, scenario_module
from kafkasim.scenarios._common import MARKER, fresh_broker

SMALL = {
    "hot_keys": {"records": 4000, "keys": 300, "partitions": 8},
    "group_scaling": {},
    "eager_vs_cooperative": {"trials": 2},
    "add_partitions": {"keys": 200, "records_before": 2, "records_after": 2},
    "mixed_clients": {"keys": 300},
    "retry_reorder": {"records": 200},
    "consumer_crash": {"records_per_partition": 20},
}


def _run(name, tmp_path, seed=42, **extra):
    lines = []
    result = run_scenario(name, str(tmp_path / name), seed=seed, echo=lines.append,
                          **{**SMALL[name], **extra})
    return result, lines


def _p(key: bytes, n: int) -> int:
    """Kafka's BuiltInPartitioner.partitionForKey, written out: toPositive(murmur2) % n."""
    return (murmur2(key) & 0x7FFFFFFF) % n


# ---------------------------------------------------------------------- registry

def test_registry_names_a_module_with_params_run_and_lab_text_for_every_scenario():
    assert list(SCENARIOS) == ["hot_keys", "group_scaling", "eager_vs_cooperative", "add_partitions",
                               "mixed_clients", "retry_reorder", "consumer_crash"]
    for name in SCENARIOS:
        mod = scenario_module(name)
        assert callable(mod.run) and isinstance(mod.PARAMS, dict)
        assert mod.__doc__ and "What you will see" in mod.__doc__ and "Kafka" in mod.__doc__
        assert set(SMALL[name]) <= set(mod.PARAMS)
    assert [r["name"] for r in list_scenarios()] == list(SCENARIOS)


def test_unknown_scenario_and_bad_params_raise_invalid_argument_naming_them(tmp_path):
    with pytest.raises(InvalidArgumentError, match="nope"):
        scenario_module("nope")
    with pytest.raises(InvalidArgumentError, match="'bogus'"):
        parse_params("hot_keys", ["bogus=1"])
    with pytest.raises(InvalidArgumentError, match="'partitions'.*integer"):
        parse_params("hot_keys", ["partitions=many"])
    with pytest.raises(InvalidArgumentError, match="'bogus'"):
        run_scenario("mixed_clients", str(tmp_path / "x"), bogus=2)
    assert parse_params("group_scaling", ["sizes=1,4", "assignors=range"]) == {
        "sizes": [1, 4], "assignors": ["range"]}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=8), st.integers(-10**9, 10**9))
def test_params_parse_with_the_type_of_their_default(sizes, n):
    parsed = parse_params("group_scaling", ["sizes=" + ",".join(map(str, sizes)), f"partitions={n}"])
    assert parsed == {"sizes": sizes, "partitions": n}


def test_data_dir_is_wiped_only_when_a_scenario_made_it(tmp_path):
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


# ---------------------------------------------------------------------- the labs

def test_hot_keys_concentrates_load_and_both_fixes_spread_it(tmp_path):
    r, _ = _run("hot_keys", tmp_path)
    n = r["partitions"]
    for variant in ("murmur2", "hot_keys_partitioner", "composite"):
        assert sum(r[variant]["counts"]) == r["records"]
    top = r["hot_keys"][0]
    assert top["partition"] == _p(top["key"].encode(), n)
    # every record of a key goes to its murmur2 partition, so that partition holds them all
    assert r["murmur2"]["counts"][top["partition"]] >= top["records"]
    assert r["murmur2"]["max_over_avg"] > 1.8
    assert r["hot_keys_partitioner"]["max_over_avg"] < r["murmur2"]["max_over_avg"]
    assert r["composite"]["max_over_avg"] < r["murmur2"]["max_over_avg"]


def test_group_scaling_one_owner_per_partition_and_four_idle_at_ten(tmp_path):
    r, lines = _run("group_scaling", tmp_path)
    for assignor in ("range", "cooperative-sticky"):
        steps = r["assignors"][assignor]
        assert [s["consumers"] for s in steps] == [1, 2, 3, 6, 10]
        assert [s["idle_count"] for s in steps] == [0, 0, 0, 0, 4]
        for s in steps:
            owned = sorted(p for tps in s["assignment"].values() for p in tps)
            assert owned == list(range(6))                       # each partition exactly once
        gens = [s["generation"] for s in steps]
        assert gens == sorted(set(gens))                         # a new generation per step
    rng = r["assignors"]["range"]
    assert rng[1]["assignment"] == {"c00": [0, 1, 2], "c01": [3, 4, 5]}   # RangeAssignor's ranges
    assert rng[2]["assignment"] == {"c00": [0, 1], "c01": [2, 3], "c02": [4, 5]}
    # cooperative scale steps that move partitions take two rebalances
    coop = r["assignors"]["cooperative-sticky"]
    assert coop[1]["generation"] - coop[0]["generation"] == 2
    assert any("4 are idle" in line for line in lines)


def test_eager_revokes_everything_cooperative_only_what_moves_and_pauses_less(tmp_path):
    r, _ = _run("eager_vs_cooperative", tmp_path)
    eager, coop = r["eager"], r["cooperative"]
    assert eager["rebalance_rounds"] == [1] and coop["rebalance_rounds"] == [2]
    for t in eager["trials"]:
        assert t["revoked_count"] == r["partitions"]
    for t in coop["trials"]:
        moved = sum(len(set(t["before"].get(c, [])) - set(ps)) for c, ps in t["after"].items())
        assert 0 < t["revoked_count"] < r["partitions"]
        assert t["revoked_count"] == moved         # only partitions that changed owner
        assert sorted(p for ps in t["after"].values() for p in ps) == list(range(r["partitions"]))
    assert coop["mean_paused_partition_seconds"] < eager["mean_paused_partition_seconds"]


def test_add_partitions_moves_exactly_the_keys_murmur2_moves_and_breaks_order(tmp_path):
    r, _ = _run("add_partitions", tmp_path)
    keys = kafkasim.scenarios.add_partitions.make_keys(42, SMALL["add_partitions"]["keys"])
    direct = sum(1 for k in keys if _p(k, 6) != _p(k, 8))
    assert r["moved_keys"] == direct and r["moved_equals_prediction"]
    assert r["moved_fraction"] == round(direct / len(keys), 4)
    assert r["expected_moved_fraction"] == 0.75          # only h mod 24 < 6 keeps its partition
    assert r["keys_seen_out_of_order"] > 0
    for e in r["examples"]:
        assert e["seq_order_seen"] != sorted(e["seq_order_seen"])


def test_mixed_clients_split_keys_match_crc32_versus_murmur2(tmp_path):
    r, _ = _run("mixed_clients", tmp_path)
    keys = kafkasim.scenarios.mixed_clients.make_keys(42, SMALL["mixed_clients"]["keys"])
    n = r["partitions"]
    direct = sum(1 for k in keys if zlib.crc32(k) % n != _p(k, n))
    crc, compatible = r["pairs"]
    assert crc["other"] == "consistent_random" and crc["split_keys"] == direct
    assert 0.7 < crc["split_fraction"] < 0.95
    assert compatible["other"] == "murmur2_random" and compatible["split_keys"] == 0
    assert set(crc["records_per_producer"].values()) == {len(keys) * 2}


def test_retries_reorder_and_duplicate_only_without_idempotence(tmp_path):
    r, _ = _run("retry_reorder", tmp_path)
    plain, idem = r["not_idempotent"], r["idempotent"]
    assert plain["injected_faults"] > 0 and idem["injected_faults"] > 0
    assert plain["out_of_order"] > 0 and plain["duplicates"] > 0 and plain["lost"] == 0
    assert idem["in_order"] and idem["lost"] == 0
    assert idem["records_in_log"] == r["records"]
    assert idem["duplicate_batches_detected_by_broker"] > 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 30), max_size=60))
def test_audit_log_counts_duplicates_and_order_of_first_copies(seqs):
    a = kafkasim.scenarios.retry_reorder.audit_log(seqs, 31)
    assert a["duplicates"] == len(seqs) - len(set(seqs))
    assert a["lost"] == 31 - len(set(seqs))
    firsts = list(dict.fromkeys(seqs))
    assert (a["out_of_order"] == 0) == (firsts == sorted(firsts))


def test_consumer_crash_eviction_redelivery_and_zombie_commit_rejected(tmp_path):
    r, _ = _run("consumer_crash", tmp_path)
    timeout = r["session_timeout_ms"]
    assert timeout - 3_000 <= r["evicted_after_ms"] <= timeout + 100
    assert r["generations"][1] > r["generations"][0]
    survivors = {c: ps for c, ps in r["assignment_after"].items()}
    assert r["victim"] not in survivors
    assert sorted(p for ps in survivors.values() for p in ps) == list(range(r["partitions"]))
    assert r["victim_uncommitted"] > 0
    assert r["redelivered"] == r["victim_uncommitted"]            # at-least-once, exactly those
    assert all(p in r["victim_partitions"] for p, _ in r["redelivered_records"])
    assert r["every_record_processed"] and r["committed_end"]
    assert r["zombie_commit"]["commit_rejected"]
    assert r["zombie_commit"]["error"] == "CommitFailedError"


# ---------------------------------------------------------------------- determinism

@pytest.mark.parametrize("name", list(SMALL))
def test_same_seed_gives_the_same_result_and_text(tmp_path, name):
    first, text1 = _run(name, tmp_path)
    second, text2 = _run(name, tmp_path)
    assert first == second
    assert text1 == text2
    json.dumps(first)                       # JSON-able


def test_a_different_seed_changes_the_traffic(tmp_path):
    a, _ = _run("hot_keys", tmp_path, seed=1)
    b, _ = _run("hot_keys", tmp_path, seed=2)
    assert a["murmur2"]["counts"] != b["murmur2"]["counts"]


# ---------------------------------------------------------------------- CLI

def test_cli_scenario_list_json(capsys):
    assert main(["scenario", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list(SCENARIOS)
    assert all(r["description"] for r in rows)
    assert rows[0]["params"]["partitions"] == 12


def test_cli_scenario_run_json_and_text_in_data_dir_subfolder(tmp_path, capsys):
    argv = ["scenario", "run", "mixed-clients", "--data-dir", str(tmp_path), "--seed", "3",
            "--param", "keys=50"]
    assert main(argv + ["--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result == run_scenario("mixed_clients", str(tmp_path / "other"), seed=3,
                                  echo=lambda s: None, keys=50)
    assert (tmp_path / "scenarios" / "mixed_clients" / MARKER).exists()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "keys on two partitions" in out and "consistent_random" in out


def test_cli_unknown_scenario_or_param_exits_1_naming_it(tmp_path, capsys):
    assert main(["scenario", "run", "no_such_lab", "--data-dir", str(tmp_path)]) == 1
    assert "no_such_lab" in capsys.readouterr().err
    assert main(["scenario", "run", "hot_keys", "--data-dir", str(tmp_path), "--param", "speed=9"]) == 1
    assert "'speed'" in capsys.readouterr().err


def test_python_dash_m_runs_a_scenario(tmp_path):
    out = subprocess.run([sys.executable, "-m", "kafkasim.scenarios.mixed_clients", "--json", "--seed", "5",
                          "--data-dir", str(tmp_path / "m"), "--param", "keys=40"],
                         capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["keys"] == 40
