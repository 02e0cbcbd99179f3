"""spark_jobs: Spark batch audits that read kafkasim's segment files directly (no broker).

Modules: ``session`` (the one place a SparkSession is configured), ``logdir`` (listing and
reading a data dir: local, ``file://`` or any pyarrow file system), ``datasource``
(``spark.read.format("kafkasim")``, decoding through ``storage.record_batch`` only),
``common`` (shared read/report/chart/exit-code helpers), ``options`` (CLI options), the
jobs ``ordering``, ``skew``, ``lag``, ``repartition``, ``copartition``, and ``package``
(the ``--py-files`` zip). See docs/spark-audits.md.

Layering: imports ``kafkasim``, ``storage`` and pure functions of ``producer`` and
``coordinator``; never ``broker``.
"""
