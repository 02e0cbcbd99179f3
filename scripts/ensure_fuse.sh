#!/usr/bin/env bash
# Make sure FUSE 3 is there for the power-cut test (tests/storage/test_storage_powercut.py
# mounts its own in-memory file system, tests/storage/powercut_fs.py, through mfusepy,
# which loads libfuse3; fusermount3 unmounts it). Installs Debian's fuse3 package (with
# libfuse3-3) with apt-get when it is missing and we run as root. Still missing: see
# missing_component.sh. The test also needs /dev/fuse and root, which no package provides
# (without them it skips outside CI, saying why).
set -euo pipefail
. "$(dirname "$0")/missing_component.sh"
have_fuse() {
    command -v fusermount3 >/dev/null 2>&1 && ldconfig -p 2>/dev/null | grep -q 'libfuse3\.so'
}
if have_fuse; then
    exit 0
fi
cmd="sudo apt-get update && sudo apt-get install -y --no-install-recommends fuse3"
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "fuse3 not found; installing Debian's fuse3 package" >&2
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fuse3 >/dev/null || true
fi
have_fuse || missing fuse3 "the storage power-cut test (tests/storage/test_storage_powercut.py)" "$cmd"
