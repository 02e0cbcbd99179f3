"""Child process for the upgrade crash test: run ``upgrade_data_dir`` and SIGKILL itself mid-way.

Usage: python upgrade_child.py DATA_DIR WHERE N

``WHERE`` is ``renamed`` (killed right after the N-th segment's v2 file was renamed over its
``.log``, before its indexes are rebuilt) or ``written`` (killed right after the N-th
``<base>.log.upgrading`` was written and fsynced, before the rename). Deterministic: the kill
point is a count of the upgrade's own steps, not a timer. Exits 3 if the upgrade finished
before reaching step N.
"""

from __future__ import annotations

import os
import signal
import sys

from kafkasim.storage import upgrade


def main(data_dir: str, where: str, n: int) -> int:
    count = 0

    def step() -> None:
        nonlocal count
        count += 1
        if count == n:
            os.kill(os.getpid(), signal.SIGKILL)

    if where == "written":
        write = upgrade._write_synced

        def write_then_maybe_die(path, parts):
            write(path, parts)
            step()

        upgrade._write_synced = write_then_maybe_die
        upgrade.upgrade_data_dir(data_dir)
    else:
        upgrade.upgrade_data_dir(data_dir, on_segment=lambda _path: step())
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
