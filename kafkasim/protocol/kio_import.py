"""Import kio without its optional test hooks: importing this module first keeps hypothesis out.

kio's phantom types (``kio.static._phantom``) import ``hypothesis.strategies`` whenever
hypothesis is installed, and each type then registers a strategy; building those
strategies writes hypothesis's cache, a ``.hypothesis/`` folder, into the current working
directory. hypothesis is a test dependency (``.[dev]``), yet nothing of the product may
load it, and nothing may be written outside the data dir. So this module imports
``kio.static._phantom`` once with hypothesis hidden: kio then sees "hypothesis is not
installed" and never tries again in this process. When hypothesis is already loaded
(the test suite, which wants kio's strategies), nothing is hidden.

Every kafkasim module that imports kio imports this module before its first kio import
(``tests/cli/test_cli_hygiene.py`` checks that the product never loads hypothesis).
Importing it is cheap (kio's package and typing only). Thread-safety: runs once, under
the import lock.
"""

from __future__ import annotations

import importlib
import sys

__all__: list[str] = []


def _import_kio_without_hypothesis() -> None:
    if "kio.static._phantom" in sys.modules or "hypothesis" in sys.modules:
        return
    sys.modules["hypothesis"] = None        # type: ignore[assignment]  # "import hypothesis" raises ImportError
    try:
        importlib.import_module("kio.static._phantom")
    finally:
        del sys.modules["hypothesis"]


_import_kio_without_hypothesis()
