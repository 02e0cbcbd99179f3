"""Crash test: a child appending in a loop is SIGKILLed at random moments (seeded).

After each kill the log must open; every record the child reported flushed is there
exactly once and in order; every record read back is the one written at its offset
(so nothing from a torn write is ever returned); the log accepts appends again.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from kafkasim.config import LogConfig
from kafkasim.storage.log import Log

from crash_child import CONFIG, value_of

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_child.py")


def _check(log: Log, start: int) -> None:
    offset = start
    leo = log.log_end_offset
    while offset < leo:
        recs = log.read(offset, 65536)
        assert recs and recs[0].offset == offset, (offset, recs[:1])
        for i, r in enumerate(recs):
            assert r.offset == offset + i, f"offset {offset + i} missing or duplicated (got {r.offset})"
            assert r.key == b"k%d" % r.offset and r.value == value_of(r.offset), r
        offset = recs[-1].offset + 1
    assert log.read(leo) == []


def crash_loop(tmp_path, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    d = str(tmp_path / "crash-0")
    checked = 0
    truncations = 0
    for i in range(kills):
        child = subprocess.Popen([sys.executable, CHILD, d, str(rng.randrange(1 << 30))],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = child.stdout.readline()  # "ready <leo>": the open (and its recovery) is done
        assert first.startswith(b"ready"), (first, child.stderr.read())
        time.sleep(rng.uniform(0.0, 0.25))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        assert child.returncode == -signal.SIGKILL
        flushed = [int(x) for x in out.split()]
        reported = max(flushed, default=0)
        log = Log(d, LogConfig.from_overrides(CONFIG))
        truncations += sum("truncated" in line for line in log.recovery_report)
        assert log.log_end_offset >= reported, (log.log_end_offset, reported, log.recovery_report)
        _check(log, max(0, checked - 50))
        checked = log.log_end_offset
        if i % 2:
            log.close()  # alternate clean and unclean shutdowns for the next child
    log = Log(d, LogConfig.from_overrides(CONFIG))
    _check(log, 0)
    assert log.log_end_offset > 0
    log.close()


def test_sigkill_loses_nothing_flushed(tmp_path):
    crash_loop(tmp_path, kills=12, seed=20240611)


@pytest.mark.slow
def test_sigkill_loses_nothing_flushed_many_times(tmp_path):
    crash_loop(tmp_path, kills=110, seed=77)
