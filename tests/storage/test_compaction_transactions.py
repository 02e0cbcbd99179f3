"""Compaction of a log holding transactions, as Kafka's cleaner does it
(``LogCleaner``'s ``CleanedTransactionMetadata``; storage/compaction.py step 3):

- an aborted transaction's records add no key and are removed;
- markers are not records with a key: they never supersede one another;
- a marker stays while a batch of its transaction is still in the log, then goes once older
  than ``delete.retention.ms``; an ABORT marker's ``.txnindex`` entry goes with it;
- the cleaner never passes the first unstable offset.

Every check reads the log as a read_committed consumer does (Kafka's ``Fetcher``: the
aborted transactions from the ``.txnindex``, skipped until their ABORT marker)."""

from __future__ import annotations

import heapq

import pytest

from kafkasim.config import LogConfig
from kafkasim.records import record_batch as rb
from kafkasim.records.control import is_control_batch, read_control_batch
from kafkasim.storage.log import Log
from storage_helpers import T0

COMPACT = {"cleanup.policy": "compact", "segment.bytes": 700, "delete.retention.ms": 1000}


def batch(pid: int, seq: int, kvs: list, transactional: bool = True) -> bytes:
    return rb.encode_batch(0, [(i, T0, k, v, ()) for i, (k, v) in enumerate(kvs)], producer_id=pid,
                           producer_epoch=0, base_sequence=seq,
                           attributes=rb.ATTR_TRANSACTIONAL if transactional else 0)


def fill(log, n: int, tag: bytes = b"") -> None:
    """Non-transactional filler with keys of their own, to roll segments."""
    for i in range(n):
        log.append_batch(rb.encode_batch(0, [(0, T0, b"filler-%s%d" % (tag, i), b"x" * 60, ())]))


def read_committed(log) -> dict:
    """key -> value as a read_committed consumer sees the log (later offsets win)."""
    aborted = [(a.first_offset, a.producer_id) for a in log.collect_aborted_txns(0, log.log_end_offset)]
    heapq.heapify(aborted)
    skipping: set[int] = set()
    seen: dict = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = log.read_batches(offset, 1 << 20)
        assert got, offset
        for h, raw in got:
            offset = h.last_offset + 1
            if h.producer_id >= 0:
                while aborted and aborted[0][0] <= h.last_offset:
                    skipping.add(heapq.heappop(aborted)[1])
            if is_control_batch(h):
                if read_control_batch(raw, 0, h)[0].type == 0:      # ABORT
                    skipping.discard(h.producer_id)
                continue
            if h.attributes & rb.ATTR_TRANSACTIONAL and h.producer_id in skipping:
                continue
            for delta, _, key, value, _ in rb.decode_records(raw, 0, h):
                seen[key] = value
    return seen


def markers(log) -> list[tuple[int, int]]:
    """(offset, producer id) of every control batch in the log."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        for h, _ in log.read_batches(offset, 1 << 20):
            offset = h.last_offset + 1
            if is_control_batch(h):
                out.append((h.base_offset, h.producer_id))
    return out


@pytest.fixture
def log(tmp_path, clock):
    clock.set(T0)
    lg = Log(str(tmp_path / "t-0"), LogConfig.from_overrides(COMPACT), clock)
    yield lg
    if not lg.closed:
        lg.close()


def test_an_aborted_value_never_supersedes_the_committed_one(log, clock):
    log.append_batch(batch(7, 0, [(b"acct", b"committed")]), in_transaction=True)
    log.append_control(7, 0, commit=True)
    log.append_batch(batch(7, 1, [(b"acct", b"aborted")]), in_transaction=True)
    log.append_control(7, 0, commit=False)
    fill(log, 30)
    assert read_committed(log)[b"acct"] == b"committed"
    stats = log.compact()
    assert stats["aborted_dropped"] == 1
    assert read_committed(log)[b"acct"] == b"committed"        # the old cleaner kept only "aborted"
    # read_uncommitted: the aborted record is gone from the log, the committed one stays
    values = [r.value for r in log.read(0, 1 << 20) if r.key == b"acct"]
    assert values == [b"committed"]


def test_markers_of_different_transactions_do_not_supersede_each_other(log, clock):
    for pid in (1, 2, 3):
        log.append_batch(batch(pid, 0, [(b"k%d" % pid, b"v%d" % pid)]), in_transaction=True)
    for pid in (1, 2, 3):
        log.append_control(pid, 0, commit=True)
    fill(log, 30)
    before = markers(log)
    log.compact()
    assert markers(log) == before == [(3, 1), (4, 2), (5, 3)]   # each still closes its data
    assert {k: read_committed(log)[k] for k in (b"k1", b"k2", b"k3")} == {b"k1": b"v1", b"k2": b"v2", b"k3": b"v3"}


def test_an_abort_marker_and_its_index_entry_outlive_the_aborted_data_then_go(log, clock):
    log.append_batch(batch(9, 0, [(b"a", b"1"), (b"b", b"2")]), in_transaction=True)
    log.append_control(9, 0, commit=False)                      # offset 2
    log.append_batch(batch(9, 2, [(b"a", b"3")]), in_transaction=True)
    log.append_control(9, 0, commit=True)                       # offset 4
    fill(log, 30)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in log.collect_aborted_txns(0, 100)] == [(9, 0, 2)]
    log.compact()                                # the aborted batch goes; its marker stays (it was seen)
    assert markers(log) == [(2, 9), (4, 9)]
    assert [a.last_offset for a in log.collect_aborted_txns(0, 100)] == [2]
    assert read_committed(log)[b"a"] == b"3" and b"b" not in read_committed(log)
    clock.set(T0 + 999)
    log.compact()                                # nothing of it left, but not older than delete.retention.ms
    assert markers(log) == [(2, 9), (4, 9)]
    clock.set(T0 + 1001)
    stats = log.compact()
    # the ABORT marker goes, and its .txnindex entry with it; the COMMIT marker still closes "a"=3
    assert stats["markers_dropped"] == 1
    assert markers(log) == [(4, 9)]
    assert log.collect_aborted_txns(0, 100) == []
    assert read_committed(log)[b"a"] == b"3"
    log.close()
    again = Log(log.directory, LogConfig.from_overrides(COMPACT), clock)
    assert markers(again) == [(4, 9)] and read_committed(again)[b"a"] == b"3"
    again.close()


def test_a_commit_marker_goes_once_its_records_are_superseded_and_old(log, clock):
    log.append_batch(batch(4, 0, [(b"x", b"old")]), in_transaction=True)
    log.append_control(4, 0, commit=True)                       # offset 1
    log.append_batch(rb.encode_batch(0, [(0, T0, b"x", b"new", ())]))   # supersedes x=old
    fill(log, 30)
    clock.set(T0 + 5000)
    log.compact()                                # x=old goes; its marker still saw the batch this pass
    assert markers(log) == [(1, 4)]
    log.compact()
    assert markers(log) == []
    assert read_committed(log)[b"x"] == b"new"


def test_the_cleaner_stops_at_the_first_unstable_offset(log, clock):
    log.append_batch(rb.encode_batch(0, [(0, T0, b"k", b"before", ())]))
    log.append_batch(batch(5, 0, [(b"k", b"open")]), in_transaction=True)    # open: offset 1
    fill(log, 30)
    assert log.first_unstable_offset == 1
    assert len(log.segments) > 2
    stats = log.compact()
    assert stats["segments_scanned"] == 0          # the segment holding offset 1 is not stable yet
    assert [r.value for r in log.read(0, 1 << 20) if r.key == b"k"] == [b"before", b"open"]
    log.append_control(5, 0, commit=False)
    fill(log, 30, b"b")
    log.compact()
    assert [r.value for r in log.read(0, 1 << 20) if r.key == b"k"] == [b"before"]
    assert read_committed(log)[b"k"] == b"before"
