"""Test helper: logs written by the project's own broker and producer, with injected faults.

Each ``write_*`` function writes one topic under ``data_dir`` through ``kafkasim.broker.Broker``
and ``kafkasim.producer.Producer`` (audit headers stamped) and returns the violations a correct
ordering audit must report — computed here from the fault injected, not by the jobs.
"""

from __future__ import annotations

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.producer import Producer
from kafkasim.partitioning.partitioners import partition_for_key
from kafkasim.producer.producer import LOST_REQUEST, LOST_RESPONSE

START_MS = 1_700_000_000_000
TOPIC = "orders"


def _producer(broker, clock, **kw):
    cfg = dict(client_id="app", clock=clock, stamp_headers=True, linger_ms=0, seed=7)
    cfg.update(kw)
    return Producer(broker, **cfg)


def _keys(n: int, prefix: str = "k") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


def write_clean(data_dir: str, topic: str = TOPIC, partitions: int = 3, keys: int = 12, per_key: int = 5) -> dict:
    """``keys`` keys × ``per_key`` records through the default partitioner, idempotent."""
    clock = MockClock(START_MS)
    with Broker(data_dir, clock=clock) as b:
        b.create_topic(topic, partitions=partitions)
        with _producer(b, clock) as p:
            for i in range(per_key):
                for k in _keys(keys):
                    p.send(topic, key=k, value=b"v%d" % i)
                clock.advance(10)
                p.flush()
    return {"records": keys * per_key, "keys": keys}


def write_reordered(data_dir: str, topic: str = TOPIC, partitions: int = 3) -> dict:
    """Out-of-order sends through an explicit partition: idempotence off, 5 in flight,
    one record per batch, and the first attempt of batch #3 lost, so it is written after
    batches #4–#7 (Kafka's classic reordering): sequences 0,1,2,4,5,6,7,3."""
    clock = MockClock(START_MS)
    key = b"acct-1"
    part = partition_for_key(key, partitions)

    def inject(tp, batch_no, attempt):
        return LOST_REQUEST if batch_no == 3 and attempt == 1 else None

    with Broker(data_dir, clock=clock) as b:
        b.create_topic(topic, partitions=partitions)
        with _producer(b, clock, enable_idempotence=False, acks=1, batch_size=1,
                       max_in_flight_requests_per_connection=5, fault_injector=inject) as p:
            for i in range(8):
                p.send(topic, key=key, value=b"x%d" % i, partition=part)
            p.flush()
    return {"sequence_inversion": 1}


def write_duplicated(data_dir: str, topic: str = TOPIC, partitions: int = 3) -> dict:
    """A non-idempotent retry: the response to batch #2 (one record) is lost after the
    broker wrote it, so the producer sends it again: sequence 2 is in the log twice."""
    clock = MockClock(START_MS)
    key = b"acct-2"

    def inject(tp, batch_no, attempt):
        return LOST_RESPONSE if batch_no == 2 and attempt == 1 else None

    with Broker(data_dir, clock=clock) as b:
        b.create_topic(topic, partitions=partitions)
        with _producer(b, clock, enable_idempotence=False, acks=1, batch_size=1,
                       max_in_flight_requests_per_connection=1, fault_injector=inject) as p:
            for i in range(6):
                p.send(topic, key=key, value=b"y%d" % i)
            p.flush()
    return {"duplicate": 1}


def write_mixed_clients(data_dir: str, topic: str = TOPIC, partitions: int = 6) -> dict:
    """Two clients on one topic: ``java-app`` (murmur2) and ``c-app`` with librdkafka's
    ``consistent_random`` (crc32) on its own keys. Every c-app record whose crc32
    partition differs from murmur2's is a mismatch."""
    clock = MockClock(START_MS)
    java_keys, c_keys = _keys(10, "j"), _keys(10, "c")
    expected = sum(1 for k in c_keys
                   if partition_for_key(k, partitions, "consistent_random") != partition_for_key(k, partitions))
    with Broker(data_dir, clock=clock) as b:
        b.create_topic(topic, partitions=partitions)
        with _producer(b, clock, client_id="java-app") as pj, \
                _producer(b, clock, client_id="c-app", partitioner="consistent_random") as pc:
            for i in range(3):
                for k in java_keys:
                    pj.send(topic, key=k, value=b"j")
                for k in c_keys:
                    pc.send(topic, key=k, value=b"c")
                clock.advance(10)
            pj.flush()
            pc.flush()
    return {"partitioner_mismatch": 3 * expected, "mismatched_keys": expected}


def write_partitions_added(data_dir: str, topic: str = TOPIC, before: int = 3, after: int = 6, keys: int = 12) -> dict:
    """Partitions added mid-stream: 3 records per key with ``before`` partitions, then the
    topic grows to ``after`` and 3 more records per key follow. Every key whose murmur2
    partition differs between the two counts moves once."""
    clock = MockClock(START_MS)
    ks = _keys(keys)
    moved = sum(1 for k in ks if partition_for_key(k, before) != partition_for_key(k, after))
    with Broker(data_dir, clock=clock) as b:
        b.create_topic(topic, partitions=before)
        with _producer(b, clock, metadata_max_age_ms=0) as p:
            for i in range(3):
                for k in ks:
                    p.send(topic, key=k, value=b"a%d" % i)
                clock.advance(10)
                p.flush()
            clock.advance(1000)
            b.create_partitions(topic, after)
            for i in range(3):
                for k in ks:
                    p.send(topic, key=k, value=b"b%d" % i)
                clock.advance(10)
                p.flush()
    return {"key_in_multiple_partitions": moved, "records": 6 * keys}


def write_grown_with_librdkafka(data_dir: str, topic: str = TOPIC, before: int = 3, after: int = 6,
                                keys: int = 12) -> dict:
    """Two faults with known causes: the partition count goes ``before`` -> ``after``
    between two rounds of a Java-style (murmur2) idempotent producer ``java-app``, and a
    librdkafka-style producer ``c-app`` (``consistent_random``: crc32) sends its own keys
    before the change. Returns, per old partition, the offset where the change took effect
    as inferred from the data (``effective``: the first record after the change whose key
    murmur2 maps to this partition under ``after`` and elsewhere under ``before``, and 0 for
    each new partition that got data), and as the broker records it (``at_change``: each
    old partition's log end offset at the change, 0 for each new one)."""
    clock = MockClock(START_MS)
    jk, ck = _keys(keys, "j"), _keys(keys, "c")
    rounds = 3
    end = [0] * before             # offsets at the change: what both producers wrote
    for k in jk:
        end[partition_for_key(k, before)] += rounds
    for k in ck:
        end[partition_for_key(k, before, "consistent_random")] += rounds
    effective: dict[int, int] = {}
    nxt = list(end) + [0] * (after - before)
    for k in jk:                   # the first round after the change, in send order
        p_new, p_old = partition_for_key(k, after), partition_for_key(k, before)
        if p_new != p_old:
            effective.setdefault(p_new, nxt[p_new])
        nxt[p_new] += 1
    moved = sum(1 for k in jk if partition_for_key(k, before) != partition_for_key(k, after))
    c_mismatch = sum(1 for k in ck if partition_for_key(k, before, "consistent_random")
                     not in (partition_for_key(k, before), partition_for_key(k, after)))
    with Broker(data_dir, clock=clock) as b:
        b.create_topic(topic, partitions=before)
        with _producer(b, clock, client_id="java-app", metadata_max_age_ms=0) as pj, \
                _producer(b, clock, client_id="c-app", partitioner="consistent_random") as pc:
            for i in range(rounds):
                for k in jk:
                    pj.send(topic, key=k, value=b"a%d" % i)
                pj.flush()
                for k in ck:
                    pc.send(topic, key=k, value=b"c%d" % i)
                pc.flush()
                clock.advance(10)
            clock.advance(1000)
            b.create_partitions(topic, after)
            for i in range(rounds):
                for k in jk:
                    pj.send(topic, key=k, value=b"b%d" % i)
                pj.flush()
                clock.advance(10)
    return {"effective": effective, "at_change": dict(enumerate(end + [0] * (after - before))),
            "change_ms": START_MS + rounds * 10 + 1000, "moved_keys": moved, "c_mismatches": rounds * c_mismatch,
            "records": 2 * rounds * keys + rounds * keys}
