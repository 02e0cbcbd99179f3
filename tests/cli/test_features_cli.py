"""``kafkasim features`` on a data dir, as kafka-features.sh: describe's line, upgrade /
downgrade / disable with Kafka's messages, --dry-run, and exit 1 with "N out of M operation(s)
failed." when the broker refuses (a lowered level asked as an upgrade, an unknown feature)."""

from __future__ import annotations

import json

import pytest

from kafkasim.broker import Broker
from kafkasim.cli import main


@pytest.fixture
def data(tmp_path):
    path = str(tmp_path / "data")
    with Broker(path):
        pass
    return path


def run(capsys, data, *argv):
    code = main(["features", *argv, "--data-dir", data])
    out, err = capsys.readouterr()
    return code, out, err


def finalized(data) -> tuple[dict, int]:
    with Broker(data) as b:
        return b.finalized_features, b.finalized_features_epoch


def test_describe_prints_kafkas_line(capsys, data):
    code, out, _ = run(capsys, data, "describe")
    assert (code, out) == (0, "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t"
                              "FinalizedVersionLevel: 2\tEpoch: 0\n")
    code, out, _ = run(capsys, data, "describe", "--json")
    assert json.loads(out) == [{"feature": "transaction.version", "supported_min_version": 0,
                                "supported_max_version": 2, "finalized_version_level": 2, "epoch": 0}]


def test_downgrade_dry_run_then_downgrade_then_disable_and_upgrade(capsys, data):
    assert run(capsys, data, "downgrade", "--feature", "transaction.version=1", "--dry-run")[:2] == (
        0, "transaction.version can be downgraded to 1.\n")
    assert finalized(data) == ({"transaction.version": 2}, 0)
    assert run(capsys, data, "downgrade", "--feature", "transaction.version=1")[:2] == (
        0, "transaction.version was downgraded to 1.\n")
    assert finalized(data) == ({"transaction.version": 1}, 1)
    assert run(capsys, data, "disable", "--feature", "transaction.version")[:2] == (
        0, "transaction.version was disabled.\n")
    assert run(capsys, data, "describe")[1].endswith("FinalizedVersionLevel: 0\tEpoch: 2\n")
    assert run(capsys, data, "upgrade", "--feature", "transaction.version=2")[:2] == (
        0, "transaction.version was upgraded to 2.\n")
    assert finalized(data) == ({"transaction.version": 2}, 3)


@pytest.mark.parametrize("argv, line", [
    (["upgrade", "--feature", "transaction.version=1"],
     "Could not upgrade transaction.version to 1. Invalid update version 1 for feature transaction.version. "
     "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe "
     "downgrade."),
    (["upgrade", "--feature", "transaction.version=3", "--dry-run"],
     "Can not upgrade transaction.version to 3. Invalid update version 3 for feature transaction.version. "
     "Broker 0 only supports versions 0-2."),
    (["upgrade", "--feature", "kraft.version=1"],
     "Could not upgrade kraft.version to 1. Invalid update version 1 for feature kraft.version. The broker "
     "does not support the feature (supported: transaction.version)."),
])
def test_a_refused_update_fails_with_kafkas_lines(capsys, data, argv, line):
    code, out, err = run(capsys, data, *argv)
    assert (code, out, err) == (1, line + "\n", "1 out of 1 operation(s) failed.\n")
    assert finalized(data) == ({"transaction.version": 2}, 0)


@pytest.mark.parametrize("argv, message", [
    (["upgrade", "--feature", "transaction.version"],
     "Can't parse feature=level string transaction.version: equals sign not found."),
    (["upgrade", "--feature", "transaction.version=two"],
     "Can't parse feature=level string transaction.version=two: unable to parse two as a short."),
    (["downgrade", "--feature", "transaction.version=1", "--feature", "transaction.version=0"],
     "Feature transaction.version was specified more than once."),
    (["upgrade"], "You must specify at least one feature to upgrade"),
])
def test_bad_feature_arguments_are_named(capsys, data, argv, message):
    code, out, err = run(capsys, data, *argv)
    assert code == 1 and out == "" and message in err
