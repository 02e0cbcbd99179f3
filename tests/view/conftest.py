"""Fixtures of the live-view tests: ``kafkasim serve`` (tests/server's fixtures), ``kafkasim view``
as a subprocess, and a headless Chromium page driven by Playwright (missing, it fails or skips on
purpose: tests/required_tools.py).

The browser is Debian's ``chromium`` (scripts/ensure_chromium.sh installs it with apt-get), launched
by Playwright through ``executable_path``: Playwright's own browser download (``playwright install``)
is never used, so a machine that cannot reach its CDN still runs these tests. Chromium's profile and
its ``HOME`` (crash-report settings, dconf cache) are in the test's tmp dir; nothing is written to the
working directory or the user's home.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Optional

import pytest
from playwright.sync_api import sync_playwright

from tests.required_tools import missing
from tests.server.conftest import _no_proxy_env, serve_process  # noqa: F401  (fixtures)

# What Playwright's own switches leave out (it already passes --no-sandbox, --no-first-run,
# --disable-background-networking, --disable-component-update, --disable-dev-shm-usage).
FLAGS = ["--disable-gpu", "--disable-quic", "--disable-sync"]
WIDTH, HEIGHT = 1280, 1000


def chromium_path() -> Optional[str]:
    """``chromium`` on PATH (Debian's package: /usr/bin/chromium), or None if it is missing."""
    return shutil.which("chromium") or (os.path.exists("/usr/bin/chromium") and "/usr/bin/chromium") or None


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
def console_messages() -> list[str]:
    """What the ``page`` fixture's page wrote to its console or threw (``"<type>: <text>"``), in order."""
    return []


@pytest.fixture
def page(tmp_path, console_messages):
    """A 1280x1000 page (device scale 1) of headless Debian chromium, driven by Playwright's sync API.

    Every console message and uncaught exception of the page is appended to ``console_messages``
    (Playwright delivers them while the test is inside one of its calls).
    """
    exe = chromium_path()
    if exe is None:
        missing("chromium")
    home = tmp_path / "chromium-home"
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache")}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=exe, args=FLAGS, env=env)
        try:
            context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1)
            page = context.new_page()
            page.on("console", lambda msg: console_messages.append(f"{msg.type}: {msg.text}"))
            page.on("pageerror", lambda exc: console_messages.append(f"exception: {exc}"))
            yield page
        finally:
            browser.close()
