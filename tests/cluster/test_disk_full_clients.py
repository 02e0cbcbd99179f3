"""In-process clients through a disk-full failover: KAFKA_STORAGE_ERROR from the cached leader is
stale metadata (Kafka's KafkaStorageException is an InvalidMetadataException), so the producer and
the consumer refresh the leader after retry.backoff.ms and go on; nothing is lost."""

from __future__ import annotations

from kafkasim.consumer import Consumer
from kafkasim.producer import Producer
from kafkasim.types import TopicPartition


def test_the_producer_and_consumer_follow_the_leader_off_a_full_disk(cluster, clock):
    cluster.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    p = Producer(cluster, acks="all", enable_idempotence=True, linger_ms=0, retry_backoff_ms=100,
                 delivery_timeout_ms=5_000)
    c = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False, retry_backoff_ms=100)
    c.assign([TopicPartition("t", 0)])
    p.send("t", key=b"warm", value=b"v", partition=0).get()   # both now cache the leader
    got = [r.key for recs in c.poll(timeout_ms=0).values() for r in recs]
    old = cluster.leader_for("t", 0)

    cluster.fill_disk(old)

    t0 = clock.now_ms()
    futures = [p.send("t", key=b"after%d" % i, value=b"v", partition=0) for i in range(3)]
    p.flush()
    assert [f.get().offset for f in futures] == [1, 2, 3]
    assert clock.now_ms() - t0 == 100        # one retry.backoff.ms, then the new leader
    assert cluster.leader_for("t", 0) != old
    for _ in range(3):
        got += [r.key for recs in c.poll(timeout_ms=0).values() for r in recs]
    assert got == [b"warm", b"after0", b"after1", b"after2"]
    p.close()
    c.close()
