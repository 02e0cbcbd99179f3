"""Share sessions (KIP-932): the broker side of ShareFetch's and ShareAcknowledge's
``ShareSessionEpoch``, as Kafka's ``ShareSessionCache``.

A share session is keyed by (group id, member id) on one broker and holds the partitions the
member fetches from, so an incremental ShareFetch names only what changed. Its epoch:

- ``0`` (ShareFetch only) opens the session, replacing one the member already had (whose
  records are then released, as a new session starts clean); a ShareFetch opening a session
  must carry no acknowledgements (INVALID_REQUEST) and a ShareAcknowledge may not open one
  (INVALID_SHARE_SESSION_EPOCH);
- ``-1`` is the member's final request: its acknowledgements are applied, nothing is
  acquired, and the session closes, releasing every record the member still holds;
- ``n > 0`` continues the session: SHARE_SESSION_NOT_FOUND when there is none, and
  INVALID_SHARE_SESSION_EPOCH (the session dropped, its records released) when ``n`` is not
  the epoch the broker expects next. Each accepted request advances the expected epoch by one.

At most ``group.share.max.share.sessions`` sessions are held (Kafka's default 2000);
opening one more answers SHARE_SESSION_LIMIT_REACHED.

What releasing a member's records means belongs to the share coordinator
(``Broker.share_session_close``); this module only says when. Thread-safety: the server's
loop thread only (no lock).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from kafkasim.errors import (
    InvalidShareSessionEpochError, ShareSessionLimitReachedError, ShareSessionNotFoundError,
)

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "MAX_SHARE_SESSIONS", "ShareSession", "ShareSessionCache"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SHARE_SESSIONS = 2000
"""Kafka's ``group.share.max.share.sessions`` default."""


@dataclass
class ShareSession:
    """One member's share session: the epoch its next request must carry (0 while the request
    that opens it is being answered), and its partitions in the order they were added
    (``(topic id, partition)``)."""

    group_id: str
    member_id: str
    epoch: int = 0
    partitions: dict = field(default_factory=dict)

    def add(self, partitions) -> None:
        for key in partitions:
            self.partitions.setdefault(key, None)

    def forget(self, partitions) -> None:
        for key in partitions:
            self.partitions.pop(key, None)


class ShareSessionCache:
    """The share sessions of one broker (see the module docstring)."""

    def __init__(self, max_sessions: int = MAX_SHARE_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, group_id: str, member_id: str, partitions) -> tuple[ShareSession, bool]:
        """A new session with ``partitions``: ``(session, replaced)``; ``replaced`` says the
        member had one, whose records the caller releases."""
        key = (group_id, member_id)
        replaced = self._sessions.pop(key, None) is not None
        if not replaced and len(self._sessions) >= self.max_sessions:
            raise ShareSessionLimitReachedError(
                f"share session limit ({self.max_sessions}) reached: no session for member "
                f"{member_id} of group {group_id}")
        session = ShareSession(group_id, member_id)
        session.add(partitions)
        self._sessions[key] = session
        return session, replaced

    def find(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session an epoch ``epoch`` (> 0 or -1) request continues. A wrong ``epoch``
        drops the session (the caller releases its records) and raises."""
        key = (group_id, member_id)
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionNotFoundError(f"no share session for member {member_id} of group {group_id}")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            del self._sessions[key]
            raise InvalidShareSessionEpochError(
                f"share session epoch {epoch} of member {member_id} of group {group_id}: "
                f"expected {session.epoch}")
        return session

    def advance(self, session: ShareSession) -> None:
        """After an accepted request that keeps the session open (the opening one included)."""
        session.epoch += 1

    def close(self, group_id: str, member_id: str) -> Optional[ShareSession]:
        return self._sessions.pop((group_id, member_id), None)
