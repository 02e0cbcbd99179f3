#!/usr/bin/env bash
# Make sure Chromium is there for the live-view browser test (tests/view/test_browser.py
# drives `chromium --headless` against `kafkasim view`). Installs Debian's chromium package
# with apt-get when it is missing and we run as root; otherwise prints the command.
# Never downloads a browser build of its own (Playwright's `install` is not used).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
cmd="apt-get update && apt-get install -y --no-install-recommends chromium"
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "chromium not found; installing: $cmd" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
    command -v chromium >/dev/null 2>&1
else
    echo "The live-view browser test needs Chromium (Debian's chromium package). Install it with: sudo $cmd" >&2
    exit 1
fi
