"""``kafkasim share-groups`` as Kafka 4.2's kafka-share-groups.sh (list, describe --offsets /
--members / --state with --verbose, reset-offsets, delete-offsets, delete) and ``kafkasim consume
--share-group``, over a data dir a real Broker and real ShareConsumers left behind."""

from __future__ import annotations

import json

import pytest

from kafkasim.broker import Broker
from kafkasim.cli import main
from kafkasim.consumer import ShareConsumer

EARLIEST = {"share.auto.offset.reset": "earliest"}


def _fill(b, n=10, topic="jobs"):
    b.append_records(topic, 0, [(1_000 + i, None, f"v{i}".encode(), ()) for i in range(n)])


def _lines(text):
    return [line.split() for line in text.strip("\n").split("\n") if line.strip()]


@pytest.fixture
def empty_group(tmp_path):
    """Share group 'workers' after one consumer accepted offsets 0..5 of 10 and closed (Empty)."""
    d = str(tmp_path / "data")
    with Broker(d, broker_configs=EARLIEST) as b:
        b.create_topic("jobs", 1)
        _fill(b)
        c = ShareConsumer(b, group_id="workers", client_id="w1", seed=1, max_poll_records=6)
        c.subscribe(["jobs"])
        while not c.poll(timeout_ms=100):
            pass
        c.close()                      # implicit: 0..5 accepted, 6..9 released
    return d


@pytest.fixture
def live_group(tmp_path):
    """Share group 'workers' with two members that never closed (Stable), plus a consumer group."""
    d = str(tmp_path / "live")
    with Broker(d, broker_configs=EARLIEST) as b:
        b.create_topic("jobs", 2)
        _fill(b)
        cs = [ShareConsumer(b, group_id="workers", client_id=f"w{i}", seed=i) for i in (1, 2)]
        for c in cs:
            c.subscribe(["jobs"])
            c.poll(timeout_ms=100)
        members = sorted(c.member_id for c in cs)
    return d, members


def test_list_and_list_state(live_group, capsys):
    d, _ = live_group
    assert main(["share-groups", "list", "--data-dir", d]) == 0
    assert capsys.readouterr().out.split() == ["workers"]
    assert main(["share-groups", "list", "--state", "--data-dir", d]) == 0
    assert _lines(capsys.readouterr().out) == [["GROUP", "STATE"], ["workers", "Stable"]]
    assert main(["share-groups", "list", "--state", "empty", "--json", "--data-dir", d]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["share-groups", "list", "--state", "Stable,bogus", "--data-dir", d]) == 1
    assert "Invalid state list 'Stable,bogus'. Valid states are: Empty, Stable, Dead, Unknown" \
        in capsys.readouterr().err


def test_describe_members_and_state_verbose(live_group, capsys):
    d, members = live_group
    assert main(["share-groups", "describe", "--group", "workers", "--members", "--verbose", "--data-dir", d]) == 0
    rows = _lines(capsys.readouterr().out)
    assert rows[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT"]
    assert [r[1] for r in rows[1:]] == members
    covered = set()
    for r in rows[1:]:
        assert r[0] == "workers" and r[-1].startswith("jobs:") and int(r[5]) > 0
        parts = r[-1][len("jobs:"):].split(",")
        assert r[4] == str(len(parts))
        covered.update(parts)
    assert covered == {"0", "1"}                   # the simple assignor covers every partition
    assert main(["share-groups", "describe", "workers", "--state", "--verbose", "--data-dir", d]) == 0
    rows = _lines(capsys.readouterr().out)
    assert rows[0] == ["GROUP", "COORDINATOR", "(ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert rows[1][0] == "workers" and rows[1][2] == "Stable" and rows[1][-1] == "2"
    assert main(["share-groups", "describe", "--all-groups", "--state", "--json", "--data-dir", d]) == 0
    (state,) = json.loads(capsys.readouterr().out)
    assert (state["group"], state["state"], state["members"]) == ("workers", "Stable", 2)


def test_describe_offsets_shows_the_start_offset_and_lag(empty_group, capsys):
    assert main(["share-groups", "describe", "--group", "workers", "--data-dir", empty_group]) == 0
    assert _lines(capsys.readouterr().out) == [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                                               ["workers", "jobs", "0", "6", "4"]]
    assert main(["share-groups", "describe", "--group", "workers", "--offsets", "--verbose", "--json",
                 "--data-dir", empty_group]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert (row["topic"], row["partition"], row["start_offset"], row["lag"]) == ("jobs", 0, 6, 4)
    assert main(["share-groups", "describe", "--group", "workers", "--members", "--data-dir", empty_group]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == "" and "Share group 'workers' has no active members." in out.err


def test_describe_a_group_that_is_not_a_share_group(empty_group, capsys):
    assert main(["share-groups", "describe", "--group", "nobody", "--data-dir", empty_group]) == 1
    assert "Share group 'nobody' does not exist." in capsys.readouterr().err
    assert main(["share-groups", "describe", "--data-dir", empty_group]) == 1
    assert "[all-groups], [group]" in capsys.readouterr().err


@pytest.mark.slow
def test_reset_offsets_plans_then_executes_and_the_group_reads_again(empty_group, capsys):
    base = ["share-groups", "reset-offsets", "--group", "workers", "--topic", "jobs", "--data-dir", empty_group]
    assert main(base + ["--to-earliest"]) == 0
    out = capsys.readouterr().out
    assert _lines(out)[:2] == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["workers", "jobs", "0", "0"]]
    assert "dry run" in out
    with Broker(empty_group) as b:                       # a dry run changed nothing
        assert b.describe_share_group_offsets("workers")[("jobs", 0)]["start_offset"] == 6
    assert main(base + ["--to-offset", "2", "--execute"]) == 0
    capsys.readouterr()
    with Broker(empty_group, broker_configs=EARLIEST) as b:
        assert b.describe_share_group_offsets("workers")[("jobs", 0)]["start_offset"] == 2
        c = ShareConsumer(b, group_id="workers", seed=3)
        c.subscribe(["jobs"])
        got = []
        for _ in range(20):
            got.extend(c.poll(timeout_ms=100))
        assert [r.offset for r in got] == list(range(2, 10))
        c.close()


def test_reset_offsets_of_a_group_with_members_is_refused(live_group, capsys):
    d, _ = live_group
    assert main(["share-groups", "reset-offsets", "--group", "workers", "--topic", "jobs", "--to-latest",
                 "--execute", "--data-dir", d]) == 1
    assert "Share group 'workers' is not empty." in capsys.readouterr().err


@pytest.mark.slow
def test_delete_offsets_and_delete(empty_group, live_group, capsys):
    assert main(["share-groups", "delete-offsets", "--group", "workers", "--topic", "jobs",
                 "--data-dir", empty_group]) == 0
    assert _lines(capsys.readouterr().out) == [["TOPIC", "STATUS"], ["jobs", "Successful"]]
    assert main(["share-groups", "delete", "--group", "workers", "--data-dir", empty_group]) == 0
    assert capsys.readouterr().out.strip() == "Deletion of requested share groups ('workers') was successful."
    assert main(["share-groups", "list", "--data-dir", empty_group]) == 0
    assert capsys.readouterr().out.strip() == ""
    d, _ = live_group
    assert main(["share-groups", "delete", "--group", "workers", "--group", "ghost", "--data-dir", d]) == 1
    out = capsys.readouterr().out
    assert "Error: Deletion of some share groups failed:" in out
    assert "* Group 'workers' could not be deleted due to: NonEmptyGroupError: Share group 'workers' is not EMPTY." in out
    assert "* Group 'ghost' could not be deleted due to: GroupIdNotFoundError: Group 'ghost' is not a share group." in out


@pytest.mark.slow
def test_consume_share_group_accepts_what_it_printed(tmp_path, capsys):
    d = str(tmp_path / "data")
    with Broker(d) as b:
        b.create_topic("jobs", 1)
    # share.auto.offset.reset=latest (the default): the first member starts at the log end, 0
    assert main(["consume", "jobs", "--share-group", "g", "--timeout-ms", "200", "--data-dir", d]) == 0
    assert capsys.readouterr().out == ""
    with Broker(d) as b:
        _fill(b, 5)
    assert main(["consume", "jobs", "--share-group", "g", "--max-messages", "3", "--data-dir", d]) == 0
    out = capsys.readouterr()
    assert out.out.split() == ["v0", "v1", "v2"] and "Processed a total of 3 messages" in out.err
    assert main(["consume", "jobs", "--share-group", "g", "--timeout-ms", "300", "--data-dir", d]) == 0
    assert capsys.readouterr().out.split() == ["v3", "v4"]      # 0..2 were accepted; 3, 4 released at exit


@pytest.mark.parametrize("extra,named", [(["--group", "h"], "group"), (["--from-beginning"], "from-beginning"),
                                         (["--partition", "0"], "partition")])
def test_consume_share_group_excludes_the_consumer_options(tmp_path, capsys, extra, named):
    d = str(tmp_path / "data")
    with Broker(d) as b:
        b.create_topic("jobs", 1)
    assert main(["consume", "jobs", "--share-group", "g", "--data-dir", d] + extra) == 1
    assert f"Options share-group and {named} cannot be specified together" in capsys.readouterr().err
