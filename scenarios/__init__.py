"""Scenario scripts (teaching labs) and their registry.

A scenario is a small module ``scenarios/<name>.py`` built only on the public APIs
(``kafkasim.broker.Broker``, ``kafkasim.producer.Producer`` and its partitioners, ``kafkasim.consumer.Consumer``,
``kafkasim.assignors``). Its module docstring is the lab text. It defines:

- ``PARAMS``: ``{name: default}`` — the tunable parameters and their types;
- ``run(data_dir, *, seed=42, echo=print, **params) -> dict``: runs on a
  :class:`kafkasim.clock.MockClock` with randomness from ``random.Random(seed)``,
  prints the lab's tables through ``echo`` and returns a JSON-able result.

Registry::

    >>> from scenarios import SCENARIOS, run_scenario
    >>> sorted(SCENARIOS)[:2]
    ['add_partitions', 'consumer_crash']
    >>> result = run_scenario("mixed_clients", "/tmp/lab", echo=lambda s: None)  # doctest: +SKIP

Invariants: the same name, seed and params give the same echoed text and the same
result dict (no wall-clock time, no salted ``hash()``, no unseeded randomness).
``run_scenario`` wipes ``data_dir`` first, but only a dir that is empty or was made by a
scenario (see ``kafkasim.scenarios._common.MARKER``). Thread-safety: run one scenario per data
dir at a time (the broker holds a lock on it).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable, Iterable

from kafkasim.errors import InvalidArgumentError

__all__ = ["SCENARIOS", "scenario_module", "list_scenarios", "parse_params", "run_scenario"]

SCENARIOS: dict[str, str] = {
    "hot_keys": "Zipf-skewed keys on murmur2 partitions, then the hot-keys and composite-key fixes",
    "group_scaling": "6 partitions, 1/2/3/6/10 consumers (range, cooperative-sticky): owners and idle members",
    "eager_vs_cooperative": "scale 3→4 consumers: revoked partitions, paused partition-seconds, rounds",
    "add_partitions": "6→8 partitions: which keys move, and how per-key order breaks across the move",
    "mixed_clients": "Java (murmur2) and librdkafka (consistent_random) producers split the same keys",
    "retry_reorder": "retries with 5 in flight reorder and duplicate records unless idempotent",
    "consumer_crash": "a member stops heartbeating: eviction, re-delivery, the zombie's commit fails",
}
"""Scenario name → one-line description, in teaching order."""


def scenario_module(name: str) -> ModuleType:
    """The module of scenario ``name``; InvalidArgumentError naming it if unknown."""
    if name not in SCENARIOS:
        raise InvalidArgumentError(
            f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    return importlib.import_module(f"kafkasim.scenarios.{name}")


def list_scenarios() -> list[dict]:
    """``[{"name", "description", "params": {name: default}}]`` in teaching order."""
    return [{"name": n, "description": d, "params": dict(scenario_module(n).PARAMS)}
            for n, d in SCENARIOS.items()]


def _coerce(scenario: str, key: str, raw: Any, default: Any) -> Any:
    def bad(why: str) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"scenario {scenario}: bad value {raw!r} for param {key!r}: {why}")
    if not isinstance(raw, str):
        return raw
    if isinstance(default, bool):
        if raw.lower() in ("true", "1", "yes"):
            return True
        if raw.lower() in ("false", "0", "no"):
            return False
        raise bad("expected true or false")
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise bad("expected an integer") from None
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError:
            raise bad("expected a number") from None
    if isinstance(default, (list, tuple)):
        items = [s.strip() for s in raw.split(",") if s.strip()]
        if default and isinstance(default[0], int):
            try:
                return [int(s) for s in items]
            except ValueError:
                raise bad("expected comma-separated integers") from None
        return items
    return raw


def parse_params(name: str, pairs: Iterable[str]) -> dict[str, Any]:
    """``["k=v", ...]`` → typed params of scenario ``name`` (types from its ``PARAMS``)."""
    module = scenario_module(name)
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise InvalidArgumentError(f"scenario {name}: param {pair!r} is not of the form k=v")
        k, v = pair.split("=", 1)
        k = k.strip()
        if k not in module.PARAMS:
            raise InvalidArgumentError(
                f"scenario {name} has no param {k!r}; known: {', '.join(module.PARAMS)}")
        out[k] = _coerce(name, k, v, module.PARAMS[k])
    return out


def run_scenario(name: str, data_dir: str, *, seed: int = 42,
                 echo: Callable[[str], Any] = print, **params: Any) -> dict:
    """Run scenario ``name`` in ``data_dir`` (wiped first) and return its result dict."""
    module = scenario_module(name)
    unknown = sorted(set(params) - set(module.PARAMS))
    if unknown:
        raise InvalidArgumentError(
            f"scenario {name} has no param {unknown[0]!r}; known: {', '.join(module.PARAMS)}")
    typed = {k: _coerce(name, k, v, module.PARAMS[k]) for k, v in params.items()}
    return module.run(data_dir, seed=seed, echo=echo, **typed)
