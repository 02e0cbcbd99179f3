"""Lazy package exports (PEP 562): a package names what it offers without importing it.

``__getattr__, __dir__ = lazy_exports(__name__, {"Broker": "kafkasim.broker.broker"})``
in a package ``__init__`` makes ``from package import Broker`` import the defining
module on first use only, so that importing a package (or a light module inside it,
e.g. ``kafkasim.errors``) never drags in the heavy ones. Vocabulary layer: imports
nothing of ours. Thread-safe: ``importlib`` holds the import lock; the cache write is
a single dict assignment.
"""

from __future__ import annotations

import importlib
import sys
from typing import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable, Callable]:
    """Return ``(__getattr__, __dir__)`` for ``package`` serving ``name -> module`` lazily."""
    exports = dict(exports)

    def __getattr__(name: str):
        try:
            module = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)   # later look-ups skip __getattr__
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
