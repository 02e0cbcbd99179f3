"""Bad input at the broker's entry points: a specific kafkasim error naming the bad value,
nothing written, nothing created outside the data dir, nothing left open (hardening issue:
the one record rule, topic metadata checked on load, arguments checked by kafkasim.arguments)."""

from __future__ import annotations

import glob
import json
import os

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import (
    InvalidArgumentError, InvalidRecordError, InvalidTimestampError, KafkaStorageError,
    UnknownTopicOrPartitionError,
)
from kafkasim.records import record_batch as rb

T0 = 1_700_000_000_000


@pytest.fixture
def b(tmp_path):
    broker = Broker(tmp_path / "data", clock=MockClock(T0))
    broker.create_topic("t", 2)
    yield broker
    broker.close()


# ------------------------------------------------------------------ records: the one record rule

def test_keys_and_values_must_be_bytes_for_the_broker(b):
    for bad in ("text", 5, bytearray(b"x")[0]):
        with pytest.raises(InvalidRecordError, match="value must be bytes or None"):
            b.append_records("t", 0, [(T0, None, bad, ())])
        with pytest.raises(InvalidRecordError, match="record 0: key must be bytes or None"):
            b.append_records("t", 0, [(T0, bad, b"v", ())])
    assert b.list_offsets("t", 0, -1)[0] == 0


@pytest.mark.parametrize("records,error,message", [
    ([(2**63, None, b"v", ())], InvalidTimestampError, "record 0: Invalid timestamp: 9223372036854775808"),
    ([(T0, None, b"v", ()), (-1, None, b"v", ())], InvalidTimestampError, "record 1: Invalid timestamp: -1"),
    ([(True, None, b"v", ())], InvalidTimestampError, "Invalid timestamp: True"),
    ([(T0, None, b"v")], InvalidRecordError, "record 0: expected a (timestamp_ms, key, value, headers) tuple"),
    ("abc", InvalidRecordError, "records must be a sequence"),
])
def test_append_records_checks_every_record_before_writing(b, records, error, message):
    with pytest.raises(error) as e:
        b.append_records("t", 0, records)
    assert message in str(e.value)
    assert b.list_offsets("t", 0, -1)[0] == 0


@pytest.mark.parametrize("record,message", [
    ((0, T0, "str key", b"v", ()), "record at offset delta 0: key must be bytes or None, got str"),
    ((0, T0, None, 5, ()), "record at offset delta 0: value must be bytes or None, got int"),
    ((0, T0, None, b"v", ((b"hk", b"v"),)), "record at offset delta 0: header 0: key must be str, got bytes"),
    ((0, T0, None, b"v", (("h", "v"),)), "record at offset delta 0: header 'h': value must be bytes or None"),
    ((0, T0, None, b"v", (("h",),)), "header 0: expected a (key, value) pair"),
    ((0, T0, None, b"v", ({"h": b"v"},)), "header 0: expected a (key, value) pair"),
])
def test_a_batch_cannot_be_built_from_a_record_that_breaks_the_rule(b, record, message):
    """A v2 batch has no room for a field of the wrong type: encode_batch names the record
    and the field (the one record rule) and nothing reaches the broker."""
    with pytest.raises(InvalidRecordError) as e:
        rb.encode_batch(0, [(0, T0, b"k", b"ok", ()), record[:0] + (1,) + record[1:]])
    assert message.replace("delta 0", "delta 1") in str(e.value)
    assert b.list_offsets("t", 0, -1)[0] == 0


def test_a_produced_batch_with_a_timestamp_out_of_range_is_refused(b):
    body = bytearray()
    rb._put_record(body, 0, 0, None, b"v", ())
    rb._put_record(body, 1, -10, None, b"v", ())     # base 5 - 10: timestamp -5
    batch = rb._assemble(0, -1, 0, 1, 5, 5, -1, -1, -1, 2, bytes(body))
    with pytest.raises(InvalidTimestampError, match="t-0: record timestamp -5 outside"):
        b.produce("t", 0, batch)
    assert b.list_offsets("t", 0, -1)[0] == 0


# ------------------------------------------------------------------ topic metadata, checked on load

def _meta_file(d):
    for path in glob.glob(os.path.join(d, "meta", "topics", "*.json")):
        with open(path) as f:
            if json.load(f)["name"] == "t":
                return path
    raise AssertionError("no metadata file for t")


def _rewrite(path, **changes):
    with open(path) as f:
        raw = json.load(f)
    raw.update(changes)
    for k in [k for k, v in changes.items() if v is _DROP]:
        del raw[k]
    with open(path, "w") as f:
        json.dump(raw, f)


_DROP = object()


@pytest.mark.parametrize("field,value,message", [
    ("name", "../escape", "invalid topic name '../escape'"),
    ("name", "", "invalid topic name ''"),
    ("name", 7, "invalid topic name 7"),
    ("partitions", -1, "partitions: -1"),
    ("partitions", "abc", "partitions: 'abc'"),
    ("partitions", 10**9, "partitions: 1000000000"),
    ("partitions", True, "partitions: True"),
    ("replication_factor", 0, "replication_factor: 0"),
    ("configs", {"segment.bytes": -5}, "segment.bytes"),
    ("configs", ["segment.bytes"], "configs: ['segment.bytes']"),
    ("topic_id", "../../x", "topic_id: '../../x'"),
    ("created_ms", -1, "created_ms: -1"),
    ("partitions", _DROP, "missing field(s) partitions"),
    ("surprise", 1, "unknown field(s) surprise"),
])
def test_metadata_is_validated_on_load_and_never_points_outside_the_data_dir(tmp_path, field, value, message):
    d = str(tmp_path / "data")
    with Broker(d) as b:
        b.create_topic("t", 2)
    path = _meta_file(d)
    _rewrite(path, **{field: value})
    before = set(os.listdir(tmp_path))
    with pytest.raises(KafkaStorageError) as e:
        Broker(d)
    assert path in str(e.value) and message in str(e.value)
    assert set(os.listdir(tmp_path)) == before            # nothing created next to the data dir
    Broker(d + "-other").close()                            # and no lock left behind in the process


def test_two_metadata_files_for_one_topic_are_refused(tmp_path):
    d = str(tmp_path / "data")
    with Broker(d) as b:
        b.create_topic("t", 1)
        b.create_topic("u", 1)
    path = _meta_file(d)
    other = [p for p in glob.glob(os.path.join(d, "meta", "topics", "*.json")) if p != path][0]
    _rewrite(other, name="t")
    with pytest.raises(KafkaStorageError, match="both describe topic 't'"):
        Broker(d)


def _open_fds() -> set[str]:
    fds = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds.add(f"{fd}->{os.readlink(f'/proc/self/fd/{fd}')}")
        except OSError:         # the listing's own fd, closed meanwhile
            pass
    return fds


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
@pytest.mark.parametrize("breakage", ["metadata", "partition"])
def test_a_failed_open_leaves_no_file_open_and_releases_the_lock(tmp_path, breakage):
    d = str(tmp_path / "data")
    with Broker(d) as b:
        b.create_topic("a", 3)
        b.create_topic("t", 3)
        for p in range(3):
            b.append_records("a", p, [(T0, None, b"x", ())])
            b.append_records("t", p, [(T0, None, b"x", ())])
    if breakage == "metadata":
        _rewrite(_meta_file(d), partitions=0)
    else:                       # t-0 and a-* open fine, then t-2 cannot be opened
        os.rename(os.path.join(d, "t-2"), os.path.join(tmp_path, "t-2-moved"))
        with open(os.path.join(d, "t-2"), "w") as f:
            f.write("a file where a partition directory belongs")
    before = _open_fds()
    with pytest.raises(KafkaStorageError):
        Broker(d)
    assert _open_fds() == before
    if breakage == "metadata":
        _rewrite(_meta_file(d), partitions=3)
    else:
        os.unlink(os.path.join(d, "t-2"))
        os.rename(os.path.join(tmp_path, "t-2-moved"), os.path.join(d, "t-2"))
    with Broker(d) as b:                                    # the lock was released
        assert [b.list_offsets("t", p, -1)[0] for p in range(3)] == [1, 1, 1]


# ------------------------------------------------------------------ arguments

@pytest.mark.parametrize("data_dir", ["", None, 5, b"data"])
def test_a_data_dir_must_be_a_non_empty_path(tmp_path, monkeypatch, data_dir):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError, match="data_dir"):
        Broker(data_dir)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kwargs,name", [
    ({"broker_id": "0"}, "broker_id"), ({"broker_id": -1}, "broker_id"), ({"clock": 5}, "clock"),
    ({"default_configs": [("retention.ms", 1)]}, "default_configs"),
    ({"broker_configs": "log.cleaner.enable=false"}, "broker_configs"),
])
def test_broker_constructor_arguments_are_checked_before_the_disk(tmp_path, kwargs, name):
    with pytest.raises(InvalidArgumentError, match=name):
        Broker(tmp_path / "data", **kwargs)
    assert not (tmp_path / "data").exists()


def test_create_topic_configs_must_be_a_mapping(b):
    with pytest.raises(InvalidArgumentError, match=r"configs must be a mapping of config names to values, got list"):
        b.create_topic("u", 1, configs=[("segment.bytes", 1000)])
    assert "u" not in b.list_topics()
    with pytest.raises(InvalidArgumentError, match="configs must be a mapping"):
        b.alter_topic_configs("t", "retention.ms=5")


@pytest.mark.parametrize("offset", ["5", 1.5, None, True])
def test_fetch_offsets_must_be_integers(b, offset):
    with pytest.raises(InvalidArgumentError, match="offset"):
        b.fetch("t", 0, offset)
    with pytest.raises(InvalidArgumentError, match="offset"):
        b.fetch_columns("t", 0, offset)
    with pytest.raises(InvalidArgumentError, match="partition"):
        b.fetch("t", "0", 0)


@pytest.mark.parametrize("call,error,name", [
    (lambda b: b.fetch("t", 0, 0, max_bytes="1"), InvalidArgumentError, "max_bytes"),
    (lambda b: b.fetch(["t"], 0, 0), InvalidArgumentError, "topic"),
    (lambda b: b.list_offsets("t", 0, "latest"), InvalidArgumentError, "timestamp"),
    (lambda b: b.list_offsets("t", 0, -4), InvalidArgumentError, "timestamp"),
    (lambda b: b.list_offsets("t", True, -1), InvalidArgumentError, "partition"),
    (lambda b: b.produce("t", 0, "not a batch"), InvalidArgumentError, "batch"),
    (lambda b: b.produce("t", 1.0, b""), InvalidArgumentError, "partition"),
    (lambda b: b.append_records("t", 0, [(T0, None, b"v", ())], producer_id="1"), InvalidArgumentError,
     "producer_id"),
    (lambda b: b.describe_topic(["t"]), InvalidArgumentError, "topic"),
    (lambda b: b.partition_count(None), InvalidArgumentError, "topic"),
    (lambda b: b.log("t", "1"), InvalidArgumentError, "partition"),
    (lambda b: b.fetch("t", 7, 0), UnknownTopicOrPartitionError, "t-7"),
])
def test_bad_arguments_name_themselves(b, call, error, name):
    with pytest.raises(error, match=name):
        call(b)
    assert b.list_offsets("t", 0, -1)[0] == 0
