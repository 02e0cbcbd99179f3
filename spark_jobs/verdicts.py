"""Checks and verdicts of the audit reports.

Every report carries ``checks`` (``{"name", "limit", "value", "passed"}``, one per limit the
job applies) and a ``verdict``: :data:`VERDICT_OK`, :data:`VERDICT_FAILED` (a check failed),
or :data:`VERDICT_NOT_ENOUGH_DATA` (the skew and ordering audits: fewer than
``--min-records-per-partition`` records per partition on average, and nothing that is a
fact at any sample size — corrupt batches, or an ordering violation — was found).

Pure functions; thread-safe.
"""

from __future__ import annotations

from typing import Optional, Sequence

__all__ = ["VERDICT_OK", "VERDICT_FAILED", "VERDICT_NOT_ENOUGH_DATA", "MIN_RECORDS_PER_PARTITION", "check",
           "verdict_of", "checks_text"]

VERDICT_OK = "ok"
VERDICT_FAILED = "failed"
VERDICT_NOT_ENOUGH_DATA = "not enough data"
MIN_RECORDS_PER_PARTITION = 20
"""Default sample floor of the skew and ordering audits (``--min-records-per-partition``):
below 20 records per partition on average one record moves a partition's share by 5 % or
more, so max/avg and a clean ordering result say little."""


def check(name: str, limit, value, passed: Optional[bool] = None) -> dict:
    """One check of a report: ``passed`` defaults to ``value <= limit`` (a null value passes)."""
    if passed is None:
        passed = value is None or limit is None or value <= limit
    return {"name": name, "limit": limit, "value": value, "passed": bool(passed)}


def verdict_of(checks: Sequence[dict], *, records: Optional[int] = None, partitions: Optional[int] = None,
               min_per_partition: Optional[int] = None, facts: int = 0) -> dict:
    """``{"verdict", "sample"}``. ``facts``: findings that stand at any sample size (corrupt
    batches, ordering violations): with any, the sample floor does not apply. Otherwise,
    when ``records / partitions < min_per_partition`` the verdict is ``not enough data``."""
    sample = None
    if min_per_partition is not None and records is not None:
        n = max(int(partitions or 0), 1)
        per = records / n
        sample = {"records": int(records), "partitions": n, "records_per_partition": per,
                  "min_records_per_partition": int(min_per_partition), "enough": per >= min_per_partition}
    failed = any(not c["passed"] for c in checks)
    if sample is not None and not sample["enough"] and not facts:
        v = VERDICT_NOT_ENOUGH_DATA
    else:
        v = VERDICT_FAILED if failed else VERDICT_OK
    return {"verdict": v, "sample": sample}


def _fmt(x) -> str:
    if isinstance(x, float):
        return f"{x:.3f}"
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:,}"
    return str(x)


def checks_text(rep: dict) -> list[str]:
    """Text lines: each failed check (``FAILED max/avg 2.000 > limit 1.3``) and the verdict."""
    lines = []
    for c in rep.get("checks", ()):
        if not c["passed"]:
            lines.append(f"  FAILED {c['name']} {_fmt(c['value'])} > limit {c['limit']:g}"
                         if isinstance(c["limit"], (int, float)) else f"  FAILED {c['name']} {_fmt(c['value'])}")
    s = rep.get("sample")
    if rep.get("verdict") == VERDICT_NOT_ENOUGH_DATA and s:
        lines.append(f"  NOT ENOUGH DATA: {s['records']:,} records over {s['partitions']} partition(s) = "
                     f"{s['records_per_partition']:.1f} per partition < {s['min_records_per_partition']} "
                     f"(--min-records-per-partition); the failed checks above are not a verdict")
    return lines
