"""Transactions over the wire with aiokafka, and KIP-447 zombie fencing with confluent-kafka,
against ``kafkasim serve`` (issue 23).

- aiokafka: a transactional ``AIOKafkaProducer`` commits one transaction and aborts another;
  an aiokafka read_committed consumer reads exactly the committed records (and a
  read_uncommitted one both); ``send_offsets_to_transaction`` commits the group's offsets
  only with a committed transaction;
- confluent-kafka: a consumer's group metadata taken before a rebalance is stale after it;
  ``send_offsets_to_transaction`` with it is refused by the group coordinator (TxnOffsetCommit
  v3: ILLEGAL_GENERATION), the transaction must be aborted, and the group keeps no offsets
  from it; the current metadata commits;
- read_committed ListOffsets by timestamp is bounded by the last stable offset;
- a transaction left open (its producer gone, never fenced) is aborted by ``kafkasim serve``
  once its ``transaction.timeout.ms`` has passed.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.server.test_transactions_wire import _consume, _create, _ck_producer

pytestmark = pytest.mark.slow


def _run(coro, timeout: float = 60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def _aio_read(bootstrap: str, topic: str, isolation: str, expect: int, timeout: float = 15) -> list:
    """Every value an aiokafka consumer with ``isolation_level`` reads from partition 0 of
    ``topic``, waiting until ``expect`` arrived (and one more fetch after, so extra
    records would show) or ``timeout``."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                         auto_offset_reset="earliest")
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        values = []
        deadline = time.monotonic() + timeout
        extra = 0
        while time.monotonic() < deadline and extra < 2:
            got = await c.getmany(tp, timeout_ms=300)
            values += [m.value for m in got.get(tp, [])]
            if len(values) >= expect:
                extra += 1
        return values
    finally:
        await c.stop()


def test_aiokafka_commits_one_transaction_and_aborts_another(server):
    from aiokafka import AIOKafkaProducer
    _create(server.bootstrap, "txa")

    async def main():
        p = AIOKafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="aio-tx")
        await p.start()
        try:
            async with p.transaction():
                for i in range(3):
                    await p.send("txa", b"c%d" % i, partition=0)
            await p.begin_transaction()
            for i in range(2):
                await p.send_and_wait("txa", b"a%d" % i, partition=0)
            await p.abort_transaction()
        finally:
            await p.stop()
        committed = await _aio_read(server.bootstrap, "txa", "read_committed", 3)
        everything = await _aio_read(server.bootstrap, "txa", "read_uncommitted", 5)
        return committed, everything

    committed, everything = _run(main())
    assert committed == [b"c0", b"c1", b"c2"]
    assert everything == [b"c0", b"c1", b"c2", b"a0", b"a1"]
    assert _consume(server.bootstrap, "txa", "read_committed", 3) == [b"c0", b"c1", b"c2"]   # librdkafka agrees


def test_aiokafka_send_offsets_to_transaction_commits_only_on_commit(server):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    _create(server.bootstrap, "txao")
    tp = TopicPartition("txao", 0)

    async def main():
        c = AIOKafkaConsumer("txao", bootstrap_servers=server.bootstrap, group_id="aio-group",
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             isolation_level="read_committed")
        p = AIOKafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="aio-offsets")
        await c.start()
        await p.start()
        try:
            deadline = time.monotonic() + 20
            while not c.assignment() and time.monotonic() < deadline:
                await c.getmany(timeout_ms=200)
            assert c.assignment() == {tp}
            await p.begin_transaction()
            await p.send_and_wait("txao", b"dropped", partition=0)
            await p.send_offsets_to_transaction({tp: 7}, "aio-group")
            await p.abort_transaction()
            after_abort = await c.committed(tp)
            async with p.transaction():
                await p.send("txao", b"kept", partition=0)
                await p.send_offsets_to_transaction({tp: 5}, "aio-group")
            after_commit = await c.committed(tp)
        finally:
            await p.stop()
            await c.stop()
        return after_abort, after_commit

    after_abort, after_commit = _run(main())
    assert after_abort is None                  # nothing committed by the aborted transaction
    assert after_commit == 5
    assert _consume(server.bootstrap, "txao", "read_committed", 1) == [b"kept"]


def _wait_assigned(consumers, n_partitions: int, timeout: float = 30) -> None:
    """Poll every consumer until their assignments split ``n_partitions`` among them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.1)
        owned = [len(c.assignment()) for c in consumers]
        if sum(owned) == n_partitions and all(owned):
            return
    raise AssertionError(f"assignments not settled: {[c.assignment() for c in consumers]}")


def test_a_zombie_consumers_send_offsets_to_transaction_is_fenced(server):
    """KIP-447 with confluent-kafka: the first member's group metadata is taken in
    generation N; a second member joins (generation N+1). The stale metadata's
    TxnOffsetCommit gets ILLEGAL_GENERATION: an abortable error, nothing committed; the
    producer aborts and commits the offsets with the current metadata."""
    from confluent_kafka import Consumer, KafkaException, KafkaError, TopicPartition
    _create(server.bootstrap, "txz", 2)
    conf = {"bootstrap.servers": server.bootstrap, "group.id": "zombie-group", "enable.auto.commit": False,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    first = Consumer(conf)
    first.subscribe(["txz"])
    _wait_assigned([first], 2)
    stale = first.consumer_group_metadata()          # a copy: the generation it was taken in
    second = Consumer(conf)
    second.subscribe(["txz"])
    try:
        _wait_assigned([first, second], 2)
        p = _ck_producer(server.bootstrap, "zombie-tx")
        p.init_transactions(15)
        p.begin_transaction()
        p.produce("txz", value=b"out", partition=0)
        with pytest.raises(KafkaException) as caught:
            p.send_offsets_to_transaction([TopicPartition("txz", 0, 3)], stale, 15)
        err = caught.value.args[0]
        assert err.code() in (KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID), err
        assert err.txn_requires_abort() and not err.fatal(), err
        p.abort_transaction(15)
        assert first.committed([TopicPartition("txz", 0)], 10)[0].offset < 0
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition("txz", 0, 4)], first.consumer_group_metadata(), 15)
        p.commit_transaction(15)
        assert first.committed([TopicPartition("txz", 0)], 10)[0].offset == 4
    finally:
        second.close()
        first.close()


def test_a_consumer_kicked_out_for_stalling_cannot_commit_offsets_in_a_transaction(server):
    """The KIP-447 zombie: a member stalls past ``max.poll.interval.ms``, librdkafka takes it
    out of the group, the other member gets every partition. A transaction sending offsets
    with the metadata the stalled member had gets UNKNOWN_MEMBER_ID (no such member any
    more): abortable, nothing committed."""
    from confluent_kafka import Consumer, KafkaException, KafkaError, TopicPartition
    _create(server.bootstrap, "txk2", 2)
    conf = {"bootstrap.servers": server.bootstrap, "group.id": "stall-group", "enable.auto.commit": False,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "max.poll.interval.ms": 6000}
    stalled, live = Consumer(conf), Consumer(conf)
    stalled.subscribe(["txk2"])
    live.subscribe(["txk2"])
    try:
        _wait_assigned([stalled, live], 2)
        zombie = stalled.consumer_group_metadata()
        deadline = time.monotonic() + 40                 # only `live` polls: `stalled` is processing
        while len(live.assignment()) < 2 and time.monotonic() < deadline:
            live.poll(0.2)
        assert len(live.assignment()) == 2, live.assignment()
        p = _ck_producer(server.bootstrap, "stall-tx")
        p.init_transactions(15)
        p.begin_transaction()
        p.produce("txk2", value=b"late", partition=1)
        with pytest.raises(KafkaException) as caught:
            p.send_offsets_to_transaction([TopicPartition("txk2", 0, 9)], zombie, 15)
        err = caught.value.args[0]
        assert err.code() in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION), err
        assert err.txn_requires_abort() and not err.fatal(), err
        p.abort_transaction(15)
        assert live.committed([TopicPartition("txk2", 0)], 10)[0].offset < 0
    finally:
        live.close()
        stalled.close()


def test_list_offsets_by_timestamp_under_read_committed_is_bounded_by_the_lso(server):
    """ListOffsets v5 by timestamp (and max timestamp, v7): under read_committed a record of
    an open transaction is not found (offset -1, as Kafka's ``fetchOffsetForTimestamp``
    bounded by the last stable offset), under read_uncommitted it is; after the commit both
    find it."""
    from tests.server import raw
    _create(server.bootstrap, "txts")
    now = int(time.time() * 1000)          # markers carry the coordinator's time: the records
    past, future = now - 60_000, now + 60_000          # are stamped around it so a look-up by
    p = _ck_producer(server.bootstrap, "ts-tx")        # time finds a record, not a marker
    p.init_transactions(15)
    p.begin_transaction()
    p.produce("txts", value=b"c", partition=0, timestamp=past)
    p.commit_transaction(15)                              # 0, marker 1
    p.begin_transaction()
    p.produce("txts", value=b"open", partition=0, timestamp=future)
    p.flush(15)                                           # 2, open

    with raw.connect(server.host, server.port) as sock:
        def lookup(version, isolation, ts):
            r = raw.call(sock, 2, version, {"replica_id": -1, "isolation_level": isolation, "topics": [
                {"name": "txts", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                 "timestamp": ts}]}]})
            part = r.topics[0].partitions[0]
            return int(part.error_code), part.offset, part.timestamp

        assert lookup(5, 1, future) == (0, -1, -1)
        assert lookup(5, 0, future) == (0, 2, future)
        assert lookup(5, 1, past - 1) == (0, 0, past)
        assert lookup(7, 1, -3) == (0, -1, -1)
        assert lookup(7, 0, -3) == (0, 2, future)
        p.commit_transaction(15)
        assert lookup(5, 1, future) == (0, 2, future)
        assert lookup(7, 1, -3) == (0, 2, future)


def test_serve_aborts_a_transaction_left_open_past_its_timeout(server):
    """A producer that opens a transaction and goes away (never ends it, never fenced):
    ``kafkasim serve`` aborts it once ``transaction.timeout.ms`` has passed (checked every
    10 s, as Kafka), and read_committed reads past it again."""
    from confluent_kafka import Producer
    _create(server.bootstrap, "txleft")
    p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "left-open",
                  "transaction.timeout.ms": 2000, "linger.ms": 5})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce("txleft", value=b"never-ended", partition=0)
    p.flush(15)
    from tests.server import raw
    with raw.connect(server.host, server.port) as sock:
        def latest(isolation):
            r = raw.call(sock, 2, 5, {"replica_id": -1, "isolation_level": isolation, "topics": [
                {"name": "txleft", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                   "timestamp": -1}]}]})
            return r.topics[0].partitions[0].offset

        assert (latest(0), latest(1)) == (1, 0)           # open: the LSO holds read_committed back
        deadline = time.monotonic() + 25
        while latest(1) != 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert latest(1) == 2 == latest(0)                # aborted: the marker at 1, LSO = HW = 2
    del p                                                 # (gone while the server still answers)
    assert _consume(server.bootstrap, "txleft", "read_committed", 0, timeout=3) == []
