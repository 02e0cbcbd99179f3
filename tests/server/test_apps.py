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
import sys
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


# --------------------------------------------------------------------------- faust-streaming

def _start_faust_worker(python: str, bootstrap: str, tmp_path: Path, name: str) -> subprocess.Popen:
    env = _app_env()
    env.update(FAUST_COUNT_BOOTSTRAP=bootstrap, FAUST_COUNT_DATADIR=str(tmp_path / f"faust-{name}"),
               FAUST_COUNT_PARTITIONS="4")
    log = open(tmp_path / f"faust-{name}.log", "w")
    try:
        return subprocess.Popen([python, str(APPS / "faust_count.py"), "worker", "--without-web",
                                 "--loglevel=info"], stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=tmp_path, start_new_session=True)
    finally:
        log.close()


def _stop_worker(proc: subprocess.Popen, timeout: float = 30) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(10)


def _group(bootstrap: str, group: str, *flags: str) -> dict:
    """``kafkasim groups describe GROUP [flags] --json`` ({} while it fails)."""
    done = subprocess.run([sys.executable, "-m", "kafkasim", "groups", "describe", group, *flags,
                           "--json", "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=30)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def _words_split(bootstrap: str) -> tuple[str, dict[str, set[int]]]:
    """The group's state and each member's partitions of ``words``."""
    out = _group(bootstrap, "counter", "--members")
    members = {}
    for row in out.get("rows", []):
        words = [part for part in (row.get("assignment") or "").split(";") if part.startswith("words:")]
        members[row["consumer_id"]] = {int(p) for w in words for p in w.split(":", 1)[1].split(",")}
    return out.get("state", ""), members


def _all_committed(bootstrap: str) -> bool:
    """Every ``words`` partition's committed offset is its log end (nothing in flight)."""
    rows = [r for r in _group(bootstrap, "counter").get("rows", []) if r["topic"] == "words"]
    return len(rows) == 4 and all(r["current_offset"] == r["log_end_offset"] for r in rows)


def _ready_generation(log: Path):
    """The generation a faust worker last joined, once its recovery after it is done (else None)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    joined = text.rfind("Joined group 'counter' (generation ")
    if joined < 0 or "Recovery]: Worker ready" not in text[joined:]:
        return None
    return int(text[joined:].split("(generation ", 1)[1].split(")", 1)[0])


def _table_counts(bootstrap: str) -> dict[str, int]:
    """The faust table as its changelog holds it: the last value per key."""
    last = {}
    for _, _, key, value in sorted(read_topic(bootstrap, "counter-counts-changelog")):
        last[json.loads(key)] = json.loads(value)
    return last


def test_faust_table_counts_across_two_workers_and_rebalances(server, tmp_path):
    """faust-streaming: a table counting per key, first in one worker; a second worker joins
    (the table's partitions are split, the newcomer recovers its share from the changelog),
    then the first leaves (the second takes and recovers everything). After each phase every
    key's count is the number of records sent with it.

    Records are sent only once every live worker has recovered after the last rebalance,
    and a rebalance is started only once every offset is committed: faust is at-least-once,
    and a record in flight across a rebalance may be counted twice, in Kafka as here.

    Needs the leader's SyncGroup assignment ``user_data`` delivered unchanged (faust's
    assignor keeps its table assignment there): before that, each worker crashes in
    ``on_assignment`` (``TypeError: a bytes-like object is required, not 'NoneType'``)."""
    python = app_python("faust")
    _create_topic(server.bootstrap, "words", 4)
    keys = [f"user-{i}" for i in range(12)]
    sent: Counter = Counter()
    workers: dict[str, subprocess.Popen] = {}

    def logs() -> str:
        return "\n".join(f"--- worker {n}:\n{_log_tail(tmp_path / f'faust-{n}.log', 3000)}" for n in workers)

    def settled(live: list[str]) -> dict[str, set[int]]:
        """A stable group of the live workers, the 4 partitions split among them, each recovered."""
        def check():
            gens = {_ready_generation(tmp_path / f"faust-{n}.log") for n in live}
            if None in gens or len(gens) != 1:
                return None
            state, members = _words_split(server.bootstrap)
            split = sorted(p for ps in members.values() for p in ps)
            return (state == "Stable" and len(members) == len(live) and split == [0, 1, 2, 3]
                    and all(members.values()) and members)
        try:
            return wait_until(check, 40, 0.5, f"workers {live} settled")
        except AssertionError:
            raise AssertionError(f"workers {live} not settled: {_words_split(server.bootstrap)}\n{logs()}") from None

    def phase(name: str, n: int) -> None:
        records = _records(name, n, keys)
        produce(server.bootstrap, "words", records)
        sent.update(k for k, _ in records)
        try:
            wait_until(lambda: _table_counts(server.bootstrap) == sent, 40, 0.5,
                       f"the table's counts after phase {name}")
            wait_until(lambda: _all_committed(server.bootstrap), 20, 0.5, "the offsets committed")
        except AssertionError as exc:
            raise AssertionError(f"phase {name}: {exc}: table {_table_counts(server.bootstrap)} != "
                                 f"sent {dict(sent)}\n{logs()}") from None

    try:
        workers["a"] = _start_faust_worker(python, server.bootstrap, tmp_path, "a")
        settled(["a"])
        phase("one-worker", 240)

        workers["b"] = _start_faust_worker(python, server.bootstrap, tmp_path, "b")
        split = settled(["a", "b"])                      # each worker owns 2 of the 4 partitions,
        assert sorted(len(ps) for ps in split.values()) == [2, 2]   # b recovered its share
        phase("two-workers", 240)

        assert _stop_worker(workers["a"]) == 0, logs()   # a leaves: b takes every partition
        settled(["b"])
        phase("b-alone", 120)
        assert workers["b"].poll() is None, logs()
    finally:
        codes = {n: _stop_worker(p) for n, p in workers.items()}
    assert codes == {"a": 0, "b": 0}, logs()
    assert _table_counts(server.bootstrap) == sent
    assert sum(sent.values()) == 600
