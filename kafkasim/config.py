"""Configs with Kafka's names, defaults and validation rules: one mechanism for all of them.

A :class:`ConfigDef` describes one config (name, type, default, bounds or choices, doc,
and whether kafkasim acts on it); :meth:`ConfigDef.parse` validates a value with Kafka's
wording ("Invalid value -5 for configuration segment.bytes: Value must be at least 14").
Every config set goes through it:

- topic configs (:data:`TOPIC_CONFIGS`, Kafka's names): ``LogConfig.from_overrides(
  {"segment.bytes": "1048576"})`` parses a dict of overrides (Kafka's strings or Python
  values) and fills every other field with Kafka's default;
- broker configs (:data:`BROKER_CONFIGS`, server.properties names, e.g. ``log.cleaner.enable``);
- the producer's and the consumer's configs (kafka-python's underscored names), defined
  next to each client (``kafkasim.producer.config``, ``kafkasim.consumer.config``) and
  completed by :data:`KAFKA_PYTHON_UNAPPLIED`: the one list of configs kafka-python
  accepts that mean nothing in-process (network, security, compression, ...).

:func:`parse_configs` validates a whole dict once, at construction: an unknown name is
an :class:`~kafkasim.errors.InvalidConfigurationError` naming it and its close matches
(``Unrecognized producer config 'linger_m' (did you mean 'linger_ms'?)``); a config with
``applied=False`` is accepted and reported back so the caller can emit one
:class:`IgnoredConfigWarning` listing every such name it was given.

Deliberate difference: Kafka 4.x raised the minimum ``segment.bytes`` to 1 MiB;
kafkasim keeps the 3.x minimum (14) so labs can watch segments roll with little data.

Invariants: a ``LogConfig`` is immutable and always valid; a value returned by
:meth:`ConfigDef.parse` satisfies the def's type and bounds. Thread-safe.
"""

from __future__ import annotations

import difflib
import warnings
from dataclasses import dataclass, fields
from typing import Any, Iterable, Mapping

from kafkasim.errors import InvalidConfigurationError

__all__ = ["LogConfig", "TOPIC_CONFIGS", "BROKER_CONFIGS", "ConfigDef", "LONG_MAX", "INT_MAX",
           "MAX_PARTITIONS", "KAFKA_PYTHON_UNAPPLIED", "IgnoredConfigWarning", "parse_configs",
           "unapplied_configs", "warn_ignored", "did_you_mean", "from_kafka_names"]

LONG_MAX = 9223372036854775807
INT_MAX = 2**31 - 1
MAX_PARTITIONS = 100_000
"""The most partitions one kafkasim topic may have (the broker and every calculator check it)."""


class IgnoredConfigWarning(UserWarning):
    """Emitted once by a constructor given configs kafkasim accepts but does not act on (``applied=False``)."""


@dataclass(frozen=True)
class ConfigDef:
    """One config: its Kafka name, type, default, bounds or allowed values, and doc."""

    name: str
    type: str            # "long" | "int" | "double" | "string" | "list" | "boolean" | "object"
    default: Any         # None: the config may also be set to None (Kafka's null)
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
        if self.type == "object" or (raw is None and self.default is None):
            return raw          # a callable, a Clock, a Partitioner...: checked by its user
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


def parse_configs(kind: str, defs: Mapping[str, ConfigDef],
                  given: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Validate ``given`` against ``defs`` (``kind`` names the owner in messages: "producer").

    Returns (every config's value: the parsed given value, else the default; the sorted
    names given whose def has ``applied=False``). Raises InvalidConfigurationError for an
    unknown name (with close matches) or the first invalid value.
    """
    unknown = [name for name in given if name not in defs]
    if unknown:
        raise _unrecognized(kind, unknown, defs)
    values = {name: d.default for name, d in defs.items()}
    for name, raw in given.items():
        values[name] = defs[name].parse(raw)
    return values, sorted(name for name in given if not defs[name].applied)


def did_you_mean(name: str, known: Iterable[str], *, quote: bool = False) -> str:
    """The close matches of ``name`` among ``known`` ("segment.bytes", or "'a' or 'b'" with
    ``quote``), or ``""``."""
    close = difflib.get_close_matches(str(name), sorted(known), n=3, cutoff=0.6)
    return " or ".join(repr(c) if quote else c for c in close)


def _unrecognized(kind: str, names: list[str], known: Iterable[str]) -> InvalidConfigurationError:
    known = sorted(known)
    parts = []
    for name in names:
        close = did_you_mean(name, known, quote=True)
        hint = f" (did you mean {close}?)" if close else ""
        parts.append(f"{str(name)!r}{hint}")
    noun = "config" if len(names) == 1 else "configs"
    return InvalidConfigurationError(f"Unrecognized {kind} {noun} {', '.join(parts)}")


def from_kafka_names(kind: str, defs: Mapping[str, ConfigDef], given: Mapping[str, Any]) -> dict[str, Any]:
    """Configs given with Kafka's dotted names (``linger.ms``, as Kafka's tools and
    properties files spell them) → the underscored names of ``defs`` (``linger_ms``, the
    client's keyword arguments). An unknown name is an error in the spelling it was typed,
    with its close matches in that spelling too (``'lingr.ms' (did you mean 'linger.ms'?)``)."""
    dotted = {name.replace("_", "."): name for name in defs}
    unknown = [name for name in given if name not in dotted and name not in defs]
    if unknown:
        raise _unrecognized(kind, unknown, dotted)
    return {dotted.get(name, name): value for name, value in given.items()}


def warn_ignored(kind: str, names: list[str], stacklevel: int = 3) -> None:
    """One :class:`IgnoredConfigWarning` listing the ``applied=False`` configs a ``kind`` was given."""
    if names:
        warnings.warn(
            f"{kind} configs accepted but ignored (no meaning in-process): {', '.join(names)}",
            IgnoredConfigWarning, stacklevel=stacklevel)


_D = ConfigDef
TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    _D("cleanup.policy", "list", "delete", choices=("delete", "compact"),
       doc="delete: retention by size/time; compact: keep the latest record per key"),
    _D("compression.type", "string", "producer",
       choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
       doc="the codec batches are stored with; producer keeps the producer's codec"),
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
    _D("min.insync.replicas", "int", 1, min=1,
       doc="acks=all fails with NotEnoughReplicas while the ISR is smaller (kafkasim.broker.replica)"),
    _D("preallocate", "boolean", False, doc="stored only", applied=False),
    _D("retention.bytes", "long", -1, doc="-1: no size limit"),
    _D("retention.ms", "long", 604_800_000, min=-1, doc="-1: no time limit"),
    _D("segment.bytes", "int", 1_073_741_824, min=14, doc="roll a new segment past this size"),
    _D("segment.index.bytes", "int", 10_485_760, min=4,
       doc="stored only: indexes grow as needed", applied=False),
    _D("segment.jitter.ms", "long", 0, min=0, doc="stored only", applied=False),
    _D("segment.ms", "long", 604_800_000, min=1, doc="roll a new segment after this long"),
    _D("unclean.leader.election.enable", "boolean", False,
       doc="elect an out-of-sync replica when no ISR member is alive; the lost records are listed"),
]}


BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    _D("auto.create.topics.enable", "boolean", True,
       doc="a client's metadata request for a missing topic creates it (num.partitions, "
           "default.replication.factor), as Kafka's AutoTopicCreationManager does; the in-process "
           "producer and consumer, the CLI and kafkasim serve all go through Broker.auto_create_topic"),
    _D("num.partitions", "int", 1, min=1,
       doc="partitions of an auto-created topic (and of CreateTopics with -1)"),
    _D("default.replication.factor", "int", 1, min=1,
       doc="replicas of an auto-created topic (and of CreateTopics with -1)"),
    _D("auto.leader.rebalance.enable", "boolean", True,
       doc="a cluster's controller moves leadership back to each partition's preferred (first) replica, "
           "once it is live and in the ISR, every leader.imbalance.check.interval.seconds while any "
           "partition is led by another replica (kafkasim.broker.leader_balance)"),
    _D("leader.imbalance.check.interval.seconds", "long", 300, min=1,
       doc="how long after an imbalance appears (and then between checks) the controller runs the "
           "preferred leader election (a cluster's tick() on the clock)"),
    _D("leader.imbalance.per.broker.percentage", "int", 10,
       doc="accepted and stored only: Kafka 4's KRaft controller does not read it (only the ZooKeeper "
           "controller, removed in 4.0, used it as a per-broker threshold)", applied=False),
    _D("log.cleaner.enable", "boolean", True,
       doc="run the LogCleaner (retention, compaction, flush.ms) every log.retention.check.interval.ms "
           "(a background thread on a real clock; Broker.tick() under a MockClock)"),
    _D("log.retention.check.interval.ms", "long", 300_000, min=1,
       doc="how often the broker's maintenance pass runs (retention, compaction and the flush.ms check)"),
    _D("replica.lag.time.max.ms", "long", 30_000, min=1,
       doc="a follower not caught up with the leader for this long leaves the ISR (kafkasim.broker.replica)"),
    _D("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000, min=1,
       doc="how often the transaction coordinator aborts transactions open longer than their "
           "transaction.timeout.ms (Broker.tick(); kafkasim serve ticks on real time)"),
    _D("transaction.max.timeout.ms", "int", 900_000, min=1,
       doc="the largest transaction.timeout.ms a producer may ask for (InitProducerId answers "
           "INVALID_TRANSACTION_TIMEOUT above it)"),
    _D("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3_600_000, min=1,
       doc="how often the transaction coordinator removes transactional ids idle past "
           "transactional.id.expiration.ms"),
    _D("transactional.id.expiration.ms", "int", 604_800_000, min=1,
       doc="a transactional id with no transaction for this long is removed (a tombstone in "
           "__transaction_state)"),
    _D("group.coordinator.rebalance.protocols", "list", "classic,consumer", choices=("classic", "consumer"),
       doc="the group protocols served: classic (JoinGroup/SyncGroup) and consumer (KIP-848, "
           "ConsumerGroupHeartbeat); without consumer a heartbeat gets UNSUPPORTED_VERSION"),
    # The consumer group protocol (KIP-848): Kafka's GroupCoordinatorConfig group.consumer.*;
    # kafkasim.coordinator.consumer_group_config reads them and cross-checks them.
    _D("group.consumer.session.timeout.ms", "int", 45_000, min=1,
       doc="a member that does not heartbeat for this long is fenced (its partitions are freed)"),
    _D("group.consumer.min.session.timeout.ms", "int", 45_000, min=1,
       doc="the smallest group.consumer.session.timeout.ms allowed"),
    _D("group.consumer.max.session.timeout.ms", "int", 60_000, min=1,
       doc="the largest group.consumer.session.timeout.ms allowed"),
    _D("group.consumer.heartbeat.interval.ms", "int", 5_000, min=1,
       doc="the heartbeat interval every response tells members to use"),
    _D("group.consumer.min.heartbeat.interval.ms", "int", 5_000, min=1,
       doc="the smallest group.consumer.heartbeat.interval.ms allowed"),
    _D("group.consumer.max.heartbeat.interval.ms", "int", 15_000, min=1,
       doc="the largest group.consumer.heartbeat.interval.ms allowed"),
    _D("group.consumer.max.size", "int", INT_MAX, min=1,
       doc="the most members one consumer group may have (GROUP_MAX_SIZE_REACHED beyond)"),
    _D("group.consumer.assignors", "list", "uniform,range",
       doc="the server assignors by name; the first is used when no member asks for one"),
    _D("group.consumer.migration.policy", "string", "bidirectional",
       choices=("disabled", "upgrade", "downgrade", "bidirectional"),
       doc="online conversion between classic and consumer groups: upgrade (a consumer-protocol "
           "member joins a classic group with members), downgrade (the last consumer-protocol "
           "member leaves a group of classic members), both, or neither"),
    # Share groups (KIP-932): Kafka's ShareGroupConfig and GroupCoordinatorConfig group.share.*;
    # kafkasim.coordinator.share_group_config reads them and cross-checks them.
    _D("group.share.record.lock.duration.ms", "int", 30_000, min=1_000, max=3_600_000,
       doc="how long a share-group member holds an acquired record before it is released"),
    _D("group.share.min.record.lock.duration.ms", "int", 15_000, min=1_000, max=30_000,
       doc="the smallest record lock duration a share group may use"),
    _D("group.share.max.record.lock.duration.ms", "int", 60_000, min=30_000, max=3_600_000,
       doc="the largest record lock duration a share group may use"),
    _D("group.share.delivery.count.limit", "int", 5, min=2, max=10,
       doc="a record delivered this many times and released again is archived"),
    _D("group.share.partition.max.record.locks", "int", 2_000, min=100, max=10_000,
       doc="the most records of one share-partition in flight (acquired) at once"),
    _D("group.share.max.share.sessions", "int", 2_000, min=1,
       doc="the most share sessions per broker (at least group.share.max.size)"),
    _D("group.share.session.timeout.ms", "int", 45_000, min=1,
       doc="a share-group member that does not heartbeat for this long is fenced (its records released)"),
    _D("group.share.min.session.timeout.ms", "int", 45_000, min=1,
       doc="the smallest group.share.session.timeout.ms allowed"),
    _D("group.share.max.session.timeout.ms", "int", 60_000, min=1,
       doc="the largest group.share.session.timeout.ms allowed"),
    _D("group.share.heartbeat.interval.ms", "int", 5_000, min=1,
       doc="the heartbeat interval every ShareGroupHeartbeat answer tells members to use"),
    _D("group.share.min.heartbeat.interval.ms", "int", 5_000, min=1,
       doc="the smallest group.share.heartbeat.interval.ms allowed"),
    _D("group.share.max.heartbeat.interval.ms", "int", 15_000, min=1,
       doc="the largest group.share.heartbeat.interval.ms allowed"),
    _D("share.coordinator.state.topic.num.partitions", "int", 50, min=1,
       doc="the partitions of __share_group_state, created on the first share-partition write"),
    _D("group.share.max.size", "int", 200, min=1, max=1_000,
       doc="the most members one share group may have (GROUP_MAX_SIZE_REACHED beyond)"),
    _D("group.share.assignors", "list", "simple", choices=("simple",),
       doc="the share group assignor (Kafka's SimpleAssignor, by name)"),
    # Kafka's group configs of share groups (kafka-configs --entity-type groups); kafkasim has
    # no per-group configs, so these are the broker-wide values every share group uses.
    _D("share.auto.offset.reset", "string", "latest",
       doc="where a share-partition starts when the group has no state for it: latest, earliest, "
           "or by_duration:<ISO-8601 duration> (e.g. by_duration:PT1H)"),
    _D("share.record.lock.duration.ms", "int", None, min=1_000, max=3_600_000,
       doc="the share groups' record lock duration (within group.share.min/max.record.lock.duration.ms); "
           "unset: group.share.record.lock.duration.ms"),
    _D("share.isolation.level", "string", "read_uncommitted", choices=("read_committed", "read_uncommitted"),
       doc="read_uncommitted acquires up to the high watermark, read_committed up to the last stable offset"),
]}
"""Broker configs (server.properties names) the in-process broker reads; ``Broker(broker_configs=...)``."""

_PRODUCER, _CONSUMER, _BOTH = ("producer",), ("consumer",), ("producer", "consumer")
_NET = "no network in-process: the Broker object is passed instead"
_SEC = "no network, so no TLS/SASL in-process"

KAFKA_PYTHON_UNAPPLIED: tuple[tuple[ConfigDef, tuple[str, ...]], ...] = tuple(
    (_D(name, type_, default, choices=choices, doc=doc, applied=False), clients)
    for name, type_, default, choices, doc, clients in [
        # -- both clients: connection, metadata bootstrap, metrics plumbing
        ("bootstrap_servers", "object", "localhost", None, _NET, _BOTH),
        ("client_dns_lookup", "string", "use_all_dns_ips", None, _NET, _BOTH),
        ("api_version", "object", None, None, "one in-process API: nothing to negotiate", _BOTH),
        ("api_version_auto_timeout_ms", "int", 2000, None, _NET, _BOTH),
        ("bootstrap_timeout_ms", "int", 30_000, None, _NET, _BOTH),
        ("connections_max_idle_ms", "int", 540_000, None, _NET, _BOTH),
        ("reconnect_backoff_ms", "int", 50, None, _NET, _BOTH),
        ("reconnect_backoff_max_ms", "int", 30_000, None, _NET, _BOTH),
        ("receive_buffer_bytes", "int", None, None, _NET, _BOTH),
        ("send_buffer_bytes", "int", None, None, _NET, _BOTH),
        ("receive_message_max_bytes", "int", 100_000_000, None, _NET, _BOTH),
        ("socket_options", "object", None, None, _NET, _BOTH),
        ("proxy_url", "string", None, None, _NET, _BOTH),
        ("socks5_proxy", "string", None, None, _NET, _BOTH),
        ("default_api_timeout_ms", "int", 60_000, None, "calls into the broker return at once", _BOTH),
        ("security_protocol", "string", "PLAINTEXT",
         ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), _SEC, _BOTH),
        ("ssl_context", "object", None, None, _SEC, _BOTH),
        ("ssl_check_hostname", "boolean", True, None, _SEC, _BOTH),
        ("ssl_cafile", "string", None, None, _SEC, _BOTH),
        ("ssl_certfile", "string", None, None, _SEC, _BOTH),
        ("ssl_keyfile", "string", None, None, _SEC, _BOTH),
        ("ssl_crlfile", "string", None, None, _SEC, _BOTH),
        ("ssl_password", "object", None, None, _SEC, _BOTH),
        ("ssl_ciphers", "string", None, None, _SEC, _BOTH),
        ("sasl_mechanism", "string", None,
         ("PLAIN", "GSSAPI", "OAUTHBEARER", "SCRAM-SHA-256", "SCRAM-SHA-512"), _SEC, _BOTH),
        ("sasl_plain_username", "string", None, None, _SEC, _BOTH),
        ("sasl_plain_password", "object", None, None, _SEC, _BOTH),
        ("sasl_kerberos_name", "object", None, None, _SEC, _BOTH),
        ("sasl_kerberos_service_name", "string", "kafka", None, _SEC, _BOTH),
        ("sasl_kerberos_domain_name", "string", None, None, _SEC, _BOTH),
        ("sasl_oauth_token_provider", "object", None, None, _SEC, _BOTH),
        ("metric_reporters", "object", (), None, "metrics() returns the counters directly", _BOTH),
        ("metrics_enabled", "boolean", True, None, "metrics() is always available", _BOTH),
        ("metrics_num_samples", "int", 2, None, "metrics() returns plain counters", _BOTH),
        ("metrics_sample_window_ms", "int", 30_000, None, "metrics() returns plain counters", _BOTH),
        ("selector", "object", None, None, _NET, _BOTH),
        ("kafka_client", "object", None, None, _NET, _BOTH),
        ("net", "object", None, None, _NET, _BOTH),
        # -- producer
        ("request_timeout_ms", "int", 30_000, None, "a produce returns at once (no network wait)", _PRODUCER),
        ("max_block_ms", "int", 60_000, None, "send() never blocks on metadata or buffer space", _PRODUCER),
        ("buffer_memory", "int", 33_554_432, None, "send() never blocks on buffer space", _PRODUCER),
        ("bootstrap_topics_filter", "object", None, None, _NET, _PRODUCER),
        # -- consumer
        ("request_timeout_ms", "int", 305_000, None, "a fetch returns at once (no network wait)", _CONSUMER),
        ("fetch_min_bytes", "int", 1, None, "a fetch returns what the log has, at once", _CONSUMER),
        ("fetch_max_wait_ms", "int", 500, None, "a fetch never waits on the broker", _CONSUMER),
        ("client_rack", "string", "", None, "one broker: no follower fetching (KIP-392)", _CONSUMER),
        ("check_crcs", "boolean", True, None, "the log always verifies CRCs", _CONSUMER),
        ("exclude_internal_topics", "boolean", True, None, "subscriptions name topics explicitly", _CONSUMER),
        ("enable_incremental_fetch_sessions", "boolean", True, None, "no fetch sessions in-process",
         _CONSUMER),
        ("default_offset_commit_callback", "object", None, None,
         "commit_async() takes its callback as an argument", _CONSUMER),
        ("max_in_flight_requests_per_connection", "int", 5, None, _NET, _CONSUMER),
        ("metric_group_prefix", "string", "consumer", None, "metrics() returns plain counters", _CONSUMER),
        ("sock_chunk_bytes", "int", 4096, None, _NET, _BOTH),
        ("sock_chunk_buffer_count", "int", 1000, None, _NET, _BOTH),
        ("legacy_iterator", "boolean", False, None, "one iterator implementation", _CONSUMER),
    ])
"""The one list of kafka-python configs that have no meaning in-process: (def, clients).

Each client accepts its entries (``applied=False``), validates their values like any
config and emits one :class:`IgnoredConfigWarning` naming those it was given."""


def unapplied_configs(client: str) -> dict[str, ConfigDef]:
    """The entries of :data:`KAFKA_PYTHON_UNAPPLIED` for ``client`` ("producer" or "consumer")."""
    return {d.name: d for d, clients in KAFKA_PYTHON_UNAPPLIED if client in clients}


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
                close = did_you_mean(name, TOPIC_CONFIGS)
                raise InvalidConfigurationError(
                    f"Unknown topic config name: {name}" + (f" (did you mean {close}?)" if close else
                                                            f" (known: {', '.join(sorted(TOPIC_CONFIGS))})"))
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
