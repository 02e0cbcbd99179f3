"""Fixtures of the live-view tests: ``kafkasim serve`` (tests/server's fixtures), ``kafkasim view``
as a subprocess, and headless Chromium (missing, it fails or skips on purpose: tests/required_tools.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.required_tools import missing
from tests.server.conftest import _no_proxy_env, serve_process  # noqa: F401  (fixtures)
from tests.view.cdp import Chromium, chromium_path


@pytest.fixture
def view_process():
    """Factory: ``view_process(data_dir) -> url`` runs ``kafkasim view --json``; all stopped at teardown."""
    procs: list[subprocess.Popen] = []

    def start(data_dir) -> str:
        proc = subprocess.Popen([sys.executable, "-m", "kafkasim", "view", "--data-dir", str(data_dir),
                                 "--json", "--interval-ms", "100"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(proc)
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"kafkasim view did not start (exit code {proc.wait(10)})")
        return json.loads(line)["url"]

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def chromium(tmp_path):
    """Headless Debian chromium driven over the DevTools pipe (tests/view/cdp.py)."""
    if chromium_path() is None:
        missing("chromium")
    browser = Chromium.start(str(tmp_path / "chromium-profile"))
    yield browser
    browser.close()
