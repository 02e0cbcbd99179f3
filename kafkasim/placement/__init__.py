"""kafkasim.placement: which brokers hold a partition's replicas (shared pure layer).

- ``admin_utils`` — Kafka's ``AdminUtils.assignReplicasToBrokers`` (rack-unaware and
  rack-aware, with ``fixed_start_index`` / ``start_partition_id`` and the increasing
  follower shift), the placement Kafka used before KRaft and that the course teaches.
- ``striped`` — the KRaft controller's ``StripedReplicaPlacer`` (Kafka ≥ 3), with
  ``java_random`` (bit-exact ``java.util.Random`` and Kafka's test ``MockRandom``).
- ``reassign`` — the fewest-moves balanced reassignment planner and its lower bound;
  ``reassign_json`` — Kafka's reassignment JSON; ``mincostflow`` — its flow engine.
- ``fixed_partitions`` — keys moved by adding nodes: Fixed Partitions vs hash mod N.
- ``skew`` — replicas, leaders and bytes per broker, max/min ratios flagged above 1.3.

Pure functions of their inputs plus an injected random source where placement is
random; imports only the vocabulary (errors, types).
"""
