"""The teaching labs (scenario scripts): the lab contract and the registry.

The lab contract
----------------
A lab is a small module ``scenarios/<module>.py`` built only on the public APIs
(``kafkasim.broker.Broker``, ``kafkasim.producer.Producer`` and its partitioners,
``kafkasim.consumer.Consumer``, ``kafkasim.assignors``, ``kafkasim.server.metrics`` ...).
It defines:

- its **module docstring**: the lab text a student reads (``kafkasim scenario show NAME``),
  with the sections "What you will see" and "Why", and the Kafka references;
- ``PARAMS``: ``{name: default}``, the tunable parameters (their defaults give their types);
- ``CLAIM``: one sentence, the point of the lab, that its run must show;
- ``run(data_dir, *, seed=42, echo=print, plot_dir=None, **params) -> dict`` which

  1. runs on a :class:`kafkasim.clock.MockClock` with randomness from ``random.Random(seed)``;
  2. prints plain sentences with units through ``echo`` (no Python reprs: one notation for
     assignments, ``c0 owns 0, 1``; tables through ``kafkasim.scenarios._common.table``), and
     explains any result that runs against the claim (e.g. a trial where it did not hold);
  3. when ``plot_dir`` is given, writes at least one PNG that carries the claim into it
     (``kafkasim.scenarios._figures``) and returns their paths under ``"pictures"``
     (``[]`` without a ``plot_dir``);
  4. returns a JSON-able dict holding the data behind every picture, and ``"claim"``;
  5. asserts the claim: :func:`kafkasim.scenarios._common.check_claim` raises
     :class:`kafkasim.errors.ClaimFailedError` naming the claim and the evidence if the run
     does not show it (e.g. after a parameter change that removes the effect).

  and ends with ``if __name__ == "__main__": raise SystemExit(main_for("<name>"))``.

The registry
------------
:data:`LABS` lists every lab with its number in the course, its dashed name, its module and
the old names kept as aliases. Look-ups accept a name, an alias or the module name::

    >>> from kafkasim.scenarios import SCENARIOS, resolve
    >>> resolve("hot_keys")
    'hot-partition'
    >>> result = run_scenario("mixed-clients", "/tmp/lab", plot_dir="/tmp/pics")  # doctest: +SKIP

Invariants: the same name, seed and params give the same echoed text, the same result dict
and the same PNG bytes (no wall-clock time, no salted ``hash()``, no unseeded randomness).
The exception is a lab that drives a real client through ``kafkasim serve``
(``retries-and-duplicates``): it runs on real time, says so in its text, and only its claim
is the same run after run.
``run_scenario`` wipes ``data_dir`` first, but only a dir that is empty or was made by a lab
(see ``kafkasim.scenarios._common.MARKER``). Importing this package imports no lab module.
Thread-safety: run one lab per data dir at a time (the broker holds a lock on it).
"""

from __future__ import annotations

import argparse
import importlib
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Iterable, Optional

from kafkasim.errors import InvalidArgumentError

__all__ = ["Lab", "LABS", "SCENARIOS", "ALIASES", "resolve", "scenario_module", "lab_text",
           "list_scenarios", "parse_params", "run_scenario", "add_run_options"]


@dataclass(frozen=True)
class Lab:
    """One registry entry: course ``number``, dashed ``name``, ``module`` file, old names."""

    number: int
    name: str
    module: str
    description: str
    aliases: tuple[str, ...] = ()


LABS: list[Lab] = [
    Lab(2, "hot-partition", "hot_keys",
        "Zipf merchants on murmur2: one hot partition, three fixes side by side, the skew alert",
        ("hot_keys",)),
    Lab(3, "partition-count-change", "add_partitions",
        "32 → 64 partitions mid-stream: keys move, a per-key total goes wrong; mirroring instead",
        ("add_partitions",)),
    Lab(4, "consumer-scaling", "group_scaling",
        "6 partitions, 1/2/3/10 consumers: owners, idle members, throughput and lag",
        ("group_scaling",)),
    Lab(5, "rebalance-protocols", "eager_vs_cooperative",
        "eager vs cooperative-sticky vs the consumer protocol (KIP-848) on a join, a crash and a "
        "rolling restart: paused partition-seconds",
        ("eager_vs_cooperative",)),
    Lab(7, "mixed-clients", "mixed_clients",
        "Java (murmur2) and librdkafka (consistent_random) producers split the same keys",
        ("mixed_clients",)),
    Lab(14, "retry-reorder", "retry_reorder",
        "retries with 5 in flight reorder and duplicate records unless idempotent; last step: transactional",
        ("retry_reorder",)),
    Lab(15, "retries-and-duplicates", "retries_duplicates",
        "a real confluent-kafka producer through kafkasim serve: injected drops duplicate, errors with 5 in "
        "flight reorder, idempotence neither"),
    Lab(16, "consumer-crash", "consumer_crash",
        "a member stops heartbeating: eviction, re-delivery, the zombie's commit fails",
        ("consumer_crash",)),
]
"""Every lab (teaching order is by ``number``; see :data:`SCENARIOS`)."""

# ---- KIP-848 (wt-k848labs): broker-side-assignment (6), after rebalance-protocols
LABS += [
    Lab(6, "broker-side-assignment", "broker_side_assignment",
        "KIP-848's server assignors: uniform vs range on three topics; a regex member gets a new "
        "topic by heartbeat"),
]

# ---- new labs (wt-newlabs): one block, numbered in the course order
LABS += [
    Lab(1, "partitions-basics", "partitions_basics",
        "same key, same partition (murmur2); per-key order holds, no global order across partitions"),
    Lab(8, "assignor-comparison", "assignor_comparison",
        "uneven subscriptions: roundrobin vs sticky vs range on real groups, moves when C0 leaves"),
    Lab(11, "crash-recovery", "crash_recovery",
        "a writer killed with SIGKILL, a torn tail in its segment: the tail is cut, written records survive"),
    Lab(12, "null-key-batching", "null_key_batching",
        "keyless records: per-record round robin vs sticky, batch sizes and short-window imbalance"),
    Lab(13, "co-partitioning", "co_partitioning",
        "a per-partition join: every match with equal partition counts, most missed without; "
        "repartitioning fixes it"),
]

# ---- cluster labs (wt-clusterlabs): rack-aware-placement (8), add-broker-reassign (9)
LABS += [
    Lab(9, "rack-aware-placement", "rack_aware_placement",
        "6 brokers in 3 racks, RF 3: a whole rack fails and acks=all still succeeds; rack-unaware does not"),
    Lab(10, "add-broker-reassign", "add_broker_reassign",
        "a 4th broker sits idle until a reassignment: the plan, bytes moved, balance; fixed partitions vs mod-N"),
]

# ---- transactions (wt-txnlab): exactly-once (17)
LABS += [
    Lab(17, "exactly-once", "exactly_once",
        "consume-transform-produce crashes and restarts: at-least-once and idempotent totals count "
        "payments twice, transactions with read_committed are exact"),
]

# ---- share groups (wt-slab): share-groups (18)
LABS += [
    Lab(18, "share-groups", "share_groups",
        "KIP-932's share groups: 6 then 12 consumers on 6 partitions scale where a consumer group "
        "idles; per-key order breaks; a poison record is archived at the delivery count limit"),
]


def _index() -> tuple[dict[str, Lab], dict[str, str]]:
    by_name: dict[str, Lab] = {}
    aliases: dict[str, str] = {}
    for lab in sorted(LABS, key=lambda lab: lab.number):
        if lab.name in by_name:
            raise InvalidArgumentError(f"lab {lab.name!r} is registered twice")
        by_name[lab.name] = lab
        for alias in (*lab.aliases, lab.module):
            if alias != lab.name:
                aliases[alias] = lab.name
    return by_name, aliases


_BY_NAME, ALIASES = _index()

SCENARIOS: dict[str, str] = {lab.name: lab.description for lab in _BY_NAME.values()}
"""Lab name → one-line description, in teaching order."""


def resolve(name: str) -> str:
    """The lab's name for ``name`` (a name, an alias or a module name); InvalidArgumentError if unknown."""
    if name in _BY_NAME:
        return name
    if name in ALIASES:
        return ALIASES[name]
    raise InvalidArgumentError(f"unknown lab {name!r}; known: {', '.join(_BY_NAME)}")


def scenario_module(name: str) -> ModuleType:
    """The module of lab ``name`` (or alias); InvalidArgumentError naming it if unknown."""
    return importlib.import_module(f"kafkasim.scenarios.{_BY_NAME[resolve(name)].module}")


def lab_text(name: str) -> str:
    """The lab text of ``name`` as plain text (:func:`plain_text` of its module docstring),
    plus its claim and parameters."""
    module = scenario_module(name)
    params = "\n".join(f"  {k} = {_show(v)}" for k, v in module.PARAMS.items())
    return (f"{plain_text(module.__doc__.strip())}\n\nClaim\n-----\n{plain_text(module.CLAIM)}\n\n"
            f"Parameters (--param k=v)\n------------------------\n{params}")


_ROLE = re.compile(r":[a-z:]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")      # :class:`~a.b.C` → C's path, :ref:`t <x>` → t
_LITERAL = re.compile(r"``((?:(?!``).)+?)``", re.DOTALL)          # may run over a line break
_STRONG = re.compile(r"(?<![\w*])\*\*(\S(?:(?!\*\*).)*?)\*\*(?![\w*])", re.DOTALL)
_EMPHASIS = re.compile(r"(?<![\w*])\*([^\s*](?:[^*])*?)\*(?![\w*])", re.DOTALL)
_LINK = re.compile(r"`([^`<]+?)\s*<[^>]+>`_+")


def plain_text(rst: str) -> str:
    """reStructuredText inline markup as a terminal shows it well: ``literal``, **strong**,
    *emphasis*, roles and links become their plain text (a role's target keeps its last
    dotted part with ``~``, as Sphinx shows it); headings (a title over a line of ``-``)
    and everything else stay as they are."""
    def role(m: re.Match) -> str:
        text = m.group(1)
        return text.rsplit(".", 1)[-1] if m.group(0).split("`", 1)[1].startswith("~") else text
    out = _ROLE.sub(role, rst)
    out = _LINK.sub(r"\1", out)
    out = _LITERAL.sub(r"\1", out)
    out = _STRONG.sub(r"\1", out)
    return _EMPHASIS.sub(r"\1", out)


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def list_scenarios() -> list[dict]:
    """``[{"number", "name", "aliases", "description", "claim", "params"}]`` in teaching order."""
    out = []
    for lab in _BY_NAME.values():
        module = scenario_module(lab.name)
        out.append({"number": lab.number, "name": lab.name,
                    "aliases": [a for a, n in ALIASES.items() if n == lab.name],
                    "description": lab.description, "claim": module.CLAIM,
                    "params": dict(module.PARAMS)})
    return out


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
    """``["k=v", ...]`` → typed params of lab ``name`` (types from its ``PARAMS``)."""
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
                 echo: Callable[[str], Any] = print, plot_dir: Optional[str] = None,
                 **params: Any) -> dict:
    """Run lab ``name`` in ``data_dir`` (wiped first), pictures into ``plot_dir``; its result."""
    module = scenario_module(name)
    unknown = sorted(set(params) - set(module.PARAMS))
    if unknown:
        raise InvalidArgumentError(
            f"scenario {name} has no param {unknown[0]!r}; known: {', '.join(module.PARAMS)}")
    typed = {k: _coerce(name, k, v, module.PARAMS[k]) for k, v in params.items()}
    return module.run(data_dir, seed=seed, echo=echo, plot_dir=plot_dir, **typed)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of running one lab, shared by ``kafkasim scenario run`` and ``python -m``."""
    p.add_argument("--seed", type=int, default=42, help="seed of every random choice (default 42)")
    p.add_argument("--plot-dir", default=None, metavar="DIR",
                   help="write the lab's pictures (PNG) into DIR (created)")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="OUT",
                   help="--json alone: print only the result as JSON; --json OUT: print the "
                        "lab's text and write the result as JSON to the file OUT")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="override a lab parameter, e.g. partitions=24 (repeatable)")
    p.add_argument("--view", action="store_true",
                   help="serve the live view of the lab's data dir on 127.0.0.1 (URL on stderr), "
                        "run the lab paced in real time, and keep the view up until Ctrl-C")
    p.add_argument("--view-pace", type=float, default=0.05, metavar="S",
                   help="with --view: real seconds per simulated second (default 0.05; 0 = "
                        "no waiting); the lab's results do not change")
