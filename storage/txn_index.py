"""The aborted-transaction index of one segment: Kafka's ``.txnindex`` (txn facts §3.3).

A read_committed consumer must drop the records of aborted transactions. The log tells it
which ones through Fetch's ``AbortedTransactions``, built from this index: one entry per
transaction whose ABORT marker was written into the segment, appended when the marker is.
Committed transactions, and transactions that wrote nothing to the partition, have no entry.

File name: ``<20-digit segment base offset>.txnindex``
(``layout.segment_name(base, TXN_INDEX_SUFFIX)``). File format: a sequence of 34-byte big-endian entries, nothing else (Kafka's ``AbortedTxn``)::

    version int16 = 0 | producer_id int64 | first_offset int64 | last_offset int64 | last_stable_offset int64

``first_offset`` is the transaction's first offset in the partition, ``last_offset`` the
offset of its ABORT marker, ``last_stable_offset`` the partition's LSO once the marker is
written (the first offset of the earliest other open transaction, else ``last_offset + 1``).

Invariants:

- ``last_offset`` strictly increases from entry to entry (markers are appended in offset
  order); :meth:`TransactionIndex.append` refuses anything else, as Kafka does.
- An entry whose version is not 0 makes the file corrupt (:class:`CorruptIndexError`).
  (Kafka throws only for versions above 0; a negative version never comes from a writer.)
- The index is derived from the log — the markers and the producer state before them — so
  a file that does not check out (:meth:`TransactionIndex.sanity_check`) is thrown away and
  rebuilt by whoever owns the segment, as Kafka rebuilds it on segment recovery.
- A torn tail (a size that is not a multiple of 34, from a crash inside an append) is not
  read, as Kafka's reader stops short of a partial entry; :attr:`TransactionIndex.torn_bytes`
  reports it, :meth:`~TransactionIndex.sanity_check` fails on it, and the next write cuts it.
- An absent file is an empty index; the file is created by the first append.

Writes go straight to the file (``pwrite``; entries are rare: one per aborted transaction);
:meth:`TransactionIndex.flush` makes them durable. The entries are read once, on first
use, and then kept in memory.

Thread-safety: not thread-safe; the owning segment's log serialises access under its lock.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple, Optional

from kafkasim.errors import KafkaStorageError
from kafkasim.storage.files import storage_errors
from kafkasim.storage.layout import TXN_INDEX_SUFFIX

__all__ = [
    "AbortedTxn", "TransactionIndex", "TxnIndexSearchResult", "CorruptIndexError",
    "TXN_INDEX_SUFFIX", "ABORTED_TXN_SIZE", "ABORTED_TXN_VERSION",
]

ABORTED_TXN_SIZE = 34
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
assert _ENTRY.size == ABORTED_TXN_SIZE


class CorruptIndexError(KafkaStorageError):
    """Raised when a ``.txnindex`` does not check out (an entry of unknown version, a torn tail
    or entries out of order in :meth:`TransactionIndex.sanity_check`); the segment's owner
    rebuilds the index from the log. Names the file and the entry."""


class AbortedTxn(NamedTuple):
    """One entry of the index: an aborted transaction of ``producer_id`` spanning
    ``first_offset``..``last_offset`` (its ABORT marker), and the LSO once it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        """The 34-byte version-0 entry.

        >>> AbortedTxn(1, 2, 3, 4).pack().hex()
        '00000000000000000001000000000000000200000000000000030000000000000004'
        """
        return _ENTRY.pack(ABORTED_TXN_VERSION, *self)

    @classmethod
    def unpack(cls, data, pos: int = 0, *, where: str = "<buffer>") -> "AbortedTxn":
        """The entry at byte ``pos`` of ``data``; :class:`CorruptIndexError` when its version is not 0."""
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != ABORTED_TXN_VERSION:
            raise CorruptIndexError(
                f"{where}: unexpected aborted transaction version {version} in the entry at byte {pos} "
                f"(the current version is {ABORTED_TXN_VERSION})")
        return cls(pid, first, last, lso)


class TxnIndexSearchResult(NamedTuple):
    """What :meth:`TransactionIndex.collect` found: the overlapping aborted transactions, and
    whether the search is complete (else it goes on into the next segment's index)."""

    aborted_transactions: list
    is_complete: bool


class TransactionIndex:
    """The ``.txnindex`` of one segment (see the module docstring for the format and the rules).

    ``start_offset`` is the segment's base offset: :meth:`sanity_check` refuses an entry whose
    marker lies before it.

    Example::

        >>> import tempfile, os
        >>> d = tempfile.TemporaryDirectory()
        >>> idx = TransactionIndex(os.path.join(d.name, "00000000000000000000.txnindex"))
        >>> idx.append(AbortedTxn(producer_id=7, first_offset=0, last_offset=10, last_stable_offset=11))
        >>> idx.collect(0, 100)
        TxnIndexSearchResult(aborted_transactions=[AbortedTxn(producer_id=7, first_offset=0, last_offset=10, last_stable_offset=11)], is_complete=False)
        >>> idx.collect(5, 11).is_complete   # the LSO after the abort (11) reaches the bound
        True
        >>> d.cleanup()
    """

    def __init__(self, path: str, start_offset: int = 0) -> None:
        self.path = os.fspath(path)
        self.start_offset = start_offset
        self._entries: Optional[list[AbortedTxn]] = None   # None: not read yet
        self.torn_bytes = 0
        """Bytes past the last whole entry found when the file was read (0 once a write cut them)."""

    # -- reading ---------------------------------------------------------------------------
    def load(self) -> None:
        """Read the file now (every other method reads it on first use). An absent file is an
        empty index; a torn tail is skipped and counted in :attr:`torn_bytes`;
        :class:`CorruptIndexError` for an entry whose version is not 0."""
        with storage_errors("read transaction index", self.path):
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
        whole = len(data) - len(data) % ABORTED_TXN_SIZE
        self._entries = [AbortedTxn.unpack(data, pos, where=self.path) for pos in range(0, whole, ABORTED_TXN_SIZE)]
        self.torn_bytes = len(data) - whole

    def _loaded(self) -> list[AbortedTxn]:
        if self._entries is None:
            self.load()
        return self._entries   # type: ignore[return-value]

    def entries(self) -> list[AbortedTxn]:
        """Every entry, in file order (Kafka's ``allAbortedTxns``)."""
        return list(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())

    @property
    def last_offset(self) -> Optional[int]:
        """The marker offset of the last entry, or None when the index is empty."""
        entries = self._loaded()
        return entries[-1].last_offset if entries else None

    def collect(self, fetch_offset: int, upper_bound: int) -> TxnIndexSearchResult:
        """The aborted transactions that overlap the fetch range ``[fetch_offset, upper_bound)``:
        entries with ``last_offset >= fetch_offset`` and ``first_offset < upper_bound``, in
        order. The search is complete at the first entry whose ``last_stable_offset >=
        upper_bound``: no transaction aborted later, in this segment or a later one, can
        have started before the bound. Otherwise the caller goes on with the next segment.

        Example (Kafka's TransactionIndexTest): with entries (pid, first, last, lso)
        (0, 0, 10, 11), (1, 5, 15, 13), (2, 18, 35, 25), (3, 32, 50, 40), ``collect(0, 32)``
        gives the first three, complete: the walk ends at the fourth (its LSO 40 ≥ 32), which
        itself starts at 32, not below the bound. ``collect(20, 41)`` gives the last two,
        incomplete (no LSO reaches 41).
        """
        found = []
        for txn in self._loaded():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        """:class:`CorruptIndexError` when the file does not check out: a torn tail, an entry
        whose marker lies before the segment's ``start_offset`` (Kafka's ``sanityCheck``), or
        marker offsets that do not strictly increase."""
        entries = self._loaded()
        if self.torn_bytes:
            raise CorruptIndexError(
                f"{self.path}: {self.torn_bytes} bytes after the last whole entry "
                f"(the size is not a multiple of {ABORTED_TXN_SIZE})")
        prev = None
        for i, txn in enumerate(entries):
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"{self.path}: last offset of aborted transaction {txn} (entry {i}) is less than "
                    f"the start offset {self.start_offset}")
            if prev is not None and txn.last_offset <= prev:
                raise CorruptIndexError(
                    f"{self.path}: entry {i} has last offset {txn.last_offset}, not above the previous {prev}")
            prev = txn.last_offset

    # -- writing ---------------------------------------------------------------------------
    def append(self, entry: AbortedTxn) -> None:
        """Append ``entry`` to the file. Its ``last_offset`` must exceed the last entry's, else
        ``ValueError`` naming both (Kafka's IllegalArgumentException)."""
        if not isinstance(entry, AbortedTxn):
            entry = AbortedTxn(*entry)
        entries = self._loaded()
        if entries and entry.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: the last offset of appended transactions must increase, but "
                f"{entry.last_offset} is not greater than the current last offset {entries[-1].last_offset}")
        try:
            data = entry.pack()
        except struct.error as exc:
            raise ValueError(f"{self.path}: aborted transaction {entry} has a field outside int64: {exc}") from None
        self._write_at(len(entries) * ABORTED_TXN_SIZE, data)
        entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or past ``offset`` (the log is truncated there)."""
        entries = self._loaded()
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep < len(entries) or self.torn_bytes:
            self._cut(keep)

    def reset(self) -> None:
        """Drop every entry (the file is cut to 0 bytes if it exists)."""
        self._loaded()
        self._cut(0)

    def flush(self, fsync: bool = True) -> None:
        """Make the appended entries durable (every write already reached the file; this
        fsyncs it). Nothing to do without a file, or with ``fsync=False``."""
        if not fsync:
            return
        with storage_errors("flush transaction index", self.path):
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        """Forget the entries read (no file stays open between calls; a later use reads again)."""
        self._entries = None
        self.torn_bytes = 0

    def delete(self) -> bool:
        """Delete the file; True if it existed."""
        self.close()
        with storage_errors("delete transaction index", self.path):
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                return False
        return True

    def rename(self, new_path: str) -> None:
        """Rename the file (if it exists) to ``new_path``; from then on the index is ``new_path``
        even if the rename failed, as Kafka's ``renameTo``."""
        new_path = os.fspath(new_path)
        try:
            with storage_errors("rename transaction index", self.path):
                try:
                    os.replace(self.path, new_path)
                except FileNotFoundError:
                    pass
        finally:
            self.path = new_path

    def _cut(self, keep: int) -> None:
        """Keep the first ``keep`` entries, in memory and in the file (if it exists)."""
        with storage_errors("truncate transaction index", self.path):
            try:
                fd = os.open(self.path, os.O_WRONLY)
            except FileNotFoundError:
                fd = None
            if fd is not None:
                try:
                    os.ftruncate(fd, keep * ABORTED_TXN_SIZE)
                finally:
                    os.close(fd)
        del self._entries[keep:]   # type: ignore[index]
        self.torn_bytes = 0

    def _write_at(self, position: int, data: bytes) -> None:
        """Write ``data`` at ``position`` and end the file there (a torn tail goes); creates the file."""
        with storage_errors("write transaction index", self.path):
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, data, position)
                if self.torn_bytes:
                    os.ftruncate(fd, position + len(data))
            finally:
                os.close(fd)
        self.torn_bytes = 0
