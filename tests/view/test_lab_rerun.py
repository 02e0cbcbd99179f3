"""``kafkasim scenario run X --view`` run again in the same dir shows this run only.

The lab wipes its data dir when it starts; the view used to start first and so read the previous
run, then listed its rebalances next to the new ones (the same generations twice). Now the dir is
wiped before the view starts, and the view also forgets what it read when a dir is wiped under it.
"""

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

from kafkasim.view.snapshot import DataDirWatcher

pytestmark = pytest.mark.slow

LAB = "consumer-scaling"


def test_a_rerun_with_view_shows_only_the_new_run(tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    base = [sys.executable, "-m", "kafkasim", "--data-dir", str(tmp_path), "scenario", "run", LAB]
    subprocess.run(base + ["--json", str(tmp_path / "first.json")], check=True, env=env,
                   stdout=subprocess.DEVNULL, timeout=120)
    lab_dir = tmp_path / "scenarios" / LAB
    one_run = DataDirWatcher(str(lab_dir)).poll()
    expected = sorted((r["group"], r["generation"]) for r in one_run["rebalances"])
    assert expected and len(set(expected)) == len(expected)

    proc = subprocess.Popen(base + ["--view", "--view-pace", "0"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, text=True)
    try:
        url, lines, deadline = None, [], time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            m = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
            url = url or (m and m.group(1))
            if "has finished" in line or not line:
                break
        assert url and "has finished" in lines[-1], lines
        time.sleep(1.0)                        # a few polls after the lab's last write
        with urllib.request.urlopen(url + "snapshot.json", timeout=10) as r:
            snap = json.loads(r.read())
        shown = sorted((r["group"], r["generation"]) for r in snap["rebalances"])
        assert shown == expected               # each rebalance of this run once, none of the last run's
        assert snap["active"]["group"] == one_run["active"]["group"]
        assert snap["clock"]["simulated"] is True
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
