"""Progress by phase of an audit, on the terminal: ``with progress.phase("skew"): ...``.

On an interactive stderr a rich spinner names the running phase, and each finished phase
leaves one line (``✓ skew  3.1 s``). When stderr is not a terminal (a pipe, a file, a
test, ``spark-submit`` logs) nothing is printed: the report on stdout, and ``--json``
output, never carry progress. :func:`Progress.disabled` gives a silent one.

One thread drives the phases; :meth:`Progress.timed` may be called from several threads
at once (``audit all`` runs its three audits in parallel inside one phase).
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Optional

__all__ = ["Progress"]


class Progress:
    """Phases of one audit run (see the module docstring)."""

    def __init__(self, stream=None, *, enabled: Optional[bool] = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self._stream, "isatty", lambda: False)())
        self.enabled = enabled
        self._console = None
        self.timings: list[tuple[str, float]] = []
        self._lock = threading.Lock()

    @classmethod
    def disabled(cls) -> "Progress":
        return cls(enabled=False)

    def _rich(self):
        if self._console is None:
            from rich.console import Console
            self._console = Console(file=self._stream, highlight=False, emoji=False)
        return self._console

    @contextmanager
    def phase(self, name: str, detail: str = "") -> Iterator[None]:
        """Run the body as phase ``name``; its wall time is kept in :attr:`timings`."""
        t0 = time.perf_counter()
        label = f"{name}: {detail}" if detail else name
        if not self.enabled:
            yield
            self.timings.append((name, time.perf_counter() - t0))
            return
        console = self._rich()
        with console.status(f"[bold]{label}[/bold] ...", spinner="dots"):
            yield
        took = time.perf_counter() - t0
        self.timings.append((name, took))
        console.print(f"[green]✓[/green] {label}  [dim]{took:.1f} s[/dim]")

    def timed(self, name: str, fn):
        """``fn()``, its wall time kept in :attr:`timings` as ``name`` (thread-safe; prints
        nothing: the enclosing phase does)."""
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            with self._lock:
                self.timings.append((name, time.perf_counter() - t0))
