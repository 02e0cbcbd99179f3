"""The mixed-client bug, as the lab shows it: librdkafka's default partitioner
(``consistent_random``: CRC32 of the key) and the Java/kafka-python one (murmur2) put the
same key in different partitions. Two real producers write the same keys through
``kafkasim serve``; with the server stopped, ``kafkasim audit ordering`` (Spark) finds keys
in several partitions and records that murmur2 does not explain."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark]

KEYS = [b"merchant_%d" % i for i in range(40)]


def test_librdkafka_and_kafka_python_producers_split_keys_and_audit_ordering_reports_it(
        tmp_path, serve_process):
    from confluent_kafka import Producer as RdKafkaProducer
    from kafka import KafkaProducer

    data = tmp_path / "data"
    served = serve_process(data, "--no-auto-create-topics")
    subprocess.run([sys.executable, "-m", "kafkasim", "topics", "create", "payments", "--partitions", "6",
                    "--data-dir", str(data)], check=True, capture_output=True, timeout=60)
    rd = RdKafkaProducer({"bootstrap.servers": served.bootstrap, "partitioner": "consistent_random",
                          "linger.ms": 5})
    for k in KEYS:
        rd.produce("payments", key=k, value=b"from librdkafka")
    assert rd.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=served.bootstrap, linger_ms=5)
    for k in KEYS:
        kp.send("payments", key=k, value=b"from kafka-python")
    kp.flush(30)
    kp.close()
    assert served.stop() == 0

    done = subprocess.run([sys.executable, "-m", "kafkasim", "audit", "ordering", "--data-dir", str(data),
                           "--topic", "payments", "--json", "-"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 3, done.stderr[-3000:]
    report = json.loads(done.stdout[done.stdout.index("{"):done.stdout.rindex("}") + 1])
    assert report["records"] == 2 * len(KEYS)
    moved = report["violations"]["key_in_multiple_partitions"]
    mismatched = report["violations"]["partitioner_mismatch"]
    # CRC32 and murmur2 agree on a key's partition about one time in six
    assert moved >= len(KEYS) // 2, report["violations"]
    assert mismatched == moved, report["violations"]    # exactly the librdkafka copies of moved keys
