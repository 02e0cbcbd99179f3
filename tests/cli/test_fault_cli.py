"""``kafkasim fault add|list|remove|clear`` against a real ``kafkasim serve`` process: through
the data dir's control directory (one broker and a cluster), a --bootstrap-server that data
dir's server listens on, and --control-url; bad input and a missing server end in exit 1 with
a message naming the value or the data dir."""

from __future__ import annotations

import json

import pytest

from kafkasim.cli import main
from kafkasim.server.address import read_address
from tests.server.conftest import start_server


def _run(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One broker served with its control endpoint on a free port."""
    s = start_server(tmp_path_factory.mktemp("fault-cli") / "data", "--control-port", "0")
    yield s
    s.stop()


@pytest.fixture
def data(served, capsys):
    """The served data dir, with no rule installed."""
    assert main(["fault", "clear", "--data-dir", served.data_dir]) == 0
    return served.data_dir


def test_add_then_list_shows_the_rule_with_no_hits_then_remove_and_clear(data, capsys):
    rc, out, err = _run(capsys, "fault", "add", "--data-dir", data, "--api", "Produce", "--error",
                        "NOT_LEADER_OR_FOLLOWER", "--count", "3", "--topic", "orders", "--partition", "0", "--json")
    assert rc == 0, err
    added = json.loads(out)
    rc, out, _ = _run(capsys, "fault", "list", "--data-dir", data, "--json")
    [listed] = json.loads(out)
    assert listed == added
    assert {k: listed[k] for k in ("api", "error", "error_name", "count", "topic", "partition", "hits", "expired")} \
        == {"api": "Produce", "error": 6, "error_name": "NOT_LEADER_OR_FOLLOWER", "count": 3, "topic": "orders",
            "partition": 0, "hits": 0, "expired": False}

    rc, _, err = _run(capsys, "fault", "add", "--data-dir", data, "--api", "Fetch", "--latency-ms", "300",
                      "--latency-jitter-ms", "50", "--client-id", "app", "--probability", "0.5",
                      "--duration-ms", "60000")
    assert rc == 0, err
    rc, out, _ = _run(capsys, "fault", "list", "--data-dir", data)
    assert "error NOT_LEADER_OR_FOLLOWER" in out and "latency 300+0..50 ms, p=0.5" in out and "HITS" in out

    rc, out, _ = _run(capsys, "fault", "remove", str(added["rule_id"]), "--data-dir", data)
    assert rc == 0 and f"Removed fault rule {added['rule_id']}" in out
    rc, _, err = _run(capsys, "fault", "remove", str(added["rule_id"]), "--data-dir", data)
    assert rc == 1 and "rule_id" in err
    rc, out, _ = _run(capsys, "fault", "clear", "--data-dir", data, "--json")
    assert json.loads(out) == {"removed": 1}
    assert json.loads(_run(capsys, "fault", "list", "--data-dir", data, "--json")[1]) == []


def test_the_same_rules_through_bootstrap_server_and_control_url(served, data, capsys):
    rc, _, err = _run(capsys, "fault", "add", "--data-dir", data, "--bootstrap-server", served.bootstrap,
                      "--api", "Metadata", "--drop", "before")
    assert rc == 0, err
    url = read_address(data)["control_url"]
    rc, out, _ = _run(capsys, "fault", "list", "--control-url", url, "--json")
    [rule] = json.loads(out)
    assert (rule["api"], rule["drop"]) == ("Metadata", "before")
    rc, _, err = _run(capsys, "fault", "list", "--data-dir", data, "--bootstrap-server", "127.0.0.1:1")
    assert rc == 1 and "127.0.0.1:1" in err and "--control-url" in err


@pytest.mark.parametrize("argv, named", [
    (["--api", "Produce", "--error", "NOT_A_KAFKA_ERROR"], "--error NOT_A_KAFKA_ERROR"),
    (["--api", "Produce", "--drop", "during"], "--drop during"),
    (["--api", "Nope", "--error", "6"], "'Nope'"),
    (["--error", "6", "--count", "0"], "count"),
    (["--error", "6", "--probability", "2"], "probability"),
    (["--api", "Produce"], "must do something"),
])
def test_bad_input_exits_1_naming_the_value_and_installs_nothing(data, capsys, argv, named):
    rc, _, err = _run(capsys, "fault", "add", "--data-dir", data, *argv)
    assert rc == 1 and named in err, err
    assert json.loads(_run(capsys, "fault", "list", "--data-dir", data, "--json")[1]) == []


def test_no_server_running_names_the_data_dir(tmp_path, capsys):
    missing = str(tmp_path / "nobody-serves-this")
    for argv in (["list"], ["clear"], ["add", "--api", "Produce", "--error", "6"]):
        rc, _, err = _run(capsys, "fault", *argv, "--data-dir", missing)
        assert rc == 1 and missing in err and "kafkasim serve" in err, err


def test_a_served_clusters_rules_name_its_brokers(tmp_path, capsys):
    s = start_server(tmp_path / "lab", "--brokers", "0,1,2")
    try:
        rc, out, err = _run(capsys, "fault", "add", "--data-dir", s.data_dir, "--broker", "2", "--api", "Fetch",
                            "--latency-ms", "500", "--json")
        assert rc == 0, err
        assert json.loads(out)["broker"] == 2
        rc, _, err = _run(capsys, "fault", "add", "--data-dir", s.data_dir, "--broker", "7", "--error", "6")
        assert rc == 1 and "broker" in err and "7" in err
        # the cluster commands still go through the same control directory
        assert _run(capsys, "cluster", "describe", "--data-dir", s.data_dir, "--json")[0] == 0
        assert [r["broker"] for r in json.loads(_run(capsys, "fault", "list", "--data-dir", s.data_dir,
                                                     "--json")[1])] == [2]
    finally:
        s.stop()


def test_a_rule_added_from_the_cli_acts_on_a_real_client_and_list_counts_its_hits(served, data, capsys):
    """End to end: ``kafkasim fault add`` in one process, a kafka-python producer in another
    role, the server between them applies the rule, and ``fault list`` shows the hits."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    rc, out, err = _run(capsys, "fault", "add", "--data-dir", data, "--api", "Produce", "--error",
                        "INVALID_REQUIRED_ACKS", "--count", "2", "--json")
    assert rc == 0, err
    rule_id = json.loads(out)["rule_id"]
    p = KafkaProducer(bootstrap_servers=served.bootstrap, retries=0, acks=1)
    try:
        for _ in range(2):      # INVALID_REQUIRED_ACKS is not retriable: each send fails with it
            with pytest.raises(KafkaError, match="InvalidRequiredAcks"):
                p.send("cli-hits", b"v").get(timeout=30)
        p.send("cli-hits", b"v").get(timeout=30)            # the rule is used up: this one lands
    finally:
        p.close()
    rc, out, _ = _run(capsys, "fault", "list", "--data-dir", data, "--json")
    [listed] = [r for r in json.loads(out) if r["rule_id"] == rule_id]
    assert (listed["hits"], listed["expired"]) == (2, True)
