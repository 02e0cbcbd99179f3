"""The aborted-transaction index (storage/txn_index.py): Kafka's entry bytes and Kafka's TransactionIndexTest cases."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, strategies as st

from kafkasim.errors import KafkaStorageError
from kafkasim.storage.txn_index import (
    ABORTED_TXN_SIZE, AbortedTxn, CorruptIndexError, TransactionIndex, TxnIndexSearchResult,
)

FOUR = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "00000000000000000000.txnindex")


@pytest.fixture
def index(path) -> TransactionIndex:
    return TransactionIndex(path)


def _filled(index: TransactionIndex, entries=FOUR) -> TransactionIndex:
    for e in entries:
        index.append(e)
    return index


def test_entry_bytes_by_hand():
    """Kafka's AbortedTxn: version int16 0, then producer id, first, last, LSO as int64, big-endian."""
    txn = AbortedTxn(producer_id=983493, first_offset=137, last_offset=299, last_stable_offset=200)
    expected = (b"\x00\x00"
                + (983493).to_bytes(8, "big") + (137).to_bytes(8, "big")
                + (299).to_bytes(8, "big") + (200).to_bytes(8, "big"))
    assert txn.pack() == expected and len(expected) == ABORTED_TXN_SIZE == 34
    assert AbortedTxn.unpack(expected) == txn                       # Kafka's testAbortedTxnSerde
    assert AbortedTxn.unpack(b"xx" + expected, 2) == txn
    assert AbortedTxn(-1, 0, 0, 0).pack()[2:10] == b"\xff" * 8


@pytest.mark.parametrize("version", [1, -1, 0x7FFF])
def test_entry_of_another_version_is_corrupt(version):
    data = struct.pack(">h", version) + AbortedTxn(1, 2, 3, 4).pack()[2:]
    with pytest.raises(CorruptIndexError, match=f"version {version}"):
        AbortedTxn.unpack(data, where="x.txnindex")
    assert issubclass(CorruptIndexError, KafkaStorageError)


def test_position_set_correctly_when_opened(index, path):
    """Kafka's testPositionSetCorrectlyWhenOpened: a reopened index appends after the entries."""
    _filled(index).close()
    reopened = TransactionIndex(path)
    another = AbortedTxn(3, 50, 60, 55)
    reopened.append(another)
    assert reopened.entries() == FOUR + [another]
    assert TransactionIndex(path).entries() == FOUR + [another]
    assert os.path.getsize(path) == 5 * 34


def test_sanity_check(index, path):
    """Kafka's testSanityCheck: opened with a start offset past the entries, the index is corrupt."""
    _filled(index).close()
    TransactionIndex(path, start_offset=0).sanity_check()
    with pytest.raises(CorruptIndexError, match="less than the start offset 100"):
        TransactionIndex(path, start_offset=100).sanity_check()


def test_last_offset_must_increase(index):
    """Kafka's testLastOffsetMustIncrease and testLastOffsetCannotDecrease."""
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(ValueError, match="15 is not greater than the current last offset 15"):
        index.append(AbortedTxn(0, 0, 15, 11))
    with pytest.raises(ValueError, match="10 is not greater than the current last offset 15"):
        index.append(AbortedTxn(0, 0, 10, 11))
    assert index.entries() == [AbortedTxn(1, 5, 15, 13)]


def test_collect_aborted_transactions(index):
    """Kafka's testCollectAbortedTransactions, case by case."""
    _filled(index)
    assert index.collect(0, 100) == TxnIndexSearchResult(FOUR, False)
    assert index.collect(0, 32) == (FOUR[:3], True)
    assert index.collect(0, 35) == (FOUR, True)
    assert index.collect(10, 35) == (FOUR, True)
    assert index.collect(11, 35) == (FOUR[1:], True)
    assert index.collect(20, 41) == (FOUR[2:], False)
    aborted, complete = index.collect(0, 100)
    assert aborted == FOUR and not complete


def test_truncate(index):
    """Kafka's testTruncate."""
    entries = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]
    _filled(index, entries)
    index.truncate_to(51)
    assert index.collect(0, 100).aborted_transactions == entries
    index.truncate_to(50)
    assert index.collect(0, 100).aborted_transactions == entries[:3]
    assert TransactionIndex(index.path).entries() == entries[:3]         # the file is cut too
    index.append(AbortedTxn(4, 40, 45, 46))                               # and appends go on from there
    assert TransactionIndex(index.path).entries() == entries[:3] + [AbortedTxn(4, 40, 45, 46)]
    index.reset()
    assert index.collect(0, 100).aborted_transactions == []
    assert os.path.getsize(index.path) == 0


def test_rename_index(index, tmp_path):
    """Kafka's testRenameIndex: appends after a rename land in the renamed file."""
    renamed = str(tmp_path / "renamed.txnindex")
    index.append(AbortedTxn(0, 0, 10, 2))
    index.rename(renamed)
    index.append(AbortedTxn(1, 5, 15, 16))
    aborted = index.collect(0, 100).aborted_transactions
    assert [a.first_offset for a in aborted] == [0, 5]
    assert index.path == renamed and TransactionIndex(renamed).entries() == aborted


def test_rename_without_a_file_just_moves_the_name(index, tmp_path):
    index.rename(str(tmp_path / "b.txnindex"))
    assert index.path.endswith("b.txnindex") and not os.path.exists(index.path)


def test_flush(path):
    """Kafka's testFlush: flushing a never-written index creates nothing; after an append the file has it."""
    index = TransactionIndex(path)
    index.flush()
    assert not os.path.exists(path)
    index.append(AbortedTxn(0, 0, 10, 2))
    index.flush()
    index.flush(fsync=False)
    assert os.path.getsize(path) == 34


def test_delete_if_exists(index, path):
    """Kafka's testDeleteIfExists."""
    index.append(AbortedTxn(0, 0, 10, 2))
    assert os.path.exists(path)
    assert index.delete() is True
    assert not os.path.exists(path)
    assert index.delete() is False
    assert index.entries() == []


def test_absent_file_is_an_empty_index(index, path):
    assert index.entries() == [] and len(index) == 0 and index.last_offset is None
    assert index.collect(0, 10) == ([], False)
    index.truncate_to(0)
    index.sanity_check()
    assert not os.path.exists(path)


def test_torn_tail_is_skipped_reported_and_cut(index, path):
    _filled(index, FOUR[:2])
    with open(path, "ab") as f:
        f.write(AbortedTxn(9, 9, 99, 99).pack()[:20])      # a crash inside an append
    torn = TransactionIndex(path)
    assert torn.entries() == FOUR[:2] and torn.torn_bytes == 20    # Kafka's reader stops short of it
    with pytest.raises(CorruptIndexError, match="20 bytes after the last whole entry"):
        torn.sanity_check()
    torn.append(FOUR[2])                                   # the next write cuts the partial entry
    assert torn.torn_bytes == 0 and os.path.getsize(path) == 3 * 34
    assert TransactionIndex(path).entries() == FOUR[:3]
    with open(path, "ab") as f:
        f.write(b"\x00")
    again = TransactionIndex(path)
    again.truncate_to(1000)                                # nothing to drop, but the tail goes
    assert os.path.getsize(path) == 3 * 34 and again.torn_bytes == 0


def test_entry_of_unknown_version_in_the_file_is_corrupt(path):
    with open(path, "wb") as f:
        f.write(AbortedTxn(0, 0, 10, 11).pack() + b"\x00\x01" + AbortedTxn(1, 5, 15, 13).pack()[2:])
    with pytest.raises(CorruptIndexError, match=f"{path}: unexpected aborted transaction version 1 in the entry at byte 34"):
        TransactionIndex(path).entries()


def test_sanity_check_finds_entries_out_of_order(path):
    with open(path, "wb") as f:
        f.write(AbortedTxn(0, 0, 10, 11).pack() + AbortedTxn(1, 5, 10, 13).pack())
    with pytest.raises(CorruptIndexError, match="entry 1 has last offset 10, not above the previous 10"):
        TransactionIndex(path).sanity_check()


def test_append_refuses_fields_outside_int64(index):
    with pytest.raises(ValueError, match="outside int64"):
        index.append(AbortedTxn(1 << 63, 0, 1, 2))
    assert index.entries() == []


def test_io_errors_are_storage_errors(tmp_path):
    index = TransactionIndex(str(tmp_path / "no-such-dir" / "x.txnindex"))
    assert index.entries() == []
    with pytest.raises(KafkaStorageError, match="cannot write transaction index"):
        index.append(AbortedTxn(0, 0, 1, 2))


@given(st.lists(st.tuples(st.integers(0, 2 ** 40), st.integers(0, 50), st.integers(1, 50), st.integers(0, 60)),
                max_size=12),
       st.integers(0, 2 ** 41), st.integers(0, 2 ** 41))
def test_collect_is_kafkas_rule_and_survives_a_reopen(tmp_path_factory, specs, fetch, bound):
    path = str(tmp_path_factory.mktemp("ti") / "x.txnindex")
    entries, last = [], 0
    for pid, span, step, lso_gap in specs:      # increasing markers, first offsets before them
        last += step
        entries.append(AbortedTxn(pid, max(0, last - span), last, last + 1 - min(lso_gap, last + 1) // 2))
    index = _filled(TransactionIndex(path), entries)
    expected, complete = [], False
    for e in entries:
        if e.last_offset >= fetch and e.first_offset < bound:
            expected.append(e)
        if e.last_stable_offset >= bound:
            complete = True
            break
    assert index.collect(fetch, bound) == (expected, complete)
    assert TransactionIndex(path).collect(fetch, bound) == (expected, complete)


def test_docstring_examples_hold():
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module("kafkasim.storage.txn_index"))
    assert result.failed == 0 and result.attempted > 0
