#!/usr/bin/env bash
# Make sure kcat (librdkafka's command-line client) is there for the kcat client tests
# (tests/server/test_kcat.py drives `kcat -L/-P/-G` against `kafkasim serve`). Installs
# Debian's kcat package with apt-get when it is missing and we run as root; otherwise
# prints the command.
set -euo pipefail
if command -v kcat >/dev/null 2>&1; then
    exit 0
fi
cmd="apt-get update && apt-get install -y --no-install-recommends kcat"
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "kcat not found; installing: $cmd" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kcat >/dev/null
    command -v kcat >/dev/null 2>&1
else
    echo "The kcat client tests need kcat (Debian's kcat package). Install it with: sudo $cmd" >&2
    exit 1
fi
