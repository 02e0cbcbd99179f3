"""Package the project for ``spark-submit --py-files``: ``python -m kafkasim.spark_jobs.package [OUT.zip]``.

Writes a zip of exactly the modules a job needs on the executors, laid out as the one
``kafkasim`` package (``kafkasim/storage/...``, ``kafkasim/spark_jobs/...``; no tests,
no caches, no C extension: zipimport cannot load one, so executors fall back to the
pure-Python codec), default ``dist/kafkasim-jobs.zip``. Then, e.g.::

    spark-submit --master 'local[*]' \\
        --conf spark.pyspark.python="$(which python)" \\
        --py-files dist/kafkasim-jobs.zip \\
        spark_jobs/skew.py --data-dir ./kafkasim-data --topic orders --json skew.json

Executors still need the third-party dependencies (pyarrow, numpy, pandas, msgpack,
mmh3) in the interpreter ``spark.pyspark.python`` names (or a packed venv, see
docs/spark-audits.md). The files come from the installed packages' own folders, so it
works from an editable install (folders mapped by ``package-dir``) and from a wheel
alike. Pure function of the installed source; thread-safe.
"""

from __future__ import annotations

import importlib
import os
import sys
import zipfile

__all__ = ["build_zip", "PACKAGES", "main"]

# The layers a Spark job stands on (see the import-linter contracts in pyproject.toml):
# vocabulary, record format, partitioning, the offsets-topic schema, replica placement
# (per-broker skew), storage layout, jobs.
PACKAGES = ("kafkasim", "kafkasim.records", "kafkasim.partitioning", "kafkasim.protocol",
            "kafkasim.placement", "kafkasim.storage", "kafkasim.spark_jobs")


def build_zip(out: str = os.path.join("dist", "kafkasim-jobs.zip")) -> str:
    """Write the zip to ``out`` and return its path."""
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name in PACKAGES:
            folder = importlib.import_module(name).__path__[0]
            arcdir = name.replace(".", "/")
            for f in sorted(os.listdir(folder)):   # one level: subpackages are listed by name
                if f.endswith((".py", ".md")) and os.path.isfile(os.path.join(folder, f)):
                    z.write(os.path.join(folder, f), f"{arcdir}/{f}")
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    print(build_zip(*argv[:1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
