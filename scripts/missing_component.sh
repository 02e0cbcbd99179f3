# Sourced by scripts/ensure_*.sh: what the set-up does when a real component the tests need
# is still missing after the install attempt.
#
#   missing NAME TESTS INSTALL_COMMAND
#
# - under CI=true: exit 1 (CI must have every component; the tests fail there too);
# - with KAFKASIM_SKIP_MISSING=1: say that TESTS will skip on purpose, exit 0;
# - otherwise: print the exact install command and exit 1, so `make setup`/`make test` stop.
# tests/required_tools.py applies the same rule inside the tests.
missing() {
    local name=$1 tests=$2 install=$3
    if [ "${CI:-}" = "true" ]; then
        echo "kafkasim: $name is missing under CI=true, where $tests must run. Install it with: $install" >&2
        exit 1
    fi
    if [ "${KAFKASIM_SKIP_MISSING:-}" = "1" ]; then
        echo "kafkasim: $name is missing; KAFKASIM_SKIP_MISSING=1, so $tests skip on purpose" >&2
        exit 0
    fi
    echo "kafkasim: $name is missing and $tests need it. Install it with:" >&2
    echo "    $install" >&2
    echo "kafkasim: or set KAFKASIM_SKIP_MISSING=1 to skip $tests on purpose" >&2
    exit 1
}
