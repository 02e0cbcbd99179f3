"""Values in a stated format: msgpack values (kafka-python's ``value_serializer=msgpack.dumps``)
decoded where the audits read them, and a value that does not decode named by its offset."""

from __future__ import annotations

import json
import re

import msgpack
import pyarrow as pa
import pytest
from pyspark.testing import assertDataFrameEqual

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import RecordDeserializationError
from kafkasim.producer import Producer
from kafkasim.spark_jobs import ordering, values
from kafkasim.spark_jobs.common import EXIT_VIOLATIONS

ORDER = pa.struct([("order", pa.int64()), ("channel", pa.string())])
REC = ("topic string, partition int, offset long, timestamp long, key binary, value binary, "
       "headers array<struct<key:string,value:binary>>, producer_id long")


def _decode(vals, typ=ORDER):
    n = len(vals)
    return values.decode_msgpack(pa.array(vals, pa.binary()), typ, pa.array(["orders"] * n),
                                 pa.array([2] * n, pa.int32()), pa.array(range(40, 40 + n), pa.int64()))


def test_msgpack_maps_decode_into_the_asked_struct():
    got = _decode([msgpack.dumps({"order": 1, "channel": "web", "extra": [1, 2]}),   # extra fields ignored
                   msgpack.dumps({"order": 2}),                                      # a missing field: null
                   None])                                                            # a tombstone: null
    assert got.to_pylist() == [{"order": 1, "channel": "web"}, {"order": 2, "channel": None}, None]


@pytest.mark.parametrize("bad, what", [
    (b'{"order": 1}', "does not decode as msgpack"),                 # JSON, not msgpack: trailing bytes
    (b"\xc1", "does not decode as msgpack"),                         # msgpack's never-used byte
    (msgpack.dumps([1, 2]), "is msgpack list [1, 2], not a map of fields"),
    (msgpack.dumps({"order": "seven"}), "does not fit"),
])
def test_a_value_that_does_not_decode_is_named_by_topic_partition_and_offset(bad, what):
    with pytest.raises(RecordDeserializationError, match=re.escape("the value at orders-2 offset 41 " + what)) as err:
        _decode([msgpack.dumps({"order": 1}), bad, msgpack.dumps({"order": 3})])
    assert (err.value.topic, err.value.partition, err.value.offset) == ("orders", 2, 41)


@pytest.mark.spark
def test_with_fields_decodes_msgpack_values_in_spark_and_a_bad_one_stops_the_job_naming_it(spark):
    rows = [("orders", 0, i, msgpack.dumps({"order": i, "channel": "web" if i % 2 else "app"})) for i in range(6)]
    df = spark.createDataFrame(rows + [("orders", 1, 0, None)],
                               "topic string, partition int, offset long, value binary")
    got = values.with_fields(df, "msgpack", "order long, channel string")
    assertDataFrameEqual(got.groupBy("fields.channel").count(),
                         spark.createDataFrame([("web", 3), ("app", 3), (None, 1)], "channel string, count long"))
    bad = df.union(spark.createDataFrame([("orders", 1, 7, b"not msgpack")], df.schema))
    with pytest.raises(RecordDeserializationError, match="the value at orders-1 offset 7 does not decode as msgpack"), \
            values.task_errors():
        values.with_fields(bad, "msgpack", "order long").collect()


@pytest.mark.spark
def test_sequence_from_a_msgpack_value_field(spark):
    df = spark.createDataFrame(
        [("t", 0, i, 1000 + i, b"user-9", msgpack.dumps({"n": n}), [], 5) for i, n in enumerate((0, 1, 2, 2, 3))]
        + [("t", 0, 9, 2000, b"user-9", msgpack.dumps({"other": 1}), [], 5)], REC)
    seq = ordering.with_sequence(df, "value:n", "msgpack")
    assert [(r.producer, r.seq) for r in seq.orderBy("offset").collect()] == \
        [("5", 0), ("5", 1), ("5", 2), ("5", 2), ("5", 3), ("5", None)]
    assert "_fields" not in seq.columns


def _write_msgpack_log(data_dir: str, bad_at: int | None = None) -> None:
    """Orders {"n": per-key sequence} sent with value_serializer=msgpack.dumps: k0 0,1,2 and
    k1 0,1,1,2 (a duplicate); ``bad_at``: the value of that send (0-based) is text instead."""
    clock = MockClock(1_700_000_000_000)
    with Broker(data_dir, clock=clock) as b:
        b.create_topic("orders", 2)
        p = Producer(b, clock=clock, linger_ms=0,
                     value_serializer=lambda v: v if type(v) is bytes else msgpack.dumps(v))
        sends = [(b"k0", 0), (b"k1", 0), (b"k0", 1), (b"k1", 1), (b"k1", 1), (b"k0", 2), (b"k1", 2)]
        for i, (k, n) in enumerate(sends):
            p.send("orders", key=k, value=b"n=%d" % n if i == bad_at else {"n": n})
        p.flush()
        p.close()


@pytest.mark.spark
def test_the_ordering_audit_reads_msgpack_sequences_from_segments(spark, tmp_path):
    d = str(tmp_path / "data")
    _write_msgpack_log(d)
    out = tmp_path / "o.json"
    args = ["--data-dir", d, "--sequence", "value:n", "--json", str(out), "--min-records-per-partition", "0"]
    assert ordering.main(args + ["--value-format", "msgpack"], spark=spark) == EXIT_VIOLATIONS
    rep = json.loads(out.read_text())
    assert rep["sequenced_records"] == 7 and rep["violations"]["duplicate"] == 1
    assert [(x["key"], x["sequence"]) for x in rep["details"] if x["kind"] == "duplicate"] == [("k1", 1)]
    # read as JSON (the default), the msgpack values hold no sequence: nothing is checked
    assert ordering.main(args, spark=spark) == 0
    assert json.loads(out.read_text())["sequenced_records"] == 0


@pytest.mark.spark
def test_a_value_that_is_not_msgpack_stops_the_audit_with_its_offset(spark, tmp_path):
    d = str(tmp_path / "data")
    _write_msgpack_log(d, bad_at=3)
    with pytest.raises(RecordDeserializationError) as err:
        ordering.main(["--data-dir", d, "--sequence", "value:n", "--value-format", "msgpack"], spark=spark)
    e = err.value
    assert e.topic == "orders" and e.offset is not None and "does not decode as msgpack" in str(e)
    assert f"the value at orders-{e.partition} offset {e.offset} " in str(e) and "b'n=1'" in str(e)
