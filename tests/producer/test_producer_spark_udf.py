"""partition_many inside a Spark Arrow UDF (the ordering audit's use), on the session `spark`."""

from __future__ import annotations

import pytest

from kafkasim.partitioning.partitioners import KEY_PURE, partition_for_key

pytestmark = pytest.mark.spark


def test_partition_many_in_map_in_arrow_matches_the_scalar_path(spark):
    import pyarrow as pa

    keys = [b"merchant_%06d" % i for i in range(500)] + [None, b""]
    df = spark.createDataFrame([(k,) for k in keys], "key binary")
    names = list(KEY_PURE)

    def udf(batches):
        from kafkasim.partitioning.partitioners import partition_many
        for batch in batches:
            col = batch.column("key")              # a pyarrow binary array: zero-copy input
            cols = [pa.array(partition_many(col, 64, name)) for name in names]
            yield pa.RecordBatch.from_arrays([col] + cols, ["key"] + names)

    schema = "key binary, " + ", ".join(f"{n} int" for n in names)
    got = {(bytes(r["key"]) if r["key"] is not None else None): r for r in
           df.mapInArrow(udf, schema).collect()}
    assert len(got) == len(keys)
    for k in keys:
        for name in names:
            assert got[k][name] == partition_for_key(k, 64, name), (k, name)
