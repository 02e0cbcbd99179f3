"""House rules for the storage and record-format modules (issue "One package, enforced layers").

- No module is named like a standard-library module: ``storage/inspect.py`` once shadowed
  ``inspect`` for anything that put ``storage/`` on ``sys.path`` (a script run from it).
- No module is over 500 lines (split by job, as Kafka's LogSegment/LogSegments/LocalLog/
  LogLoader are), unless its docstring says why it must be (``over 500 lines because``).
"""

from __future__ import annotations

import ast
import os
import sys

import pytest

import kafkasim.records
import kafkasim.storage

_FOLDERS = [kafkasim.storage.__path__[0], kafkasim.records.__path__[0]]
_MODULES = sorted(os.path.join(folder, name) for folder in _FOLDERS for name in os.listdir(folder)
                  if name.endswith(".py"))


def test_the_rules_see_the_modules():
    names = {os.path.basename(p) for p in _MODULES}
    assert {"log.py", "segment.py", "record_batch.py", "framing.py"} <= names


@pytest.mark.parametrize("path", _MODULES, ids=os.path.basename)
def test_no_module_is_named_like_a_standard_library_module(path):
    assert os.path.basename(path)[:-3] not in sys.stdlib_module_names


@pytest.mark.parametrize("path", _MODULES, ids=os.path.basename)
def test_no_module_is_over_500_lines_without_saying_why(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.count("\n")
    if lines > 500:
        doc = ast.get_docstring(ast.parse(text)) or ""
        assert "over 500 lines because" in doc, f"{path} has {lines} lines"
