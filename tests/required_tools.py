"""Real components some tests need (promtool, Chromium, kcat, fuse3): one rule when one is missing.

The set-up (``make setup``: scripts/ensure_*.sh and scripts/missing_component.sh) and the
tests apply the same rule, so ``make test`` never passes quietly without them:

- under ``CI=true`` the test fails (CI must have installed it);
- with ``KAFKASIM_SKIP_MISSING=1`` the test skips, saying it was skipped on purpose;
- otherwise the test fails with the exact install command.

Chromium is Debian's package, which the live-view page tests drive through Playwright
(tests/view/conftest.py launches it by path); Playwright's own browser download is never used,
so Chromium is a component of the machine like the others, and Playwright a dev dependency.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

INSTALL = {
    "promtool": "sudo apt-get update && sudo apt-get install -y --no-install-recommends prometheus",
    "chromium": "sudo apt-get update && sudo apt-get install -y --no-install-recommends chromium",
    "kcat": "sudo apt-get update && sudo apt-get install -y --no-install-recommends kcat",
    "fuse3": "sudo apt-get update && sudo apt-get install -y --no-install-recommends fuse3",
}


def missing(tool: str) -> NoReturn:
    """Fail or skip (the module docstring's rule) because ``tool`` is not installed."""
    install = INSTALL[tool]
    script = f"scripts/ensure_{tool}.sh"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{tool} is missing in CI: {script} must install it ({install})")
    if os.environ.get("KAFKASIM_SKIP_MISSING") == "1":
        pytest.skip(f"{tool} is missing: skipped on purpose (KAFKASIM_SKIP_MISSING=1)")
    pytest.fail(f"{tool} is missing. Install it with: {install}  "
                f"(or run with KAFKASIM_SKIP_MISSING=1 to skip the tests that need it on purpose)")
