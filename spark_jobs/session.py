"""How kafkasim starts Spark: one place that sets the driver's Python for workers.

``build_session()`` returns a SparkSession whose workers run ``sys.executable``
(``spark.pyspark.python``), with the kafkasim data source registered.
Not thread-safe to call concurrently (SparkSession.builder is global).
"""

from __future__ import annotations

import os
import sys
from typing import Mapping, Optional

__all__ = ["build_session"]


def build_session(app_name: str = "kafkasim", master: Optional[str] = "local[*]",
                  extra_conf: Optional[Mapping[str, str]] = None):
    """Build (or get) a SparkSession configured for kafkasim jobs.

    ``master=None`` leaves the master to ``spark-submit``.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    builder = (builder.config("spark.pyspark.python", sys.executable)
               .config("spark.pyspark.driver.python", sys.executable)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    for k, v in (extra_conf or {}).items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        from kafkasim.spark_jobs.datasource import register
    except ImportError:  # the data source lands with the Spark issue
        return session
    register(session)
    return session
