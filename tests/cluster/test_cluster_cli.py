"""`kafkasim cluster ...` and `kafkasim topics describe` on a cluster: what an operator types."""

from __future__ import annotations

import json

import pytest

from kafkasim.broker.cluster import Cluster
from kafkasim.cli import main


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def d(tmp_path, capsys):
    d = str(tmp_path / "lab")
    rc, out, _ = run(capsys, "cluster", "create", "--brokers", "0:r1,1:r2,2:r3", "--data-dir", d)
    assert rc == 0 and "Created a cluster of 3 brokers" in out
    rc, _, _ = run(capsys, "topics", "create", "orders", "--partitions", "3", "--replication-factor", "3",
                   "--config", "min.insync.replicas=2", "--data-dir", d)
    assert rc == 0
    return d


def test_faults_show_in_describe_and_survive_between_commands(d, capsys):
    rc, out, _ = run(capsys, "cluster", "stop-broker", "1", "--data-dir", d)
    assert rc == 0 and "Broker 1 stopped. under-replicated: 3" in out
    rc, out, _ = run(capsys, "cluster", "describe", "--json", "--data-dir", d)
    desc = json.loads(out)
    assert [b["state"] for b in desc["brokers"]] == ["alive", "stopped", "alive"]
    assert desc["under_replicated"] == 3 and desc["offline"] == 0
    assert all(1 not in p["isr"] and p["leader"] != 1 for p in desc["partitions"])
    rc, out, _ = run(capsys, "cluster", "describe", "--data-dir", d)
    assert "under-replicated" in out and "OVER 1.3" in out
    rc, out, _ = run(capsys, "topics", "describe", "orders", "--data-dir", d)
    assert rc == 0 and out.count("Leader: ") == 3 and "Isr: " in out
    rc, out, _ = run(capsys, "topics", "describe", "--under-replicated-partitions", "--json", "--data-dir", d)
    assert [len(t["partitions"]) for t in json.loads(out)] == [3]
    rc, out, _ = run(capsys, "topics", "describe", "--unavailable-partitions", "--json", "--data-dir", d)
    assert json.loads(out) == []
    for b in (0, 2):
        run(capsys, "cluster", "stop-broker", str(b), "--data-dir", d)
    rc, out, _ = run(capsys, "topics", "describe", "--unavailable-partitions", "--json", "--data-dir", d)
    assert [len(t["partitions"]) for t in json.loads(out)] == [3]
    run(capsys, "cluster", "start-broker", "0", "--data-dir", d)
    run(capsys, "cluster", "start-broker", "2", "--data-dir", d)
    run(capsys, "cluster", "start-broker", "1", "--data-dir", d)
    rc, out, _ = run(capsys, "cluster", "isolate", "2", "--data-dir", d)
    assert rc == 0 and "isolated" in out
    rc, out, _ = run(capsys, "cluster", "isolate", "2", "--heal", "--data-dir", d)
    rc, out, _ = run(capsys, "cluster", "elect-leaders", "--json", "--data-dir", d)
    rc, out, _ = run(capsys, "cluster", "describe", "--json", "--data-dir", d)
    desc = json.loads(out)
    assert desc["under_replicated"] == 0
    assert all(p["leader"] == p["replicas"][0] for p in desc["partitions"])


def test_add_broker_moves_nothing_then_reassign_execute_and_verify(d, capsys, tmp_path):
    with Cluster(d) as c:
        for p in range(3):
            for i in range(20):
                c.append_records("orders", p, [(1000, b"k%d-%d" % (p, i), b"v" * 100, ())])
        before = c.assignment()
    rc, out, _ = run(capsys, "cluster", "add-broker", "3:r1", "--data-dir", d)
    assert rc == 0 and "holds no replicas" in out
    rc, out, _ = run(capsys, "cluster", "describe", "--json", "--data-dir", d)
    desc = json.loads(out)
    assert desc["brokers"][3]["replicas"] == 0 and desc["skew"]["replicas"]["flagged"]
    plan = {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [3] + before[("orders", 0)][1:]}]}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    rc, out, _ = run(capsys, "cluster", "reassign", "--verify", str(path), "--data-dir", d)
    assert rc == 1 and "still in progress" in out
    rc, out, _ = run(capsys, "cluster", "reassign", "--execute", str(path), "--throttle", "1000",
                     "--json", "--data-dir", d)
    res = json.loads(out)
    assert res["replicas_added"] == 1 and res["bytes_moved"] > 0
    assert res["time_ms"] == pytest.approx(res["bytes_moved"] * 1000 / 1000, abs=2)
    rc, out, _ = run(capsys, "cluster", "reassign", "--verify", str(path), "--data-dir", d)
    assert rc == 0 and "completed" in out
    with Cluster(d) as c:
        assert c.assignment()[("orders", 0)] == plan["partitions"][0]["replicas"]
        for p in range(3):
            assert [r.key for r in c.fetch("orders", p, 0).records] == [b"k%d-%d" % (p, i) for i in range(20)]


@pytest.mark.parametrize("argv, message", [
    (["cluster", "stop-broker", "9"], "broker 9 is not in the cluster"),
    (["cluster", "start-broker", "0"], "broker 0 is alive; cannot make it alive"),
    (["cluster", "add-broker", "x:r1"], "broker 'x:r1': expected ID or ID:RACK"),
    (["cluster", "add-broker", "1"], "broker 1 is already in the cluster"),
    (["cluster", "reassign", "--execute", "/nonexistent.json"], "reassignment file /nonexistent.json"),
    (["cluster", "reassign", "--verify", "/dev/null", "--throttle", "5"], "--throttle goes with --execute"),
    (["topics", "create", "t", "--replication-factor", "4"], "4 larger than available brokers: 3"),
])
def test_bad_input_is_a_message_and_a_non_zero_exit(d, capsys, argv, message):
    rc, _, err = run(capsys, *argv, "--data-dir", d)
    assert rc != 0 and message in err


def test_cluster_commands_on_a_dir_without_a_cluster_say_so(tmp_path, capsys):
    from kafkasim.broker import Broker
    Broker(tmp_path / "plain").close()
    rc, _, err = run(capsys, "cluster", "describe", "--data-dir", str(tmp_path / "plain"))
    assert rc != 0 and "holds no cluster" in err
    rc, _, err = run(capsys, "cluster", "create", "--brokers", "0,1", "--data-dir", str(tmp_path / "plain"))
    assert rc != 0 and "is not empty" in err


def test_a_plain_broker_refuses_a_cluster_data_dir(d):
    from kafkasim.broker import Broker
    from kafkasim.errors import KafkaStorageError
    with pytest.raises(KafkaStorageError, match="holds a cluster"):
        Broker(d)


def test_generate_then_execute_balances_a_new_broker_and_keeps_every_record(tmp_path, capsys):
    """The issue's seed example: 3 nodes, 9 partitions, a 4th added; the generated plan
    moves no more replicas than the lower bound, and is executed and verified here."""
    from kafkasim.placement.reassign import lower_bound_moves, replica_moves
    from kafkasim.types import TopicPartition
    d = str(tmp_path / "lab")
    run(capsys, "cluster", "create", "--brokers", "0,1,2", "--data-dir", d)
    run(capsys, "topics", "create", "t", "--partitions", "9", "--replication-factor", "2", "--data-dir", d)
    with Cluster(d) as c:
        for p in range(9):
            c.append_records("t", p, [(1000, b"%d" % p, b"v", ())])
    run(capsys, "cluster", "add-broker", "3", "--data-dir", d)
    rc, out, _ = run(capsys, "cluster", "reassign", "--generate", "--json", "--data-dir", d)
    assert rc == 0
    proposed = json.loads(out)["proposed"]
    with Cluster(d) as c:
        current = {TopicPartition("t", p): c.describe_topic("t")["partitions"][p]["replicas"]
                   for p in range(9)}
    target = {TopicPartition(e["topic"], e["partition"]): e["replicas"] for e in proposed["partitions"]}
    target = {tp: target.get(tp, reps) for tp, reps in current.items()}
    bound = lower_bound_moves(current, {0: None, 1: None, 2: None, 3: None})
    assert replica_moves(current, target) <= bound
    assert bound == 4                      # 18 replicas over 4 brokers: broker 3 needs 4
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(proposed))
    rc, out, _ = run(capsys, "cluster", "reassign", "--execute", str(plan), "--json", "--data-dir", d)
    assert rc == 0
    rc, _, _ = run(capsys, "cluster", "reassign", "--verify", str(plan), "--data-dir", d)
    assert rc == 0
    rc, out, _ = run(capsys, "cluster", "describe", "--json", "--data-dir", d)
    per_broker = [b["replicas"] for b in json.loads(out)["brokers"]]
    assert max(per_broker) - min(per_broker) <= 1
    with Cluster(d) as c:
        for p in range(9):
            assert [r.key for r in c.fetch("t", p, 0).records] == [b"%d" % p]


def test_produce_consume_and_get_offsets_work_on_a_cluster_data_dir(tmp_path, capsys):
    """The console tools open a cluster data dir as the cluster (no running server)."""
    d = str(tmp_path / "c")
    run(capsys, "cluster", "create", "--brokers", "0:r1,1:r2,2:r3", "--data-dir", d)
    run(capsys, "topics", "create", "t", "--partitions", "3", "--replication-factor", "3", "--data-dir", d)
    import io
    import sys as _sys
    old = _sys.stdin
    _sys.stdin = io.StringIO("a:1\nb:2\nc:3\n")
    try:
        rc, _, err = run(capsys, "produce", "t", "--property", "parse.key=true",
                         "--property", "key.separator=:", "--data-dir", d)
    finally:
        _sys.stdin = old
    assert rc == 0, err
    rc, out, err = run(capsys, "consume", "t", "--from-beginning", "--max-messages", "3",
                       "--data-dir", d)
    assert rc == 0, err
    assert sorted(out.split()) == ["1", "2", "3"]
    rc, out, _ = run(capsys, "get-offsets", "--topic", "t", "--json", "--data-dir", d)
    assert rc == 0 and sum(e["offset"] for e in json.loads(out)) == 3


# -- broker-level faults: fill-disk|clear-disk and isolate --from ---------------------------

def _broker(capsys, d, b) -> dict:
    rc, out, _ = run(capsys, "cluster", "describe", "--json", "--data-dir", d)
    assert rc == 0
    return next(x for x in json.loads(out)["brokers"] if x["id"] == b)


def test_fill_and_clear_disk_between_commands(d, capsys):
    rc, out, _ = run(capsys, "cluster", "fill-disk", "1", "--data-dir", d)
    assert rc == 0 and "full disk" in out
    b = _broker(capsys, d, 1)
    assert (b["disk_full"], b["log_dir_offline"], b["leaders"]) == (True, True, 0)
    rc, out, _ = run(capsys, "cluster", "describe", "--data-dir", d)
    assert "alive, disk full, log dir offline" in out
    rc, _, err = run(capsys, "cluster", "fill-disk", "1", "--data-dir", d)
    assert rc != 0 and "already full" in err
    assert run(capsys, "cluster", "clear-disk", "1", "--data-dir", d)[0] == 0
    assert _broker(capsys, d, 1)["log_dir_offline"]          # until the broker restarts
    run(capsys, "cluster", "stop-broker", "1", "--data-dir", d)
    run(capsys, "cluster", "start-broker", "1", "--data-dir", d)
    b = _broker(capsys, d, 1)
    assert (b["disk_full"], b["log_dir_offline"], b["state"]) == (False, False, "alive")


def test_isolate_from_one_side(d, capsys):
    rc, out, _ = run(capsys, "cluster", "isolate", "2", "--from", "clients", "--data-dir", d)
    assert rc == 0 and "isolated from clients" in out
    b = _broker(capsys, d, 2)
    assert (b["state"], b["isolated_from"]) == ("alive", "clients") and b["leaders"] == 1
    with pytest.raises(SystemExit) as exit_:
        run(capsys, "cluster", "isolate", "2", "--from", "peers", "--data-dir", d)
    assert exit_.value.code != 0 and "'peers'" in capsys.readouterr().err
    assert run(capsys, "cluster", "isolate", "2", "--heal", "--data-dir", d)[0] == 0
    assert _broker(capsys, d, 2)["isolated_from"] is None
