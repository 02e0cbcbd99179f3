"""An audit's small final results in one Spark action: :func:`collect_together`.

Pure DataFrame plumbing (no I/O of its own); thread-safe.
"""

from __future__ import annotations

__all__ = ["collect_together"]


def collect_together(parts: dict) -> dict[str, list]:
    """Several small results in **one** Spark action: ``{name: (df, order)}`` →
    ``{name: [Row, ...]}``, each list what ``df.orderBy(*order).collect()`` returns
    (``order``: column names, or ``(name, False)`` for descending, Spark's null ordering).

    The parts are tagged, their columns prefixed (``<i>__<column>``: no clash of names or
    types), unioned by name and collected once, then split back, so an audit's final
    figures cost one job submission instead of one per figure: on a warm Spark Connect
    server each action is a round trip plus planning, most of a small audit's time. Rows
    come back as ``pyspark.sql.Row`` with the part's own column names, in its order."""
    from functools import reduce
    from pyspark.sql import Row
    from pyspark.sql import functions as F
    names = list(parts)
    tagged, sort = [], [F.col("_part")]
    for i, name in enumerate(names):
        df, order = parts[name]
        tagged.append(df.select(F.lit(i).alias("_part"), *[F.col(c).alias(f"{i}__{c}") for c in df.columns]))
        for o in order:
            col, asc = (o, True) if isinstance(o, str) else o
            sort.append(F.col(f"{i}__{col}").asc() if asc else F.col(f"{i}__{col}").desc())
    union = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), tagged)
    out: dict[str, list] = {name: [] for name in names}
    columns = {i: parts[name][0].columns for i, name in enumerate(names)}
    for r in union.orderBy(*sort).collect():
        i = r["_part"]
        cols = columns[i]
        out[names[i]].append(Row(**{c: r[f"{i}__{c}"] for c in cols}))
    return out
