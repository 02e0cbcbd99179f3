"""Fixtures for storage tests: small-segment configs and a MockClock."""

from __future__ import annotations

import pytest

from kafkasim.clock import MockClock
from kafkasim.config import LogConfig
from storage_helpers import T0


@pytest.fixture
def clock() -> MockClock:
    return MockClock(T0)


@pytest.fixture
def small_config() -> LogConfig:
    """Segments of ~2 KB with an index entry every ~256 bytes: many rolls, many index entries."""
    return LogConfig.from_overrides({"segment.bytes": 2048, "index.interval.bytes": 256})
