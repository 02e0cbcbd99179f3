#!/usr/bin/env bash
# Make sure kcat (librdkafka's command-line client) is there for the kcat client tests
# (tests/server/test_kcat.py drives `kcat -L/-P/-G` against `kafkasim serve`). Installs
# Debian's kcat package with apt-get when it is missing and we run as root. Still missing:
# see missing_component.sh (exit 1 with the install command, unless KAFKASIM_SKIP_MISSING=1
# skips the tests on purpose).
set -euo pipefail
. "$(dirname "$0")/missing_component.sh"
if command -v kcat >/dev/null 2>&1; then
    exit 0
fi
cmd="sudo apt-get update && sudo apt-get install -y --no-install-recommends kcat"
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "kcat not found; installing Debian's kcat package" >&2
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kcat >/dev/null || true
fi
command -v kcat >/dev/null 2>&1 || missing kcat "the kcat client tests (tests/server/test_kcat.py)" "$cmd"
