"""``Broker.fetch_columns`` gives the records ``Broker.fetch`` gives, column-wise, with the same offsets and errors."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import OffsetOutOfRangeError

T0 = 1_700_000_000_000


def test_fetch_columns_matches_fetch(tmp_path):
    with Broker(tmp_path, clock=MockClock(T0)) as b:
        b.create_topic("t", 2)
        for i in range(0, 30, 10):
            b.append_records("t", 1, [(T0 + j, b"k%d" % j, b"v%d" % j, (("h", b"%d" % j),))
                                      for j in range(i, i + 10)])
        for start in (0, 5, 10, 29):
            rows = b.fetch("t", 1, start, 1_000_000)
            cols = b.fetch_columns("t", 1, start, 1_000_000)
            assert cols.columns.offsets == [r.offset for r in rows.records]
            assert list(zip(*cols.columns)) == [(r.offset, r.timestamp, r.key, r.value, r.headers)
                                                for r in rows.records]
            assert cols[1:] == rows[1:]      # high watermark, log start, log end
        assert b.fetch_columns("t", 1, 30).columns.offsets == []
        with pytest.raises(OffsetOutOfRangeError):
            b.fetch_columns("t", 1, 31)


def test_flush_makes_every_partition_durable_up_to_its_end(tmp_path):
    """Broker.flush (concurrent per-log fsyncs) leaves every partition's recovery point at its LEO."""
    with Broker(tmp_path, clock=MockClock(T0)) as b:
        b.create_topic("t", 11)                       # more partitions than flush threads
        for p in range(11):
            b.append_records("t", p, [(T0, b"k", b"v", ())] * (p + 1))
        b.flush()
        for p in range(11):
            log = b.log("t", p)
            with open(f"{log.directory}/recovery-point") as f:
                assert int(f.read().split()[0]) == p + 1 == log.log_end_offset


def test_flush_raises_the_error_of_a_failing_log_after_flushing_the_others(tmp_path):
    from kafkasim.errors import KafkaStorageError
    with Broker(tmp_path, clock=MockClock(T0)) as b:
        b.create_topic("t", 4)
        for p in range(4):
            b.append_records("t", p, [(T0, b"k", b"v", ())])
        b.log("t", 1).close()                          # flushing a closed log fails
        with pytest.raises(KafkaStorageError, match="closed"):
            b.flush()
        with open(f"{b.log('t', 3).directory}/recovery-point") as f:
            assert int(f.read().split()[0]) == 1
