"""kafkasim.spark_jobs: Spark batch audits that read kafkasim's segment files directly (no broker).

Modules: ``session`` (the one place a SparkSession is configured), ``logdir`` (listing and
reading a data dir: local, ``file://`` or any pyarrow file system), ``datasource``
(``spark.read.format("kafkasim")``, decoding through :mod:`kafkasim.records` only),
``splits`` (input planning: packing small segments, cutting big ones at index-verified
batch boundaries), ``common`` (shared read/report/chart/exit-code helpers), ``options``
(CLI options), ``progress`` (phases on the terminal), the jobs ``ordering`` (with
``causes``), ``skew``, ``lag``, ``repartition``, ``copartition``, ``transactions`` (over
``batch_headers``: the data source's one-row-per-batch mode), ``audit_all`` (ordering, skew
and lag from one scan, and transactions), and ``package`` (the ``--py-files`` zip). See
docs/spark-audits.md.

Layering (a ``forbidden`` contract in pyproject.toml): imports only the vocabulary, the
record format (``kafkasim.records``), partitioning (``kafkasim.partitioning``), the
offsets-topic and transaction-log schemas (``kafkasim.protocol.offsets``,
``kafkasim.protocol.txn_log``) and ``kafkasim.storage.layout``;
never the broker, coordinator, producer, consumer or the storage engine.
"""
