"""A one-broker ``kafkasim serve`` is SIGKILLed while a real client produces with acks=all,
then restarted on the same port: nothing acknowledged is lost or written twice.

This is a crash-and-restart test, not a failover test: there is no other broker to fail over
to, so librdkafka (confluent-kafka, idempotent) retries against the same broker once it is back,
and the broker must recover its log after a SIGKILL (no clean shutdown, no flush). Leader
failover with real clients on a served 3-broker cluster is tested in test_cluster_serve.py
(test_clients_fail_over_when_a_leader_is_stopped_and_lose_no_acknowledged_record).
"""

from __future__ import annotations

import signal
import socket
import threading
import time

import pytest

from tests.server.conftest import start_server

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_single_broker_sigkilled_mid_stream_and_restarted_loses_no_acknowledged_record(tmp_path):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    data, port = tmp_path / "data", _free_port()
    served = start_server(data, "--listen", f"127.0.0.1:{port}")
    try:
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(30)
        acked, failed = [], []
        lock = threading.Lock()

        def report(err, msg):
            with lock:
                (failed if err else acked).append(int(msg.value()))

        producer = Producer({"bootstrap.servers": served.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 60_000, "reconnect.backoff.max.ms": 500})
        stop = threading.Event()

        def send():          # ~5,000 records/s, serving delivery reports as it goes
            i = 0
            while not stop.is_set():
                if i < 20_000:
                    try:
                        producer.produce("orders", key=b"k%d" % (i % 50), value=b"%d" % i, on_delivery=report)
                        i += 1
                    except BufferError:
                        pass
                producer.poll(0.002 if i % 10 == 0 else 0)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        deadline = time.monotonic() + 60
        while len(acked) < 2_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(acked) >= 2_000, "the producer never got going"
        served.proc.send_signal(signal.SIGKILL)             # the broker dies mid-stream
        served.proc.wait(10)
        with lock:
            acked_before_kill = len(acked)
        time.sleep(1)
        served = start_server(data, "--listen", f"127.0.0.1:{port}")   # and comes back on its port
        time.sleep(2)
        stop.set()
        sender.join(30)
        assert producer.flush(90) == 0
        assert len(acked) > acked_before_kill, "the restarted broker acknowledged nothing"
    finally:
        served.stop()
    from kafkasim.broker import Broker

    with Broker(data) as broker:
        values = [int(r.value) for p in range(3) for r in broker.fetch("orders", p, 0, 64 << 20).records]
    assert not set(acked) - set(values), f"{len(set(acked) - set(values))} acknowledged records lost"
    assert len(values) == len(set(values)), "records written twice"
