"""The group.consumer.* broker configs: Kafka's names, defaults and cross-checks."""

from __future__ import annotations

import pytest

from kafkasim.clock import MockClock
from kafkasim.config import INT_MAX
from kafkasim.coordinator.consumer_group_config import CONSUMER_GROUP_CONFIGS, ConsumerGroupConfig
from kafkasim.coordinator.consumer_heartbeat import ConsumerGroupCoordinator
from kafkasim.errors import InvalidConfigurationError
from tests.coordinator.consumer_group_support import PreparedAssignor


def test_kafkas_names_and_defaults():
    assert {name: d.default for name, d in CONSUMER_GROUP_CONFIGS.items()} == {
        "group.consumer.session.timeout.ms": 45_000,
        "group.consumer.min.session.timeout.ms": 45_000,
        "group.consumer.max.session.timeout.ms": 60_000,
        "group.consumer.heartbeat.interval.ms": 5_000,
        "group.consumer.min.heartbeat.interval.ms": 5_000,
        "group.consumer.max.heartbeat.interval.ms": 15_000,
        "group.consumer.max.size": INT_MAX,
        "group.consumer.assignors": "uniform,range",
        "group.consumer.migration.policy": "bidirectional",
    }
    assert ConsumerGroupConfig.from_configs() == ConsumerGroupConfig(45_000, 5_000, INT_MAX, ("uniform", "range"))


@pytest.mark.parametrize("configs,message", [
    ({"group.consumer.heartbeat.interval.ms": 4_000},
     "group.consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ({"group.consumer.heartbeat.interval.ms": 16_000},
     "group.consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ({"group.consumer.session.timeout.ms": 61_000},
     "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ({"group.consumer.session.timeout.ms": 6_000, "group.consumer.min.session.timeout.ms": 6_000,
      "group.consumer.heartbeat.interval.ms": 6_000},
     "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
    ({"group.consumer.max.size": 0}, "Invalid value 0 for configuration group.consumer.max.size: Value must be at least 1"),
    ({"group.consumer.session.timeout": 1}, "Unrecognized consumer group config 'group.consumer.session.timeout'"),
])
def test_bad_configs_are_refused_naming_the_value(configs, message):
    with pytest.raises(InvalidConfigurationError, match="^" + message.replace(".", r"\.")):
        ConsumerGroupConfig.from_configs(configs)


def test_the_coordinator_takes_its_assignors_by_name():
    clock = MockClock(0)
    coordinator = ConsumerGroupCoordinator([PreparedAssignor("range"), PreparedAssignor("uniform")], clock,
                                           configs={"group.consumer.assignors": "uniform,range"})
    assert coordinator.assignor_names == ("uniform", "range")
    with pytest.raises(InvalidConfigurationError, match="no assignor named uniform"):
        ConsumerGroupCoordinator([PreparedAssignor("range")], clock, configs={"group.consumer.assignors": "uniform"})
