"""`kafkasim scenario run NAME --view`: the lab runs paced in real time while the live view
serves its data dir, with the same results as an unpaced run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from kafkasim.clock import MockClock, PacedClock
from kafkasim.scenarios import run_scenario
from kafkasim.scenarios._common import lab_clock, paced


def test_paced_clock_waits_real_time_and_keeps_simulated_time():
    c = PacedClock(1_000, pace=0.05)           # one simulated second takes 50 ms
    t0 = time.monotonic()
    assert c.advance(2_000) == 3_000
    c.sleep(1_000)
    c.set(5_000)
    assert c.now_ms() == 5_000
    assert time.monotonic() - t0 >= 0.2        # 4 simulated seconds at 50 ms each
    with pytest.raises(ValueError, match="pace"):
        PacedClock(0, pace=-1)


def test_labs_take_a_paced_clock_only_inside_paced():
    assert type(lab_clock()) is MockClock
    with paced(0.0):
        assert isinstance(lab_clock(), PacedClock)
    assert type(lab_clock()) is MockClock


def test_a_paced_lab_gives_the_same_result(tmp_path):
    plain = run_scenario("retry-reorder", str(tmp_path / "a"), echo=lambda s: None)
    with paced(0.0001):
        slow = run_scenario("retry-reorder", str(tmp_path / "b"), echo=lambda s: None)
    assert json.dumps(plain, sort_keys=True) == json.dumps(slow, sort_keys=True)


@pytest.mark.slow
def test_scenario_run_view_serves_the_lab_data_dir_until_ctrl_c(tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkasim", "--data-dir", str(tmp_path), "scenario", "run",
         "retry-reorder", "--view", "--view-pace", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        url = None
        deadline = time.monotonic() + 60
        lines = []
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            m = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
            if m and url is None:
                url = m.group(1)
            if "has finished" in line:
                break
        assert url and "has finished" in lines[-1], lines
        snap = {}
        while time.monotonic() < deadline:
            with urllib.request.urlopen(url + "snapshot.json", timeout=10) as r:
                snap = json.loads(r.read())
            if snap.get("topics") and sum(
                    p["records"] for t in snap["topics"] for p in t["partition_stats"]) > 0:
                break
            time.sleep(0.2)
        assert any(p["records"] > 0 for t in snap["topics"] for p in t["partition_stats"]), snap
        assert proc.poll() is None                  # the view stays up after the lab
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert "retry" in out.lower()               # the lab's text was printed
    finally:
        if proc.poll() is None:
            proc.kill()
