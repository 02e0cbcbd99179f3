"""Helpers shared by the scenario scripts: a fresh broker, a stepped group driver, tables.

- :func:`fresh_broker` wipes the scenario's data dir (only if it is empty or was made
  by a scenario: it carries the :data:`MARKER` file) and opens a
  :class:`kafkasim.broker.Broker` on a :class:`kafkasim.clock.MockClock`.
- :class:`GroupDriver` steps consumers of one or more groups from one thread: each
  step advances the clock by ``step_ms``. A live consumer models an application
  loop ``poll → process for process_ms → commit``: it polls when it is not busy
  processing, or while it is inside a rebalance (Kafka's ``poll()`` blocks until the
  rebalance completes, so such a member keeps polling every step); while busy it
  only runs its background heartbeat thread (``Consumer.tick``), which is where it
  learns that a rebalance started. A "crashed" consumer is simply never called
  again, as if its process had died. Members of Kafka 4's consumer group protocol
  (``group_protocol="consumer"``, KIP-848) are driven the same way; while any is live,
  every step also runs the broker's consumer group timers
  (``Broker.tick_consumer_groups``: session timeouts are the broker's in KIP-848).
- :class:`OwnershipClock` (kept for labs written against it; the rebalance labs now use
  the richer :class:`kafkasim.scenarios._ownership.OwnershipLog`, which also records who
  owned what when) is a rebalance listener that sums *partition-milliseconds
  without an owner* (a revoked or lost partition is paused until someone is
  assigned it).
- :func:`table` renders rows as aligned text for ``echo`` (the CLI's rich style);
  :func:`fmt_assignment` is the one notation of an assignment (``c0: p0, p1; c1: idle``).
- :func:`check_claim` is how a lab asserts its claim (:class:`ClaimFailedError`).
- :func:`write_json` writes a result file atomically (``--json OUT``).
- :func:`main_for` is the ``python -m kafkasim.scenarios.<name>`` entry point.

Invariants: everything is driven by the injected MockClock and seeded RNGs, so the
same calls give the same output. Thread-safety: none; a scenario runs in one thread.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import io
import json
import os
import re
import random
import shutil
import sys
from typing import Any, Callable, Iterable, Optional, Sequence

from rich.console import Console
from rich.table import Table

from kafkasim.broker import Broker
from kafkasim.consumer import Consumer, ConsumerRebalanceListener, MemberState
from kafkasim.clock import MockClock, PacedClock
from kafkasim.errors import (
    ClaimFailedError, CommitFailedError, IllegalStateError, InvalidArgumentError, KafkaSimError,
    RebalanceInProgressError,
)
from kafkasim.types import TopicPartition

__all__ = ["MARKER", "START_MS", "fresh_broker", "fresh_dir", "check_wipeable", "lab_clock", "paced", "GroupDriver", "OwnershipClock", "table",
           "fmt_assignment", "check_claim", "write_json", "run_with_options",
           "main_for", "Echo"]

MARKER = ".kafkasim-scenario"
"""File written into a scenario's data dir; only such a dir (or an empty one) is ever wiped."""

START_MS = 1_700_000_000_000
"""Every scenario's MockClock starts here (2023-11-14T22:13:20Z)."""

_PACE: contextvars.ContextVar[Optional[float]] = contextvars.ContextVar("kafkasim_lab_pace", default=None)


def lab_clock(start_ms: int = START_MS) -> MockClock:
    """The clock a lab runs on: a MockClock at ``start_ms``, or, inside :func:`paced`, a
    :class:`~kafkasim.clock.PacedClock` that also waits in real time so a viewer can follow
    the run. Simulated times, and so the lab's output, are the same either way."""
    pace = _PACE.get()
    return MockClock(start_ms) if pace is None else PacedClock(start_ms, pace=pace)


@contextlib.contextmanager
def paced(pace: float):
    """Labs started inside this block run on a PacedClock (``pace`` real s per simulated s)."""
    token = _PACE.set(pace)
    try:
        yield
    finally:
        _PACE.reset(token)


Echo = Callable[[str], Any]
_NUMBER = re.compile(r"^-?[0-9][0-9,]*(\.[0-9]+)?( ?(%|ms|s|x))?$")


def fresh_dir(data_dir: str) -> str:
    """Wipe ``data_dir`` (empty, or made by a lab: it has the :data:`MARKER` file), mark it,
    and return it; any other non-empty directory is refused (InvalidArgumentError)."""
    data_dir = os.fspath(data_dir)
    check_wipeable(data_dir)
    if os.path.isdir(data_dir) and os.listdir(data_dir):
        shutil.rmtree(data_dir)
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(data_dir, MARKER), "w") as f:
        f.write("made by a kafkasim scenario; wiped when the scenario runs again\n")
    return data_dir


def check_wipeable(data_dir: str) -> None:
    """Refuse (InvalidArgumentError) a non-empty ``data_dir`` no lab made."""
    if os.path.isdir(data_dir) and os.listdir(data_dir) \
            and not os.path.exists(os.path.join(data_dir, MARKER)):
        raise InvalidArgumentError(
            f"refusing to wipe {data_dir!r}: it is not empty and has no {MARKER} file "
            "(choose an empty or new directory for the scenario)")


def fresh_broker(data_dir: str, clock: MockClock,
                 broker_configs: Optional[dict[str, Any]] = None,
                 topic_id_seed: Optional[int | str] = None) -> Broker:
    """Wipe ``data_dir`` (a scenario dir or an empty one: :func:`fresh_dir`) and open a broker
    on it, with ``broker_configs`` (server.properties names, e.g. ``group.consumer.*``) and,
    for a lab whose outcome depends on topic ids (KIP-848's assignors), seeded topic ids."""
    return Broker(fresh_dir(data_dir), clock=clock, broker_configs=broker_configs,
                  topic_id_seed=topic_id_seed)


class OwnershipClock(ConsumerRebalanceListener):
    """Sums partition-ms during which a partition had no owner (revoked/lost → assigned).

    One instance is shared by every member of a group; ``counting`` turns measuring on.
    ``revoked`` records, per member name, the partitions it gave up while counting.
    """

    def __init__(self, clock: MockClock) -> None:
        self.clock = clock
        self.counting = False
        self.unowned_since: dict[TopicPartition, int] = {}
        self.paused_ms = 0
        self.revoked: dict[str, list[str]] = {}

    def for_member(self, name: str) -> "ConsumerRebalanceListener":
        owner = self

        class _Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                owner._revoked(name, revoked)

            def on_partitions_assigned(self, assigned):
                owner._assigned(assigned)

            def on_partitions_lost(self, lost):
                owner._revoked(name, lost)

        return _Listener()

    def mark_unowned(self, name: str, tps: Sequence[TopicPartition]) -> None:
        """Count ``tps`` as unowned from now (e.g. their owner crashed), if counting."""
        self._revoked(name, tps)

    def _revoked(self, name: str, tps: Sequence[TopicPartition]) -> None:
        if not self.counting:
            return
        now = self.clock.now_ms()
        for tp in tps:
            self.unowned_since.setdefault(tp, now)
        if tps:
            self.revoked.setdefault(name, []).extend(str(tp) for tp in tps)

    def _assigned(self, tps: Sequence[TopicPartition]) -> None:
        now = self.clock.now_ms()
        for tp in tps:
            since = self.unowned_since.pop(tp, None)
            if since is not None:
                self.paused_ms += now - since


class _Member:
    """One consumer of a :class:`GroupDriver`: its loop state and what it processed."""

    def __init__(self, name: str, consumer: Consumer, commit: bool, process_ms: int,
                 jitter: float, busy_until: int) -> None:
        self.name = name
        self.consumer = consumer
        self.commit = commit
        self.process_ms = process_ms
        self.busy_until = busy_until
        self.pending_commit = False
        self.commit_failures = 0
        self.jitter = jitter
        self.alive = True
        self.processed: list[tuple[int, int, Optional[bytes]]] = []   # (partition, offset, key)


class GroupDriver:
    """Steps consumers on one MockClock (see the module docstring)."""

    def __init__(self, broker: Broker, clock: MockClock, *, step_ms: int = 100,
                 rng: Optional[random.Random] = None,
                 on_step: Optional[Callable[[], Any]] = None) -> None:
        self.broker, self.clock, self.step_ms = broker, clock, step_ms
        self.on_step = on_step            # called after the clock moves, before members act
        self.rng = rng or random.Random(0)
        self.members: list[_Member] = []

    def add(self, name: str, topic: Optional[str], group_id: str, *, commit: bool = True,
            process_ms: int = 0, jitter: float = 0.0, start_in_ms: int = 0,
            listener: Optional[ConsumerRebalanceListener] = None, pattern: Optional[str] = None,
            topics: Sequence[str] = (), **config: Any) -> _Member:
        """A consumer ``name`` in ``group_id`` subscribed to ``topic`` (or to ``topics``, or by
        regex to ``pattern``): it first polls ``start_in_ms`` from now, then spends
        ``process_ms`` (± ``jitter`` × ``process_ms``, from the driver's seeded RNG) on every
        non-empty batch, committing after it if ``commit``."""
        config.setdefault("auto_offset_reset", "earliest")
        config.setdefault("enable_auto_commit", False)
        c = Consumer(self.broker, group_id=group_id, client_id=name, clock=self.clock, **config)
        if pattern is not None:
            c.subscribe(pattern=pattern, listener=listener)
        else:
            c.subscribe([topic] if topic is not None else list(topics), listener=listener)
        m = _Member(name, c, commit, process_ms, jitter, self.clock.now_ms() + start_in_ms)
        self.members.append(m)
        return m

    def live(self, group_id: Optional[str] = None) -> list[_Member]:
        return [m for m in self.members if m.alive
                and (group_id is None or m.consumer.config["group_id"] == group_id)]

    def step(self) -> None:
        self.clock.advance(self.step_ms)
        if self.on_step is not None:
            self.on_step()
        now = self.clock.now_ms()
        if any(_kip848(m) for m in self.live()):
            self.broker.tick_consumer_groups()   # KIP-848: the broker fences silent members
        for m in self.live():
            c = m.consumer
            if now < m.busy_until and c.member_state == MemberState.STABLE:
                c.tick()                 # busy processing: only the heartbeat thread runs
                continue
            self._commit(m)              # what the last batch processed, if allowed now
            batch = c.poll()
            for tp, recs in batch.items():
                m.processed.extend((tp.partition, r.offset, r.key) for r in recs)
            if batch:
                m.pending_commit = m.commit
                spread = m.jitter * m.process_ms
                m.busy_until = now + int(m.process_ms + self.rng.uniform(-spread, spread))
                if m.process_ms == 0:
                    self._commit(m)

    @staticmethod
    def _commit(m: _Member) -> None:
        """Commit after processing (at-least-once). Outside a Stable generation, or while
        the group rebalances, the commit waits for a later step (Kafka's apps retry a
        RebalanceInProgressException after the next poll); a CommitFailedError means the
        partitions are gone: their records will be re-delivered to the new owner."""
        if not m.pending_commit or m.consumer.member_state != MemberState.STABLE:
            return
        try:
            m.consumer.commit()
            m.pending_commit = False
        except RebalanceInProgressError:
            pass
        except CommitFailedError:
            m.pending_commit = False
            m.commit_failures += 1

    def run(self, ms: int) -> None:
        for _ in range(max(1, ms // self.step_ms)):
            self.step()

    def stable(self, group_id: str) -> bool:
        """Every live member of ``group_id`` is in the group and has what the group assigns it.

        Classic: one generation on every member, none about to rejoin, the group Stable.
        Consumer protocol (KIP-848): the group Stable (every member reconciled to the target
        assignment), every member's epoch the group epoch and its assignment its target."""
        live = [m.consumer for m in self.live(group_id)]
        gens = {c.generation_id for c in live}
        if len(gens) != 1 or gens <= {-1, 0} or any(c.rebalance_pending for c in live):
            return False
        d = self.broker.describe_group(group_id)
        if d["state"] != "Stable" or len(d["members"]) != len(live):
            return False
        if d.get("type") == "consumer":
            return all(m["member_epoch"] == d["group_epoch"]
                       and sorted(m["assignment"]) == sorted(m["target_assignment"])
                       for m in d["members"]) and gens == {d["group_epoch"]}
        return True

    def run_until_stable(self, group_id: str, max_ms: int = 120_000) -> int:
        """Step until the group is Stable with every live member in it; return ms taken."""
        start = self.clock.now_ms()
        for _ in range(max_ms // self.step_ms):
            self.step()
            if self.stable(group_id):
                return self.clock.now_ms() - start
        raise IllegalStateError(f"group {group_id!r} did not stabilise within {max_ms} ms of "
                                "simulated time (check the lab's parameters)")

    def assignments(self, group_id: str) -> dict[str, list[int]]:
        return {m.name: sorted(tp.partition for tp in m.consumer.assignment())
                for m in self.live(group_id)}


def _kip848(m: _Member) -> bool:
    return m.consumer.config["group_protocol"] == "consumer"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Rows as a table under ``headers`` in the CLI's one style (``kafkasim/cli/output.py``:
    rich, no borders, two spaces between columns, numbers right-aligned, plain text). The
    labs sit below the CLI layer, so the style is repeated here rather than imported."""
    rows = [["-" if c is None else str(c) for c in r] for r in rows]
    t = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 2, 0, 0), show_header=True)
    for i, h in enumerate(headers):
        numeric = bool(rows) and all(_NUMBER.match(r[i]) or r[i] == "-" for r in rows)
        t.add_column(str(h), justify="right" if numeric else "left", no_wrap=True)
    for r in rows:
        t.add_row(*r)
    out = io.StringIO()
    Console(file=out, width=100_000, color_system=None, highlight=False, emoji=False,
            markup=False, soft_wrap=False).print(t)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").split("\n"))


def fmt_assignment(assignment: dict, *, prefix: str = "p") -> str:
    """The one notation of an assignment in lab text: ``c0: p0, p1; c1: idle``."""
    return "; ".join(f"{member}: {', '.join(f'{prefix}{p}' for p in parts) or 'idle'}"
                     for member, parts in assignment.items())


def check_claim(holds: bool, claim: str, evidence: str) -> None:
    """Raise :class:`ClaimFailedError` naming ``claim`` and ``evidence`` unless ``holds``."""
    if not holds:
        raise ClaimFailedError(f"the lab's claim did not hold: {claim} Evidence: {evidence}")


def write_json(path: str, result: dict) -> None:
    """Write ``result`` as indented JSON to ``path`` via a temporary file renamed into place."""
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise InvalidArgumentError(f"cannot write the JSON result to {path!r}: {exc}") from exc


def run_with_options(name: str, data_dir: str, args: argparse.Namespace) -> dict:
    """Run lab ``name`` as :func:`kafkasim.scenarios.add_run_options` asked; print or write
    the result and name the pictures."""
    from kafkasim.scenarios import parse_params, run_scenario   # the registry owns params

    quiet = args.json == "-"
    echo = (lambda s: None) if quiet else print
    params = parse_params(name, args.param)
    if getattr(args, "view", False):
        result = _run_in_view(name, data_dir, args, echo, params)
    else:
        result = run_scenario(name, data_dir, seed=args.seed, echo=echo, plot_dir=args.plot_dir,
                              **params)
    if quiet:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        if args.json:
            write_json(args.json, result)
            print(f"\nresult (JSON): {args.json}")
        for path in result.get("pictures", []):
            print(f"picture: {path}")
    return result


def _run_in_view(name: str, data_dir: str, args: argparse.Namespace, echo: Echo,
                 params: dict) -> dict:
    """Run the lab paced in real time while ``kafkasim view`` serves its data dir; after the
    run the view stays up (the page keeps the final state and the rebalances) until Ctrl-C."""
    import signal
    import threading

    from kafkasim.scenarios import run_scenario
    from kafkasim.view.server import ViewServer
    from kafkasim.view.snapshot import DataDirWatcher

    if not 0 <= args.view_pace <= 60:
        raise InvalidArgumentError(f"--view-pace {args.view_pace}: between 0 and 60 seconds")
    fresh_dir(data_dir)         # wipe before the view reads it: the page never shows the previous run
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with ViewServer(DataDirWatcher(data_dir)) as server:
        print(f"kafkasim view: {server.url} (watching {data_dir}; the lab runs at "
              f"{args.view_pace:g} s per simulated second)", file=sys.stderr, flush=True)
        with paced(args.view_pace):
            result = run_scenario(name, data_dir, seed=args.seed, echo=echo,
                                  plot_dir=args.plot_dir, **params)
        print(f"kafkasim view: the lab has finished; the view stays at {server.url} until Ctrl-C",
              file=sys.stderr, flush=True)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    return result


def main_for(name: str, argv: Optional[Sequence[str]] = None) -> int:
    """``python -m kafkasim.scenarios.<module> [--seed N] [--data-dir D] [--plot-dir D]
    [--json [OUT]] [--param k=v ...]``: the same options as ``kafkasim scenario run``."""
    from kafkasim.scenarios import add_run_options, resolve

    lab = resolve(name)
    p = argparse.ArgumentParser(prog=f"python -m kafkasim.scenarios.{name}",
                                description=f"Run the {lab} lab (`kafkasim scenario show {lab}`).")
    p.add_argument("--data-dir", default=os.path.join("kafkasim-data", "scenarios", lab),
                   help="where the lab's broker writes (wiped first; default %(default)s)")
    add_run_options(p)
    args = p.parse_args(argv)
    try:
        run_with_options(lab, args.data_dir, args)
    except KafkaSimError as exc:
        print(f"kafkasim.scenarios.{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return 0
