"""Child process for the crash test: append forever, flushing now and then.

Usage: python crash_child.py DIR SEED

Prints ``ready <leo>`` after opening, then after every flush the log end offset
(every offset below it is flushed), one line each, line-buffered. Record ``o`` has
key ``k<o>`` and the value :func:`value_of` ``(o)``, so the parent can check every
record it reads back. Runs until killed.
"""

from __future__ import annotations

import random
import sys

from kafkasim.clock import SystemClock
from kafkasim.config import LogConfig
from kafkasim.storage.log import Log

CONFIG = {"segment.bytes": 16384, "index.interval.bytes": 512}


def value_of(offset: int) -> bytes:
    return b"%d:" % offset + bytes([65 + offset % 26]) * (offset % 150)


def main(directory: str, seed: int) -> None:
    rng = random.Random(seed)
    log = Log(directory, LogConfig.from_overrides(CONFIG), SystemClock())
    print("ready", log.log_end_offset, flush=True)
    while True:
        leo = log.log_end_offset
        n = rng.randint(1, 30)
        log.append([(1_700_000_000_000 + leo + i, b"k%d" % (leo + i), value_of(leo + i), ()) for i in range(n)])
        if rng.random() < 0.2:
            log.flush()
            print(log.log_end_offset, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
