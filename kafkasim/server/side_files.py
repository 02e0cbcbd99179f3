"""The live view's side files that ``kafkasim serve`` keeps in the data dir: written whole,
replaced atomically, removed at shutdown.

:mod:`kafkasim.server.positions` (``.fetch-positions.json``) and
:mod:`kafkasim.server.fault_events` (``.server-faults.json``) both write through here: a
temporary file named with the server's pid, then ``os.replace``, so a reader sees the old file
or the new one, never half of one. A failed write is logged, never raised: the files serve the
view, and a full disk must not fail a client's request. Thread-safe for distinct paths.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

__all__ = ["write_side_file", "remove_side_file"]

log = logging.getLogger("kafkasim.server")


def _tmp(path: str) -> str:
    return f"{path}.{os.getpid()}.tmp"


def write_side_file(path: str, value: Any) -> None:
    """Write ``value`` as JSON to ``path`` (atomic rename); an OSError is logged."""
    tmp = _tmp(path)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot write %s: %s", path, exc)


def remove_side_file(path: str) -> None:
    """Remove ``path`` and this process's temporary file of it, if there."""
    for p in (path, _tmp(path)):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
