"""The consumer's configs: kafka-python's names, Kafka's defaults, one validation mechanism.

:data:`CONSUMER_CONFIGS` maps each name ``Consumer(broker, *topics, **configs)`` accepts
to its :class:`kafkasim.config.ConfigDef`; :func:`kafkasim.config.parse_configs`
validates a constructor's configs against it once, at construction:

- kafka-python's configs the consumer acts on, with Kafka's defaults (``session.timeout.ms``
  45000 as Kafka ≥ 3.0, ``partition.assignment.strategy`` range + cooperative-sticky as
  Kafka 3.x);
- kafkasim's own (``clock``, ``heartbeat_thread``);
- the consumer's entries of :data:`kafkasim.config.KAFKA_PYTHON_UNAPPLIED`
  (``fetch_min_bytes``, ``fetch_max_wait_ms``, network, security,
  ...): accepted with ``applied=False``; the constructor emits one
  :class:`~kafkasim.config.IgnoredConfigWarning` naming those it was given.

An unknown name raises ``InvalidConfigurationError`` with the close matches; a bad value
raises it with Kafka's wording (``Invalid value 'smallest' for configuration
auto_offset_reset: String must be one of: latest, earliest, none``). Pure data; thread-safe.
"""

from __future__ import annotations

from typing import Any

from kafkasim.config import ConfigDef, unapplied_configs
from kafkasim.errors import InvalidConfigurationError

__all__ = ["CONSUMER_CONFIGS", "DEFAULT_CONFIG", "check_group_protocol_configs"]

_D = ConfigDef
CONSUMER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    _D("group_id", "string", None, doc="None: no group (assign() only, no commits)"),
    _D("client_id", "string", "kafkasim-consumer"),
    _D("key_deserializer", "object", None, doc="fn(bytes) -> key"),
    _D("value_deserializer", "object", None, doc="fn(bytes) -> value"),
    _D("fetch_max_bytes", "int", 52_428_800, min=1, doc="bytes per poll across partitions"),
    _D("max_partition_fetch_bytes", "int", 1_048_576, min=1, doc="bytes per partition per fetch"),
    _D("max_poll_records", "int", 500, min=1, doc="records one poll() returns at most"),
    _D("max_poll_interval_ms", "int", 300_000, min=1,
       doc="longest gap between polls before the member leaves; its rebalance timeout"),
    _D("session_timeout_ms", "int", 45_000, min=1, doc="no heartbeat this long: evicted (Kafka >= 3.0)"),
    _D("heartbeat_interval_ms", "int", 3_000, min=1, doc="must be lower than session_timeout_ms"),
    _D("enable_auto_commit", "boolean", True, doc="commit consumed positions every auto_commit_interval_ms"),
    _D("auto_commit_interval_ms", "int", 5_000, min=0),
    _D("auto_offset_reset", "string", "latest", choices=("latest", "earliest", "none"),
       doc="where to start without a committed offset (none: NoOffsetForPartitionError)"),
    _D("partition_assignment_strategy", "object", ("range", "cooperative-sticky"),
       doc="assignor names or classes, by preference (Kafka 3.x default)"),
    _D("group_instance_id", "string", None, doc="static membership (KIP-345)"),
    _D("retry_backoff_ms", "long", 100, min=0, doc="poll()'s wait step without records"),
    _D("consumer_timeout_ms", "double", float("inf"), min=0, doc="iteration stops after this long idle"),
    _D("metadata_max_age_ms", "long", 300_000, min=0, doc="how often the leader checks partition counts"),
    _D("allow_auto_create_topics", "boolean", True,
       doc="subscribing to a missing topic creates it when the broker's auto.create.topics.enable allows"),
    _D("isolation_level", "string", "read_uncommitted", choices=("read_uncommitted", "read_committed"),
       doc="read_committed: up to the last stable offset, aborted transactions dropped; markers never returned"),
    _D("group_protocol", "string", "classic", choices=("classic", "consumer"),
       doc="classic (join/sync) or consumer (KIP-848 heartbeats, broker-side assignment)"),
    _D("group_remote_assignor", "string", None,
       doc="group.protocol=consumer only: the server assignor to ask for (uniform, range); None: the broker's"),
    # kafkasim-only
    _D("seed", "object", None, doc="group.protocol=consumer: seeds the member id (None: a random UUID)"),
    _D("clock", "object", None, doc="kafkasim.clock.Clock; None -> the broker's clock"),
    _D("heartbeat_thread", "boolean", None,
       doc="None: Kafka's background heartbeat thread on a real clock, none on a MockClock"),
]}
CONSUMER_CONFIGS.update(unapplied_configs("consumer"))
CONSUMER_CONFIGS["client_rack"] = _D(
    "client_rack", "string", "",
    doc="rack of this consumer (Kafka's client.rack): for rack-aware fetching and assignment")

DEFAULT_CONFIG: dict[str, Any] = {name: d.default for name, d in CONSUMER_CONFIGS.items()}
"""Every config's default (kafka-python's ``KafkaConsumer.DEFAULT_CONFIG`` counterpart)."""


_UNSUPPORTED = {
    "consumer": ("partition_assignment_strategy", "heartbeat_interval_ms", "session_timeout_ms"),
    "classic": ("group_remote_assignor",),
}
"""Configs the Java client refuses per group protocol (ConsumerConfig's
CONSUMER_PROTOCOL_UNSUPPORTED_CONFIGS, CLASSIC_PROTOCOL_UNSUPPORTED_CONFIGS), in its order:
with the consumer protocol the broker owns assignment and timing."""


def check_group_protocol_configs(cfg: dict, given: dict) -> None:
    """Java's ConsumerConfig check: the configs ``given`` (not None, not blank) that
    ``cfg["group_protocol"]`` does not support raise one InvalidConfigurationError naming
    them all, with their values (Kafka: "partition.assignment.strategy, session.timeout.ms
    cannot be set when group.protocol=CONSUMER")."""
    protocol = cfg["group_protocol"]
    bad = [n for n in _UNSUPPORTED[protocol] if given.get(n) is not None and str(given[n]).strip()]
    if bad:
        raise InvalidConfigurationError(
            f"{', '.join(bad)} cannot be set when group_protocol={protocol.upper()} "
            f"(given: {', '.join(f'{n}={given[n]!r}' for n in bad)})")
