#!/usr/bin/env bash
# Make sure FUSE 3 is there for the power-cut test (tests/storage/test_storage_powercut.py
# mounts its own in-memory file system, tests/storage/powercut_fs.py, through mfusepy,
# which loads libfuse3; fusermount3 unmounts it). Installs Debian's fuse3 package (with
# libfuse3-3) with apt-get when it is missing and we run as root; otherwise prints the
# command. The test also needs /dev/fuse and root, which no package provides.
set -euo pipefail
have_fuse() {
    command -v fusermount3 >/dev/null 2>&1 && ldconfig -p 2>/dev/null | grep -q 'libfuse3\.so'
}
if have_fuse; then
    exit 0
fi
cmd="apt-get update && apt-get install -y --no-install-recommends fuse3"
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "fuse3 not found; installing: $cmd" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fuse3 >/dev/null
    have_fuse
else
    echo "The power-cut test needs FUSE 3 (Debian's fuse3 package). Install it with: sudo $cmd" >&2
    exit 1
fi
