"""Fixtures of the cluster tests: a 3-broker, 3-rack cluster on the test's MockClock."""

from __future__ import annotations

import pytest

from kafkasim.broker.cluster import Cluster

RACKS3 = [(0, "r1"), (1, "r2"), (2, "r3")]


@pytest.fixture
def cluster(tmp_path, clock):
    c = Cluster(tmp_path / "data", RACKS3, clock=clock, seed=7)
    yield c
    c.close()


def records_of(log, start: int = 0) -> list[tuple[int, bytes]]:
    """``(offset, key)`` of every record of ``log`` from ``start``."""
    out, offset = [], start
    while offset < log.log_end_offset:
        batch = log.read(offset)
        if not batch:
            break
        out += [(r.offset, r.key) for r in batch]
        offset = batch[-1].offset + 1
    return out
