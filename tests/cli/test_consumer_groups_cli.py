"""``kafkasim groups`` for consumer groups (KIP-848), as Kafka 4's kafka-consumer-groups.sh:
``list --type``, ``describe --group G --members --verbose`` and ``--state --verbose``, read from
the records a stopped broker left in ``__consumer_offsets`` (no broker running) and from a
running server (ConsumerGroupDescribe)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from kafkasim.admin import groups as admin
from kafkasim.broker import Broker
from kafkasim.cli import main
from kafkasim.consumer import Consumer
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kafkasim.types import TopicPartition
from kafkasim.view.readonly import ReadOnlyDataDir

A, B = str(uuid.UUID(int=0xA)), str(uuid.UUID(int=0xB))


def _hb(b, member, epoch, **kw):
    return b.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest("orders-app", member, epoch, **kw),
                                      client_id="app-" + member[-1], client_host="/127.0.0.1")


@pytest.fixture
def data(tmp_path):
    """A data dir left mid-reconciliation: A owned all 4 partitions, B joined, A was asked to
    give 2 of them up and has not yet (group epoch 2, target epoch 2, A at epoch 1)."""
    d = str(tmp_path / "data")
    with Broker(d) as b:
        b.create_topic("orders", 4)
        join = {"rebalance_timeout_ms": 30_000, "subscribed_topic_names": ("orders",), "topic_partitions": {}}
        ra = _hb(b, A, 0, **join)
        _hb(b, A, 1, topic_partitions=dict(ra.assignment))
        _hb(b, B, 0, **join)
        _hb(b, A, 1, topic_partitions=dict(ra.assignment))
        c = Consumer(b, group_id="legacy", enable_auto_commit=False)     # a classic group with an offset
        c.assign([TopicPartition("orders", 0)])
        c.commit({TopicPartition("orders", 0): 0})
        c.close()
    return d


def test_list_type_prints_kafkas_type_column_and_filters(data, capsys):
    assert main(["groups", "list", "--type", "--state", "--data-dir", data]) == 0
    lines = capsys.readouterr().out.strip("\n").split("\n")
    assert lines[0].split() == ["GROUP", "TYPE", "STATE"]
    assert [line.split() for line in lines[1:]] == [["legacy", "Classic", "Empty"],
                                                    ["orders-app", "Consumer", "Reconciling"]]
    assert main(["groups", "list", "--type", "consumer", "--data-dir", data]) == 0
    assert [line.split() for line in capsys.readouterr().out.strip("\n").split("\n")] == [["GROUP", "TYPE"],
                                                                             ["orders-app", "Consumer"]]
    assert main(["groups", "list", "--type", "CLASSIC,share", "--json", "--data-dir", data]) == 0
    assert [g["group_id"] for g in json.loads(capsys.readouterr().out)] == ["legacy"]


def test_list_type_refuses_an_unknown_type_naming_it(data, capsys):
    assert main(["groups", "list", "--type", "consumer,bogus", "--data-dir", data]) != 0
    err = capsys.readouterr().err
    assert "Invalid types list 'consumer,bogus'. Valid types are: Consumer, Classic, Share" in err


def test_describe_members_verbose_shows_epochs_and_assignments_from_the_records(data, capsys):
    assert main(["groups", "describe", "--group", "orders-app", "--members", "--verbose", "--data-dir", data]) == 0
    lines = capsys.readouterr().out.strip("\n").split("\n")
    assert lines[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                                "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "UPGRADED"]
    rows = {r.split()[1]: r.split() for r in lines[1:]}
    assert {r[-1] for r in rows.values()} == {"true"}      # both speak the consumer protocol
    # A is still at epoch 1 owning all four (two pending revocation are not in its assignment);
    # B is at epoch 2 with nothing yet: its partitions are still A's.
    a, b = rows[A], rows[B]
    assert a[2:5] == ["/127.0.0.1", "app-a", "2"] and a[5] == "1"
    assert b[2:5] == ["/127.0.0.1", "app-b", "0"] and b[5:7] == ["2", "-"]
    assert a[7] == b[7] == "2"
    targets = {a[8], b[-2]}
    assert len(targets) == 2 and all(t.startswith("orders:") for t in targets)


def test_describe_state_verbose_shows_group_and_target_epochs(data, capsys):
    assert main(["groups", "describe", "orders-app", "--state", "--verbose", "--data-dir", data]) == 0
    lines = capsys.readouterr().out.strip("\n").split("\n")
    assert lines[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                                "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert lines[1].split() == ["orders-app", "(0)", "uniform", "Reconciling", "2", "2", "2"]
    assert main(["groups", "describe", "--group", "orders-app", "--state", "--json", "--data-dir", data]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["type"], d["group_epoch"], d["target_assignment_epoch"]) == ("consumer", 2, 2)


def test_describe_needs_one_group(data, capsys):
    assert main(["groups", "describe", "--state", "--data-dir", data]) != 0
    assert "no group to describe" in capsys.readouterr().err
    assert main(["groups", "describe", "a", "--group", "b", "--data-dir", data]) != 0
    assert "'a'" in capsys.readouterr().err


def test_the_files_answer_what_the_restarted_broker_answers(data):
    ro = ReadOnlyDataDir(data)
    answers = [admin.members(ro, "orders-app"), admin.state(ro, "orders-app"), admin.describe(ro, "orders-app"),
               ro.list_groups()]
    assert len(answers[2]["rows"]) == 2        # A's assigned two (those pending revocation are not listed)
    with Broker(data) as b:
        assert answers == [admin.members(b, "orders-app"), admin.state(b, "orders-app"),
                           admin.describe(b, "orders-app"), b.list_groups()]


@pytest.mark.slow
def test_describe_through_a_running_server(data):
    from tests.server.conftest import start_server

    served = start_server(data)
    try:
        def run(*argv):
            return json.loads(subprocess.run(
                [sys.executable, "-m", "kafkasim", "groups", *argv, "--bootstrap-server", served.bootstrap,
                 "--json"], capture_output=True, text=True, timeout=60, check=True).stdout)
        members = run("describe", "--group", "orders-app", "--members", "--verbose")
        state = run("describe", "--group", "orders-app", "--state", "--verbose")
        listed = run("list", "--type", "consumer")
    finally:
        served.stop()
    ro = ReadOnlyDataDir(data)
    assert members["rows"] == admin.members(ro, "orders-app")["rows"]
    assert {r["current_epoch"] for r in members["rows"]} == {1, 2}
    assert (state["group_epoch"], state["target_assignment_epoch"], state["state"]) == (2, 2, "Reconciling")
    assert [g["group_id"] for g in listed] == ["orders-app"]
