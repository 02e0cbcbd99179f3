"""The producer's configs: kafka-python's names, Kafka's defaults, one validation mechanism.

:data:`PRODUCER_CONFIGS` maps each name ``Producer(broker, **configs)`` accepts to its
:class:`kafkasim.config.ConfigDef`; :func:`kafkasim.config.parse_configs` validates a
constructor's configs against it once, at construction (never per record):

- kafka-python's configs the producer acts on, with the defaults of Kafka's Java producer
  (4.x: ``acks=all``, ``linger.ms=5`` per KIP-1030, idempotence on unless other configs
  conflict; a ``transactional_id`` makes it idempotent, and a conflicting config then raises);
- kafkasim's own (``clock``, ``seed``, ``stamp_headers``, fault injection,
  ``background_sender``);
- the producer's entries of :data:`kafkasim.config.KAFKA_PYTHON_UNAPPLIED` (network,
  security, compression, ...): accepted with ``applied=False``; the constructor emits one
  :class:`~kafkasim.config.IgnoredConfigWarning` naming those it was given.

An unknown name raises ``InvalidConfigurationError`` with the close matches
(``Unrecognized producer config 'linger_m' (did you mean 'linger_ms'?)``); a bad value
raises it with Kafka's wording (``Invalid value -1 for configuration linger_ms: Value
must be at least 0``). Pure data; thread-safe.
"""

from __future__ import annotations

from typing import Any

from kafkasim.config import INT_MAX, ConfigDef, unapplied_configs

from kafkasim.producer.faults import FAULT_MODES, LOST_REQUEST

__all__ = ["PRODUCER_CONFIGS", "DEFAULT_CONFIG"]

_D = ConfigDef
PRODUCER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    _D("client_id", "string", None, doc='None -> "producer-<n>", as Kafka'),
    _D("key_serializer", "object", None, doc="fn(key) -> bytes"),
    _D("value_serializer", "object", None, doc="fn(value) -> bytes"),
    _D("acks", "string", "all", choices=("all", "-1", "0", "1"),
       doc="0: fire and forget; 1 and all: wait for the (single) replica"),
    _D("compression_type", "string", None, choices=("gzip", "snappy", "lz4", "zstd"),
       doc="codec of the batches sent (kafka-python's names; None: uncompressed)"),
    _D("batch_size", "int", 16384, min=0, doc="bytes per partition batch before it is closed"),
    _D("linger_ms", "long", 5, min=0, doc="how long a batch waits for more records (injected clock)"),
    _D("max_request_size", "int", 1_048_576, min=0, doc="largest record (with batch overhead) accepted"),
    _D("retries", "int", INT_MAX, min=0, doc="retries of a batch after a retriable error"),
    _D("enable_idempotence", "boolean", None,
       doc="None: Kafka's default (on) unless acks/retries/max-in-flight conflict"),
    _D("max_in_flight_requests_per_connection", "int", 5, min=1,
       doc="batches of a partition a failed one may be overtaken by (the reorder lab)"),
    _D("partitioner", "object", None,
       doc="a name, a Partitioner, or a kafka-python callable; None -> murmur2"),
    _D("retry_backoff_ms", "long", 100, min=0,
       doc="counted against delivery_timeout_ms per attempt; slept on the clock by flush(timeout)"),
    _D("delivery_timeout_ms", "int", 120_000, min=0, doc="bound on a batch's attempts x retry_backoff_ms"),
    _D("metadata_max_age_ms", "long", 300_000, min=0, doc="how long a topic's partition count is cached"),
    _D("allow_auto_create_topics", "boolean", True,
       doc="a send to a missing topic creates it when the broker's auto.create.topics.enable allows"),
    _D("transactional_id", "string", None,
       doc="None: no transactions; else init_transactions() and the transaction methods (implies idempotence)"),
    _D("transaction_timeout_ms", "int", 60_000, min=1,
       doc="the coordinator aborts a transaction open longer than this (transaction.timeout.ms)"),
    # kafkasim-only
    _D("clock", "object", None, doc="kafkasim.clock.Clock; None -> the broker's clock"),
    _D("seed", "object", 0, doc="seeds the partitioner's RNG and fault injection"),
    _D("stamp_headers", "boolean", False, doc="add kafkasim.producer / kafkasim.seq headers"),
    _D("fault_rate", "double", 0.0, min=0, max=1, doc="probability that a batch's FIRST attempt fails"),
    _D("fault_mode", "string", LOST_REQUEST, choices=FAULT_MODES, doc="what an injected fault loses"),
    _D("fault_injector", "object", None,
       doc="fn(tp, batch_no, attempt) -> None | LOST_REQUEST | LOST_RESPONSE"),
    _D("background_sender", "boolean", None, doc="None -> a linger thread only for a non-Mock clock"),
]}
PRODUCER_CONFIGS.update(unapplied_configs("producer"))

DEFAULT_CONFIG: dict[str, Any] = {name: d.default for name, d in PRODUCER_CONFIGS.items()}
"""Every config's default (kafka-python's ``KafkaProducer.DEFAULT_CONFIG`` counterpart)."""
