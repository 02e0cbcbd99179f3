"""Repartition and co-partitioning audits, the CLI front door, and spark-submit packaging."""

from __future__ import annotations

import json
import os
import zipfile

import pytest
from pyspark.testing import assertDataFrameEqual

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.producer import Producer
from kafkasim.partitioning.partitioners import partition_for_key
from kafkasim.spark_jobs import copartition, repartition
from kafkasim.spark_jobs.common import EXIT_OK, EXIT_VIOLATIONS

pytestmark = pytest.mark.spark


def test_recommended_partitions_rule():
    # peak / 50 MB/s, rounded up, to the next power of two, then x2
    assert [repartition.recommended_partitions(p) for p in (0, 1, 50, 51, 120, 200, 401, 1000)] == \
        [2, 2, 2, 4, 8, 8, 32, 64]


def test_partition_moves_transform(spark):
    keys = [b"k%d" % i for i in range(40)]
    traffic = spark.createDataFrame([("t", k, 1, 2) for k in keys], "topic string, key binary, records long, bytes long")
    got = repartition.partition_moves(traffic, 3, 6).select("key", "from_partition", "to_partition", "moves")
    expected = spark.createDataFrame(
        [(k, partition_for_key(k, 3), partition_for_key(k, 6), partition_for_key(k, 3) != partition_for_key(k, 6))
         for k in keys], "key binary, from_partition int, to_partition int, moves boolean")
    assertDataFrameEqual(got, expected)


def _write_two_topics(d: str) -> list[bytes]:
    clock = MockClock(1_700_000_000_000)
    keys = [b"user-%d" % i for i in range(30)]
    with Broker(d, clock=clock) as b:
        b.create_topic("orders", partitions=4)
        b.create_topic("payments", partitions=4)
        b.create_topic("refunds", partitions=6)
        with Producer(b, clock=clock, linger_ms=0) as p:
            for i, k in enumerate(keys):
                for _ in range(1 + (i == 0) * 9):           # user-0 is hot: 10 records
                    p.send("orders", key=k, value=b"o" * 100)
                p.send("payments", key=k, value=b"p")
                p.send("refunds", key=k, value=b"r")
                clock.advance(10)
            p.send("payments", key=keys[1], value=b"p", partition=(partition_for_key(keys[1], 4) + 1) % 4)
            p.flush()
    return keys


def test_repartition_report_matches_the_partitioner(spark, tmp_path):
    d = str(tmp_path / "data")
    keys = _write_two_topics(d)
    out = tmp_path / "r.json"
    rc = repartition.main(["--data-dir", d, "--topic", "orders", "--to", "6", "--json", str(out),
                           "--target-peak-mbps", "120"], spark=spark)
    rep = json.loads(out.read_text())
    moved = [k for k in keys if partition_for_key(k, 4) != partition_for_key(k, 6)]
    records = {k: 10 if k == keys[0] else 1 for k in keys}
    assert (rep["from_partitions"], rep["to_partitions"], rep["keys"]) == (4, 6, 30)
    assert rep["moved_key_fraction"] == pytest.approx(len(moved) / 30)
    assert rep["moved_traffic_fraction"] == pytest.approx(sum(records[k] for k in moved) / sum(records.values()))
    assert [h["key"] for h in rep["hot_keys_moving"]][:1] == ([keys[0].decode()] if keys[0] in moved else
                                                             [sorted(k.decode() for k in moved)[0]])
    assert rep["recommended_partitions"] == 8 and rep["peak_source"] == "target"
    assert rep["measured_peak_mb_per_s"] > 0
    assert rc == EXIT_OK


def test_copartition_finds_count_and_key_mismatches(spark, tmp_path):
    d = str(tmp_path / "data")
    keys = _write_two_topics(d)
    out = tmp_path / "c.json"
    rc = copartition.main(["--data-dir", d, "--topic", "orders", "--topic", "payments", "--json", str(out)],
                          spark=spark)
    rep = json.loads(out.read_text())
    assert rep["shared_keys"] == 30
    assert rep["violations"] == {"partition_count_mismatch": 0, "key_partition_mismatch": 1}
    assert [x["key"] for x in rep["details"]] == [keys[1].decode()]
    assert rc == EXIT_VIOLATIONS


def test_cli_audit_runs_a_job_and_gates_on_violations(spark, tmp_path, capsys):
    from kafkasim.cli import audit
    import argparse
    d = str(tmp_path / "data")
    keys = _write_two_topics(d)
    differ = sum(partition_for_key(k, 4) != partition_for_key(k, 6) for k in keys)
    parser = argparse.ArgumentParser(prog="kafkasim")
    audit.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["audit", "copartition", "--data-dir", d, "--topic", "orders",
                              "--topic", "refunds", "--json", "-", "--master", "local[2]"])
    assert args.handler(args) == EXIT_VIOLATIONS
    rep = json.loads(capsys.readouterr().out)
    assert rep["violations"] == {"partition_count_mismatch": 1, "key_partition_mismatch": differ}
    with pytest.raises(SystemExit):
        parser.parse_args(["audit", "repartition", "--data-dir", d, "--topic", "orders"])  # --to is required


def test_cli_unknown_topic_is_an_error_not_a_clean_audit(spark, tmp_path, capsys):
    from kafkasim.cli import main
    d = str(tmp_path / "data")
    with Broker(d, clock=MockClock()) as b:
        b.create_topic("orders", partitions=1)
    assert main(["audit", "ordering", "--data-dir", d, "--topic", "nope", "--master", "local[2]"]) == 1
    assert "UnknownTopicOrPartitionError" in capsys.readouterr().err


def test_package_zip_holds_every_project_package(tmp_path):
    from kafkasim.spark_jobs.package import build_zip
    path = build_zip(str(tmp_path / "kafkasim-jobs.zip"))
    names = set(zipfile.ZipFile(path).namelist())
    for mod in ("kafkasim/errors.py", "kafkasim/records/record_batch.py", "kafkasim/partitioning/partitioners.py",
                "kafkasim/protocol/offsets.py", "kafkasim/storage/layout.py",
                "kafkasim/spark_jobs/datasource.py", "kafkasim/spark_jobs/ordering.py"):
        assert mod in names
    # one package: nothing at the top level but kafkasim/, and no layer a job does not need
    assert {n.split("/")[0] for n in names} == {"kafkasim"}
    assert not any(n.startswith(("kafkasim/broker/", "kafkasim/producer/", "kafkasim/consumer/",
                                 "kafkasim/coordinator/", "kafkasim/cli/")) or "__pycache__" in n for n in names)


def test_package_zip_runs_on_the_pure_python_codec(tmp_path):
    """Executors import the project from the zip, which holds no C extension (zipimport
    could not load one): storage falls back to its pure-Python codec and reads the same
    columns. The editable install's finder is removed so only the zip can supply code."""
    import subprocess
    import sys
    from kafkasim.spark_jobs.package import build_zip
    from kafkasim.records import record_batch as rb
    path = build_zip(str(tmp_path / "kafkasim-jobs.zip"))
    batch = rb.encode_batch(7, [(0, 1000, b"k", None, (("h", b"x"),)), (2, 990, None, b"v", ())],
                            last_offset_delta=3)
    (tmp_path / "batch.bin").write_bytes(batch)
    from kafkasim.records.columns import ArrowColumnBuilder
    expected = ArrowColumnBuilder()
    expected.add(batch, 0, rb.decode_header(batch))
    script = f"""
import sys
sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, {path!r})
from kafkasim.records import record_batch as rb
from kafkasim.records.columns import ArrowColumnBuilder
assert rb.__file__.startswith({path!r}), rb.__file__
assert not rb.C_CODEC
data = open({str(tmp_path / "batch.bin")!r}, "rb").read()
b = ArrowColumnBuilder()
b.add(data, 0, rb.decode_header(data))
print(repr(b.take()))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert eval(out.stdout) == expected.take()


@pytest.mark.slow
def test_package_zip_alone_runs_an_audit_with_the_same_report(tmp_path, spark):
    """The ``--py-files`` zip is self-sufficient: a driver that can import kafkasim only from
    the zip (the editable install's finder removed; executors get the zip first on their
    path) runs the skew audit and writes the same report as the installed package does."""
    import subprocess
    import sys
    from kafkasim.spark_jobs import skew
    from kafkasim.spark_jobs.package import build_zip
    d = str(tmp_path / "data")
    _write_two_topics(d)
    zip_path = build_zip(str(tmp_path / "kafkasim-jobs.zip"))
    expected_json = tmp_path / "expected.json"
    skew.main(["--data-dir", d, "--topic", "orders", "--json", str(expected_json)], spark=spark)

    got_json = tmp_path / "got.json"
    driver = tmp_path / "driver.py"
    driver.write_text(f"""
import sys
sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, {zip_path!r})
from kafkasim.spark_jobs import skew
rc = skew.main(["--data-dir", {d!r}, "--topic", "orders", "--json", {str(got_json)!r}, "--master", "local[1]"])
outside = sorted(m.__name__ for m in list(sys.modules.values())
                 if m.__name__.startswith("kafkasim") and not (getattr(m, "__file__", None) or {zip_path!r}).startswith({zip_path!r}))
assert not outside, outside
sys.exit(rc)
""")
    env = dict(os.environ, PYTHONPATH=zip_path, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    out = subprocess.run([sys.executable, str(driver)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode in (EXIT_OK, EXIT_VIOLATIONS), out.stderr[-3000:]
    assert json.loads(got_json.read_text()) == json.loads(expected_json.read_text())
