"""The demo's real client: kafka-python sends Zipf-keyed records through ``kafkasim serve``.

:func:`send_through_serve` opens what ``kafkasim serve`` runs over a cluster — one
listener per broker (:class:`~kafkasim.server.listeners.ClusterListeners`), each on
``127.0.0.1`` and a free port — over the demo's open cluster, on an event loop in a thread
of its own; a ``kafka.KafkaProducer`` (``acks=all``, Kafka's wire protocol, bootstrapped on
every listener; values serialized with msgpack, the way kafka-python's README serializes
them: ``msgpack.dumps`` wrapped in kafka-python 3's ``Serializer`` interface, since 3.x
deprecates a bare callable) sends the keys with structured values (``{"order": n, "channel": "web"}``) and timestamps taken from
the demo's MockClock; then the listeners are closed and the thread joined. It checks every
acknowledged record's partition against kafkasim's Java-default partitioner (murmur2): kafka-python's default partitioner is the same, so
every key must land where an in-process Java-default producer puts it.

The server runs on real time, so only counts are reported (they do not depend on timing).
Needs kafka-python (the ``dev`` extra, which ``make demo`` installs); without it the step
is skipped and says so. Not thread-safe: one call at a time; the server never outlives it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Optional

import msgpack

from kafkasim.clock import MockClock
from kafkasim.partitioning.base import murmur2_partition
from kafkasim.server.listeners import ClusterListeners

__all__ = ["send_through_serve"]


def send_through_serve(cluster, topic: str, keys: list[bytes], clock: MockClock, *,
                       partitions: int, client_id: str = "web-shop") -> tuple[dict, list[tuple[int, int]]]:
    """Send ``keys`` with kafka-python through the served ``cluster``: counts and conformance,
    and the acknowledged ``(partition, offset)`` of every record."""
    try:
        from kafka import KafkaProducer
        from kafka.serializer import Serializer
    except ImportError:
        return {"skipped": "kafka-python is not installed (pip install -e '.[dev]', which make demo runs)"}, []
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="kafkasim-demo-serve", daemon=True)
    thread.start()
    server = ClusterListeners(cluster, "127.0.0.1", 0, data_dir=str(cluster.data_dir))
    producer = None
    try:
        listeners = asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
        bootstrap = [f"{a['host']}:{a['port']}" for a in listeners]
        # nothing leaves before flush(): one batch per partition, whatever the machine's timing,
        # so the same seed writes the same bytes (with linger_ms=5 the batching followed the
        # scheduler, and the bytes the story reports with it)
        producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, acks="all",
                                 linger_ms=60_000, request_timeout_ms=30_000,
                                 value_serializer=_msgpack_serializer(Serializer))
        futures = []
        for i, key in enumerate(keys):
            value = {"order": i, "channel": "web"}
            futures.append((key, producer.send(topic, key=key, value=value, timestamp_ms=clock.now_ms())))
            if i % 100 == 99:
                clock.advance(20)
        producer.flush(timeout=60)
        per_partition = [0] * partitions
        misplaced = 0
        acked = []
        for key, fut in futures:
            meta = fut.get(timeout=60)
            per_partition[meta.partition] += 1
            misplaced += meta.partition != murmur2_partition(key, partitions)
            acked.append((meta.partition, meta.offset))
        return {"client": "kafka-python", "listeners": len(listeners), "sent": len(keys),
                "acked": len(acked), "per_partition": per_partition, "not_murmur2": misplaced}, acked
    finally:
        if producer is not None:
            producer.close(timeout=10)
        _stop(server, loop, thread)


def _msgpack_serializer(base):
    """``msgpack.dumps`` as a ``kafka.serializer.Serializer`` (kafka-python 3: a bare callable
    still works but warns), None kept as None like kafka-python's ``JsonSerializer``."""
    class MsgpackSerializer(base):
        def serialize(self, topic, headers, data):
            return None if data is None else msgpack.dumps(data)
    return MsgpackSerializer()


def _stop(server: ClusterListeners, loop: asyncio.AbstractEventLoop, thread: threading.Thread,
          timeout: Optional[float] = 30) -> None:
    try:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(timeout)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        loop.close()
