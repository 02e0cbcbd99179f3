"""The share consumer's configs: Kafka's names (dotted or underscored), Kafka's defaults.

:data:`SHARE_CONSUMER_CONFIGS` maps each name ``ShareConsumer(broker, group_id=..., **configs)``
accepts to its :class:`kafkasim.config.ConfigDef`, underscored as the rest of the clients'
keyword arguments (``max_poll_records``); :func:`parse_share_configs` also takes Kafka's
dotted spelling (``share.acknowledgement.mode``, as confluent-kafka's and the Java client's
config maps spell them) and validates once, at construction:

- ``share_acknowledgement_mode``: ``implicit`` (default: a poll's records are accepted by the
  next poll or commit) or ``explicit`` (the application acknowledges each record);
- ``max_poll_records`` (500), ``fetch_max_bytes`` (52428800), ``max_poll_interval_ms`` (300000),
  ``retry_backoff_ms`` (100), ``client_rack``, ``key_deserializer``/``value_deserializer``;
- kafkasim's own: ``clock``, ``seed`` (a reproducible member id), ``heartbeat_thread``.

The configs Kafka's ``ShareConsumerConfig`` refuses (``SHARE_GROUP_UNSUPPORTED_CONFIGS``:
where to start and the isolation level are the *group's* configs ``share.auto.offset.reset`` /
``share.isolation.level``, the session and heartbeat are the broker's) raise one
InvalidConfigurationError naming them all, in Kafka's words: ``auto.offset.reset,
enable.auto.commit cannot be set when using a share group.`` An unknown name is an
InvalidConfigurationError with its close matches. Pure data; thread-safe.
"""

from __future__ import annotations

from typing import Any, Mapping

from kafkasim.config import ConfigDef, from_kafka_names, parse_configs
from kafkasim.errors import InvalidConfigurationError

__all__ = ["SHARE_CONSUMER_CONFIGS", "SHARE_GROUP_UNSUPPORTED_CONFIGS", "IMPLICIT", "EXPLICIT",
           "parse_share_configs"]

IMPLICIT, EXPLICIT = "implicit", "explicit"

_D = ConfigDef
SHARE_CONSUMER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    _D("group_id", "string", None, doc="the share group (required)"),
    _D("client_id", "string", "kafkasim-share-consumer"),
    _D("share_acknowledgement_mode", "string", IMPLICIT, choices=(IMPLICIT, EXPLICIT),
       doc="implicit: the next poll/commit accepts the previous poll's records; explicit: acknowledge() each"),
    _D("max_poll_records", "int", 500, min=1, doc="records one poll() returns at most (the ShareFetch's max records)"),
    _D("fetch_max_bytes", "int", 52_428_800, min=1, doc="bytes one ShareFetch may return"),
    _D("max_poll_interval_ms", "int", 300_000, min=1,
       doc="longest gap between polls before the member leaves the group (its records are released)"),
    _D("retry_backoff_ms", "long", 100, min=0, doc="poll()'s wait step without records"),
    _D("client_rack", "string", "", doc="this consumer's rack (Kafka's client.rack), sent in the heartbeat"),
    _D("key_deserializer", "object", None, doc="fn(bytes) -> key"),
    _D("value_deserializer", "object", None, doc="fn(bytes) -> value"),
    # kafkasim-only
    _D("seed", "object", None, doc="seeds the member id (None: a random UUID)"),
    _D("clock", "object", None, doc="kafkasim.clock.Clock; None -> the broker's clock"),
    _D("heartbeat_thread", "boolean", None,
       doc="None: a background heartbeat thread on a real clock, none on a MockClock (call tick())"),
]}

SHARE_GROUP_UNSUPPORTED_CONFIGS = ("auto.offset.reset", "enable.auto.commit", "group.instance.id",
                                   "isolation.level", "partition.assignment.strategy", "interceptor.classes",
                                   "session.timeout.ms", "heartbeat.interval.ms", "group.protocol",
                                   "group.remote.assignor")
"""Kafka's ``ShareConsumerConfig.SHARE_GROUP_UNSUPPORTED_CONFIGS``, in its order."""


def parse_share_configs(given: Mapping[str, Any]) -> dict[str, Any]:
    """Every config's value (given, else default) from ``given`` in either spelling; see the
    module docstring for the errors."""
    bad = [n for n in SHARE_GROUP_UNSUPPORTED_CONFIGS
           if n in given or n.replace(".", "_") in given]
    if bad:
        raise InvalidConfigurationError(f"{', '.join(bad)} cannot be set when using a share group.")
    given = dict(given)
    mode = given.get("share.acknowledgement.mode", given.get("share_acknowledgement_mode"))
    if isinstance(mode, str):          # Kafka's validator is case-insensitive
        key = "share.acknowledgement.mode" if "share.acknowledgement.mode" in given else "share_acknowledgement_mode"
        given[key] = mode.lower()
    cfg, _ = parse_configs("share consumer", SHARE_CONSUMER_CONFIGS,
                           from_kafka_names("share consumer", SHARE_CONSUMER_CONFIGS, given))
    if not cfg["group_id"]:
        raise InvalidConfigurationError(
            f"Invalid value {cfg['group_id']!r} for configuration group.id: a share consumer needs a "
            f"non-empty group id")
    return cfg
