"""The broker configs of consumer groups (KIP-848), with Kafka's names, defaults and checks.

Kafka's ``GroupCoordinatorConfig`` ``group.consumer.*`` entries:

====================================== ============ ==========================================
name                                   default      meaning
====================================== ============ ==========================================
group.consumer.session.timeout.ms      45000        a member not heard from for this long is fenced
group.consumer.min.session.timeout.ms  45000        lower bound of the above
group.consumer.max.session.timeout.ms  60000        upper bound of the above
group.consumer.heartbeat.interval.ms   5000         the interval the coordinator tells members to heartbeat at
group.consumer.min.heartbeat.interval.ms 5000       lower bound of the above
group.consumer.max.heartbeat.interval.ms 15000      upper bound of the above
group.consumer.max.size                2147483647   most members in one consumer group
group.consumer.assignors               uniform,range server assignors; the first is the default
====================================== ============ ==========================================

Kafka lists assignor class names (``org.apache.kafka.coordinator.group.assignor.UniformAssignor``);
kafkasim takes the assignors' names (their ``name``, as ``group.remote.assignor`` and the
heartbeat's ``server_assignor`` name them). The cross-checks are Kafka's, with its messages
("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms").

Immutable once built; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from kafkasim.config import BROKER_CONFIGS, INT_MAX, ConfigDef, parse_configs
from kafkasim.errors import InvalidConfigurationError

__all__ = ["CONSUMER_GROUP_CONFIGS", "ConsumerGroupConfig"]

CONSUMER_GROUP_CONFIGS: dict[str, ConfigDef] = {
    name: d for name, d in BROKER_CONFIGS.items() if name.startswith("group.consumer.")}
"""The ``group.consumer.*`` broker configs (defined once, in :data:`kafkasim.config.BROKER_CONFIGS`)."""


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """The parsed ``group.consumer.*`` configs; build with :meth:`from_configs`."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = INT_MAX
    assignors: tuple[str, ...] = ("uniform", "range")
    migration_policy: str = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        """Kafka's ``ConsumerGroupMigrationPolicy.isUpgradeEnabled``."""
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("downgrade", "bidirectional")

    @classmethod
    def from_configs(cls, configs: Mapping[str, Any] | None = None) -> "ConsumerGroupConfig":
        """Parse Kafka-named configs (unknown names and bad values: InvalidConfigurationError)."""
        v, _ = parse_configs("consumer group", CONSUMER_GROUP_CONFIGS, dict(configs or {}))

        def require(ok: bool, message: str) -> None:
            if not ok:
                raise InvalidConfigurationError(message)

        hb, hb_min, hb_max = (v["group.consumer.heartbeat.interval.ms"], v["group.consumer.min.heartbeat.interval.ms"],
                              v["group.consumer.max.heartbeat.interval.ms"])
        st, st_min, st_max = (v["group.consumer.session.timeout.ms"], v["group.consumer.min.session.timeout.ms"],
                              v["group.consumer.max.session.timeout.ms"])
        require(hb_max >= hb_min, "group.consumer.max.heartbeat.interval.ms must be greater than or equal to "
                                  "group.consumer.min.heartbeat.interval.ms")
        require(hb >= hb_min, "group.consumer.heartbeat.interval.ms must be greater than or equal to "
                              "group.consumer.min.heartbeat.interval.ms")
        require(hb <= hb_max, "group.consumer.heartbeat.interval.ms must be less than or equal to "
                              "group.consumer.max.heartbeat.interval.ms")
        require(st_max >= st_min, "group.consumer.max.session.timeout.ms must be greater than or equal to "
                                  "group.consumer.min.session.timeout.ms")
        require(st >= st_min, "group.consumer.session.timeout.ms must be greater than or equal to "
                              "group.consumer.min.session.timeout.ms")
        require(st <= st_max, "group.consumer.session.timeout.ms must be less than or equal to "
                              "group.consumer.max.session.timeout.ms")
        require(hb < st, "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
        assignors = tuple(v["group.consumer.assignors"].split(","))
        return cls(session_timeout_ms=st, heartbeat_interval_ms=hb, max_size=v["group.consumer.max.size"],
                   assignors=assignors, migration_policy=v["group.consumer.migration.policy"])
