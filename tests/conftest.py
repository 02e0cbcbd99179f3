"""Shared fixtures: a MockClock, a real Broker on tmp_path, and one session-scoped local
SparkSession (started only if a test asks)."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture
def clock():
    """A simulated clock at 2023-11-14T22:13:20Z; moves only when a test advances it."""
    from kafkasim.clock import MockClock

    return MockClock(1_700_000_000_000)


@pytest.fixture
def broker(tmp_path, clock):
    """A real broker over ``tmp_path/data`` on the test's clock, closed afterwards."""
    from kafkasim.broker import Broker

    b = Broker(tmp_path / "data", clock=clock)
    yield b
    b.close()


@pytest.fixture(scope="session")
def spark():
    """The one local SparkSession of the test run; workers use this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from kafkasim.spark_jobs.session import build_session

    session = build_session(app_name="kafkasim-tests", master="local[2]",
                            extra_conf={"spark.sql.shuffle.partitions": "4",
                                        "spark.ui.enabled": "false"})
    yield session
    session.stop()
