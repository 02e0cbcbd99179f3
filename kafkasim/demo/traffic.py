"""The demo's traffic and group helpers: Zipf merchant keys, sending them, a group that settles.

- :class:`Merchants`: 2,000 merchant keys whose traffic follows a Zipf law (weight of the
  rank-``r`` merchant ``1 / r**1.1``), shuffled by the demo's seeded ``random.Random`` so the
  hot merchants land anywhere; :meth:`Merchants.keys` draws ``n`` keys.
- :func:`produce`: round-robins keys over in-process producers (any kafkasim broker or
  cluster), advancing the MockClock 20 ms every 100 records, and returns the futures. Each
  value is an order, a structured value: ``{"order": n, "amount": cents}``, which the
  producers serialize with ``value_serializer=msgpack.dumps`` as kafka-python's README does
  (:data:`VALUE_SERIALIZER`; the group members read it back with :data:`VALUE_DESERIALIZER`).
- :func:`settle` / :func:`consume`: poll a consumer group until it is stable and every
  partition is owned; poll and commit for a number of rounds.

Invariants: everything random comes from the ``random.Random`` passed in, time from the
MockClock passed in, so the same seed gives the same keys, partitions and offsets.
Not thread-safe: one demo drives these from one thread.
"""

from __future__ import annotations

import random
from typing import Callable, Optional, Sequence

import msgpack

from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer

__all__ = ["Merchants", "produce", "group_member", "settle", "consume", "owners", "owned_text", "scale_out", "Tick",
           "VALUE_SERIALIZER", "VALUE_DESERIALIZER"]

VALUE_SERIALIZER = msgpack.dumps      # kafka-python's README: KafkaProducer(value_serializer=msgpack.dumps)
VALUE_DESERIALIZER = msgpack.loads    # and KafkaConsumer(value_deserializer=msgpack.loads)

Tick = Optional[Callable[[int], None]]   # called with the number of records sent so far


class Merchants:
    """Zipf-weighted merchant keys (see the module docstring)."""

    def __init__(self, rng: random.Random, count: int = 2000, exponent: float = 1.1) -> None:
        self.rng = rng
        self.names = [b"merchant_%04d" % i for i in range(count)]
        rng.shuffle(self.names)
        self.weights = [1.0 / (rank ** exponent) for rank in range(1, count + 1)]

    def keys(self, n: int) -> list[bytes]:
        return self.rng.choices(self.names, weights=self.weights, k=n)


def produce(producers: Sequence, topic: str, merchants: Merchants, clock: MockClock, count: int,
            *, tick: Tick = None, between: Optional[Callable[[int], None]] = None) -> list:
    """Send ``count`` orders (dict values: the producers need ``value_serializer=VALUE_SERIALIZER``);
    return their futures (``between(i)`` runs before record ``i``)."""
    rng = merchants.rng
    futures = []
    for i, key in enumerate(merchants.keys(count)):
        if between is not None:
            between(i)
        value = {"order": i, "amount": rng.randrange(1, 10_000)}
        futures.append(producers[i % len(producers)].send(topic, key=key, value=value))
        if i % 100 == 99:
            clock.advance(20)
            if tick is not None:
                tick(i + 1)
    for p in producers:
        p.flush()
    if tick is not None:
        tick(count)
    return futures


def group_member(broker, clock: MockClock, topic: str, group: str, client_id: str) -> Consumer:
    """A cooperative-sticky member that commits by hand and starts from the earliest offset."""
    return Consumer(broker, topic, group_id=group, client_id=client_id, clock=clock,
                    value_deserializer=VALUE_DESERIALIZER, enable_auto_commit=False, auto_offset_reset="earliest",
                    partition_assignment_strategy=["cooperative-sticky"])


def settle(group: list, clock: MockClock, topic: str, max_steps: int = 400) -> int:
    """Poll every member until the group is stable and every partition is owned; the generation."""
    for _ in range(max_steps):
        for c in group:
            c.poll(timeout_ms=0, max_records=1, update_offsets=False)
        clock.advance(100)
        gens = {c.generation_id for c in group}
        owned = sum(len(c.assignment()) for c in group)
        if len(gens) == 1 and None not in gens and not any(c.rebalance_pending for c in group) \
                and owned == len(group[0].partitions_for_topic(topic)):
            return gens.pop()
    raise RuntimeError("the demo group did not settle")  # a bug, not a user error


def consume(group: list, clock: MockClock, rounds: int) -> int:
    """Poll each member ``rounds`` times (500 records at most), committing what it got."""
    total = 0
    for _ in range(rounds):
        for c in group:
            got = c.poll(timeout_ms=0, max_records=500)
            total += sum(len(v) for v in got.values())
            if got:
                c.commit()
        clock.advance(100)
    return total


def owners(group: list) -> dict[str, list[int]]:
    """``{client_id: [partitions it owns]}``."""
    return {c.config["client_id"]: sorted(tp.partition for tp in c.assignment()) for c in group}


def owned_text(own: dict) -> str:
    """``a owns [0,2]; b owns [1,3]``: one notation for an assignment in the story."""
    return "; ".join(f"{m} owns [{','.join(map(str, ps))}]" for m, ps in own.items())


def scale_out(group: list, newcomer, clock: MockClock, topic: str, rounds: tuple[int, int]) -> dict:
    """Settle ``group``, consume ``rounds[0]`` rounds, add ``newcomer()`` (a new member), settle
    again and consume ``rounds[1]`` rounds: the generations, owners before and after, and the
    records processed. ``group`` grows by the new member."""
    gens = [settle(group, clock, topic)]
    before = owners(group)
    consumed = consume(group, clock, rounds=rounds[0])
    group.append(newcomer())
    gens.append(settle(group, clock, topic))
    consumed += consume(group, clock, rounds=rounds[1])
    return {"generations": gens, "owners_before": before, "owners_after": owners(group),
            "consumed": consumed}
