"""The whole CLI while ``kafkasim serve`` holds the data dir (what a lab with two terminals does).

Every command that talks to a broker goes to the running server (its ``.server.json``,
or ``--bootstrap-server``) instead of failing on the data dir's lock, and prints what
it prints over the embedded broker. Commands run as subprocesses, as a person types them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.server.conftest import wait_until

CLI_TIMEOUT_S = 60


def kafkasim(*args: str, data_dir=None, stdin: str | None = None, check: bool = True):
    cmd = [sys.executable, "-m", "kafkasim", *args]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir)]
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    if check:
        assert done.returncode == 0, (args, done.returncode, done.stdout, done.stderr)
    return done


def _spawn(*args: str, data_dir) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kafkasim", *args, "--data-dir", str(data_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stop(proc: subprocess.Popen) -> tuple[str, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate(timeout=10)


def _members(data_dir, group: str) -> list[dict]:
    done = kafkasim("groups", "describe", group, "--members", "--json", data_dir=data_dir, check=False)
    if done.returncode != 0:
        return []
    return json.loads(done.stdout)["rows"]


def test_every_command_works_while_serving_and_prints_what_the_embedded_broker_prints(
        tmp_path, serve_process):
    data = tmp_path / "data"
    served = serve_process(data)
    kafkasim("topics", "create", "orders", "--partitions", "3", "--config", "retention.ms=3600000",
             data_dir=data)
    out = kafkasim("produce", "orders", "--property", "parse.key=true", "--property", "key.separator=:",
                   "--json", data_dir=data, stdin="a:1\nb:2\nc:3\nd:4\n")
    assert json.loads(out.stdout)["records"] == 4
    kafkasim("topics", "alter", "orders", "--config", "segment.ms=600000", data_dir=data)
    kafkasim("topics", "add-partitions", "orders", "--partitions", "4", data_dir=data)  # a history entry
    kafkasim("topics", "create", "scratch", data_dir=data)
    kafkasim("topics", "add-partitions", "scratch", "--partitions", "2", data_dir=data)
    kafkasim("topics", "delete", "scratch", data_dir=data)
    got = kafkasim("consume", "orders", "--group", "billing", "--from-beginning", "--max", "4",
                   "--timeout-ms", "20000", "--property", "print.key=true", data_dir=data)
    assert sorted(line.split("\t")[0] for line in got.stdout.splitlines()) == ["a", "b", "c", "d"]
    kafkasim("groups", "reset-offsets", "billing", "--topic", "orders:0", "--to-earliest", "--execute",
             data_dir=data)
    kafkasim("groups", "describe", "billing", "--data-dir", str(data), "--json")   # a committed group
    # the same read-only commands, over the server and then over the data dir itself
    reads = [("topics", "list"), ("topics", "list", "--internal"), ("topics", "describe", "orders"),
             ("topics", "describe", "orders", "--json"), ("get-offsets", "--topic", "orders"),
             ("get-offsets", "--topic", "orders", "--time", "-2", "--json"), ("groups", "list", "--state"),
             ("groups", "describe", "billing"), ("groups", "describe", "billing", "--members"),
             ("groups", "describe", "billing", "--state"), ("groups", "describe", "billing", "--json"),
             ("consume", "orders", "--from-beginning", "--timeout-ms", "300", "--json")]
    remote = {r: kafkasim(*r, data_dir=data) for r in reads}
    assert os.path.exists(data / ".server.json")
    assert served.stop() == 0
    assert not os.path.exists(data / ".server.json")
    for r in reads:
        embedded = kafkasim(*r, data_dir=data)
        assert (remote[r].stdout, remote[r].stderr) == (embedded.stdout, embedded.stderr), r
    assert "retention.ms=3600000,segment.ms=600000" in remote[("topics", "describe", "orders")].stdout
    history = json.loads(remote[("topics", "describe", "orders", "--json")].stdout)["partition_history"]
    assert [(e["from_partitions"], e["to_partitions"]) for e in history] == [(3, 4)]
    # the deletion went through the server too
    assert "scratch" not in remote[("topics", "list")].stdout
    kafkasim("groups", "delete", "billing", data_dir=data)


def test_two_terminals_consume_and_produce_at_once_and_describe_shows_the_live_member(
        tmp_path, serve_process):
    data = tmp_path / "data"
    serve_process(data)
    kafkasim("topics", "create", "t", "--partitions", "2", data_dir=data)
    consumer = _spawn("consume", "t", "--group", "g", "--from-beginning", "--max", "3", "--timeout-ms", "60000",
                      data_dir=data)
    try:
        members = wait_until(lambda: [m for m in _members(data, "g") if m["partitions"]], 60, 0.5,
                             "the consumer to join group g and get its partitions")
        kafkasim("produce", "t", "--property", "parse.key=true", "--property", "key.separator=:",
                 data_dir=data, stdin="k1:v1\nk2:v2\nk3:v3\n")
        out, err = consumer.communicate(timeout=60)
    finally:
        _stop(consumer)
    assert consumer.returncode == 0, err
    assert sorted(out.splitlines()) == ["v1", "v2", "v3"]        # Kafka's default: the value only
    (member,) = members
    assert member["host"] == "/127.0.0.1"
    assert member["client_id"] == "kafkasim-console-consumer"
    assert member["consumer_id"].startswith("kafkasim-console-consumer-")
    assert member["partitions"] == 2


def test_describe_shows_a_live_real_client_with_host_and_client_id(tmp_path, serve_process):
    from kafka import KafkaConsumer

    data = tmp_path / "data"
    served = serve_process(data)
    kafkasim("topics", "create", "t", "--partitions", "3", data_dir=data)
    c = KafkaConsumer("t", bootstrap_servers=served.bootstrap, group_id="live", client_id="lab-client",
                      auto_offset_reset="earliest", heartbeat_interval_ms=500, session_timeout_ms=10_000)
    try:
        wait_until(lambda: c.poll(100) is not None and c.assignment(), 60, 0.1, "an assignment")
        text = kafkasim("groups", "describe", "live", data_dir=data).stdout
        rows = kafkasim("groups", "describe", "live", "--members", "--json", data_dir=data).stdout
    finally:
        c.close()
    assert "/127.0.0.1" in text and "lab-client" in text
    (member,) = json.loads(rows)["rows"]
    assert (member["host"], member["client_id"], member["partitions"]) == ("/127.0.0.1", "lab-client", 3)


def test_reset_offsets_refuses_while_a_real_clients_group_is_live_and_works_after_it_leaves(
        tmp_path, serve_process):
    from kafka import KafkaConsumer, KafkaProducer

    data = tmp_path / "data"
    served = serve_process(data)
    kafkasim("topics", "create", "t", data_dir=data)
    p = KafkaProducer(bootstrap_servers=served.bootstrap)
    for i in range(5):
        p.send("t", b"%d" % i)
    p.flush(20)
    p.close()
    c = KafkaConsumer("t", bootstrap_servers=served.bootstrap, group_id="g", auto_offset_reset="earliest",
                      heartbeat_interval_ms=500, session_timeout_ms=10_000, enable_auto_commit=False)
    got = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < 5 and time.monotonic() < deadline:
            for recs in c.poll(200).values():
                got += recs
        c.commit()
        refused = kafkasim("groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute",
                           data_dir=data, check=False)
    finally:
        c.close()       # leaves the group
    assert len(got) == 5
    assert refused.returncode == 1
    assert ("Assignments can only be reset if the group 'g' is inactive, but the current state is Stable."
            in refused.stderr)
    done = kafkasim("groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute", "--json",
                    data_dir=data)
    assert json.loads(done.stdout)["rows"] == [{"group": "g", "topic": "t", "partition": 0, "new_offset": 0}]
    rows = json.loads(kafkasim("groups", "describe", "g", "--json", data_dir=data).stdout)["rows"]
    assert [(r["current_offset"], r["lag"]) for r in rows] == [(0, 5)]


def test_bootstrap_server_option_talks_to_that_server(tmp_path, serve_process):
    served = serve_process(tmp_path / "data")
    elsewhere = tmp_path / "no-such-dir"
    kafkasim("topics", "create", "viaboot", "--bootstrap-server", served.bootstrap, data_dir=elsewhere)
    listed = kafkasim("topics", "list", "--bootstrap-server", served.bootstrap).stdout
    assert listed.split() == ["viaboot"]
    assert not elsewhere.exists()


def test_a_stale_address_file_falls_back_to_the_data_dir_with_a_notice(tmp_path):
    data = tmp_path / "data"
    kafkasim("topics", "create", "t", data_dir=data)
    (data / ".server.json").write_text(json.dumps({"host": "127.0.0.1", "port": 1, "pid": 999999,
                                                   "started_ms": 0}))
    done = kafkasim("topics", "list", data_dir=data)
    assert done.stdout.split() == ["t"]
    notice = done.stderr.strip().splitlines()
    assert len(notice) == 1 and "no server answers at 127.0.0.1:1" in notice[0]
    assert not (data / ".server.json").exists()          # removed once the lock proved it stale
    assert kafkasim("topics", "list", data_dir=data).stderr == ""


def test_delete_group_over_the_wire_refuses_a_live_group(tmp_path, serve_process):
    from kafka import KafkaConsumer

    data = tmp_path / "data"
    served = serve_process(data)
    kafkasim("topics", "create", "t", data_dir=data)
    c = KafkaConsumer("t", bootstrap_servers=served.bootstrap, group_id="busy",
                      heartbeat_interval_ms=500, session_timeout_ms=10_000)
    try:
        wait_until(lambda: c.poll(100) is not None and c.assignment(), 60, 0.1, "an assignment")
        busy = kafkasim("groups", "delete", "busy", "nosuch", data_dir=data, check=False)
    finally:
        c.close()
    assert busy.returncode == 1
    assert "Group 'busy' could not be deleted due to: NonEmptyGroupError" in busy.stdout
    assert "Group 'nosuch' could not be deleted due to: GroupIdNotFoundError" in busy.stdout
    assert "was successful" in kafkasim("groups", "delete", "busy", data_dir=data).stdout


@pytest.mark.parametrize("command", [("topics", "list"), ("groups", "list")])
def test_commands_fail_cleanly_when_the_bootstrap_server_is_down(command):
    done = kafkasim(*command, "--bootstrap-server", "127.0.0.1:1", check=False)
    assert done.returncode == 1
    assert "NetworkError: cannot connect to a Kafka server at 127.0.0.1:1" in done.stderr
    assert "Traceback" not in done.stderr
