"""A real cluster run: ``spark-submit --master local-cluster[2,1,1024]`` with the ``--py-files``
zip: separate executor JVMs and Python workers, the same report as local mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kafkasim.spark_jobs import audit_all
from . import logs

pytestmark = pytest.mark.spark


def _spark_home() -> str:
    import pyspark
    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _comparable(rep: dict) -> dict:
    rep = dict(rep)
    rep.pop("timings_s")
    return rep


@pytest.mark.slow
def test_local_cluster_run_of_the_py_files_zip_gives_the_local_report(spark, tmp_path):
    from kafkasim.spark_jobs.package import build_zip
    d = str(tmp_path / "data")
    logs.write_mixed_clients(d)                  # a producer-partitioner cause: hashing on the executors
    zip_path = build_zip(str(tmp_path / "kafkasim-jobs.zip"))
    local_json, cluster_json = tmp_path / "local.json", tmp_path / "cluster.json"
    audit_all.main(["--data-dir", d, "--json", str(local_json)], spark=spark)
    home = _spark_home()
    job = os.path.join(os.path.dirname(os.path.abspath(audit_all.__file__)), "audit_all.py")
    cmd = [os.path.join(home, "bin", "spark-submit"), "--master", "local-cluster[2,1,1024]",
           "--conf", f"spark.pyspark.python={sys.executable}",
           "--conf", f"spark.pyspark.driver.python={sys.executable}",
           "--conf", "spark.executor.memory=768m",
           "--py-files", zip_path, job, "--data-dir", d, "--json", str(cluster_json)]
    env = dict(os.environ, SPARK_HOME=home, PYSPARK_PYTHON=sys.executable)
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 3, out.stderr[-3000:]          # the mismatches fail the ordering audit
    local, cluster = json.loads(local_json.read_text()), json.loads(cluster_json.read_text())
    assert _comparable(cluster) == _comparable(local)
    (cause,) = [c for c in cluster["ordering"]["causes"] if c["cause"] == "producer_partitioner"]
    assert cause["client_id"] == "c-app" and "consistent_random" in cause["partitioners"]
