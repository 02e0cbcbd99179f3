"""kafkasim.placement: which brokers hold a partition's replicas (shared pure layer).

- ``admin_utils`` — Kafka's ``AdminUtils.assignReplicasToBrokers`` (rack-unaware and
  rack-aware, with ``fixed_start_index`` / ``start_partition_id`` and the increasing
  follower shift), the placement Kafka used before KRaft and that the course teaches.

Pure functions of their inputs plus an injected ``random.Random`` for the random start;
imports only the vocabulary.
"""
