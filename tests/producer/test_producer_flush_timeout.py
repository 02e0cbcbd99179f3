"""Producer.flush(timeout) and close(timeout) honour their timeout on the producer's clock."""

from __future__ import annotations

import time

import pytest

from kafkasim.broker import Broker
from kafkasim.errors import KafkaTimeoutError
from kafkasim.producer import LOST_REQUEST, Producer


class Outage:
    """A fault injector: every produce request is lost while ``down`` (the broker cannot take it)."""

    def __init__(self) -> None:
        self.down = True
        self.calls = 0

    def __call__(self, tp, batch_no, attempt):
        self.calls += 1
        return LOST_REQUEST if self.down else None


def test_flush_timeout_raises_after_that_long_on_the_mock_clock_and_keeps_the_records(broker, clock):
    broker.create_topic("t", partitions=1)
    outage = Outage()
    p = Producer(broker, clock=clock, fault_injector=outage)      # retry_backoff_ms=100
    fut = p.send("t", value=b"v")
    start = clock.now_ms()
    with pytest.raises(KafkaTimeoutError, match="within 1.0 secs"):
        p.flush(timeout=1.0)
    waited = clock.now_ms() - start
    assert 1_000 <= waited < 1_100                     # about the timeout, in simulated time
    assert 10 <= outage.calls <= 12                    # one attempt per retry_backoff_ms
    assert not fut.is_done                             # still buffered, not failed
    outage.down = False                                # the broker is back
    p.flush()
    assert fut.get().offset == 0
    assert broker.describe_topic("t")["partitions"][0]["log_end_offset"] == 1


def test_flush_timeout_paces_a_transient_failure_by_retry_backoff(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, retry_backoff_ms=250,
                 fault_injector=lambda tp, n, attempt: LOST_REQUEST if attempt == 1 else None)
    fut = p.send("t", value=b"v")
    start = clock.now_ms()
    p.flush(timeout=5)                                 # the retry succeeds: no error
    assert clock.now_ms() - start == 250               # one backoff slept, on the clock
    assert fut.get().offset == 0


def test_flush_timeout_costs_no_time_when_the_broker_accepts_at_once(broker, clock):
    broker.create_topic("t", partitions=2)
    p = Producer(broker, clock=clock)
    futs = [p.send("t", key=b"k%d" % i, value=b"v") for i in range(10)]
    start = clock.now_ms()
    p.flush(timeout=0.5)
    assert clock.now_ms() == start and all(f.succeeded() for f in futs)


def test_idempotent_flush_timeout_keeps_sequence_order_across_rounds(broker, clock):
    broker.create_topic("t", partitions=1)
    outage = Outage()
    outage.down = False
    p = Producer(broker, clock=clock, linger_ms=0, batch_size=1, fault_injector=outage)
    assert p.idempotent
    p.send("t", value=b"first").get()                  # the partition knows this producer id
    outage.down = True
    futs = [p.send("t", value=b"%d" % i) for i in range(3)]    # three batches, all stuck
    with pytest.raises(KafkaTimeoutError):
        p.flush(timeout=0.3)
    assert not any(f.is_done for f in futs)
    outage.down = False
    p.flush(timeout=10)
    assert [f.get().offset for f in futs] == [1, 2, 3]
    assert [r.value for r in broker.fetch("t", 0, 0).records] == [b"first", b"0", b"1", b"2"]


def test_close_timeout_fails_what_is_left_and_closes(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, fault_injector=Outage())
    fut = p.send("t", value=b"v")
    p.close(timeout=0.5)
    assert fut.failed() and isinstance(fut.exception, KafkaTimeoutError)
    assert 500 <= clock.now_ms() - 1_700_000_000_000 < 600


def test_flush_timeout_on_a_real_clock_waits_about_that_long(tmp_path):
    with Broker(tmp_path / "data") as b:                # SystemClock
        b.create_topic("t", partitions=1)
        p = Producer(b, retry_backoff_ms=20, fault_injector=Outage(), background_sender=False)
        p.send("t", value=b"v")
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            p.flush(timeout=0.2)
        assert 0.15 <= time.monotonic() - t0 < 5
