"""Fixtures: ``kafkasim serve`` as a subprocess on a free loopback port, always stopped.

``serve_process(data_dir)`` starts one and returns a :class:`Served` (``bootstrap``,
``host``, ``port``, ``proc``); the fixture's finalizer terminates every process it started
(SIGTERM, then SIGKILL after 10 s), whatever the test did.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

START_TIMEOUT_S = 60


@dataclass
class Served:
    proc: subprocess.Popen
    host: str
    port: int
    data_dir: str
    log_path: str = ""
    """Where the server's stderr (its log) goes."""

    def log_text(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (what Ctrl-C's clean path does too) and wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)


def start_server(data_dir, *extra: str) -> Served:
    """Start ``kafkasim serve`` on 127.0.0.1:0 and wait until it prints its address."""
    cmd = [sys.executable, "-m", "kafkasim", "serve", "--data-dir", str(data_dir),
           "--listen", "127.0.0.1:0", "--json", *extra]
    log_path = os.path.join(os.path.dirname(os.path.abspath(str(data_dir))),
                            f"serve-{os.path.basename(str(data_dir))}-{time.monotonic_ns()}.log")
    # stderr goes to a file: a pipe nobody drains would fill up and block the server's logging
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    log.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    line = ""
    try:
        while time.monotonic() < deadline:
            line = proc.stdout.readline()   # the one line it prints once it listens
            if line or proc.poll() is not None:
                break
        info = json.loads(line)
    except Exception:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
        with open(log_path) as f:
            err = f.read()
        raise AssertionError(f"kafkasim serve did not start: stdout={line!r}{out!r} stderr={err[-2000:]!r}")
    return Served(proc, info["host"], info["port"], str(data_dir), log_path)


@pytest.fixture
def serve_process():
    """Factory: ``serve_process(data_dir, *extra_args) -> Served``; all stopped at teardown."""
    started: list[Served] = []

    def start(data_dir, *extra: str) -> Served:
        served = start_server(data_dir, *extra)
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop(timeout=10)


@pytest.fixture
def server(tmp_path, serve_process) -> Served:
    """One running server over ``tmp_path/data``."""
    return serve_process(tmp_path / "data")


def wait_until(predicate, timeout: float, interval: float = 0.2, what: str = "condition"):
    """Poll ``predicate`` until truthy (returned) or ``timeout`` seconds (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch):
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
