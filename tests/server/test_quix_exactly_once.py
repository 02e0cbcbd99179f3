"""Quix Streams with ``processing_guarantee="exactly-once"`` against ``kafkasim serve``,
killed with SIGKILL in the middle of a transaction and started again (issue 23).

The app (``tests/apps/quix_count.py --exactly-once``, from ``.venv-apps/quix`` as in
``test_apps.py``) counts records per key from ``words`` into ``counts``. Each Quix
checkpoint is one Kafka transaction: the outputs, the changelog writes and the consumed
offsets (TxnOffsetCommit with the consumer's KIP-447 group metadata) commit together. Its
transactional id is a fresh uuid per run (Quix's default), so the killed run's open
transaction is not fenced by the next one: the coordinator aborts it when its
``transaction.timeout.ms`` runs out, and until then it holds back the last stable offset.

What must hold, read with read_committed: for every key, the ``{"count": n}`` outputs are
exactly 1, 2, ..., N with N the recount of the input (no count lost, none repeated), while
read_uncommitted shows the killed run's aborted outputs too.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.server.conftest import wait_until
from tests.server.test_apps import APPS, _app_env, _log_tail, _records, app_python, produce
from tests.server.test_clients import _create_topic

pytestmark = pytest.mark.slow

TXN_TIMEOUT_MS = 8000
SESSION_TIMEOUT_MS = 6000


def _quix_cmd(python: str, bootstrap: str, state_dir: Path, idle_timeout: float) -> list[str]:
    return [python, str(APPS / "quix_count.py"), "--bootstrap", bootstrap, "--group", "eos-counter",
            "--input", "words", "--output", "counts", "--state-dir", str(state_dir),
            "--expect", "1000000", "--idle-timeout", str(idle_timeout), "--exactly-once",
            "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
            "--transaction-timeout-ms", str(TXN_TIMEOUT_MS)]


def read_isolated(bootstrap: str, topic: str, isolation: str, timeout: float = 30) -> list:
    """Every record of ``topic`` a fresh confluent-kafka consumer with ``isolation.level``
    reads up to the end offsets it is told (the last stable offset under read_committed,
    the high watermark under read_uncommitted): (partition, offset, key, value)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-reader-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "isolation.level": isolation})
    try:
        parts = sorted(consumer.list_topics(topic, timeout=15).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                out.append((m.partition(), m.offset(), m.key(), m.value()))
            positions = {tp.partition: tp.offset for tp in consumer.position(
                [TopicPartition(topic, p) for p in parts])}
            if all(ends[p] == 0 or positions[p] >= ends[p] for p in parts):
                return out
        raise AssertionError(f"{topic} ({isolation}): not read to its end offsets {ends}")
    finally:
        consumer.close()


def _stable_end(bootstrap: str, topic: str, isolation: str) -> int:
    """The sum over ``topic``'s partitions of the end offset a consumer with ``isolation``
    is given (ListOffsets latest: the LSO under read_committed)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-ends", "isolation.level": isolation})
    try:
        meta = c.list_topics(topic, timeout=15).topics.get(topic)
        if meta is None or meta.error is not None:
            return 0
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=15, cached=False)[1]
                   for p in meta.partitions)
    finally:
        c.close()


def _counts_per_key(outputs) -> dict[str, list[int]]:
    """Each key's ``{"count": n}`` values in offset order."""
    seq: dict[str, list[int]] = {}
    for _, _, key, value in sorted(outputs):
        seq.setdefault(key.decode(), []).append(json.loads(value)["count"])
    return seq


def test_quix_exactly_once_survives_sigkill_mid_transaction(server, tmp_path):
    """Input arrives in chunks while the app runs; once an output transaction is open (the
    high watermark of ``counts`` ahead of its last stable offset) the app is SIGKILLed. More
    input is sent, the app starts again on the same state dir and runs until idle. Under
    read_committed every key's counts are exactly 1..N, N the input's recount; the killed
    transaction's outputs are in the log (read_uncommitted) but were aborted."""
    python = app_python("quix")
    bootstrap = server.bootstrap
    _create_topic(bootstrap, "words", 2)
    keys = [f"user-{i}" for i in range(8)]
    sent: Counter = Counter()
    state_dir = tmp_path / "quix-state"
    log1, log2 = tmp_path / "quix-eos-1.log", tmp_path / "quix-eos-2.log"

    def send(phase: str, n: int) -> None:
        records = _records(phase, n, keys)
        produce(bootstrap, "words", records)
        sent.update(k for k, _ in records)

    with open(log1, "w") as err:
        first = subprocess.Popen(_quix_cmd(python, bootstrap, state_dir, 60), stdout=subprocess.PIPE,
                                 stderr=err, text=True, env=_app_env(), cwd=tmp_path,
                                 start_new_session=True)
    try:
        send("warmup", 40)
        wait_until(lambda: _stable_end(bootstrap, "counts", "read_committed") > 0, 60, 0.5,
                   "the first committed transaction of counts")
        chunk = 0
        deadline = time.monotonic() + 60
        while True:                                  # feed until a transaction is caught open
            assert first.poll() is None, _log_tail(log1)
            assert time.monotonic() < deadline, "no open transaction seen\n" + _log_tail(log1)
            send(f"c{chunk}", 20)
            chunk += 1
            if _stable_end(bootstrap, "counts", "read_uncommitted") > \
                    _stable_end(bootstrap, "counts", "read_committed"):
                break
            time.sleep(0.1)
        first.send_signal(signal.SIGKILL)
    finally:
        if first.poll() is None:
            first.kill()
        first.wait(10)
    assert first.returncode == -signal.SIGKILL
    before_restart = _stable_end(bootstrap, "counts", "read_uncommitted")

    send("after-kill", 120)
    with open(log2, "w") as err:
        second = subprocess.run(_quix_cmd(python, bootstrap, state_dir, 20), stdout=subprocess.PIPE,
                                stderr=err, text=True, env=_app_env(), cwd=tmp_path, timeout=150)
    assert second.returncode == 0, (second.stdout, _log_tail(log2))

    # the killed run's transaction holds the LSO back until the coordinator aborts it
    # (transaction.timeout.ms after its start, checked every 10 s as Kafka does)
    wait_until(lambda: _stable_end(bootstrap, "counts", "read_committed") ==
               _stable_end(bootstrap, "counts", "read_uncommitted"), 40, 0.5,
               "the killed transaction aborted (counts' LSO at its high watermark)")
    committed = read_isolated(bootstrap, "counts", "read_committed")
    everything = read_isolated(bootstrap, "counts", "read_uncommitted")
    seq = _counts_per_key(committed)
    assert {k: len(v) for k, v in seq.items()} == dict(sent), _log_tail(log2)
    assert all(v == list(range(1, sent[k] + 1)) for k, v in seq.items()), seq
    assert len(everything) > len(committed)          # the killed transaction's outputs, aborted
    assert before_restart > 0 and sum(sent.values()) == len(committed)
