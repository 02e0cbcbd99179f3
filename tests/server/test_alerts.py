"""Metrics and the hot-partition alert: ``/metrics`` moves during a produce run, and
``promtool test rules`` replays series recorded from real runs (alerts_test.yml, written
by ``python -m tests.server.record_alert_series``) against the shipped rules file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from importlib import resources


from tests.required_tools import missing
from tests.server.conftest import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))


def _promtool() -> str:
    path = shutil.which("promtool")
    if path:
        return path
    missing("promtool")


def _rules_text() -> str:
    return resources.files("kafkasim.server").joinpath("alerts.yml").read_text()


def test_rules_file_ships_as_package_data_and_is_valid():
    promtool = _promtool()
    text = _rules_text()
    assert "KafkaHotPartition" in text
    done = subprocess.run([promtool, "check", "rules", str(resources.files("kafkasim.server") / "alerts.yml")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 rules found" in done.stdout


def test_hot_partition_alert_fires_on_the_recorded_hot_run_and_not_on_the_even_run():
    done = subprocess.run([_promtool(), "test", "rules", "alerts_test.yml"], cwd=HERE,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_recorded_test_would_catch_a_broken_rule(tmp_path):
    """With the threshold raised past what the hot run reaches, the same test file fails:
    it checks the rule, not just the file's syntax."""
    broken = _rules_text().replace("          > 5\n", "          > 50\n")
    assert broken != _rules_text()
    rules_dir = tmp_path / "kafkasim" / "server"
    tests_dir = tmp_path / "tests" / "server"
    rules_dir.mkdir(parents=True)
    tests_dir.mkdir(parents=True)
    (rules_dir / "alerts.yml").write_text(broken)
    shutil.copy(os.path.join(HERE, "alerts_test.yml"), tests_dir / "alerts_test.yml")
    done = subprocess.run([_promtool(), "test", "rules", "alerts_test.yml"], cwd=tests_dir,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "KafkaHotPartition" in done.stdout + done.stderr


_SAMPLE = re.compile(r"^([a-z_]+)(\{[^}]*\})? (\S+)$")


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def test_metrics_move_during_a_produce_run(tmp_path, serve_process):
    from kafka import KafkaConsumer, KafkaProducer

    data = tmp_path / "data"
    served = serve_process(data, "--metrics-port", "0")
    with open(data / ".server.json") as f:
        port = json.load(f)["metrics_port"]
    subprocess.run([sys.executable, "-m", "kafkasim", "topics", "create", "m", "--partitions", "2",
                    "--data-dir", str(data)], check=True, capture_output=True, timeout=60)
    before = _scrape(port)
    bytes0 = 'kafkasim_partition_bytes_in_total{partition="0",topic="m"}'
    msgs1 = 'kafkasim_partition_messages_in_total{partition="1",topic="m"}'
    assert before[bytes0] == 0 and before[msgs1] == 0          # present from zero, before any record
    assert before["kafkasim_under_replicated_partitions"] == 0
    assert before["kafkasim_offline_partitions"] == 0
    p = KafkaProducer(bootstrap_servers=served.bootstrap)
    seen = []
    for rnd in range(3):
        for i in range(50):
            p.send("m", value=b"v" * 100, partition=i % 2)
        p.flush(20)
        seen.append(_scrape(port))
    p.close()
    assert [s[bytes0] for s in seen] == sorted(s[bytes0] for s in seen) and seen[0][bytes0] > 0
    assert seen[-1][bytes0] > seen[0][bytes0]
    assert seen[-1][msgs1] == 75
    assert seen[-1]['kafkasim_partition_log_end_offset{partition="1",topic="m"}'] == 75
    assert seen[-1]['kafkasim_partition_high_watermark{partition="0",topic="m"}'] == 75
    assert seen[-1]['kafkasim_requests_total{api="Produce"}'] > before.get('kafkasim_requests_total{api="Produce"}', 0)
    assert seen[-1]['kafkasim_request_duration_seconds_count{api="Produce"}'] >= 3
    # a group's committed offset and lag
    c = KafkaConsumer(bootstrap_servers=served.bootstrap, group_id="mg", enable_auto_commit=False,
                      auto_offset_reset="earliest")
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata as KOM
    c.commit({KTP("m", 0): KOM(70, "", -1)})
    c.close()
    lag = 'kafkasim_group_lag{group="mg",partition="0",topic="m"}'
    after = wait_until(lambda: (s := _scrape(port)).get(lag) is not None and s, 30, 0.2, "the group's lag")
    assert after['kafkasim_group_committed_offset{group="mg",partition="0",topic="m"}'] == 70
    assert after[lag] == 5
