"""The two cluster labs: rack-aware-placement and add-broker-reassign.

Each test names what a lab's text promises a student: the course's documented rack-aware
placement, every partition writable with acks=all after a whole rack fails when replicas
are spread over racks and exactly the partitions with two replicas in that rack refused
when they are not, nothing acknowledged lost; a new broker idle until the reassignment, a
plan as small as the lower bound whose copy is the new broker's bytes at the throttle's
pace, balance within 1.3, every record readable, fixed partitions moving far fewer keys
than hash mod N. Plus determinism (same seed → same text, JSON and PNG bytes), pictures,
the registry, and parameters that remove the effect making the lab raise ClaimFailedError.
"""

from __future__ import annotations

import json
import os

import pytest

from kafkasim.cli import main
from kafkasim.errors import ClaimFailedError, InvalidArgumentError
from kafkasim.partitioning.hashing import murmur2, to_positive
from kafkasim.scenarios import SCENARIOS, lab_text, list_scenarios, run_scenario

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
COURSE_EXAMPLE = {"0": [0, 3, 1], "1": [3, 1, 5], "2": [1, 5, 4], "3": [5, 4, 2],
                  "4": [4, 2, 0], "5": [2, 0, 3], "6": [0, 4, 2]}

_RUNS: dict = {}


def _run(name, base, seed=42, **params):
    lines = []
    result = run_scenario(name, str(base / "data"), seed=seed, echo=lines.append,
                          plot_dir=str(base / "pics"), **params)
    pngs = {os.path.basename(p): open(p, "rb").read() for p in result["pictures"]}
    return result, lines, pngs


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """Each lab's default run (seed 42, pictures), shared by the tests of this module."""
    def get(name):
        if name not in _RUNS:
            _RUNS[name] = _run(name, tmp_path_factory.mktemp(name))
        return _RUNS[name]
    yield get
    _RUNS.clear()


def _comparable(result):
    return json.dumps({**result, "pictures": [os.path.basename(p) for p in result["pictures"]]},
                      sort_keys=True)


# ------------------------------------------------------------------ registry and contract

def test_both_labs_are_registered_with_lab_text_claim_and_params():
    rows = {r["name"]: r for r in list_scenarios()}
    assert rows["rack-aware-placement"]["number"] == 9
    assert rows["add-broker-reassign"]["number"] == 10
    assert list(SCENARIOS).index("rack-aware-placement") < list(SCENARIOS).index("add-broker-reassign")
    for name in ("rack-aware-placement", "add-broker-reassign"):
        text = lab_text(name)
        assert "What you will see" in text and "Why" in text and "Kafka" in text
        assert rows[name]["claim"].endswith(".") and rows[name]["claim"] in text
    assert rows["add-broker-reassign"]["aliases"] == ["add_broker_reassign"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rack-aware-placement", "add-broker-reassign"])
def test_same_seed_gives_the_same_text_json_and_png_bytes(name, lab, tmp_path):
    first, lines1, pngs1 = lab(name)
    again, lines2, pngs2 = _run(name, tmp_path)
    assert lines1 == lines2
    assert _comparable(first) == _comparable(again)
    assert pngs1 == pngs2


@pytest.mark.parametrize("name,pictures", [
    ("rack-aware-placement", ["rack-aware-placement-grid.png"]),
    ("add-broker-reassign", ["add-broker-reassign-balance.png", "add-broker-reassign-key-moves.png"]),
])
def test_pictures_are_written_as_pngs_and_the_result_is_json(name, pictures, lab):
    result, lines, pngs = lab(name)
    assert sorted(pngs) == sorted(pictures)
    for data in pngs.values():
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    json.dumps(result)                      # the data behind the pictures is JSON-able
    assert "[" not in "\n".join(lines)      # no Python lists in the prose


def test_without_a_plot_dir_no_picture_is_written(tmp_path):
    lines = []
    result = run_scenario("add-broker-reassign", str(tmp_path / "d"), echo=lines.append,
                          records=900, keys=300)
    assert result["pictures"] == [] and not (tmp_path / "pics").exists()


# ------------------------------------------------------------------ rack-aware-placement

def test_rack_aware_lab_reproduces_the_course_placement(lab):
    result, lines, _ = lab("rack-aware-placement")
    assert result["rack_alternated"] == [0, 3, 1, 5, 4, 2]
    assert result["documented_assignment"] == COURSE_EXAMPLE
    aware = result["trials"][0]
    assert aware["mode"] == "rack-aware"
    assert all(n == 3 for n in aware["racks_spanned"].values())     # one replica per rack
    assert any("0 (rack1), 4 (rack2), 2 (rack3)" in line for line in lines)   # partition 6


def test_rack_aware_placement_keeps_every_partition_writable_when_a_rack_fails(lab):
    result, lines, _ = lab("rack-aware-placement")
    aware = result["trials"][0]
    assert aware["failed_brokers"] == [0, 5]
    for snap in aware["after"]:
        assert snap["leader"] not in (-1, 0, 5)
        assert len(snap["isr"]) == 2 and not set(snap["isr"]) & {0, 5}
    assert set(aware["writes_during"].values()) == {"ok"}
    assert aware["acked_records"] == 2 * 7 * 20 and aware["acked_lost"] == 0
    assert all(len(s["isr"]) == 3 for s in aware["restored"])       # the rack caught up and rejoined


def test_rack_unaware_placement_refuses_exactly_the_partitions_with_two_replicas_in_the_rack(lab):
    result, lines, _ = lab("rack-aware-placement")
    unaware = result["trials"][1]
    assert unaware["mode"] == "rack-unaware"
    doubled = {p for p, reps in unaware["assignment"].items() if len({0, 5} & set(reps)) >= 2}
    refused = {p for p, r in unaware["writes_during"].items() if r != "ok"}
    assert doubled and refused == doubled
    assert {unaware["writes_during"][p] for p in refused} == {"NotEnoughReplicasError"}
    for snap in unaware["after"]:
        assert not snap["offline"]                                   # a leader, but too few in sync
        assert snap["under_min_isr"] == (str(snap["partition"]) in doubled)
    assert unaware["acked_records"] == 7 * 20 + (7 - len(doubled)) * 20
    assert unaware["acked_lost"] == 0 and not unaware["partitions_misread"]
    assert any("NotEnoughReplicasError" in line for line in lines)


@pytest.mark.slow
def test_rack_aware_claim_fails_with_replication_factor_two(tmp_path):
    # RF 2 over 3 racks: a partition with a replica in the failed rack keeps one in-sync
    # replica, below min.insync.replicas=2, even when placed rack-aware
    lines = []
    with pytest.raises(ClaimFailedError, match="rack-aware writes during the failure"):
        run_scenario("rack-aware-placement", str(tmp_path / "d"), echo=lines.append,
                     replication_factor=2, records_per_partition=2)
    assert any("min(RF, racks) = 2" in line for line in lines)     # the lab says why


def test_rack_aware_lab_rejects_an_unknown_rack_and_brokers_without_racks(tmp_path):
    with pytest.raises(InvalidArgumentError, match="rack9"):
        run_scenario("rack-aware-placement", str(tmp_path / "d"), failed_rack="rack9")
    with pytest.raises(InvalidArgumentError, match="every broker needs a rack"):
        run_scenario("rack-aware-placement", str(tmp_path / "d"), brokers="0,1,2")


# ------------------------------------------------------------------ add-broker-reassign

def test_a_new_broker_sits_idle_until_the_reassignment(lab):
    result, lines, _ = lab("add-broker-reassign")
    added = result["loads_after_add"]
    assert added["replicas"]["3"] == 0 and added["bytes"]["3"] == 0 and added["leaders"]["3"] == 0
    assert added["replicas_ratio"] == "inf" and added["flagged"]
    assert result["loads_initial"]["replicas"] == {"0": 6, "1": 6, "2": 6}


def test_the_plan_moves_the_lower_bound_and_copies_the_new_replicas_at_the_throttle(lab):
    result, lines, _ = lab("add-broker-reassign")
    # 18 replicas on 4 brokers: 5, 5, 4, 4; three brokers keep 4 + 4 + 4 + 2 of their 6
    assert result["lower_bound_moves"] == 4 and result["replica_moves"] == 4
    moved = sum(len(set(result["plan"][p]) - set(result["current"][p])) for p in result["plan"])
    assert moved == 4
    final = result["loads_after_reassign"]
    assert sorted(final["replicas"].values()) == [4, 4, 5, 5]
    assert sorted(final["leaders"].values()) == [2, 2, 2, 3]
    assert final["replicas_ratio"] <= 1.3 and not final["flagged"]
    # everything on the new broker was copied there, at the throttle's pace
    assert result["bytes_moved"] == final["bytes"]["3"] > 0
    assert result["copy_simulated_ms"] == pytest.approx(
        result["bytes_moved"] * 1000 / result["throttle_bytes_per_s"], abs=1)
    assert result["verified"] and result["partitions_misread"] == []


def test_fixed_partitions_move_about_two_fifths_of_keys_and_mod_n_four_fifths(lab):
    result, _, _ = lab("add-broker-reassign")
    fp = result["fixed_partitions"]
    keys = [f"user-{i:05d}".encode() for i in range(3000)]
    mod_n = sum(1 for k in keys if to_positive(murmur2(k)) % 3 != to_positive(murmur2(k)) % 5)
    assert fp["modn_keys_moved"] == mod_n
    assert fp["partitions_moved"] == 24                               # 60 partitions, 3 → 5 nodes
    assert 0.3 < fp["fixed_keys_fraction"] < 0.5 < 0.7 < fp["modn_keys_fraction"]
    grid = result["key_grids"]
    assert sum(map(sum, grid["fixed"])) == sum(map(sum, grid["modn"])) == 3000
    stayed = sum(grid["fixed"][i][i] for i in range(3))
    assert 3000 - stayed == fp["fixed_keys_moved"]


def test_add_broker_claim_fails_when_too_few_partitions_to_balance(tmp_path):
    # 3 partitions x RF 2 = 6 replicas on 4 brokers: 2, 2, 1, 1 is as even as it gets,
    # and max/min 2 is beyond the 1.3 rule
    with pytest.raises(ClaimFailedError, match="max/min 2.00"):
        run_scenario("add-broker-reassign", str(tmp_path / "d"), echo=lambda s: None,
                     partitions=3, records=300, keys=100)


def test_add_broker_lab_rejects_a_zero_throttle(tmp_path):
    with pytest.raises(InvalidArgumentError, match="throttle_bytes_per_s"):
        run_scenario("add-broker-reassign", str(tmp_path / "d"), throttle_bytes_per_s=0)


def test_cli_runs_a_cluster_lab_with_json(tmp_path, capsys):
    argv = ["scenario", "run", "add-broker-reassign", "--data-dir", str(tmp_path), "--json",
            "--param", "records=900", "--param", "keys=300"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["loads_after_add"]["replicas"]["3"] == 0 and result["verified"]


@pytest.mark.slow
def test_another_seed_places_differently_but_still_one_replica_per_rack(tmp_path):
    lines = []
    result = run_scenario("rack-aware-placement", str(tmp_path / "d"), seed=7, echo=lines.append,
                          records_per_partition=2)
    aware = result["trials"][0]
    assert not result["cluster_matches_documented"]
    assert aware["assignment"] != COURSE_EXAMPLE
    assert all(n == 3 for n in aware["racks_spanned"].values())
    assert set(aware["writes_during"].values()) == {"ok"}
    assert any("another start index" in line for line in lines)
