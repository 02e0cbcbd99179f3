"""``kafkasim scenario show`` prints the lab text as plain text, not reStructuredText markup."""

from __future__ import annotations

import re

import pytest

from kafkasim.cli import main
from kafkasim.scenarios import SCENARIOS, plain_text


def test_inline_markup_becomes_plain_text():
    assert plain_text("a ``literal``, **strong**, *emphasis*, :class:`~kafkasim.broker.Broker`, "
                      ":func:`kafkasim.x.f` and ``two\nlines``; 1/r**s stays") == \
        "a literal, strong, emphasis, Broker, kafkasim.x.f and two\nlines; 1/r**s stays"


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_show_prints_no_rst_markup(name, capsys):
    assert main(["scenario", "show", name]) == 0
    out = capsys.readouterr().out
    assert "``" not in out
    assert not re.search(r":[a-z]+:`", out)
    assert not re.search(r"(?<![\w*])\*\*\w", out)
