"""kafkasim.producer: kafka-python's ``KafkaProducer`` over the broker (see docs/producer.md).

- ``kafkasim.producer.accumulator`` / ``kafkasim.producer.batch`` — per-partition batches and futures.
- ``kafkasim.producer.sender`` — drains closed batches to the broker: retries, in-flight model, idempotence.
- ``kafkasim.producer.faults`` — fault injection (``LOST_REQUEST`` / ``LOST_RESPONSE``).
- ``kafkasim.producer.config`` — the producer's configs (``ConfigDef``s, kafka-python's names).
- ``kafkasim.producer.producer`` — ``Producer``, kafka-python's ``KafkaProducer`` API over the broker.
- ``kafkasim.producer.lines`` — the console producer's line format.

Where a key becomes a partition is the shared pure layer :mod:`kafkasim.partitioning`
(docs/partitioners.md). Depends on the vocabulary, ``kafkasim.records`` (batch
encoding) and ``kafkasim.partitioning``; talks to the broker only through its public
API (broker/API.md). Exports are lazy: importing this package imports nothing heavy.
"""

from kafkasim._lazy import lazy_exports

_EXPORTS = {
    "Producer": "kafkasim.producer.producer",
    "KafkaProducer": "kafkasim.producer.producer",
    "LOST_REQUEST": "kafkasim.producer.faults",
    "LOST_RESPONSE": "kafkasim.producer.faults",
    "RecordMetadata": "kafkasim.producer.future",
    "FutureRecordMetadata": "kafkasim.producer.future",
    "Future": "kafkasim.producer.future",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
