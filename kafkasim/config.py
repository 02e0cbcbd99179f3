"""Topic configs with Kafka's names, defaults and validation rules.

``LogConfig.from_overrides({"segment.bytes": "1048576"})`` parses and validates a
dict of overrides (values as Kafka's strings or as Python values) and fills every
other field with Kafka's default. Unknown names and out-of-range values raise
:class:`~kafkasim.errors.InvalidConfigurationError` whose message follows Kafka's
("Invalid value -5 for configuration segment.bytes: Value must be at least 14").

Deliberate difference: Kafka 4.x raised the minimum ``segment.bytes`` to 1 MiB;
kafkasim keeps the 3.x minimum (14) so labs can watch segments roll with little data.

Invariants: a ``LogConfig`` is immutable and always valid. Thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping

from kafkasim.errors import InvalidConfigurationError

__all__ = ["LogConfig", "TOPIC_CONFIGS", "ConfigDef", "LONG_MAX", "MAX_PARTITIONS"]

LONG_MAX = 9223372036854775807
MAX_PARTITIONS = 100_000
"""The most partitions one kafkasim topic may have (the broker and every calculator check it)."""


@dataclass(frozen=True)
class ConfigDef:
    """One config: its Kafka name, type, default, bounds or allowed values, and doc."""

    name: str
    type: str            # "long" | "int" | "double" | "string" | "list" | "boolean"
    default: Any
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    doc: str = ""
    applied: bool = True  # False: accepted and stored, but the simulator does not act on it

    def parse(self, raw: Any) -> Any:
        """Convert ``raw`` to this config's type and check it; raise InvalidConfigurationError."""
        def bad(why: str) -> InvalidConfigurationError:
            return InvalidConfigurationError(
                f"Invalid value {raw!r} for configuration {self.name}: {why}")
        if self.type in ("long", "int"):
            if isinstance(raw, bool):
                raise bad("Expected value to be a number")
            try:
                value = int(raw) if not isinstance(raw, float) or raw.is_integer() else None
            except (TypeError, ValueError):
                value = None
            if value is None:
                raise bad(f"Expected value to be a {'64' if self.type == 'long' else '32'}-bit integer")
            hi = LONG_MAX if self.type == "long" else 2**31 - 1
            if value > hi or value < -hi - 1:
                raise bad(f"Value out of range for a {self.type}")
        elif self.type == "double":
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise bad("Expected value to be a double") from None
        elif self.type == "boolean":
            if isinstance(raw, bool):
                value = raw
            elif str(raw).lower() in ("true", "false"):
                value = str(raw).lower() == "true"
            else:
                raise bad("Expected value to be either true or false")
        elif self.type == "list":
            items = raw if isinstance(raw, (list, tuple)) else [s.strip() for s in str(raw).split(",")]
            items = [str(s) for s in items if str(s)]
            if not items:
                raise bad("Empty list")
            for item in items:
                if self.choices and item not in self.choices:
                    raise bad(f"String must be one of: {', '.join(self.choices)}")
            return ",".join(items)
        else:
            value = str(raw)
            if self.choices and value not in self.choices:
                raise bad(f"String must be one of: {', '.join(self.choices)}")
            return value
        if self.min is not None and value < self.min:
            raise bad(f"Value must be at least {_num(self.min)}")
        if self.max is not None and value > self.max:
            raise bad(f"Value must be no more than {_num(self.max)}")
        return value


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


_D = ConfigDef
TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    _D("cleanup.policy", "list", "delete", choices=("delete", "compact"),
       doc="delete: retention by size/time; compact: keep the latest record per key"),
    _D("compression.type", "string", "producer",
       choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
       doc="stored only: kafkasim never compresses batches", applied=False),
    _D("delete.retention.ms", "long", 86_400_000, min=0,
       doc="how long a tombstone survives compaction"),
    _D("file.delete.delay.ms", "long", 60_000, min=0,
       doc="stored only: files are deleted at once", applied=False),
    _D("flush.messages", "long", LONG_MAX, min=1, doc="fsync after this many records"),
    _D("flush.ms", "long", LONG_MAX, min=0, doc="fsync when the oldest unflushed record is this old"),
    _D("index.interval.bytes", "int", 4096, min=0, doc="bytes between offset-index entries"),
    _D("max.compaction.lag.ms", "long", LONG_MAX, min=1, doc="stored only", applied=False),
    _D("max.message.bytes", "int", 1_048_588, min=0, doc="largest batch the log accepts"),
    _D("message.timestamp.type", "string", "CreateTime", choices=("CreateTime", "LogAppendTime"),
       doc="LogAppendTime: the broker stamps its clock on every record"),
    _D("min.cleanable.dirty.ratio", "double", 0.5, min=0, max=1,
       doc="the background cleaner compacts a log once this share of it is uncompacted"),
    _D("min.compaction.lag.ms", "long", 0, min=0,
       doc="records younger than this are not compacted"),
    _D("min.insync.replicas", "int", 1, min=1, doc="stored for the multi-broker work", applied=False),
    _D("preallocate", "boolean", False, doc="stored only", applied=False),
    _D("retention.bytes", "long", -1, doc="-1: no size limit"),
    _D("retention.ms", "long", 604_800_000, min=-1, doc="-1: no time limit"),
    _D("segment.bytes", "int", 1_073_741_824, min=14, doc="roll a new segment past this size"),
    _D("segment.index.bytes", "int", 10_485_760, min=4,
       doc="stored only: indexes grow as needed", applied=False),
    _D("segment.jitter.ms", "long", 0, min=0, doc="stored only", applied=False),
    _D("segment.ms", "long", 604_800_000, min=1, doc="roll a new segment after this long"),
    _D("unclean.leader.election.enable", "boolean", False, doc="stored for the multi-broker work",
       applied=False),
]}


@dataclass(frozen=True)
class LogConfig:
    """Every topic config, typed, with Kafka's defaults. Field = Kafka name with '.' → '_'."""

    cleanup_policy: str = "delete"
    compression_type: str = "producer"
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    index_interval_bytes: int = 4096
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    retention_bytes: int = -1
    retention_ms: int = 604_800_000
    segment_bytes: int = 1_073_741_824
    segment_index_bytes: int = 10_485_760
    segment_jitter_ms: int = 0
    segment_ms: int = 604_800_000
    unclean_leader_election_enable: bool = False

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, Any] | None = None) -> "LogConfig":
        """Build a config from Kafka-named overrides; raise InvalidConfigurationError on bad input."""
        return cls()._with(overrides or {})

    def with_overrides(self, overrides: Mapping[str, Any]) -> "LogConfig":
        """A copy with ``overrides`` (Kafka names) applied on top of this config."""
        return self._with(overrides)

    def _with(self, overrides: Mapping[str, Any]) -> "LogConfig":
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, raw in overrides.items():
            d = TOPIC_CONFIGS.get(name)
            if d is None:
                raise InvalidConfigurationError(
                    f"Unknown topic config name: {name} (known: {', '.join(sorted(TOPIC_CONFIGS))})")
            values[name.replace(".", "_")] = d.parse(raw)
        return LogConfig(**values)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    def to_kafka(self) -> dict[str, Any]:
        """All configs by Kafka name."""
        return {d.name: getattr(self, d.name.replace(".", "_")) for d in TOPIC_CONFIGS.values()}


def _check_defaults() -> None:
    default = LogConfig()
    for d in TOPIC_CONFIGS.values():
        if getattr(default, d.name.replace(".", "_")) != d.default:
            raise AssertionError(f"default of {d.name} disagrees with LogConfig")


_check_defaults()
