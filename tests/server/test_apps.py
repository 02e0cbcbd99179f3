"""Stream-processing apps against ``kafkasim serve``: Quix Streams and faust-streaming.

Each app pins a client range apart from the project's (quixstreams: confluent-kafka<2.13;
faust: its own aiokafka), so each runs from its own virtualenv, ``.venv-apps/NAME`` (made by
``make setup`` from ``tests/apps/requirements-NAME.txt``), as a subprocess running the app
code in ``tests/apps/``. Without the venv these tests skip, except under ``CI=true``
where they fail. Everything they write (the server's data dir, the apps' state and data
dirs, their logs) is under the test's ``tmp_path``.

- Quix Streams, at-least-once: a stateful count per key with its changelog topic; the state
  dir deleted, the app restarted, the counts go on from the changelog.
- faust-streaming: a table counting per key across two worker processes, through a
  rebalance as the second joins and again as the first leaves; the counts are right at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.server.conftest import wait_until
from tests.server.test_clients import _create_topic

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
APPS = ROOT / "tests" / "apps"
APP_TIMEOUT_S = 60


def app_python(name: str) -> str:
    """``.venv-apps/NAME/bin/python``, made by ``make setup`` (skip, or fail under CI)."""
    venv = ROOT / ".venv-apps" / name
    python = venv / "bin" / "python"
    if python.exists() and (venv / ".installed-stamp").exists():
        return str(python)
    if os.environ.get("CI") == "true":
        pytest.fail(f"{venv} is missing in CI: make setup must create it "
                    f"from tests/apps/requirements-{name}.txt")
    pytest.skip(f"{venv} not made (make setup, or make .venv-apps/{name}/.installed-stamp)")


def _app_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _log_tail(path: Path, n: int = 4000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else "(no log)"


def produce(bootstrap: str, topic: str, records: list[tuple[str, str]]) -> None:
    """Keyed records through confluent-kafka (the project's), every delivery confirmed."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors = []
    for key, value in records:
        producer.produce(topic, key=key.encode(), value=value.encode(),
                         on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors


def read_topic(bootstrap: str, topic: str) -> list[tuple[int, int, bytes, bytes]]:
    """Every record of ``topic`` up to its end offsets now: (partition, offset, key, value)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-reader",
                         "enable.auto.commit": False})
    try:
        parts = sorted(consumer.list_topics(topic, timeout=15).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in parts}
        todo = {p for p in parts if ends[p] > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in todo])
        out = []
        deadline = time.monotonic() + 30
        while todo and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None or m.error():
                continue
            out.append((m.partition(), m.offset(), m.key(), m.value()))
            if m.offset() + 1 >= ends[m.partition()]:
                todo.discard(m.partition())
        assert not todo, f"{topic}: partitions {sorted(todo)} not read to their end {ends}"
        return out
    finally:
        consumer.close()


def _records(phase: str, n: int, keys: list[str]) -> list[tuple[str, str]]:
    return [(keys[(i * 7) % len(keys)], f"{phase}-{i}") for i in range(n)]


# --------------------------------------------------------------------------- Quix Streams

def _run_quix(python: str, bootstrap: str, state_dir: Path, log: Path, expect: int) -> dict:
    cmd = [python, str(APPS / "quix_count.py"), "--bootstrap", bootstrap, "--group", "counter",
           "--input", "words", "--output", "counts", "--state-dir", str(state_dir),
           "--expect", str(expect), "--idle-timeout", "30"]
    with open(log, "w") as err:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=_app_env(),
                              cwd=state_dir.parent, timeout=APP_TIMEOUT_S)
    assert done.returncode == 0, (done.returncode, done.stdout, _log_tail(log))
    return json.loads(done.stdout.strip().splitlines()[-1])


def _last_counts(outputs) -> dict[str, int]:
    """The last ``{"count": n}`` per key, in each partition's offset order."""
    last = {}
    for _, _, key, value in sorted(outputs):
        last[key.decode()] = json.loads(value)["count"]
    return last


def test_quix_stateful_count_recovers_from_its_changelog(server, tmp_path):
    """Quix Streams (at-least-once): a count per key in its state store with a changelog
    topic; with the state dir deleted, the restarted app recovers the counts from the
    changelog and goes on from them: every key's last count is what was sent in all."""
    python = app_python("quix")
    _create_topic(server.bootstrap, "words", 2)
    keys = [f"user-{i}" for i in range(8)]
    first, second = _records("a", 240, keys), _records("b", 120, keys)
    state_dir = tmp_path / "quix-state"

    produce(server.bootstrap, "words", first)
    assert _run_quix(python, server.bootstrap, state_dir, tmp_path / "quix-1.log", len(first)) == \
        {"outputs": len(first)}
    sent = Counter(k for k, _ in first)
    assert _last_counts(read_topic(server.bootstrap, "counts")) == sent
    changelog = read_topic(server.bootstrap, "changelog__counter--words--default")
    stored = {k.decode() for _, _, k, _ in changelog}                   # '"user-0"|"count"'
    assert all(any(json.dumps(key) in s for s in stored) for key in keys), stored

    shutil.rmtree(state_dir)                                             # a fresh machine: no local state
    produce(server.bootstrap, "words", second)
    log2 = tmp_path / "quix-2.log"
    assert _run_quix(python, server.bootstrap, state_dir, log2, len(second)) == {"outputs": len(second)}
    assert "Recovery successful" in log2.read_text()
    sent.update(k for k, _ in second)
    outputs = read_topic(server.bootstrap, "counts")
    assert len(outputs) == len(first) + len(second)                      # each input counted once
    assert _last_counts(outputs) == sent                                 # went on from the changelog
