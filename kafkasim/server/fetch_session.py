"""Incremental fetch sessions (KIP-227): Kafka's ``FetchSession.scala``, for one listener.

A client that fetches the same partitions over and over may open a *session* on the broker
it fetches from; the broker then remembers the partitions and what it last told the client
about each, so later requests name only what changed and responses carry only partitions
with something new. The request's ``(session_id, session_epoch)`` says which kind it is:

====================  ==================================================================
``session_id, epoch``  meaning (the request's partitions, then the answer)
====================  ==================================================================
``0, -1``              sessionless full fetch: every partition listed is answered; session id 0
``0, 0``               full fetch opening a session: a new id (or 0 when the cache has no
                       room), epoch 1 expected next
``id, 0``              full fetch: closes session ``id``, opens a new one as above
``id, -1``             full fetch closing session ``id``; no new session (answer id 0)
``id, e > 0``          incremental: ``e`` must be the session's next epoch
                       (else INVALID_FETCH_SESSION_EPOCH; unknown id: FETCH_SESSION_ID_NOT_FOUND,
                       both with no partitions and session id 0); the listed partitions are
                       added or updated (fetch offset, max bytes), ``forgotten_topics_data``
                       removed; a session left empty is closed and answered as sessionless
====================  ==================================================================

An incremental answer holds only the session's partitions that must be sent
(:meth:`CachedPartition.must_respond`, Kafka's ``maybeUpdateResponseData``): records, a
high watermark or log start offset different from the last one sent, an error (which also
forgets the cached high watermark, so the partition is sent again once the error clears),
or a preferred read replica. Partitions that returned records move to the end of the
session's order, so the next response's byte budget starts with the others.

The cache (Kafka's ``FetchSessionCache``) holds at most ``max_slots`` sessions
(``max.incremental.fetch.session.cache.slots``, default 1000). A new session when it is
full may evict, in this order: the least recently used session if it has not been used for
``eviction_ms`` (Kafka's ``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``, 120 s); else the
"least valuable" session created at least ``eviction_ms`` ago, if it has fewer partitions
than the new one (Kafka compares ``(privileged, size, id)``; consumer sessions are never
privileged here, kafkasim has no replica fetchers on the wire). Otherwise no session is made
and the answer carries session id 0 (the client goes on with full fetches). A closed
connection frees nothing (as in Kafka): an abandoned session is evicted once stale.

Thread-safety: none; the listener's event loop thread owns the cache (the handler updates
it before and after its broker calls, never on the executor).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Optional

from kafkasim.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError

__all__ = ["CachedPartition", "FetchSession", "FetchSessionCache", "INVALID_SESSION_ID", "INITIAL_EPOCH",
           "FINAL_EPOCH", "DEFAULT_CACHE_SLOTS", "EVICTION_MS", "next_epoch"]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
DEFAULT_CACHE_SLOTS = 1000
"""``max.incremental.fetch.session.cache.slots``'s default."""
EVICTION_MS = 120_000
"""Kafka's ``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``: a session this stale (or this old)
may be evicted for a new one."""

Key = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's ``FetchMetadata.nextEpoch``): FINAL stays FINAL,
    and the epoch wraps from 2**31-1 to 1, never back to INITIAL (0)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


@dataclass
class CachedPartition:
    """What a session remembers of one partition: the client's last fetch parameters and
    the high watermark and log start offset last sent (-1: nothing sent yet)."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_respond(self, row: dict, update: bool = True) -> bool:
        """Whether an incremental answer must carry ``row`` (a Fetch response partition);
        with ``update``, remember what it carries (Kafka's ``maybeUpdateResponseData``)."""
        must = bool(row.get("records")) or row.get("preferred_read_replica", -1) >= 0
        if row["high_watermark"] != self.high_watermark:
            must = True
            if update:
                self.high_watermark = row["high_watermark"]
        if row["log_start_offset"] != self.log_start_offset:
            must = True
            if update:
                self.log_start_offset = row["log_start_offset"]
        if row["error_code"]:
            must = True
            if update:
                self.high_watermark = -1      # sent again once the error clears
        return must


@dataclass
class FetchSession:
    """One session: id, the epoch expected next, its partitions in fetch order, timestamps."""

    id: int
    epoch: int
    partitions: dict[Key, CachedPartition]
    creation_ms: int
    last_used_ms: int


class FetchSessionCache:
    """A listener's sessions, bounded (see the module docstring). ``clock_ms`` gives
    milliseconds (monotonic); ``rng`` draws session ids (Kafka: random in [1, 2**31-1))."""

    def __init__(self, max_slots: int = DEFAULT_CACHE_SLOTS, *, eviction_ms: int = EVICTION_MS,
                 clock_ms: Optional[Callable[[], int]] = None, rng: Optional[random.Random] = None) -> None:
        if max_slots < 0:
            raise ValueError(f"max.incremental.fetch.session.cache.slots must be >= 0, got {max_slots}")
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._clock_ms = clock_ms or (lambda: int(time.monotonic() * 1000))
        self._rng = rng or random.Random()
        self._sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: int) -> bool:
        return session_id in self._sessions

    def get(self, session_id: int) -> Optional[FetchSession]:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> Optional[FetchSession]:
        return self._sessions.pop(session_id, None)

    def clear(self) -> None:
        """Forget every session (the broker went down: Kafka's cache does not survive a restart)."""
        self._sessions.clear()

    # -- the request side ------------------------------------------------------------------
    def incremental(self, session_id: int, epoch: int, wanted: list[tuple[str, list[tuple[int, int, int, int]]]],
                    forgotten: list[tuple[str, list[int]]]) -> Optional[FetchSession]:
        """An incremental request (``epoch`` > 0): update session ``session_id`` with the
        listed partitions ``(partition, fetch offset, max bytes, current leader epoch)`` and
        drop the forgotten ones; the session's epoch moves on. Returns the session, or None
        when that left it empty (it is closed: answer as a sessionless fetch of ``wanted``).
        Raises FetchSessionIdNotFoundError / InvalidFetchSessionEpochError."""
        session = self._sessions.get(session_id)
        if session is None:
            raise FetchSessionIdNotFoundError(f"fetch session {session_id} is not in this broker's session cache")
        if session.epoch != epoch:
            raise InvalidFetchSessionEpochError(
                f"fetch session {session_id} expects epoch {session.epoch}, the request has {epoch}")
        parts = session.partitions
        for topic, partitions in wanted:
            for partition, offset, max_bytes, leader_epoch in partitions:
                cached = parts.get((topic, partition))
                if cached is None:
                    parts[(topic, partition)] = CachedPartition(offset, max_bytes, leader_epoch)
                else:
                    cached.fetch_offset, cached.max_bytes = offset, max_bytes
                    cached.current_leader_epoch = leader_epoch
        for topic, partitions in forgotten:
            for partition in partitions:
                parts.pop((topic, partition), None)
        if not parts:
            del self._sessions[session_id]
            return None
        session.last_used_ms = self._clock_ms()
        session.epoch = next_epoch(session.epoch)
        return session

    def wanted(self, session: FetchSession) -> list[tuple[str, list[tuple[int, int, int, int]]]]:
        """The session's partitions as a fetch list, in session order, grouped by runs of topic."""
        out: list[tuple[str, list]] = []
        for (topic, partition), c in session.partitions.items():
            if not out or out[-1][0] != topic:
                out.append((topic, []))
            out[-1][1].append((partition, c.fetch_offset, c.max_bytes, c.current_leader_epoch))
        return out

    # -- the response side -----------------------------------------------------------------
    def incremental_response(self, session: FetchSession, topics: list[dict]) -> list[dict]:
        """The rows of ``topics`` (a full answer over the session's partitions) that an
        incremental answer carries; partitions that returned records move to the end."""
        out: list[dict] = []
        moved = []
        for t in topics:
            rows = []
            for row in t["partitions"]:
                key = (t["topic"], row["partition_index"])
                cached = session.partitions.get(key)
                if cached is None or cached.must_respond(row):
                    rows.append(row)
                    if row.get("records"):
                        moved.append(key)
            if rows:
                out.append({"topic": t["topic"], "partitions": rows})
        for key in moved:
            session.partitions[key] = session.partitions.pop(key)
        return out

    def maybe_create(self, wanted: list[tuple[str, list[tuple[int, int, int, int]]]], topics: list[dict]) -> int:
        """After a full fetch that asked for a session: make one from the request's
        partitions and the answer's offsets, if there is room (evicting as the module
        docstring says); its id, or INVALID_SESSION_ID (0) when none was made."""
        size = sum(len(ps) for _, ps in wanted)
        now = self._clock_ms()
        if len(self._sessions) >= self.max_slots and not self._try_evict(size, now):
            return INVALID_SESSION_ID
        rows = {(t["topic"], r["partition_index"]): r for t in topics for r in t["partitions"]}
        parts: dict[Key, CachedPartition] = {}
        for topic, partitions in wanted:
            for partition, offset, max_bytes, leader_epoch in partitions:
                cached = CachedPartition(offset, max_bytes, leader_epoch)
                row = rows.get((topic, partition))
                if row is not None:
                    cached.must_respond(row)          # remember what this answer tells the client
                parts[(topic, partition)] = cached
        session_id = self._new_id()
        self._sessions[session_id] = FetchSession(session_id, next_epoch(INITIAL_EPOCH), parts, now, now)
        return session_id

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randrange(1, 2**31 - 1)
            if session_id not in self._sessions:
                return session_id

    def _try_evict(self, size: int, now: int) -> bool:
        """Kafka's ``tryEvict`` for an unprivileged session of ``size`` partitions."""
        if not self._sessions:
            return False
        stale = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            victim = stale
        else:
            old = [s for s in self._sessions.values() if now - s.creation_ms > self.eviction_ms]
            if not old:
                return False
            victim = min(old, key=lambda s: (len(s.partitions), s.id))
            if (size, 0) < (len(victim.partitions), victim.id):
                return False
        del self._sessions[victim.id]
        self.evictions += 1
        return True
