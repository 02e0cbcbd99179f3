"""Faults you can script: rules that make a served broker answer wrong, late, or not at all.

One model for the three ways in (Python ``server.faults`` / ``cluster.faults``, the CLI
``kafkasim fault``, and the server's HTTP control endpoint). Like librdkafka's mock cluster
(``rd_kafka_mock_push_request_errors``, per-broker round-trip times) and franz-go's kfake
(``ControlKey``), but one rule language:

- a rule **matches** a request by API (Kafka's name, ``Produce``), broker id, topic,
  partition and client id; a field left out matches anything;
- it **does** one or more of: answer a Kafka error code (``error``: a name such as
  ``NOT_LEADER_OR_FOLLOWER`` or its number), wait before answering (``latency_ms``, plus up
  to ``latency_jitter_ms`` more, drawn from the seeded RNG: "distributed"), drop the
  connection (``drop``: ``before`` the request is applied, or ``after``: applied, then the
  connection closes without an answer, which is what makes duplicates without
  idempotence), or throttle (``throttle_ms`` in the answer's ``throttle_time_ms``, as
  quotas do);
- it **lives** for ``count`` matching requests, ``duration_ms`` from when it was added, or
  until removed; ``probability`` makes a matching request hit it only so often (seeded).

A rule that names a topic or partition and carries an error applies it to those partitions
only (Kafka's per-partition error codes: the request's other partitions go through); without
one the error is the whole request's.

:meth:`Faults.decide` is asked once per request (``None`` when nothing matches: the fast path
when no rule is installed is one attribute read). Every hit is recorded in :meth:`Faults.events`
(time, rule, broker, API, client, action, partitions), so a seeded schedule replays to the
same event log. Time comes from the injected clock, randomness from ``random.Random(seed)``.

Thread-safety: one lock around the rules and the RNG; safe from the server's threads.
"""

from __future__ import annotations

import random
import re
import threading
from dataclasses import asdict, dataclass, field
from typing import Iterable, Optional, Sequence

from kafkasim.arguments import bad_arg
from kafkasim.clock import Clock, SystemClock
from kafkasim.errors import KAFKA_ERROR_NAMES, InvalidArgumentError

__all__ = ["Faults", "FaultRule", "FaultDecision", "FaultEvent", "DROP_BEFORE", "DROP_AFTER", "error_code_named"]

DROP_BEFORE = "before"
DROP_AFTER = "after"


def error_code_named(error: object) -> tuple[int, str]:
    """``(code, Kafka name)`` for an error given by Kafka's name (``NOT_LEADER_OR_FOLLOWER``,
    any case) or code; InvalidArgumentError naming it otherwise. Code 0 (no error) is refused."""
    by_code = KAFKA_ERROR_NAMES
    by_name = {name: code for code, name in by_code.items()}
    if isinstance(error, bool):
        raise bad_arg("error", error, "a Kafka error name such as NOT_LEADER_OR_FOLLOWER, or its code")
    if isinstance(error, int) or (isinstance(error, str) and re.fullmatch(r"-?\d+", error.strip())):
        code = int(error)
        if code in by_code and code != 0:
            return code, by_code[code]
    elif isinstance(error, str) and error.strip().upper() in by_name and by_name[error.strip().upper()]:
        name = error.strip().upper()
        return by_name[name], name
    raise bad_arg("error", error, "a Kafka error name such as NOT_LEADER_OR_FOLLOWER, or its code "
                  "(kafkasim.errors lists them)")


@dataclass
class FaultRule:
    """One rule (see the module docstring); ``hits`` counts the requests it acted on."""

    rule_id: int
    api: Optional[str] = None
    broker: Optional[int] = None
    topic: Optional[str] = None
    partition: Optional[int] = None
    client_id: Optional[str] = None
    error: Optional[int] = None
    error_name: Optional[str] = None
    latency_ms: int = 0
    latency_jitter_ms: int = 0
    drop: Optional[str] = None
    throttle_ms: int = 0
    count: Optional[int] = None
    probability: float = 1.0
    duration_ms: Optional[int] = None
    created_ms: int = 0
    hits: int = 0

    def expired(self, now_ms: int) -> bool:
        return ((self.count is not None and self.hits >= self.count)
                or (self.duration_ms is not None and now_ms >= self.created_ms + self.duration_ms))

    def matches_request(self, broker: Optional[int], api: str, client_id: Optional[str]) -> bool:
        return ((self.api is None or self.api == api) and (self.broker is None or self.broker == broker)
                and (self.client_id is None or self.client_id == client_id))

    def matches_partition(self, topic: str, partition: int) -> bool:
        return (self.topic is None or self.topic == topic) and (self.partition is None or self.partition == partition)

    @property
    def scoped(self) -> bool:
        """Whether it names a topic or partition (its error is then per partition)."""
        return self.topic is not None or self.partition is not None

    def to_json(self, now_ms: Optional[int] = None) -> dict:
        out = asdict(self)
        if now_ms is not None:
            out["expired"] = self.expired(now_ms)
        return out


@dataclass(frozen=True)
class FaultEvent:
    """One hit: what a rule did to one request."""

    time_ms: int
    rule_id: int
    broker: Optional[int]
    api: str
    client_id: Optional[str]
    action: str          # "error", "latency", "drop-before", "drop-after", "throttle"
    partitions: tuple[tuple[str, int], ...] = ()
    error_code: Optional[int] = None
    latency_ms: int = 0


@dataclass
class FaultDecision:
    """What to do to one request: wait ``latency_ms``, then drop it (``drop``), or answer it
    with ``error`` (the whole request) or ``partition_errors`` ((topic, partition) -> code),
    and ``throttle_ms`` in the answer."""

    latency_ms: int = 0
    drop: Optional[str] = None
    error: Optional[int] = None
    partition_errors: dict = field(default_factory=dict)
    throttle_ms: int = 0
    rule_ids: tuple[int, ...] = ()


class Faults:
    """The installed rules of one server or cluster (see the module docstring).

    ``known_apis``: the API names a rule may name (the server's); None accepts any name.
    ``brokers``: the broker ids a rule may name; None accepts any id.
    """

    def __init__(self, clock: Optional[Clock] = None, *, seed: int = 0,
                 known_apis: Optional[Iterable[str]] = None, brokers: Optional[Iterable[int]] = None) -> None:
        self._clock = clock or SystemClock()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._rules: dict[int, FaultRule] = {}
        self._events: list[FaultEvent] = []
        self._next_id = 1
        self._known_apis = frozenset(known_apis) if known_apis is not None else None
        self._brokers = frozenset(brokers) if brokers is not None else None
        self.active = False
        """Whether any rule is installed (read without the lock: the idle fast path)."""

    # -- rules ---------------------------------------------------------------------------

    def add(self, *, api: Optional[str] = None, error: object = None, count: Optional[int] = None,
            topic: Optional[str] = None, partition: Optional[int] = None, broker: Optional[int] = None,
            client_id: Optional[str] = None, latency_ms: int = 0, latency_jitter_ms: int = 0,
            drop: Optional[str] = None, probability: float = 1.0, throttle_ms: int = 0,
            duration_ms: Optional[int] = None) -> FaultRule:
        """Install a rule; returns it (with its ``rule_id``). Bad fields: InvalidArgumentError
        naming the field and value; nothing is installed then."""
        if api is not None and (not isinstance(api, str) or (self._known_apis is not None
                                                              and api not in self._known_apis)):
            known = ", ".join(sorted(self._known_apis or ()))
            raise bad_arg("api", api, f"an API name the server serves ({known})" if known else "an API name")
        code = name = None
        if error is not None:
            code, name = error_code_named(error)
        if drop is not None and drop not in (DROP_BEFORE, DROP_AFTER):
            raise bad_arg("drop", drop, "'before' or 'after'")
        if drop is not None and code is not None:
            raise InvalidArgumentError("a rule either drops the connection (drop) or answers an error (error), "
                                       f"not both: drop={drop!r}, error={name}")
        for fname, value, low in (("count", count, 1), ("partition", partition, 0), ("broker", broker, 0),
                                  ("duration_ms", duration_ms, 1)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
                raise bad_arg(fname, value, f"an integer >= {low}")
        for fname, value in (("latency_ms", latency_ms), ("latency_jitter_ms", latency_jitter_ms),
                             ("throttle_ms", throttle_ms)):
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 3_600_000:
                raise bad_arg(fname, value, "an integer from 0 to 3600000 (ms)")
        if isinstance(probability, bool) or not isinstance(probability, (int, float)) or not 0 < probability <= 1:
            raise bad_arg("probability", probability, "a number in (0, 1]")
        for fname, value in (("topic", topic), ("client_id", client_id)):
            if value is not None and (not isinstance(value, str) or not value):
                raise bad_arg(fname, value, "a non-empty string")
        if broker is not None and self._brokers is not None and broker not in self._brokers:
            raise bad_arg("broker", broker, f"one of the brokers {sorted(self._brokers)}")
        if code is None and drop is None and not latency_ms and not latency_jitter_ms and not throttle_ms:
            raise InvalidArgumentError("a rule must do something: give error, latency_ms, drop or throttle_ms")
        with self._lock:
            rule = FaultRule(self._next_id, api, broker, topic, partition, client_id, code, name, latency_ms,
                             latency_jitter_ms, drop, throttle_ms, count, float(probability), duration_ms,
                             self._clock.now_ms())
            self._next_id += 1
            self._rules[rule.rule_id] = rule
            self.active = True
            return rule

    def remove(self, rule_id: int) -> FaultRule:
        """Remove one rule; InvalidArgumentError when there is no such rule."""
        with self._lock:
            rule = self._rules.pop(rule_id, None) if isinstance(rule_id, int) else None
            self.active = bool(self._rules)
        if rule is None:
            raise bad_arg("rule_id", rule_id, "the id of an installed rule")
        return rule

    def clear(self) -> int:
        """Remove every rule; returns how many there were."""
        with self._lock:
            n = len(self._rules)
            self._rules.clear()
            self.active = False
            return n

    def rules(self) -> list[FaultRule]:
        """Every installed rule (expired ones too, until removed), oldest first."""
        with self._lock:
            return list(self._rules.values())

    def to_json(self) -> list[dict]:
        now = self._clock.now_ms()
        return [r.to_json(now) for r in self.rules()]

    def events(self) -> list[FaultEvent]:
        """Every hit so far, in order."""
        with self._lock:
            return list(self._events)

    # -- the request path --------------------------------------------------------------------

    def decide(self, broker: Optional[int], api: str, client_id: Optional[str],
               partitions: Sequence[tuple[str, int]] = ()) -> Optional[FaultDecision]:
        """What the installed rules do to one request of ``api`` (naming ``partitions``) from
        ``client_id`` to ``broker``; None when no rule acts on it. Rules act in the order they
        were added; the first drop wins (no answer), errors of later rules do not override
        earlier ones; latencies and throttles add up."""
        if not self.active:
            return None
        with self._lock:
            now = self._clock.now_ms()
            decision: Optional[FaultDecision] = None
            for rule in list(self._rules.values()):
                if rule.expired(now) or not rule.matches_request(broker, api, client_id):
                    continue
                hit_partitions = tuple(tp for tp in partitions if rule.matches_partition(*tp))
                if rule.scoped and not hit_partitions:
                    continue
                if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                    continue
                rule.hits += 1
                decision = decision or FaultDecision()
                decision.rule_ids += (rule.rule_id,)
                latency = rule.latency_ms + (self._rng.randint(0, rule.latency_jitter_ms)
                                             if rule.latency_jitter_ms else 0)

                def log(action: str, **kw) -> None:
                    self._events.append(FaultEvent(now, rule.rule_id, broker, api, client_id, action,
                                                   hit_partitions, **kw))
                if latency:
                    decision.latency_ms += latency
                    log("latency", latency_ms=latency)
                if rule.throttle_ms:
                    decision.throttle_ms += rule.throttle_ms
                    log("throttle")
                if rule.drop is not None and decision.drop is None:
                    decision.drop = rule.drop
                    log(f"drop-{rule.drop}")
                if rule.error is not None:
                    if rule.scoped:
                        for tp in hit_partitions:
                            decision.partition_errors.setdefault(tp, rule.error)
                    elif decision.error is None:
                        decision.error = rule.error
                    log("error", error_code=rule.error)
            return decision
