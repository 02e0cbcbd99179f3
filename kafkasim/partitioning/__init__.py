"""kafkasim.partitioning: where a key becomes a partition (shared pure layer; docs/partitioners.md).

- ``hashing`` — Kafka's murmur2 and the other clients' hashes, scalar and vectorised.
- ``base`` — the ``Partitioner`` base class and its null-key (sticky, round-robin) strategies.
- ``partitioners`` — Kafka's own partitioners and the skew fixes, the registry by name,
  ``partition_many`` (vectorised), ``explain_keys``; re-exports every partitioner.
- ``other_clients`` — librdkafka's, Sarama's and the murmur3 comparison partitioners.

Pure functions of their inputs; used by the producer, the scenarios and the Spark
audits alike. Imports only the vocabulary.
"""
