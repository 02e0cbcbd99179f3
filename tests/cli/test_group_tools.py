"""kafka-consumer-groups and kafka-get-offsets parity: describe views, reset-offsets, delete,
get-offsets by time, global options and the one table style."""

from __future__ import annotations

import io
import json

import pytest

import kafkasim.cli as cli
from kafkasim.admin import groups as admin
from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.errors import GroupIdNotFoundError, InvalidArgumentError, NonEmptyGroupError
from kafkasim.types import OffsetAndMetadata, TopicPartition

T0 = 1_700_000_000_000


def run(capsys, *argv):
    try:
        rc = cli.main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def data(tmp_path):
    """Topic t (2 partitions, 10 records each at ts T0+i*1000); group g committed 10 and 4."""
    d = str(tmp_path / "data")
    with Broker(d, clock=MockClock(T0)) as b:
        b.create_topic("t", 2)
        for p in (0, 1):
            b.append_records("t", p, [(T0 + i * 1000, b"k", b"v%d" % i, ()) for i in range(10)])
        b.offset_commit("g", "", -1, {TopicPartition("t", 0): OffsetAndMetadata(10),
                                      TopicPartition("t", 1): OffsetAndMetadata(4)})
    return d


def committed(d, group="g"):
    with Broker(d) as b:
        return {r["partition"]: r["committed"] for r in b.describe_group(group)["partitions"]}


def test_describe_prints_kafkas_columns_and_lag(data, capsys):
    rc, out, err = run(capsys, "groups", "describe", "g", "--data-dir", data)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert lines[1].split() == ["g", "t", "0", "10", "10", "0", "-", "-", "-"]
    assert lines[2].split() == ["g", "t", "1", "4", "10", "6", "-", "-", "-"]
    assert "Consumer group 'g' has no active members." in err


def test_unknown_group_is_an_error_in_every_view(data, capsys):
    for view in ([], ["--members"], ["--state"]):
        rc, out, err = run(capsys, "groups", "describe", "nope", *view, "--data-dir", data)
        assert rc == 1 and out == ""
        assert "GroupIdNotFoundError: Consumer group 'nope' does not exist." in err


def test_live_members_show_in_describe_members_and_state(tmp_path):
    clock = MockClock(T0)
    with Broker(tmp_path / "d", clock=clock) as b:
        b.create_topic("t", 3)
        c = Consumer(b, "t", group_id="live", client_id="app-1", clock=clock,
                     partition_assignment_strategy=["roundrobin"])
        for _ in range(10):
            c.poll(timeout_ms=0)
            clock.advance(1000)
        rows = admin.describe(b, "live")["rows"]
        assert [(r["partition"], r["client_id"]) for r in rows] == [(0, "app-1"), (1, "app-1"), (2, "app-1")]
        assert {r["consumer_id"] for r in rows} == {c.member_id}
        m = admin.members(b, "live")["rows"]
        assert [(r["client_id"], r["partitions"], r["assignment"]) for r in m] == [("app-1", 3, "t:0,1,2")]
        st = admin.state(b, "live")
        assert (st["state"], st["assignment_strategy"], st["members"]) == ("Stable", "roundrobin", 1)
        with pytest.raises(NonEmptyGroupError) as e:
            admin.reset_offsets(b, "live", scenario="to_earliest", all_topics=True, execute=True)
        assert str(e.value) == ("Assignments can only be reset if the group 'live' is inactive, "
                                "but the current state is Stable.")
        with pytest.raises(NonEmptyGroupError):
            admin.delete(b, ["live"]) and None or b.delete_group("live")
        c.close()


def test_reset_is_a_dry_run_unless_executed(data, capsys):
    rc, out, _ = run(capsys, "groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--data-dir", data)
    assert rc == 0 and "dry run" in out
    assert [l.split() for l in out.splitlines()[1:3]] == [["g", "t", "0", "0"], ["g", "t", "1", "0"]]
    assert committed(data) == {0: 10, 1: 4}
    rc, out, _ = run(capsys, "groups", "reset-offsets", "g", "--topic", "t:1", "--to-earliest", "--execute",
                     "--data-dir", data)
    assert rc == 0 and "dry run" not in out
    assert committed(data) == {0: 10, 1: 0}


@pytest.mark.parametrize("args,expected", [
    (["--to-latest"], {0: 10, 1: 10}),
    (["--to-offset", "7"], {0: 7, 1: 7}),
    (["--to-offset", "99"], {0: 10, 1: 10}),          # clamped to the log end, as Kafka
    (["--shift-by", "-3"], {0: 7, 1: 1}),
    (["--shift-by", "-30"], {0: 0, 1: 0}),            # clamped to the log start
    (["--to-datetime", "2023-11-14T22:13:25.000"], {0: 5, 1: 5}),   # T0 + 5 s
    (["--to-datetime", "2023-11-14T23:13:25.000+01:00"], {0: 5, 1: 5}),
    (["--to-datetime", "2030-01-01T00:00:00"], {0: 10, 1: 10}),     # nothing after: log end
    (["--to-current"], {0: 10, 1: 4}),
])
def test_reset_scenarios_match_kafkas_rules(data, capsys, args, expected):
    rc, _, err = run(capsys, "groups", "reset-offsets", "g", "--all-topics", *args, "--execute", "--data-dir", data)
    assert rc == 0, err
    assert committed(data) == expected


def test_reset_errors_name_the_problem(data, capsys):
    rc, _, err = run(capsys, "groups", "reset-offsets", "fresh", "--topic", "t", "--shift-by", "1",
                     "--execute", "--data-dir", data)
    assert rc == 1 and "Cannot shift offset for partition t-0 since there is no current committed offset" in err
    rc, _, err = run(capsys, "groups", "reset-offsets", "g", "--topic", "t:7", "--to-earliest", "--data-dir", data)
    assert rc == 1 and 'The partitions "t-7" do not exist' in err
    rc, _, err = run(capsys, "groups", "reset-offsets", "g", "--topic", "t:x", "--to-earliest", "--data-dir", data)
    assert rc == 1 and "Invalid partition 'x' specified in topic arg 't:x'" in err
    rc, _, err = run(capsys, "groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday",
                     "--data-dir", data)
    assert rc == 1 and "--to-datetime 'yesterday'" in err
    with pytest.raises(InvalidArgumentError, match="One of the reset scopes"):
        with Broker(data) as b:
            admin.reset_offsets(b, "g", scenario="to_earliest")


def test_delete_removes_the_group_and_reports_failures(data, capsys):
    rc, out, _ = run(capsys, "groups", "delete", "g", "--data-dir", data)
    assert rc == 0 and out.strip() == "Deletion of requested consumer groups ('g') was successful."
    rc, out, _ = run(capsys, "groups", "delete", "g", "--data-dir", data)
    assert rc == 1 and "* Group 'g' could not be deleted due to: GroupIdNotFoundError" in out
    with Broker(data) as b:
        with pytest.raises(GroupIdNotFoundError):
            admin.describe(b, "g")


def test_get_offsets_by_time(data, capsys):
    assert run(capsys, "get-offsets", "--topic", "t", "--data-dir", data)[1].split() == ["t:0:10", "t:1:10"]
    assert run(capsys, "get-offsets", "--topic", "t", "--time", "-2", "--data-dir", data)[1].split() == \
        ["t:0:0", "t:1:0"]
    assert run(capsys, "get-offsets", "--topic", "t", "--time", str(T0 + 3500), "--partitions", "1",
               "--data-dir", data)[1].split() == ["t:1:4"]
    # after the last record: no offset, so the partition is left out, as Kafka does
    assert run(capsys, "get-offsets", "--topic", "t", "--time", str(T0 + 10**6), "--data-dir", data)[1] == ""
    rc, _, err = run(capsys, "get-offsets", "--time", "yesterday", "--data-dir", data)
    assert rc == 1 and "Malformed time argument yesterday" in err
    rc, _, err = run(capsys, "get-offsets", "--topic", "nomatch.*", "--data-dir", data)
    assert rc == 1 and "Could not match any topic-partitions" in err


def test_global_options_come_before_the_command_and_version(data, capsys):
    rc, out, _ = run(capsys, "--data-dir", data, "--json", "topics", "list")
    assert rc == 0 and json.loads(out) == ["t"]
    rc, out, _ = run(capsys, "--version")
    assert rc == 0 and out.startswith("kafkasim 0.1.0 (record codec: ")


def test_one_table_style_shows_missing_values_as_a_dash():
    from kafkasim.cli.output import table
    assert table(["NAME", "N"], [["a", 1], ["bb", None]]).splitlines() == ["NAME  N", "a     1", "bb    -"]
