#!/usr/bin/env bash
# Make sure promtool (Prometheus' rule checker) is there for the alert-rule tests
# (tests/server/test_alerts.py runs `promtool test rules` on kafkasim/server/alerts.yml).
# Installs Debian's prometheus package with apt-get when it is missing and we run as
# root, without letting the package start its daemon. Still missing: see missing_component.sh
# (exit 1 with the install command, unless KAFKASIM_SKIP_MISSING=1 skips the tests on purpose).
set -euo pipefail
. "$(dirname "$0")/missing_component.sh"
if command -v promtool >/dev/null 2>&1; then
    exit 0
fi
cmd="sudo apt-get update && sudo apt-get install -y --no-install-recommends prometheus"
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "promtool not found; installing Debian's prometheus package" >&2
    # only promtool is wanted: deny service starts (policy-rc.d exit 101) during the install
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null || true
fi
command -v promtool >/dev/null 2>&1 || missing promtool "the alert-rule tests (tests/server/test_alerts.py)" "$cmd"
