"""The group.share.* broker configs and the share.* group configs: Kafka's names, defaults, checks."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.coordinator.share_group_config import SHARE_GROUP_CONFIGS, ShareGroupConfig, parse_offset_reset
from kafkasim.errors import InvalidConfigurationError


def test_kafkas_names_and_defaults():
    assert {n: d.default for n, d in SHARE_GROUP_CONFIGS.items()} == {
        "group.share.record.lock.duration.ms": 30_000, "group.share.min.record.lock.duration.ms": 15_000,
        "group.share.max.record.lock.duration.ms": 60_000, "group.share.delivery.count.limit": 5,
        "group.share.partition.max.record.locks": 2_000, "group.share.max.share.sessions": 2_000,
        "group.share.session.timeout.ms": 45_000, "group.share.min.session.timeout.ms": 45_000,
        "group.share.max.session.timeout.ms": 60_000, "group.share.heartbeat.interval.ms": 5_000,
        "group.share.min.heartbeat.interval.ms": 5_000, "group.share.max.heartbeat.interval.ms": 15_000,
        "group.share.max.size": 200, "group.share.assignors": "simple",
        "share.auto.offset.reset": "latest", "share.record.lock.duration.ms": None,
        "share.isolation.level": "read_uncommitted",
    }
    assert ShareGroupConfig.from_configs() == ShareGroupConfig()


@pytest.mark.parametrize("configs,message", [
    ({"group.share.record.lock.duration.ms": 10_000},
     "group.share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ({"group.share.max.record.lock.duration.ms": 40_000, "group.share.record.lock.duration.ms": 50_000},
     "group.share.max.record.lock.duration.ms must be greater than or equal to group.share.record.lock.duration.ms"),
    ({"group.share.max.size": 300, "group.share.max.share.sessions": 250},
     "group.share.max.share.sessions must be greater than or equal to group.share.max.size"),
    ({"group.share.delivery.count.limit": 1},
     "Invalid value 1 for configuration group.share.delivery.count.limit: Value must be at least 2"),
    ({"group.share.partition.max.record.locks": 20_000},
     "Invalid value 20000 for configuration group.share.partition.max.record.locks: Value must be no more than 10000"),
    ({"share.record.lock.duration.ms": 70_000}, "Invalid value 70000 for configuration share.record.lock.duration.ms"),
    ({"share.auto.offset.reset": "newest"}, "Invalid value 'newest' for configuration share.auto.offset.reset"),
    ({"share.auto.offset.reset": "by_duration:1h"}, "Invalid value 'by_duration:1h'"),
    ({"share.isolation.level": "committed"}, "Invalid value 'committed' for configuration share.isolation.level"),
])
def test_bad_configs_are_refused_naming_the_value(configs, message):
    with pytest.raises(InvalidConfigurationError, match="^" + message.replace(".", r"\.").replace("(", r"\(")):
        ShareGroupConfig.from_configs(configs)


def test_the_broker_refuses_them_at_start(tmp_path):
    with pytest.raises(InvalidConfigurationError, match="group.share.record.lock.duration.ms must be"):
        Broker(tmp_path / "d", broker_configs={"group.share.min.record.lock.duration.ms": 30_000,
                                               "group.share.record.lock.duration.ms": 20_000})


def test_the_group_lock_duration_overrides_the_brokers():
    assert ShareGroupConfig.from_configs({"share.record.lock.duration.ms": 20_000}).record_lock_duration_ms == 20_000


@pytest.mark.parametrize("value,expected", [
    ("latest", ("latest", None)), ("EARLIEST", ("earliest", None)), ("by_duration:PT1H", ("by_duration", 3_600_000)),
    ("by_duration:P1DT2H3M4.5S", ("by_duration", 93_784_500)), ("by_duration:PT0.25S", ("by_duration", 250)),
])
def test_auto_offset_reset_strategies(value, expected):
    assert parse_offset_reset(value) == expected
