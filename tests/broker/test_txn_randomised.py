"""Randomised transaction schedules (issue 23's "Done when") against an independent model.

Seeded schedules (``random.Random(seed)``, the injected MockClock: deterministic) of
begin/produce, send_offsets_to_transaction (AddOffsetsToTxn + TxnOffsetCommit), commit,
abort, timeout (the clock moves past ``transaction.timeout.ms`` and
the broker ticks), fence (a second producer with the same transactional id, then the
zombie's produce and commit, which must fail), and restarts: of the one in-process
``Broker`` (closed and reopened over its data dir), and of a 3-broker ``Cluster`` (brokers
stopped and started, up to two at once with two replicas per partition: leadership moves,
and a partition may go offline with markers waiting for it; or the whole cluster closed and
reopened). The cluster schedules found the follower bug of
tests/storage/test_replica_log_transactions.py and the stuck PrepareCommit of
tests/cluster/test_cluster_transactions.py.

The model is plain data: every record written to a partition in order, with the
transaction it belongs to, and which transactions committed, aborted or are still open. It
alone decides what the readers must see after every step:

- read_committed (an in-process ``Consumer(isolation_level='read_committed')`` from offset 0):
  exactly the committed transactions' records, each once, in the partition's order, up to
  the first record of a transaction still open (the last stable offset);
- read_uncommitted: every record written, in order; neither ever returns a marker;
- the group's committed offset: that of the last committed transaction that sent offsets.

The drivers play the producer's side of the protocol on the broker API directly
(InitProducerId, AddPartitionsToTxn, transactional Produce with sequences, EndTxn), so the
schedule, not a client's own recovery, decides what happens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

import pytest

from kafkasim.broker import Broker
from kafkasim.broker.cluster import Cluster
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.errors import (
    ConcurrentTransactionsError, InvalidProducerEpochError, InvalidTxnStateError, ProducerFencedError,
)
from kafkasim.records import record_batch as rb
from kafkasim.types import TopicPartition

pytestmark = pytest.mark.slow          # ~1 min for the eight schedules on the 2-core dev VM

T0 = 1_700_000_000_000
TOPIC = "t"
PARTITIONS = 3
TIDS = ("alpha", "beta", "gamma")
TIMEOUT_MS = 60_000
CHECK_MS = 1_000
BROKER_CONFIGS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": CHECK_MS}
GROUP = "g"
GROUP_TP = TopicPartition(TOPIC, 0)
FENCED = (ProducerFencedError, InvalidProducerEpochError, InvalidTxnStateError)


@dataclass
class Client:
    """One transactional producer instance: its id and epoch, and its sequences."""
    tid: str
    pid: int
    epoch: int
    seqs: dict = field(default_factory=dict)
    added: set = field(default_factory=set)
    txn: Optional[tuple] = None              # the model's key of its open transaction


@dataclass
class Model:
    written: dict = field(default_factory=lambda: {p: [] for p in range(PARTITIONS)})   # p -> [(value, txn)]
    committed: set = field(default_factory=set)
    aborted: set = field(default_factory=set)
    open: dict = field(default_factory=dict)          # tid -> txn key
    txn_offsets: dict = field(default_factory=dict)   # txn key -> the group offset it commits
    group_offset: Optional[int] = None                # the group's committed offset

    def end(self, tid: str, commit: bool) -> None:
        key = self.open.pop(tid, None)
        if key is not None:
            (self.committed if commit else self.aborted).add(key)
            if commit and key in self.txn_offsets:
                self.group_offset = self.txn_offsets[key]

    def read_committed(self) -> dict[int, list[bytes]]:
        out = {}
        for p, recs in self.written.items():
            open_keys = set(self.open.values())
            stable = next((i for i, (_, k) in enumerate(recs) if k in open_keys), len(recs))
            out[p] = [v for v, k in recs[:stable] if k in self.committed]
        return out

    def read_uncommitted(self) -> dict[int, list[bytes]]:
        return {p: [v for v, _ in recs] for p, recs in self.written.items()}


def _read(broker, isolation: str, partitions) -> dict[int, list[bytes]]:
    c = Consumer(broker, isolation_level=isolation, auto_offset_reset="earliest", enable_auto_commit=False)
    c.assign([TopicPartition(TOPIC, p) for p in partitions])
    out = {p: [] for p in partitions}
    empty = 0
    while empty < 2:
        got = c.poll(max_records=10_000)
        empty = 0 if got else empty + 1
        for tp, records in got.items():
            out[tp.partition] += [r.value for r in records]
    c.close()
    return out


class Schedule:
    """Runs one seeded schedule on a broker or a cluster, checking the readers after every step.

    On the cluster the topic has two replicas per partition and up to two brokers are down at
    once, so a partition may be offline: nothing is produced to it or read from it meanwhile,
    and the markers of transactions ended while it was offline are written once it has a
    leader again (the transactional id answers CONCURRENT_TRANSACTIONS until then, and the
    schedule's producers treat that as "retry later")."""

    def __init__(self, tmp_path, seed: int, cluster: bool) -> None:
        self.rng = random.Random(seed)
        self.clock = MockClock(T0)
        self.cluster = cluster
        self.data_dir = tmp_path / f"data-{seed}-{'cluster' if cluster else 'broker'}"
        if cluster:
            self.b = Cluster(self.data_dir, [(0, "r1"), (1, "r2"), (2, "r3")], clock=self.clock, seed=seed,
                             broker_configs=BROKER_CONFIGS)
            self.b.create_topic(TOPIC, PARTITIONS, 2)
        else:
            self.b = Broker(self.data_dir, clock=self.clock, broker_configs=BROKER_CONFIGS)
            self.b.create_topic(TOPIC, PARTITIONS)
        self.model = Model()
        self.clients: dict[str, Client] = {}
        self.stopped: list[int] = []
        self.n = 0
        self.log: list[str] = []

    def online(self) -> list[int]:
        """The partitions with a leader now (all of them on the one broker)."""
        if not self.cluster:
            return list(range(PARTITIONS))
        return [p for p in range(PARTITIONS) if self.b._partition(TOPIC, p).leader >= 0]

    # -- the producer's side ---------------------------------------------------------------------
    def _init(self, tid: str) -> Optional[Client]:
        """InitProducerId as a client runs it: CONCURRENT_TRANSACTIONS (the id's open transaction
        is being aborted, or its markers wait for an offline partition) is retried; None when it
        still is (the schedule goes on; the client would retry later)."""
        for _ in range(3):
            try:
                pid, epoch = self.b.init_transactional_producer_id(tid, TIMEOUT_MS)
            except ConcurrentTransactionsError:
                self.model.end(tid, commit=False)     # a fence aborts the open transaction
                continue
            self.model.end(tid, commit=False)
            client = self.clients[tid] = Client(tid, pid, epoch)
            return client
        return None

    def produce(self) -> None:
        online = self.online()
        tid = self.rng.choice(TIDS)
        client = self.clients.get(tid) or self._init(tid)
        if client is None or not online:
            return
        p = self.rng.choice(online)
        if p not in client.added:
            try:
                self.b.add_partitions_to_txn(tid, client.pid, client.epoch, [(TOPIC, p)])
            except ConcurrentTransactionsError:           # its last transaction's markers are in flight
                self.log.append(f"add {tid} p{p}: concurrent")
                return
            client.added.add(p)
        if client.txn is None:
            self.n += 1
            client.txn = self.model.open[tid] = (tid, self.n)
        k = self.rng.randint(1, 3)
        seq = client.seqs.get(p, 0)
        values = [b"%s.%d.%d.%d" % (tid.encode(), client.txn[1], seq, i) for i in range(k)]
        batch = rb.encode_batch(0, [(i, self.clock.now_ms(), None, v, ()) for i, v in enumerate(values)],
                                producer_id=client.pid, producer_epoch=client.epoch, base_sequence=seq,
                                attributes=rb.ATTR_TRANSACTIONAL)
        self.b.produce(TOPIC, p, batch, acks="all")
        client.seqs[p] = seq + k
        self.model.written[p] += [(v, client.txn) for v in values]
        self.log.append(f"produce {tid} p{p} x{k}")

    def send_offsets(self) -> None:
        """send_offsets_to_transaction: AddOffsetsToTxn, then TxnOffsetCommit of group GROUP."""
        open_tids = sorted(t for t, c in self.clients.items() if c.txn is not None)
        if not open_tids:
            return self.produce()
        client = self.clients[self.rng.choice(open_tids)]
        offset = self.rng.randrange(1_000)
        self.b.add_offsets_to_txn(client.tid, client.pid, client.epoch, GROUP)
        self.b.txn_offset_commit(client.tid, GROUP, client.pid, client.epoch, {GROUP_TP: offset})
        self.model.txn_offsets[client.txn] = offset
        self.log.append(f"offsets {client.tid} {offset}")

    def end(self, commit: bool) -> None:
        open_tids = sorted(t for t, c in self.clients.items() if c.txn is not None)
        if not open_tids:
            return self.produce()
        tid = self.rng.choice(open_tids)
        self._end(self.clients[tid], commit)

    def _end(self, client: Client, commit: bool) -> None:
        self.b.end_txn(client.tid, client.pid, client.epoch, commit)
        self.model.end(client.tid, commit)
        client.txn = None
        client.added = set()
        self.log.append(f"{'commit' if commit else 'abort'} {client.tid}")

    def timeout(self) -> None:
        """The clock passes transaction.timeout.ms: every open transaction is aborted and its
        producer fenced (its next EndTxn fails)."""
        self.clock.advance(TIMEOUT_MS + CHECK_MS + 1)
        self.b.tick()
        zombies = [c for c in self.clients.values() if c.txn is not None]
        for c in zombies:
            self.model.end(c.tid, commit=False)
        for c in zombies:
            with pytest.raises(FENCED):
                self.b.end_txn(c.tid, c.pid, c.epoch, True)
            del self.clients[c.tid]
        self.log.append(f"timeout ({len(zombies)} aborted)")

    def fence(self) -> None:
        """A second producer with the same transactional id: the first's open transaction is
        aborted; the zombie can neither write nor commit."""
        tid = self.rng.choice(TIDS)
        old = self.clients.pop(tid, None)
        had_open = tid in self.model.open
        if self._init(tid) is None and not had_open:  # the id's markers are in flight: nothing fenced
            if old is not None:
                self.clients[tid] = old
            return
        # (None after aborting the open transaction: its markers wait for an offline partition,
        # the new producer retries later, and the old one is fenced all the same)
        if old is not None:
            online = set(self.online())
            for p in sorted(old.added & online) if old.txn is not None else ():
                batch = rb.encode_batch(0, [(0, self.clock.now_ms(), None, b"zombie", ())],
                                        producer_id=old.pid, producer_epoch=old.epoch,
                                        base_sequence=old.seqs.get(p, 0), attributes=rb.ATTR_TRANSACTIONAL)
                with pytest.raises(FENCED):
                    self.b.produce(TOPIC, p, batch, acks="all")
            with pytest.raises(FENCED):
                self.b.end_txn(tid, old.pid, old.epoch, True)
        self.log.append(f"fence {tid}")

    # -- the broker's side -----------------------------------------------------------------------
    def restart(self) -> None:
        if self.cluster and self.rng.random() < 0.7:
            if len(self.stopped) < 2 and (not self.stopped or self.rng.random() < 0.5):
                b = self.rng.choice(sorted({0, 1, 2} - set(self.stopped)))
                self.b.stop_broker(b)
                self.stopped.append(b)
                self.log.append(f"stop broker {b}")
            else:
                b = self.rng.choice(self.stopped)
                self.b.start_broker(b)
                self.stopped.remove(b)
                self.log.append(f"start broker {b}")
            return
        self.b.close()
        if self.cluster:
            self.b = Cluster(self.data_dir, clock=self.clock, broker_configs=BROKER_CONFIGS)
        else:
            self.b = Broker(self.data_dir, clock=self.clock, broker_configs=BROKER_CONFIGS)
        self.log.append("restart")

    # -- the run ---------------------------------------------------------------------------------
    def check(self, step: int) -> None:
        where = f"after step {step}: {self.log[-6:]}"
        online = self.online()
        want_committed, want_all = self.model.read_committed(), self.model.read_uncommitted()
        assert _read(self.b, "read_committed", online) == {p: want_committed[p] for p in online}, where
        assert _read(self.b, "read_uncommitted", online) == {p: want_all[p] for p in online}, where
        committed = {tp: om.offset for tp, om in self.b.offset_fetch(GROUP).items()}
        assert committed == ({} if self.model.group_offset is None else {GROUP_TP: self.model.group_offset}), where

    def run(self, steps: int) -> None:
        ops = [(self.produce, 6), (lambda: self.end(True), 3), (lambda: self.end(False), 2),
               (self.send_offsets, 1), (self.timeout, 1), (self.fence, 1), (self.restart, 3 if self.cluster else 1)]
        funcs, weights = zip(*ops)
        for step in range(steps):
            self.rng.choices(funcs, weights)[0]()
            self.clock.advance(self.rng.randint(0, 50))
            self.b.tick()
            self.check(step)
        for b in sorted(self.stopped):                # finish: every broker up, every transaction ended
            self.b.start_broker(b)
        self.b.tick()
        for tid in sorted(self.clients):
            c = self.clients[tid]
            if c.txn is not None:
                self._end(c, self.rng.random() < 0.5)
        self.b.tick()
        assert self.online() == list(range(PARTITIONS))
        self.check(steps)
        assert not self.model.open
        states = {d.transactional_id: d.state for d in self.b.describe_transactions(TIDS) if d.error_code == 0}
        assert set(states.values()) <= {"Empty", "CompleteCommit", "CompleteAbort"}, states   # every marker written
        assert self.model.committed and self.model.aborted, "the schedule should commit and abort something"
        self.b.close()


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_transaction_schedules_on_one_broker_match_the_model(tmp_path, seed):
    Schedule(tmp_path, seed, cluster=False).run(60)


@pytest.mark.parametrize("seed", [18, 20, 39, 43, 720])   # offline partitions, markers in flight; 720: a marker lost by a leader change
def test_random_transaction_schedules_on_a_three_broker_cluster_match_the_model(tmp_path, seed):
    Schedule(tmp_path, seed, cluster=True).run(60)
