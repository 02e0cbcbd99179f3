#!/usr/bin/env bash
# Make sure Chromium is there for the live-view page tests (tests/view/test_*browser*.py drive
# headless `chromium` against `kafkasim view` through Playwright, tests/view/conftest.py).
# Installs Debian's chromium package with apt-get when it is missing and we run as root. Still
# missing: see missing_component.sh (exit 1 with the install command, unless
# KAFKASIM_SKIP_MISSING=1 skips the tests on purpose). Playwright launches this Debian chromium
# by its path (executable_path); `playwright install` and its browser downloads are never used.
set -euo pipefail
. "$(dirname "$0")/missing_component.sh"
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
cmd="sudo apt-get update && sudo apt-get install -y --no-install-recommends chromium"
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "chromium not found; installing Debian's chromium package" >&2
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null || true
fi
command -v chromium >/dev/null 2>&1 || missing Chromium "the live-view browser tests (tests/view)" "$cmd"
