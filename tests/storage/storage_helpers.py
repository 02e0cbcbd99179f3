"""Shared helpers for the storage tests (imported by name: tests/storage is on sys.path)."""

from __future__ import annotations

T0 = 1_700_000_000_000


def make_records(start: int, n: int, ts: int = T0, size: int = 20) -> list[tuple]:
    """``n`` records whose key/value name their sequence number ``start + i``."""
    return [(ts + start + i, b"k%d" % (start + i), (b"v%d-" % (start + i)).ljust(size, b"."), ())
            for i in range(n)]


def read_all(log, start=None) -> list:
    """Every record from ``start`` (default: the log start) to the LEO, through ``read``."""
    out = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        recs = log.read(offset, 4096)
        assert recs, f"read({offset}) returned nothing below the LEO {log.log_end_offset}"
        out.extend(recs)
        offset = recs[-1].offset + 1
    return out
