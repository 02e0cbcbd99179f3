"""The assignment calculator (kafkasim.assignors.calculator) and ``kafkasim assign``."""

from __future__ import annotations

import io
import json

import pytest

import kafkasim.cli
from kafkasim.assignors.calculator import calculate, parse_spec, read_spec
from kafkasim.errors import InvalidArgumentError, InvalidConfigurationError

SPEC = {
    "partitions_per_topic": {"t0": 3, "t1": 3},
    "subscriptions": {"C0": ["t0", "t1"], "C1": ["t0", "t1"], "C2": ["t0", "t1"]},
    "previous_assignment": {"C0": [["t0", 0], ["t0", 1], ["t0", 2]], "C1": [["t1", 0], ["t1", 1], ["t1", 2]]},
    "generation": {"C0": 1, "C1": 1},
}


def test_cooperative_first_round_withholds_what_changes_owner():
    out = calculate("cooperative-sticky", parse_spec(SPEC))
    assert out["assignment"] == {"C0": [["t0", 0], ["t0", 1]], "C1": [["t1", 0], ["t1", 1]], "C2": []}
    assert out["revoked_first"] == [["t0", 2], ["t1", 2]]
    assert out["moved"] == [{"topic": "t0", "partition": 2, "from": "C0", "to": None},
                            {"topic": "t1", "partition": 2, "from": "C1", "to": None}]
    assert out["rounds"] == 1


def test_cooperative_follow_up_assigns_the_revoked_partitions():
    out = calculate("cooperative-sticky", parse_spec(SPEC), follow_up=True)
    assert out["assignment"] == {"C0": [["t0", 0], ["t0", 1]], "C1": [["t1", 0], ["t1", 1]],
                                 "C2": [["t0", 2], ["t1", 2]]}
    assert out["revoked_first"] == [["t0", 2], ["t1", 2]]
    assert [(m["topic"], m["partition"], m["from"], m["to"]) for m in out["moved"]] == [
        ("t0", 2, "C0", "C2"), ("t1", 2, "C1", "C2")]
    assert out["rounds"] == 2


def test_eager_sticky_moves_in_one_round_and_range_ignores_history():
    sticky = calculate("sticky", parse_spec(SPEC))
    assert sticky["assignment"]["C2"] == [["t0", 2], ["t1", 2]] and sticky["revoked_first"] == []
    rng = calculate("range", parse_spec(SPEC), follow_up=True)
    assert rng["assignment"] == {"C0": [["t0", 0], ["t1", 0]], "C1": [["t0", 1], ["t1", 1]],
                                 "C2": [["t0", 2], ["t1", 2]]}
    assert len(rng["moved"]) == 4 and rng["rounds"] == 1


def test_static_members_change_the_order():
    spec = {"partitions_per_topic": {"t": 3}, "subscriptions": {"a": ["t"], "b": ["t"]},
            "group_instance_ids": {"b": "i-0"}}
    assert calculate("range", parse_spec(spec))["assignment"] == {"a": [["t", 2]], "b": [["t", 0], ["t", 1]]}


def test_previous_owner_is_the_highest_generation_and_a_tie_has_none():
    spec = parse_spec({"partitions_per_topic": {"t": 2}, "subscriptions": {"A": ["t"], "B": ["t"]},
                       "previous_assignment": {"A": [["t", 0]], "B": [["t", 0], ["t", 1]], "Gone": [["t", 1]]},
                       "generation": {"A": 3, "B": 2, "Gone": 2}})
    owners = spec.previous_owners()
    assert owners == {("t", 0): "A"}   # t-1 claimed by B and Gone in generation 2: no valid owner


RACKED = {"subscriptions": {"C0": ["t0"]}, "partitions_per_topic": {"t0": 2}}


@pytest.mark.parametrize("extra, field", [
    ({"racks": {"C9": "a"}}, "racks.C9"),
    ({"racks": {"C0": ""}}, "racks.C0"),
    ({"racks": {"C0": 1}}, "racks.C0"),
    ({"racks": ["a"]}, "racks"),
    ({"partition_racks": {"t9": {"0": ["a"]}}}, "partition_racks.t9"),
    ({"partition_racks": {"t0": ["a"]}}, "partition_racks.t0"),
    ({"partition_racks": {"t0": {"2": ["a"]}}}, "partition_racks.t0.2"),
    ({"partition_racks": {"t0": {"-1": ["a"]}}}, "partition_racks.t0.-1"),
    ({"partition_racks": {"t0": {"x": ["a"]}}}, "partition_racks.t0.x"),
    ({"partition_racks": {"t0": {"0": "a"}}}, "partition_racks.t0.0"),
    ({"partition_racks": {"t0": {"0": ["a", None]}}}, "partition_racks.t0.0"),
    ({"partition_racks": "t0"}, "partition_racks"),
])
def test_bad_rack_fields_name_the_field(extra, field):
    with pytest.raises(InvalidArgumentError, match=field.replace(".", r"\.") + ":"):
        parse_spec({**RACKED, **extra})


RACK_SPEC = {"partitions_per_topic": {"t0": 3}, "subscriptions": {"C0": ["t0"], "C1": ["t0"]},
             "racks": {"C0": "a", "C1": "b"},
             "partition_racks": {"t0": {"0": ["b"], "1": ["a"], "2": ["b"]}}}


@pytest.mark.parametrize("strategy", ["range", "sticky", "cooperative-sticky"])
def test_partition_racks_make_the_assignment_rack_aware(strategy):
    """Range without racks gives C0 t0-0, t0-1; with racks each member gets partitions on its rack."""
    out = calculate(strategy, parse_spec(RACK_SPEC))
    assert out["assignment"] == {"C0": [["t0", 1]], "C1": [["t0", 0], ["t0", 2]]}
    assert out["rack_misaligned"] == []


def test_rack_misaligned_lists_partitions_off_their_members_rack():
    spec = dict(RACK_SPEC, partition_racks={"t0": {"0": ["c"], "1": ["a"], "2": ["b"]}})
    out = calculate("range", parse_spec(spec))
    assert out["assignment"] == {"C0": [["t0", 0], ["t0", 1]], "C1": [["t0", 2]]}
    assert out["rack_misaligned"] == [{"topic": "t0", "partition": 0, "member": "C0", "rack": "a"}]
    without = {k: v for k, v in RACK_SPEC.items() if k != "partition_racks"}
    plain = calculate("range", parse_spec(without))
    assert plain["assignment"] == {"C0": [["t0", 0], ["t0", 1]], "C1": [["t0", 2]]}
    assert "rack_misaligned" not in plain      # no partition racks: the output is the rack-unaware one


@pytest.mark.parametrize("spec, field", [
    ([], "expected a JSON object"),
    ({}, "subscriptions"),
    ({"subscriptions": {}, "extra": 1}, "extra"),
    ({"subscriptions": {"C0": "t0"}}, "subscriptions.C0"),
    ({"subscriptions": {"C0": ["t0"]}, "partitions_per_topic": {"t0": -1}}, "partitions_per_topic.t0"),
    ({"subscriptions": {"C0": ["t0"]}, "partitions_per_topic": {"t0": True}}, "partitions_per_topic.t0"),
    ({"subscriptions": {"C0": ["t0"]}, "previous_assignment": {"C0": [["t0"]]}}, "previous_assignment.C0"),
    ({"subscriptions": {"C0": ["t0"]}, "previous_assignment": {"C0": [["t0", 0], ["t0", 0]]}},
     "previous_assignment.C0"),
    ({"subscriptions": {"C0": ["t0"]}, "generation": {"C0": "1"}}, "generation.C0"),
    ({"subscriptions": {"C0": ["t0"]}, "group_instance_ids": {"C9": "i"}}, "group_instance_ids.C9"),
    ({"subscriptions": {"C0": ["t0"], "C1": ["t0"]}, "group_instance_ids": {"C0": "i", "C1": "i"}},
     "group_instance_ids.C1"),
])
def test_bad_spec_names_the_field(spec, field):
    with pytest.raises(InvalidArgumentError, match=field.replace(".", r"\.")):
        parse_spec(spec)


def test_read_spec_file_and_errors(tmp_path):
    good = tmp_path / "spec.json"
    good.write_text(json.dumps(SPEC))
    assert read_spec(str(good)).subscriptions["C2"] == ["t0", "t1"]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidArgumentError, match="bad.json.*not valid JSON"):
        read_spec(str(bad))
    with pytest.raises(InvalidArgumentError, match="missing.json"):
        read_spec(str(tmp_path / "missing.json"))


def test_unknown_strategy_is_a_configuration_error():
    with pytest.raises(InvalidConfigurationError, match="'nope'"):
        calculate("nope", parse_spec(SPEC))


@pytest.fixture
def cli(monkeypatch):
    """The real ``kafkasim`` entry point with only this area's command registered."""
    monkeypatch.setattr(kafkasim.cli, "COMMAND_MODULES", ["kafkasim.cli.assign"])
    return kafkasim.cli.main


def test_cli_json_from_file(cli, tmp_path, capsys):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC))
    assert cli(["assign", "--strategy", "cooperative-sticky", "--spec", str(path), "--json", "--follow-up"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["assignment"]["C2"] == [["t0", 2], ["t1", 2]] and out["rounds"] == 2


def test_cli_text_from_stdin(cli, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(SPEC)))
    assert cli(["assign", "--strategy", "cooperative-sticky", "--spec", "-"]) == 0
    text = capsys.readouterr().out
    assert "MEMBER" in text and "C2" in text
    assert "revoked first (2): t0-2, t1-2" in text
    assert "t0-2 C0->(none)" in text


def test_cli_text_shows_rack_misaligned(cli, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(
        dict(RACK_SPEC, partition_racks={"t0": {"0": ["c"], "1": ["a"], "2": ["b"]}}))))
    assert cli(["assign", "--strategy", "range", "--spec", "-"]) == 0
    assert "rack-misaligned (1): t0-0 C0@a" in capsys.readouterr().out


def test_cli_bad_spec_exits_1_naming_the_field(cli, tmp_path, capsys):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"subscriptions": {"C0": ["t0"]}, "generation": {"C0": "x"}}))
    assert cli(["assign", "--strategy", "range", "--spec", str(path)]) == 1
    err = capsys.readouterr().err
    assert "InvalidArgumentError" in err and "generation.C0" in err


def test_cli_help_has_example(cli, capsys):
    with pytest.raises(SystemExit):
        cli(["assign", "--help"])
    assert "Example:" in capsys.readouterr().out
