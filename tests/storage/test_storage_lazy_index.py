"""Closed segments' indexes are loaded lazily (FORMAT.md §3.3), also by the accessors.

Listing segments (``topics describe``), the offset accessors and the broker's first
idempotent produce after a restart (which lists segments and reads the active one) must
not load any closed segment's index: after a clean restart of a log of many segments they
open no ``.index``/``.timeindex`` file but the active segment's. A closed segment's index is
loaded when it is read, time-searched, or asked for its largest timestamp — and then it is
checked (and rebuilt when it does not check out) as before.
"""

from __future__ import annotations

import builtins
import os

from kafkasim.broker.broker import Broker
from kafkasim.records import record_batch as rb
from kafkasim.storage import layout
from kafkasim.storage.log import Log
from storage_helpers import T0, make_records

_INDEX_SUFFIXES = (layout.INDEX_SUFFIX, layout.TIMEINDEX_SUFFIX)


def _count_index_opens(monkeypatch) -> list[str]:
    """Record the path of every index file opened from now on (``open`` or ``os.open``)."""
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def spy_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.fspath(file).endswith(_INDEX_SUFFIXES):
            opened.append(os.fspath(file))
        return real_open(file, *args, **kwargs)

    def spy_os_open(path, *args, **kwargs):
        if isinstance(path, (str, os.PathLike)) and os.fspath(path).endswith(_INDEX_SUFFIXES):
            opened.append(os.fspath(path))
        return real_os_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    return opened


def _segment_bases(paths: list[str]) -> set[int]:
    return {int(os.path.basename(p)[:20]) for p in paths}


def test_listing_segments_and_offsets_after_a_restart_loads_no_closed_index(tmp_path, clock, small_config,
                                                                            monkeypatch):
    d = str(tmp_path / "t-0")
    log = Log(d, small_config, clock)
    for i in range(200):
        log.append(make_records(i, 1, size=40))
    log.close()
    log = Log(d, small_config, clock)                 # clean restart
    opened = _count_index_opens(monkeypatch)

    segs = log.segments                               # what `topics describe` and the broker use
    assert len(segs) > 10
    assert [s.base_offset for s in segs] == [b for b, _ in layout.list_segments(d)]
    assert sum(s.size_bytes for s in segs) == log.size_in_bytes
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 200, 200)
    # the broker's producer state after a restart: the batches of the last segment
    batches = log.read_batches(segs[-1].base_offset)
    assert batches and batches[0][0].base_offset == segs[-1].base_offset
    assert opened == [], f"listing segments opened closed indexes: {sorted(set(opened))[:4]}"

    # a closed segment's largest timestamp is still reported, loading that segment only
    first = segs[0]
    assert first.max_timestamp == T0 + segs[1].base_offset - 1   # record i has timestamp T0 + i
    assert _segment_bases(opened) == {0}
    assert log.segments[0] == first and log.recovery_report == []
    log.close()


def test_a_lazily_loaded_index_that_does_not_check_out_is_still_rebuilt(tmp_path, clock, small_config):
    d = str(tmp_path / "t-0")
    log = Log(d, small_config, clock)
    for i in range(100):
        log.append(make_records(i, 1, size=40))
    log.close()
    first_index = os.path.join(d, layout.segment_name(0, layout.INDEX_SUFFIX))
    with open(first_index, "r+b") as f:               # an entry pointing past the log
        f.write(b"\x00\x00\x00\x01\x7f\xff\xff\xff")
    log = Log(d, small_config, clock)
    segs = log.segments
    assert log.recovery_report == []                  # not looked at yet
    assert segs[0].max_timestamp == T0 + segs[1].base_offset - 1
    assert any("index rebuilt" in line for line in log.recovery_report)
    assert [r.offset for r in log.read(0, 1 << 20)][:3] == [0, 1, 2]
    log.close()


def test_describe_and_the_first_idempotent_produce_after_a_restart_load_no_closed_index(tmp_path, clock,
                                                                                        monkeypatch):
    data = str(tmp_path / "data")
    broker = Broker(data, clock=clock)
    broker.create_topic("t", partitions=1, configs={"segment.bytes": "2048", "index.interval.bytes": "256"})
    pid, epoch = broker.init_producer_id()
    for seq in range(0, 150, 3):
        broker.produce("t", 0, rb.encode_batch(0, [(i, T0 + seq + i, b"k", b"v" * 40, ()) for i in range(3)],
                                               producer_id=pid, producer_epoch=epoch, base_sequence=seq))
    broker.close()
    broker = Broker(data, clock=clock)
    opened = _count_index_opens(monkeypatch)
    described = broker.describe_topic("t")["partitions"][0]
    assert described["segments"] > 3 and described["log_end_offset"] == 150
    result = broker.produce("t", 0, rb.encode_batch(0, [(0, T0 + 150, b"k", b"v", ())], producer_id=pid,
                                                    producer_epoch=epoch, base_sequence=150))
    assert result.base_offset == 150
    active_base = broker.log("t", 0).segments[-1].base_offset
    assert _segment_bases(opened) <= {active_base}, "describe/produce loaded closed segments' indexes"
    broker.close()
