"""producer: where a key becomes a partition (see docs/producer.md, docs/partitioners.md).

- ``producer.hashing`` — Kafka's murmur2 and the other clients' hashes, scalar and vectorised.
- ``producer.partitioners`` — named partitioners, ``partition_many`` (vectorised).
- ``producer.accumulator`` / ``producer.batch`` — per-partition batches and futures.
- ``producer.producer`` — ``Producer``, kafka-python's ``KafkaProducer`` API over the broker.

Depends on ``kafkasim`` (vocabulary) and ``storage.record_batch`` (batch encoding) and
talks to the broker only through its public API (broker/API.md).
"""

from producer.batch import FutureRecordMetadata, RecordMetadata
from producer.hashing import murmur2, to_positive
from producer.partitioners import KEY_PURE, PARTITIONERS, Partitioner, partition_many
from producer.producer import LOST_REQUEST, LOST_RESPONSE, Producer

__all__ = [
    "Producer", "RecordMetadata", "FutureRecordMetadata", "murmur2", "to_positive",
    "partition_many", "Partitioner", "PARTITIONERS", "KEY_PURE", "LOST_REQUEST", "LOST_RESPONSE",
]
