"""Package the project for ``spark-submit --py-files``: ``python -m spark_jobs.package [OUT.zip]``.

Writes a zip of the importable packages a job needs on the executors (``kafkasim``,
``storage``, ``producer``, ``coordinator``, ``spark_jobs``; no tests, no caches), default
``dist/kafkasim-jobs.zip``. Then, e.g.::

    spark-submit --master 'local[*]' \\
        --conf spark.pyspark.python="$(which python)" \\
        --py-files dist/kafkasim-jobs.zip \\
        spark_jobs/skew.py --data-dir ./kafkasim-data --topic orders --json skew.json

Executors still need the third-party dependencies (pyarrow, numpy, pandas, msgpack,
mmh3) in the interpreter ``spark.pyspark.python`` names (or a packed venv, see
docs/spark-audits.md). Pure function of the source tree; thread-safe.
"""

from __future__ import annotations

import os
import sys
import zipfile

__all__ = ["build_zip", "PACKAGES", "main"]

PACKAGES = ("kafkasim", "storage", "producer", "coordinator", "spark_jobs")


def build_zip(out: str = os.path.join("dist", "kafkasim-jobs.zip")) -> str:
    """Write the zip to ``out`` and return its path."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for pkg in PACKAGES:
            for dirpath, dirnames, filenames in os.walk(os.path.join(root, pkg)):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for f in sorted(filenames):
                    if f.endswith((".py", ".md")):
                        full = os.path.join(dirpath, f)
                        z.write(full, os.path.relpath(full, root))
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    print(build_zip(*argv[:1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
