"""Shared fixtures: one session-scoped local SparkSession (started only if a test asks)."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    """The one local SparkSession of the test run; workers use this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from spark_jobs.session import build_session

    session = build_session(app_name="kafkasim-tests", master="local[2]",
                            extra_conf={"spark.sql.shuffle.partitions": "4",
                                        "spark.ui.enabled": "false"})
    yield session
    session.stop()
