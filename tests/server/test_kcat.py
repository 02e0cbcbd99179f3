"""kcat (librdkafka's command-line client, Debian's package) against ``kafkasim serve``.

- ``kcat -L -J`` lists the broker, the topics and their partitions as Metadata says;
- a keyed ``kcat -P`` under each of librdkafka's key partitioners lands every record on
  the partition kafkasim's own partitioner of that name computes (``kafkasim.partitioning``);
- ``kcat -G group topic`` consumes as a group member and the offsets it commits on close
  are what ``kafkasim groups describe`` shows.

kcat comes from ``scripts/ensure_kcat.sh`` (run by ``make setup``); without it these tests
fail with its install command, or skip on purpose with ``KAFKASIM_SKIP_MISSING=1``
(tests/required_tools.py; under ``CI=true`` they always fail).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from kafkasim.partitioning.partitioners import partition_for_key
from tests.required_tools import missing
from tests.server.test_clients import _create_topic

pytestmark = pytest.mark.slow

KCAT_TIMEOUT_S = 60
PARTITIONS = 6
# librdkafka's partitioner -> kafkasim's partitioner giving the same partition for a key.
# (librdkafka's murmur2/fnv1a and their *_random twins differ only for a NULL key.)
LIBRDKAFKA_PARTITIONERS = {
    "murmur2_random": "murmur2_random",
    "murmur2": "murmur2",
    "consistent_random": "consistent_random",
    "consistent": "consistent",
    "fnv1a": "fnv1a",
    "fnv1a_random": "fnv1a",
}


def _kcat_path() -> str:
    path = shutil.which("kcat")
    if path:
        return path
    missing("kcat")


def kcat(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([_kcat_path(), "-b", bootstrap, *args], input=stdin, capture_output=True,
                          text=True, timeout=KCAT_TIMEOUT_S)
    assert done.returncode == 0, (args, done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


def _consume_all(bootstrap: str, topic: str) -> list[dict]:
    """Every record of ``topic`` as kcat's JSON (partition, offset, key, payload)."""
    out = kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-J")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_kcat_lists_metadata(server):
    """``kcat -L -J``: the one broker at the served address and each topic's partitions, led by it."""
    _create_topic(server.bootstrap, "listed", 3)
    _create_topic(server.bootstrap, "single", 1)
    md = json.loads(kcat(server.bootstrap, "-L", "-J"))
    assert md["brokers"] == [{"id": 0, "name": f"{server.host}:{server.port}"}]
    topics = {t["topic"]: t for t in md["topics"]}
    assert {"listed", "single"} <= set(topics)
    for name, n in (("listed", 3), ("single", 1)):
        parts = topics[name]["partitions"]
        assert [p["partition"] for p in parts] == list(range(n))
        assert all(p["leader"] == 0 and [r["id"] for r in p["replicas"]] == [0]
                   and [r["id"] for r in p["isrs"]] == [0] for p in parts)
    one = json.loads(kcat(server.bootstrap, "-L", "-J", "-t", "listed"))
    assert [t["topic"] for t in one["topics"]] == ["listed"]


@pytest.mark.parametrize("librdkafka_name", sorted(LIBRDKAFKA_PARTITIONERS))
def test_kcat_keyed_produce_lands_on_kafkasims_partition(server, librdkafka_name):
    """``kcat -P -K: -X partitioner=NAME``: each key's partition is kafkasim's for that rule."""
    ours = LIBRDKAFKA_PARTITIONERS[librdkafka_name]
    topic = f"keys-{librdkafka_name}"
    _create_topic(server.bootstrap, topic, PARTITIONS)
    keys = [f"user-{i}" for i in range(120)] + ["a", "21", "abc", "ü-key", "x" * 33]
    if partition_for_key(b"", PARTITIONS, ours) != -1:
        keys.append("")     # kcat sends an empty key as empty, not NULL (-Z would make it NULL)
    lines = "".join(f"{k}:{k}-value\n" for k in keys)
    kcat(server.bootstrap, "-P", "-t", topic, "-K", ":", "-X", f"partitioner={librdkafka_name}",
         stdin=lines)
    got = _consume_all(server.bootstrap, topic)
    assert sorted(r["key"] for r in got) == sorted(keys)              # each record once
    wrong = [(r["key"], r["partition"], partition_for_key(r["key"].encode(), PARTITIONS, ours))
             for r in got if r["partition"] != partition_for_key(r["key"].encode(), PARTITIONS, ours)]
    assert wrong == []
    assert all(r["payload"] == f"{r['key']}-value" for r in got)
    assert len({r["partition"] for r in got}) == PARTITIONS           # the keys do spread


def test_kcat_group_consume_commits_offsets_kafkasim_shows(server):
    """``kcat -G billing orders``: every record consumed once by the group member, and the
    offsets it commits on close are the log ends ``kafkasim groups describe`` shows."""
    _create_topic(server.bootstrap, "orders", 3)
    keys = [f"order-{i}" for i in range(90)]
    kcat(server.bootstrap, "-P", "-t", "orders", "-K", ":",
         stdin="".join(f"{k}:{i}\n" for i, k in enumerate(keys)))
    out = kcat(server.bootstrap, "-G", "billing", "orders", "-X", "auto.offset.reset=earliest",
               "-e", "-q", "-J")
    got = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert sorted(r["key"] for r in got) == sorted(keys)
    ends = {p: 1 + max(r["offset"] for r in got if r["partition"] == p) for p in {r["partition"] for r in got}}
    assert sorted(ends) == [0, 1, 2] and sum(ends.values()) == len(keys)

    done = subprocess.run([sys.executable, "-m", "kafkasim", "groups", "describe", "billing", "--json",
                           "--bootstrap-server", server.bootstrap],
                          capture_output=True, text=True, timeout=KCAT_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    committed = {r["partition"]: r["current_offset"] for r in rows if r["topic"] == "orders"}
    assert committed == ends
    assert all(r["lag"] == 0 for r in rows)
