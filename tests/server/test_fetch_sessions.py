"""Fetch sessions (KIP-227) on the wire, against Kafka's FetchSession.scala rules: a full fetch
with epoch 0 opens a session; an incremental fetch answers only partitions with something new;
forgotten partitions stop appearing; a wrong epoch or an unknown id is refused; the cache is
bounded (max.incremental.fetch.session.cache.slots) and evicts as Kafka's does."""

from __future__ import annotations

import pytest

from kafkasim.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError
from kafkasim.records import record_batch as rb
from kafkasim.server.fetch_session import FetchSessionCache
from tests.server import raw
from tests.server.conftest import start_server

TOPIC = "s"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = start_server(tmp_path_factory.mktemp("sessions") / "data", "--num-partitions", "3",
                     "--max-incremental-fetch-session-cache-slots", "2")
    yield s
    s.stop()


def _produce(sock, partition: int, value: bytes) -> int:
    batch = rb.encode_batch(0, [(0, 1_700_000_000_000, b"k", value, ())])
    answer = raw.call(sock, 0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}]})
    row = answer.responses[0].partition_responses[0]
    assert row.error_code == 0
    return row.base_offset


def _fetch(sock, session_id: int, epoch: int, partitions=(), forgotten=(), topic: str = TOPIC):
    """Fetch v12 of ``partitions`` ``[(partition, offset)]``; returns the response."""
    topics = [{"topic": topic, "partitions": [
        {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
         "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, o in partitions]}] if partitions else []
    return raw.call(sock, 1, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch, "topics": topics, "rack_id": "",
        "forgotten_topics_data": [{"topic": topic, "partitions": list(forgotten)}] if forgotten else []})


def _shown(response) -> dict[int, tuple[int, int]]:
    """``{partition: (high watermark, record count)}`` of every partition in the answer."""
    out = {}
    for t in response.responses:
        for p in t.partitions:
            assert p.error_code == 0, p
            n = sum(len(recs) for _, recs in raw.batches(p.records)) if p.records else 0
            out[p.partition_index] = (p.high_watermark, n)
    return out


def test_an_incremental_fetch_answers_only_partitions_with_something_new(served):
    with raw.connect(served.host, served.port) as sock:
        raw.call(sock, 3, 12, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": True})
        _produce(sock, 0, b"a")
        _produce(sock, 1, b"b")
        full = _fetch(sock, 0, 0, [(0, 0), (1, 0), (2, 0)])        # epoch 0: open a session
        assert full.error_code == 0 and full.session_id != 0
        sid = full.session_id
        assert _shown(full) == {0: (1, 1), 1: (1, 1), 2: (0, 0)}   # a full answer: every partition

        # positions move past the records: nothing new anywhere, so nothing in the answer
        assert _shown(_fetch(sock, sid, 1, [(0, 1), (1, 1)])) == {}
        assert _shown(_fetch(sock, sid, 2)) == {}                 # nothing listed: the session's partitions
        _produce(sock, 2, b"c")                                   # new records in partition 2 only
        answer = _fetch(sock, sid, 3)
        assert answer.session_id == sid and _shown(answer) == {2: (1, 1)}

        # forget partition 0: new records there no longer show; partition 2 (moved) is quiet
        assert _shown(_fetch(sock, sid, 4, [(2, 1)], forgotten=[0])) == {}
        _produce(sock, 0, b"d")
        assert _shown(_fetch(sock, sid, 5)) == {}
        _produce(sock, 1, b"e")
        assert _shown(_fetch(sock, sid, 6)) == {1: (2, 1)}        # partition 1 still in the session

        # a full fetch naming the session with epoch -1 closes it; answered sessionless
        closing = _fetch(sock, sid, -1, [(0, 0)])
        assert closing.session_id == 0 and _shown(closing) == {0: (2, 2)}
        gone = _fetch(sock, sid, 7)
        assert gone.error_code == FetchSessionIdNotFoundError.errno and gone.session_id == 0


def test_a_wrong_epoch_or_an_unknown_session_is_refused(served):
    with raw.connect(served.host, served.port) as sock:
        raw.call(sock, 3, 12, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": True})
        sid = _fetch(sock, 0, 0, [(0, 0)]).session_id
        assert sid != 0
        for epoch in (2, 5):                                      # the session expects 1
            wrong = _fetch(sock, sid, epoch)
            assert wrong.error_code == InvalidFetchSessionEpochError.errno == 71
            assert wrong.session_id == 0 and wrong.responses == ()
        assert _fetch(sock, sid, 1).error_code == 0               # the session is still there
        unknown = _fetch(sock, (sid % 1_000_000) + 1, 1)
        assert unknown.error_code == FetchSessionIdNotFoundError.errno == 70
        assert unknown.session_id == 0 and unknown.responses == ()
        assert _fetch(sock, 0, -1, [(0, 0)]).session_id == 0      # sessionless, as before
        _fetch(sock, sid, -1)                                     # close it (the cache has 2 slots)


def test_the_session_cache_is_bounded_by_its_slots(served):
    """With 2 slots and no session stale or old enough to evict (Kafka waits 120 s), a third
    full fetch gets no session (id 0, answered in full); closing one frees its slot."""
    with raw.connect(served.host, served.port) as sock:
        raw.call(sock, 3, 12, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": True})
        first = _fetch(sock, 0, 0, [(0, 0)]).session_id
        second = _fetch(sock, 0, 0, [(1, 0)]).session_id
        assert first and second and first != second
        third = _fetch(sock, 0, 0, [(0, 0), (1, 0), (2, 0)])
        assert third.error_code == 0 and third.session_id == 0 and len(third.responses[0].partitions) == 3
        assert _fetch(sock, first, 1).error_code == 0             # nobody was evicted
        assert _fetch(sock, second, 1).error_code == 0
        _fetch(sock, first, -1)                                   # closed: a slot is free again
        assert _fetch(sock, 0, 0, [(2, 0)]).session_id != 0


class _Clock:
    def __init__(self) -> None:
        self.ms = 0

    def __call__(self) -> int:
        return self.ms


def _open(cache: FetchSessionCache, n: int) -> int:
    wanted = [("t", [(p, 0, 1 << 20, -1) for p in range(n)])]
    return cache.maybe_create(wanted, [{"topic": "t", "partitions": [
        {"partition_index": p, "high_watermark": 0, "log_start_offset": 0, "error_code": 0, "records": b""}
        for p in range(n)]}])


def test_a_full_cache_evicts_a_session_unused_for_two_minutes():
    clock = _Clock()
    cache = FetchSessionCache(1, clock_ms=clock)
    old = _open(cache, 1)
    clock.ms = 60_000
    assert _open(cache, 1) == 0                                  # used a minute ago: kept
    clock.ms = 120_001
    new = _open(cache, 1)                                        # unused for > 120 s: evicted
    assert new and new != old and old not in cache and cache.evictions == 1
    with pytest.raises(FetchSessionIdNotFoundError):
        cache.incremental(old, 1, [], [])


def test_a_full_cache_evicts_an_old_busy_session_only_for_a_bigger_one():
    """Kafka's evictableByAll: a session created over 120 s ago, still in use, gives way only
    to a new session with more partitions (``(privileged, size, id)`` order)."""
    clock = _Clock()
    cache = FetchSessionCache(1, clock_ms=clock)
    busy = _open(cache, 2)
    clock.ms = 130_000
    assert cache.incremental(busy, 1, [], []) is not None        # used just now
    clock.ms = 130_500
    assert _open(cache, 1) == 0 and _open(cache, 2) == 0         # not bigger: refused
    bigger = _open(cache, 3)
    assert bigger and busy not in cache


def test_no_slots_means_no_sessions():
    assert _open(FetchSessionCache(0), 1) == 0
