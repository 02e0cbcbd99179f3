"""Spark Connect sessions kept warm between audits: a few session ids per data dir and server.

A Spark Connect server builds a new session's state (catalog, analyzer, optimizer, its plan
cache) on the session's first query; each ``kafkasim audit`` process used to open a new
session and so paid that again (measured: 2-record ``audit skew`` 2.18–3.06 s in a new session
against 1.79–2.95 s reusing one, same server, interleaved runs). An audit therefore attaches
to one of :data:`SLOTS` session ids recorded under ``<data dir>/spark/sessions/<host>_<port>/``
(``sc://HOST:PORT/;session_id=UUID``, Spark Connect's own way to resume a session), and
leaves the session open on the server when it ends (``close``: the client channel only).

- **One audit per session at a time.** A slot is taken by an exclusive ``flock`` on its
  file, held for the audit's lifetime and dropped by the kernel when the process ends, even
  killed; two terminals auditing at once get two slots, so one never sees the other's
  session settings. With every slot busy, or a data dir this process cannot write (a URI, a
  read-only folder), the audit opens a session of its own as before (:func:`take` gives None).
- **A session the server no longer has** (it restarted, or closed the session after
  ``spark.connect.session.manager.defaultSessionTimeout``, 60 min idle by default) is
  replaced: :meth:`Slot.renew` writes a new id under the lock, and the caller retries once.

Session settings an audit makes (``common.open_spark``) are set or unset in full each time,
so nothing of one audit's carries into the next. Thread-safety: a slot is one process's.
"""

from __future__ import annotations

import fcntl
import os
import re
import uuid
from typing import Optional

from kafkasim.spark_jobs.daemons import state_dir

__all__ = ["Slot", "take", "SLOTS"]

SLOTS = 3
"""Session ids per data dir and server: concurrent audits beyond this open their own session."""


class Slot:
    """A taken slot: its locked file and the session id in it."""

    def __init__(self, path: str, fd: int) -> None:
        self.path, self._fd = path, fd
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        try:
            self.session_id = str(uuid.UUID(text, version=4)) if text else ""
        except ValueError:          # a damaged file: a new id replaces it
            self.session_id = ""
        if self.session_id != text or not text:
            self.renew()

    def renew(self) -> str:
        """A new session id for this slot (the old one's session is gone from the server)."""
        self.session_id = str(uuid.uuid4())
        data = self.session_id.encode("ascii")
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)
        return self.session_id

    def release(self) -> None:
        """Drop the lock (the process ending does the same)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _folder(data_dir: str, host: str, port: int) -> str:
    return os.path.join(state_dir(data_dir), "sessions", re.sub(r"[^A-Za-z0-9.-]", "_", f"{host}_{port}"))


def take(data_dir: Optional[str], host: str, port: int) -> Optional[Slot]:
    """A free slot of ``data_dir``'s sessions on ``host:port``, or None when every slot is
    taken or the data dir is not a folder this process can write."""
    if not data_dir or "://" in data_dir or not os.path.isdir(data_dir):
        return None
    folder = _folder(data_dir, host, port)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    for i in range(SLOTS):
        path = os.path.join(folder, str(i))
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return Slot(path, fd)
    return None
