"""The assignment calculator behind ``kafkasim assign``: a JSON spec in, one assignor run out.

The spec (every key after ``subscriptions`` optional)::

    {"partitions_per_topic": {"t0": 3},
     "subscriptions": {"C0": ["t0"], "C1": ["t0"]},          # member -> topics, in join order
     "previous_assignment": {"C0": [["t0", 0], ["t0", 1]]},   # what each member owned
     "generation": {"C0": 1},                                 # generation of that ownership
     "group_instance_ids": {"C0": "i-0"},                     # static members
     "racks": {"C0": "rack-a"},                               # each member's client.rack
     "partition_racks": {"t0": {"0": ["rack-a", "rack-b"]}}}  # racks of each partition's replicas

Result (:func:`calculate`), members and partitions sorted::

    {"strategy": "cooperative-sticky", "rounds": 1,
     "assignment": {"C0": [["t0", 0], ["t0", 1]], "C1": []},
     "moved": [...], "revoked_first": [...]}

Definitions:

- a partition's *previous owner* is the member listing it in ``previous_assignment``;
  when several members list it, the one with the highest ``generation`` (missing = -1),
  and nobody when the highest generation is claimed twice (Kafka discards such claims);
- ``moved``: every partition that has a previous owner and whose owner in the printed
  ``assignment`` is different, as ``{"topic", "partition", "from", "to"}``; ``to`` is
  ``null`` when nobody holds it (withheld by cooperative-sticky, or its topic is gone);
- ``revoked_first``: for ``cooperative-sticky``, the partitions withheld by the *first*
  call (they change owner, so their old owner revokes them and a follow-up rebalance
  assigns them); empty for the eager assignors;
- with ``follow_up``, cooperative-sticky is re-run with each member owning what it was
  just assigned (generation + 1) until a round withholds nothing; ``assignment`` is
  then the final one and ``rounds`` counts the assignor calls;
- racks (KIP-881): with ``partition_racks`` the assignor gets each partition's replica
  racks (a partition not listed has no known rack) and the members' ``racks``; the range
  and sticky assignors are then rack-aware as Kafka's.  The result then also has
  ``rack_misaligned``: every assigned partition none of whose replicas is on its
  member's rack (members without a rack are never misaligned).

Invariants: a parsed :class:`AssignmentSpec` is valid (every bad field raised
:class:`~kafkasim.errors.InvalidArgumentError` naming it).  Pure functions; thread-safe.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from kafkasim.config import MAX_PARTITIONS
from kafkasim.errors import IllegalStateError, InvalidArgumentError
from kafkasim.types import TopicPartition

from kafkasim.assignors import get_assignor
from kafkasim.assignors.base import (
    COOPERATIVE, DEFAULT_GENERATION, Assignor, Subscription, member_sort_key, partition_sort_key,
)

__all__ = ["AssignmentSpec", "parse_spec", "read_spec", "calculate", "MAX_FOLLOW_UP_ROUNDS"]

MAX_FOLLOW_UP_ROUNDS = 10
"""A cooperative assignment that still withholds partitions after this many calls is a bug."""

_KEYS = ("partitions_per_topic", "subscriptions", "previous_assignment", "generation", "group_instance_ids",
         "racks", "partition_racks")


@dataclass(frozen=True)
class AssignmentSpec:
    """A validated calculator input (see the module docstring for the JSON form)."""

    partitions_per_topic: dict[str, int]
    subscriptions: dict[str, list[str]]
    previous_assignment: dict[str, list[TopicPartition]]
    generation: dict[str, int]
    group_instance_ids: dict[str, str]
    racks: dict[str, str] = field(default_factory=dict)
    partition_racks: Optional[dict[TopicPartition, tuple[str, ...]]] = None

    def to_subscriptions(self) -> dict[str, Subscription]:
        """Member id -> :class:`Subscription`, in the spec's (join) order."""
        return {m: Subscription(topics=list(topics),
                                owned_partitions=list(self.previous_assignment.get(m, ())),
                                generation_id=self.generation.get(m, DEFAULT_GENERATION),
                                group_instance_id=self.group_instance_ids.get(m),
                                rack_id=self.racks.get(m))
                for m, topics in self.subscriptions.items()}

    def previous_owners(self) -> dict[TopicPartition, str]:
        """Partition -> its previous owner (highest generation; a tied claim has no owner)."""
        best: dict[TopicPartition, tuple[int, Optional[str]]] = {}
        for member, tps in self.previous_assignment.items():
            gen = self.generation.get(member, DEFAULT_GENERATION)
            for tp in tps:
                if tp not in best or gen > best[tp][0]:
                    best[tp] = (gen, member)
                elif gen == best[tp][0] and best[tp][1] != member:
                    best[tp] = (gen, None)
        return {tp: m for tp, (_, m) in best.items() if m is not None}


def _bad(field: str, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"invalid assignment spec field {field}: {why}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _name(v: Any, field: str) -> str:
    if not isinstance(v, str) or not v:
        raise _bad(field, f"expected a non-empty string, got {v!r}")
    return v


def _object(spec: Mapping, key: str) -> dict:
    v = spec.get(key, {})
    if not isinstance(v, dict):
        raise _bad(key, f"expected a JSON object, got {type(v).__name__} {v!r}")
    return v


def parse_spec(obj: Any) -> AssignmentSpec:
    """Validate a decoded JSON spec; InvalidArgumentError names the first bad field."""
    if not isinstance(obj, dict):
        raise InvalidArgumentError(f"invalid assignment spec: expected a JSON object, got {type(obj).__name__}")
    unknown = [k for k in obj if k not in _KEYS]
    if unknown:
        raise _bad(unknown[0], f"unknown field; known fields: {', '.join(_KEYS)}")
    if "subscriptions" not in obj:
        raise _bad("subscriptions", "missing (member id -> list of topics)")
    ppt: dict[str, int] = {}
    for topic, n in _object(obj, "partitions_per_topic").items():
        _name(topic, "partitions_per_topic")
        if not _is_int(n) or n < 0:
            raise _bad(f"partitions_per_topic.{topic}", f"expected a partition count >= 0, got {n!r}")
        if n > MAX_PARTITIONS:
            raise _bad(f"partitions_per_topic.{topic}",
                       f"{n} partitions is more than a kafkasim topic can have ({MAX_PARTITIONS})")
        ppt[topic] = n
    subs: dict[str, list[str]] = {}
    for member, topics in _object(obj, "subscriptions").items():
        _name(member, "subscriptions")
        if not isinstance(topics, list):
            raise _bad(f"subscriptions.{member}", f"expected a list of topics, got {topics!r}")
        subs[member] = list(dict.fromkeys(_name(t, f"subscriptions.{member}") for t in topics))
    prev: dict[str, list[TopicPartition]] = {}
    for member, tps in _object(obj, "previous_assignment").items():
        _name(member, "previous_assignment")
        field = f"previous_assignment.{member}"
        if not isinstance(tps, list):
            raise _bad(field, f"expected a list of [topic, partition] pairs, got {tps!r}")
        out = []
        for pair in tps:
            if (not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str)
                    or not pair[0] or not _is_int(pair[1]) or pair[1] < 0):
                raise _bad(field, f"expected [topic, partition >= 0], got {pair!r}")
            out.append(TopicPartition(pair[0], pair[1]))
        if len(set(out)) != len(out):
            raise _bad(field, "lists a partition twice")
        prev[member] = out
    gens: dict[str, int] = {}
    for member, gen in _object(obj, "generation").items():
        _name(member, "generation")
        if not _is_int(gen) or gen < DEFAULT_GENERATION:
            raise _bad(f"generation.{member}", f"expected an integer >= -1, got {gen!r}")
        gens[member] = gen
    ids: dict[str, str] = {}
    seen: dict[str, str] = {}
    for member, iid in _object(obj, "group_instance_ids").items():
        _name(member, "group_instance_ids")
        if member not in subs:
            raise _bad(f"group_instance_ids.{member}", "names a member that is not in subscriptions")
        _name(iid, f"group_instance_ids.{member}")
        if iid in seen:
            raise _bad(f"group_instance_ids.{member}", f"instance id {iid!r} is already used by {seen[iid]!r}")
        seen[iid] = member
        ids[member] = iid
    racks: dict[str, str] = {}
    for member, rack in _object(obj, "racks").items():
        _name(member, "racks")
        if member not in subs:
            raise _bad(f"racks.{member}", "names a member that is not in subscriptions")
        racks[member] = _name(rack, f"racks.{member}")
    partition_racks = _partition_racks(obj, ppt) if "partition_racks" in obj else None
    return AssignmentSpec(ppt, subs, prev, gens, ids, racks, partition_racks)


def _partition_racks(obj: Mapping, ppt: Mapping[str, int]) -> dict[TopicPartition, tuple[str, ...]]:
    """``{"t0": {"0": ["rack-a", ...]}}`` -> TopicPartition -> racks, every field checked."""
    out: dict[TopicPartition, tuple[str, ...]] = {}
    for topic, per_partition in _object(obj, "partition_racks").items():
        _name(topic, "partition_racks")
        field_name = f"partition_racks.{topic}"
        if topic not in ppt:
            raise _bad(field_name, "names a topic that is not in partitions_per_topic")
        if not isinstance(per_partition, dict):
            raise _bad(field_name, f"expected an object of partition -> list of racks, got {per_partition!r}")
        for key, racks in per_partition.items():
            where = f"{field_name}.{key}"
            if not (key.isascii() and key.isdigit()) or int(key) >= ppt[topic]:
                valid = f"0..{ppt[topic] - 1}" if ppt[topic] else "none: the topic has 0 partitions"
                raise _bad(where, f"expected a partition number of {topic!r} ({valid}), got {key!r}")
            if not isinstance(racks, list):
                raise _bad(where, f"expected a list of racks, got {racks!r}")
            out[TopicPartition(topic, int(key))] = tuple(_name(r, where) for r in racks)
    return out


def read_spec(path: str) -> AssignmentSpec:
    """Read and validate a JSON spec from ``path`` (``-`` = standard input)."""
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read assignment spec {path!r}: {exc.strerror or exc}") from exc
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"assignment spec {path!r} is not valid JSON: {exc}") from exc
    return parse_spec(obj)


def _withheld(ppt: Mapping[str, int], subs: Mapping[str, Subscription],
              assignment: Mapping[str, list[TopicPartition]]) -> list[TopicPartition]:
    assigned = {tp for tps in assignment.values() for tp in tps}
    subscribed = {t for s in subs.values() for t in s.topics}
    return [TopicPartition(t, p) for t in sorted(subscribed) for p in range((ppt.get(t) or 0))
            if TopicPartition(t, p) not in assigned]


def calculate(strategy: Any, spec: AssignmentSpec, *, follow_up: bool = False) -> dict:
    """Run ``strategy`` (a name, class or instance) on ``spec``; a JSON-ready result."""
    assignor: Assignor = get_assignor(strategy)
    subs = spec.to_subscriptions()
    ppt = spec.partitions_per_topic
    racks = spec.partition_racks

    def run(subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        # only a spec with partition_racks passes the third argument (custom assignors may not take it)
        return assignor.assign(ppt, subscriptions) if racks is None else assignor.assign(ppt, subscriptions, racks)

    assignment = run(subs)
    cooperative = COOPERATIVE in tuple(getattr(assignor, "supported_protocols", ()))
    revoked_first = _withheld(ppt, subs, assignment) if cooperative else []
    rounds = 1
    if follow_up and cooperative:
        pending = revoked_first
        generation = max([s.generation_id for s in subs.values()] + [0]) + 1
        while pending:
            if rounds >= MAX_FOLLOW_UP_ROUNDS:
                raise IllegalStateError(f"{assignor.name}: partitions {pending} still withheld after {rounds} rounds")
            subs = {m: s._replace(owned_partitions=list(assignment[m]), generation_id=generation)
                    for m, s in subs.items()}
            assignment = run(subs)
            generation += 1
            rounds += 1
            pending = _withheld(ppt, subs, assignment)
    owner_now = {tp: m for m, tps in assignment.items() for tp in tps}
    moved = [{"topic": tp.topic, "partition": tp.partition, "from": prev, "to": owner_now.get(tp)}
             for tp, prev in sorted(spec.previous_owners().items(), key=lambda kv: partition_sort_key(kv[0]))
             if owner_now.get(tp) != prev]
    members = sorted(assignment, key=lambda m: member_sort_key(m, None))
    result = {
        "strategy": assignor.name,
        "rounds": rounds,
        "assignment": {m: [[tp.topic, tp.partition] for tp in sorted(assignment[m], key=partition_sort_key)]
                       for m in members},
        "moved": moved,
        "revoked_first": [[tp.topic, tp.partition] for tp in sorted(revoked_first, key=partition_sort_key)],
    }
    if racks is not None:
        result["rack_misaligned"] = [
            {"topic": tp.topic, "partition": tp.partition, "member": m, "rack": spec.racks[m]}
            for m in members if m in spec.racks
            for tp in sorted(assignment[m], key=partition_sort_key) if spec.racks[m] not in racks.get(tp, ())]
    return result
