"""The one table style of every command (rich), and Kafka's ``-`` for a missing value.

:func:`table` lays out columns with rich and returns plain text: no borders, a header
row, columns separated by two spaces, numbers right-aligned, ``None`` shown as ``-``
(Kafka's ``MISSING_COLUMN_VALUE``). Text, not terminal codes, so output piped to a file
or to ``grep`` reads the same as on screen. Stateless; thread-safe.
"""

from __future__ import annotations

import io
from typing import Any, Iterable, Optional, Sequence

__all__ = ["table", "cell", "MISSING"]

MISSING = "-"


def cell(value: Any) -> str:
    """A value as table text: ``None`` → ``-``."""
    return MISSING if value is None else str(value)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: Optional[str] = None) -> str:
    """Render ``rows`` under ``columns`` in the shared style; returns the text (no trailing newline).
    rich is imported here, not with the module: every command's module imports this one, and
    most commands (an audit on a warm Spark, ``produce``) never print a table."""
    from rich.console import Console
    from rich.table import Table

    rows = [[cell(v) for v in row] for row in rows]
    numeric = [any(r[i] != MISSING for r in rows)
               and all(r[i].lstrip("-").isdigit() or r[i] == MISSING for r in rows)
               for i in range(len(columns))]
    t = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 2, 0, 0),
              show_header=True, title=title, title_justify="left")
    for name, is_num in zip(columns, numeric):
        t.add_column(name, justify="right" if is_num else "left", no_wrap=True)
    for r in rows:
        t.add_row(*r)
    out = io.StringIO()
    Console(file=out, width=100_000, color_system=None, highlight=False, emoji=False,
            markup=False, soft_wrap=False).print(t)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").split("\n"))
