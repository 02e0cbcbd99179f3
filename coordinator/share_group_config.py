"""The broker configs of share groups (KIP-932), with Kafka's names, defaults and checks.

Kafka's ``ShareGroupConfig`` and ``GroupCoordinatorConfig`` ``group.share.*`` entries, plus
the share groups' group configs (Kafka's ``GroupConfig`` ``share.*``), which kafkasim takes as
broker-wide values because it has no per-group configs (docs/differences.md):

======================================== ========== =============================================
name                                     default    meaning
======================================== ========== =============================================
group.share.record.lock.duration.ms      30000      an acquired record's lock [1000, 3600000]
group.share.min.record.lock.duration.ms  15000      lower bound of the lock [1000, 30000]
group.share.max.record.lock.duration.ms  60000      upper bound of the lock [30000, 3600000]
group.share.delivery.count.limit         5          deliveries before a released record is archived [2, 10]
group.share.partition.max.record.locks   2000       in-flight records per share-partition [100, 10000]
group.share.max.share.sessions           2000       share sessions per broker (>= group.share.max.size)
group.share.session.timeout.ms           45000      a silent member is fenced (min 45000, max 60000)
group.share.heartbeat.interval.ms        5000       the interval answered (min 5000, max 15000)
group.share.max.size                     200        members per share group [1, 1000]
group.share.assignors                    simple     the share assignor
share.auto.offset.reset                  latest     latest, earliest, by_duration:<ISO-8601>
share.record.lock.duration.ms            (unset)    the group's lock; unset: the broker's
share.isolation.level                    read_uncommitted  or read_committed (acquire up to the LSO)
======================================== ========== =============================================

The cross-checks are Kafka's, with its messages ("group.share.record.lock.duration.ms must be
greater than or equal to group.share.min.record.lock.duration.ms").

Immutable once built; thread-safe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from kafkasim.config import BROKER_CONFIGS, ConfigDef, parse_configs
from kafkasim.errors import InvalidConfigurationError

__all__ = ["SHARE_GROUP_CONFIGS", "ShareGroupConfig", "parse_offset_reset"]

SHARE_GROUP_CONFIGS: dict[str, ConfigDef] = {
    name: d for name, d in BROKER_CONFIGS.items()
    if name.startswith(("group.share.", "share.")) and not name.startswith("share.coordinator.")}
"""The ``group.share.*`` and ``share.*`` configs (defined once, in :data:`kafkasim.config.BROKER_CONFIGS`)."""

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_offset_reset(value: str) -> tuple[str, Optional[int]]:
    """``share.auto.offset.reset`` as (strategy, duration in ms): ("latest", None),
    ("earliest", None) or ("by_duration", ms). Kafka's ``ShareGroupAutoOffsetResetStrategy``
    takes an ISO-8601 duration ``PnDTnHnMn.nS``; negative or malformed ones are refused.

    Example: ``parse_offset_reset("by_duration:PT1H")`` -> ``("by_duration", 3600000)``."""
    text = str(value).strip().lower()
    if text in ("latest", "earliest"):
        return text, None
    if text.startswith("by_duration:"):
        m = _DURATION.match(text[len("by_duration:"):].upper())
        if m and any(g is not None for g in m.groups()):
            d, h, mi, s = (float(g) if g is not None else 0.0 for g in m.groups())
            return "by_duration", int(round(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000))
        raise InvalidConfigurationError(
            f"Invalid value {value!r} for configuration share.auto.offset.reset: Unable to parse duration "
            "string in by_duration (an ISO-8601 duration PnDTnHnMn.nS, not negative)")
    raise InvalidConfigurationError(
        f"Invalid value {value!r} for configuration share.auto.offset.reset: String must be one of: "
        "latest, earliest, by_duration:PnDTnHnMn.nS")


@dataclass(frozen=True)
class ShareGroupConfig:
    """The parsed share-group configs; build with :meth:`from_configs`."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2_000
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200
    assignor: str = "simple"
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"

    @classmethod
    def from_configs(cls, configs: Mapping[str, Any] | None = None) -> "ShareGroupConfig":
        """Parse Kafka-named configs (unknown names and bad values: InvalidConfigurationError)."""
        v, _ = parse_configs("share group", SHARE_GROUP_CONFIGS, dict(configs or {}))

        def require(ok: bool, message: str) -> None:
            if not ok:
                raise InvalidConfigurationError(message)

        def ge(a: str, b: str) -> None:
            require(v[a] >= v[b], f"{a} must be greater than or equal to {b}")

        ge("group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms")
        ge("group.share.max.record.lock.duration.ms", "group.share.record.lock.duration.ms")
        ge("group.share.max.share.sessions", "group.share.max.size")
        ge("group.share.max.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms")
        ge("group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms")
        require(v["group.share.heartbeat.interval.ms"] <= v["group.share.max.heartbeat.interval.ms"],
                "group.share.heartbeat.interval.ms must be less than or equal to "
                "group.share.max.heartbeat.interval.ms")
        ge("group.share.max.session.timeout.ms", "group.share.min.session.timeout.ms")
        ge("group.share.session.timeout.ms", "group.share.min.session.timeout.ms")
        require(v["group.share.session.timeout.ms"] <= v["group.share.max.session.timeout.ms"],
                "group.share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms")
        require(v["group.share.heartbeat.interval.ms"] < v["group.share.session.timeout.ms"],
                "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")
        lock = v["share.record.lock.duration.ms"]
        if lock is None:
            lock = v["group.share.record.lock.duration.ms"]
        else:
            lo, hi = v["group.share.min.record.lock.duration.ms"], v["group.share.max.record.lock.duration.ms"]
            require(lo <= lock <= hi, f"Invalid value {lock} for configuration share.record.lock.duration.ms: "
                                      f"Value must be between {lo} and {hi} (group.share.min/max.record.lock.duration.ms)")
        parse_offset_reset(v["share.auto.offset.reset"])
        return cls(record_lock_duration_ms=lock, delivery_count_limit=v["group.share.delivery.count.limit"],
                   partition_max_record_locks=v["group.share.partition.max.record.locks"],
                   session_timeout_ms=v["group.share.session.timeout.ms"],
                   heartbeat_interval_ms=v["group.share.heartbeat.interval.ms"],
                   max_size=v["group.share.max.size"], assignor=v["group.share.assignors"].split(",")[0],
                   auto_offset_reset=v["share.auto.offset.reset"], isolation_level=v["share.isolation.level"])
