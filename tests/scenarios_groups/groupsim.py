"""A tiny deterministic driver for consumer-group scenarios on a MockClock (test helper).

``GroupSim`` steps every live consumer from one thread: each step advances the clock
by ``step_ms``; a consumer whose poll is due polls (and "processes" what it got,
committing afterwards when asked to), the others only run their heartbeat thread
(``Consumer.tick``). A crashed consumer is simply never called again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from kafkasim.consumer.consumer import Consumer
from kafkasim.consumer.group_member import ConsumerRebalanceListener
from kafkasim.types import TopicPartition


class PauseRecorder(ConsumerRebalanceListener):
    """Records when each partition loses and gets an owner, to sum paused partition-ms."""

    def __init__(self, sim: "GroupSim", name: str) -> None:
        self.sim, self.name = sim, name
        self.events: list[tuple] = []

    def on_partitions_revoked(self, revoked):
        now = self.sim.clock.now_ms()
        for tp in revoked:
            self.sim.unowned_since.setdefault(tp, now)
        self.events.append(("revoked", self.sim.clock.now_ms(), tuple(revoked)))

    def on_partitions_assigned(self, assigned):
        now = self.sim.clock.now_ms()
        for tp in assigned:
            since = self.sim.unowned_since.pop(tp, None)
            if since is not None:
                self.sim.paused_ms += now - since
        self.events.append(("assigned", now, tuple(assigned)))

    def on_partitions_lost(self, lost):
        self.events.append(("lost", self.sim.clock.now_ms(), tuple(lost)))
        self.on_partitions_revoked(lost)
        self.events.pop()


@dataclass
class Member:
    consumer: Consumer
    name: str
    poll_every_ms: int
    phase_ms: int
    commit: bool
    alive: bool = True
    processed: list = field(default_factory=list)   # (topic, partition, offset, value)
    listener: Optional[PauseRecorder] = None


class GroupSim:
    def __init__(self, broker, clock, *, step_ms: int = 100) -> None:
        self.broker, self.clock, self.step_ms = broker, clock, step_ms
        self.members: list[Member] = []
        self.unowned_since: dict[TopicPartition, int] = {}
        self.paused_ms = 0

    def add(self, name: str, topics=("t",), *, group_id="g", poll_every_ms: int = 100,
            phase_ms: int = 0, commit: bool = True, **config) -> Member:
        config.setdefault("auto_offset_reset", "earliest")
        config.setdefault("enable_auto_commit", False)
        c = Consumer(self.broker, group_id=group_id, client_id=name, clock=self.clock, **config)
        m = Member(c, name, poll_every_ms, phase_ms, commit)
        m.listener = PauseRecorder(self, name)
        c.subscribe(list(topics), listener=m.listener)
        self.members.append(m)
        return m

    def step(self) -> None:
        self.clock.advance(self.step_ms)
        now = self.clock.now_ms()
        for m in self.members:
            if not m.alive:
                continue
            if (now - m.phase_ms) % m.poll_every_ms == 0:
                batch = m.consumer.poll()
                for tp, recs in batch.items():
                    m.processed.extend((tp.topic, tp.partition, r.offset, r.value) for r in recs)
                if batch and m.commit:
                    m.consumer.commit()
            else:
                m.consumer.tick()

    def run(self, ms: int) -> None:
        for _ in range(ms // self.step_ms):
            self.step()

    def run_until_stable(self, max_ms: int = 60_000) -> None:
        """Step until every live member is Stable in one generation and nothing is pending."""
        for _ in range(max_ms // self.step_ms):
            self.step()
            live = [m.consumer for m in self.members if m.alive]
            gens = {c.generation_id for c in live}
            if len(gens) == 1 and gens != {-1} and not any(c.rebalance_pending for c in live):
                d = self.broker.describe_group(live[0].config["group_id"])
                if d["state"] == "Stable" and len(d["members"]) == len(live):
                    return
        raise AssertionError("group did not stabilise within "
                             f"{max_ms} ms: {[(m.name, m.consumer.member_state) for m in self.members]}")

    def assignments(self) -> dict[str, list[TopicPartition]]:
        return {m.name: sorted(m.consumer.assignment()) for m in self.members if m.alive}


def produce(broker, clock, topic: str, partitions: int, per_partition: int, start: int = 0) -> None:
    """Append ``per_partition`` records to every partition; values are b"p<partition>-<i>"."""
    for p in range(partitions):
        broker.append_records(topic, p, [(clock.now_ms(), f"k{i}".encode(), f"p{p}-{i}".encode(), ())
                                         for i in range(start, start + per_partition)])
