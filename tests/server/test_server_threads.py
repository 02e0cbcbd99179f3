"""Which thread does what in a served broker (docs/server.md, "Thread-safety").

- A one-broker server's non-transactional Produce appends on the event loop's thread: it
  never waits, and the hop to a worker thread and back cost more than the append.
- A Fetch still reads on the executor.
- An idle server's 100 ms control tick hands nothing to a worker thread unless a request
  file waits in the control directory (``kafkasim fault ...``).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from kafkasim.broker import Broker
from kafkasim.faults import Faults
from kafkasim.records import record_batch as rb
from kafkasim.server import runner
from kafkasim.server.control import CONTROL_DIR, has_requests
from kafkasim.server.server import KafkaServer
from tests.server import raw


def _produce_frame(topic: str, value: bytes) -> bytes:
    batch = rb.encode_batch(0, [(0, 1_700_000_000_000, b"k", value, [])])
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    return raw.request_frame(0, 9, 7, body)[4:]


def _fetch_frame(topic: str) -> bytes:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": 0, "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    return raw.request_frame(1, 12, 8, body)[4:]


def test_one_brokers_produce_appends_on_the_loop_thread_and_fetch_reads_on_the_executor(tmp_path):
    broker = Broker(str(tmp_path / "data"))
    broker.create_topic("t", 1)
    threads: dict[str, str] = {}
    produce, fetch_batches = broker.produce, broker.fetch_batches

    def recording_produce(*args, **kwargs):
        threads["produce"] = threading.current_thread().name
        return produce(*args, **kwargs)

    def recording_fetch(*args, **kwargs):
        threads["fetch"] = threading.current_thread().name
        return fetch_batches(*args, **kwargs)

    broker.produce, broker.fetch_batches = recording_produce, recording_fetch

    async def run() -> tuple[str, bytes, bytes]:
        server = KafkaServer(broker, "127.0.0.1", 0)
        await server.start()
        try:
            loop_thread = threading.current_thread().name
            produced = await server.handle_frame(_produce_frame("t", b"v1"))
            fetched = await server.handle_frame(_fetch_frame("t"))
            return loop_thread, produced, fetched
        finally:
            await server.close()

    try:
        loop_thread, produced, fetched = asyncio.run(run())
        assert produced is not None and b"v1" in fetched       # appended, and read back
        assert broker.last_stable_offset("t", 0) == 1
    finally:
        broker.close()
    assert threads["produce"] == loop_thread
    assert threads["fetch"].startswith("kafkasim-serve"), threads


class _CountingExecutor(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def test_an_idle_servers_control_tick_hands_nothing_to_a_worker_thread(tmp_path):
    data_dir = str(tmp_path)
    control = os.path.join(data_dir, CONTROL_DIR)
    executor = _CountingExecutor()

    async def tick_for(seconds: float) -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(runner._serve_control(data_dir, Faults(), stop))
        await asyncio.sleep(seconds)
        stop.set()
        await task

    async def run() -> None:
        asyncio.get_running_loop().set_default_executor(executor)
        assert not has_requests(data_dir)                # no control directory at all
        await tick_for(0.35)                             # three or four ticks
        assert executor.submitted == 0
        os.makedirs(control)
        with open(os.path.join(control, "x.req.json"), "w") as f:
            json.dump({"method": "fault_list"}, f)
        assert has_requests(data_dir)
        await tick_for(0.15)
        assert executor.submitted == 1                   # the request, once
        assert not has_requests(data_dir)
        assert os.path.exists(os.path.join(control, "x.resp.json"))

    try:
        asyncio.run(run())
    finally:
        executor.shutdown()
