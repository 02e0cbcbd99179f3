"""kafkasim.partitioning: where a key becomes a partition (shared pure layer; docs/partitioners.md).

- ``hashing`` — Kafka's murmur2 and the other clients' hashes, scalar and vectorised.
- ``partitioners`` — named partitioners, ``partition_many`` (vectorised), ``explain_keys``.

Pure functions of their inputs; used by the producer, the scenarios and the Spark
audits alike. Imports only the vocabulary.
"""
