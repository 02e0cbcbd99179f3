"""Lab: co-partitioning — a join per partition finds every match only if both topics have the same partition count.

What you will see
-----------------
``customers`` customers each place one order, and most of them (``paid_share``) pay
for it. Orders go to topic ``orders`` (``orders_partitions`` partitions), payments to
two payment topics keyed the same way, by customer id: ``payments-matching`` with the
same number of partitions as ``orders``, and ``payments-mismatched`` with
``mismatched_partitions``. Every producer uses the Java client's default partitioner,
``toPositive(murmur2(key)) % partitions``.

A stream join runs as Kafka Streams runs it: one **task per partition number** ``i``; task
``i`` reads partition ``i`` of both topics (one consumer per task, on the broker) and
joins the records it sees on their key. The table shows, per task, how many orders it
read, how many of them have a payment somewhere, and how many payments it actually
found. The total is compared with the true join (every order with its payment).

Why
---
A join per partition is correct only when equal keys sit on the same partition number
in both topics. murmur2 is the same function on both sides, so that holds when both
topics have the same number of partitions (and the same partitioner): the key's
partition is ``h % n`` on both. With 6 and 8 partitions a key sits on ``h % 6`` in one
topic and ``h % 8`` in the other; they agree only when ``h % 24`` is below 6 — a quarter
of the keys — so about **three quarters of the matches are missed**, silently: each task
simply sees an order without its payment. That is why Kafka Streams checks the partition
counts of joined topics and refuses to start (``TopologyException``: topics not
co-partitioned); the fix is to repartition one side into a topic with the other's count.
The lab does that last: a consumer reads all of ``payments-mismatched`` and a producer
writes every record again, same key, to ``payments-repartitioned`` with ``orders``'s count
(what Kafka Streams' ``repartition()`` does through an internal topic); the join then
finds every match again.

The picture ``co-partitioning-matches.png`` shows, per task, the matches that exist for
its orders against the matches it found, for the three payment topics.

Kafka references: Kafka Streams "Joining" (co-partitioning requirements),
``CopartitionedTopicsEnforcer``; ``BuiltInPartitioner.partitionForKey``.

Invariants: the same seed and params give the same text, JSON and PNG bytes; the lab
writes only into its data dir (wiped first) and ``plot_dir``.
Thread-safety: one run per data dir at a time; the module keeps no state between runs.

Run it: ``kafkasim scenario run co-partitioning`` or
``python -m kafkasim.scenarios.co_partitioning``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, Callable, Optional

from kafkasim.arguments import check_arg
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.errors import InvalidArgumentError
from kafkasim.producer import Producer
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import START_MS, check_claim, fresh_broker, main_for, table, lab_clock
from kafkasim.types import TopicPartition

__all__ = ["PARAMS", "CLAIM", "run"]

PARAMS: dict[str, Any] = {
    "customers": 400,              # distinct keys; one order each
    "paid_share": 0.9,             # share of customers who also pay (a payment record)
    "orders_partitions": 6,        # partitions of orders and of payments-matching
    "mismatched_partitions": 8,    # partitions of payments-mismatched
}

CLAIM = ("A join that reads partition i of both topics finds every match when the topics have "
         "the same partition count, misses matches when the counts differ, and finds them all "
         "again once one side is repartitioned to the other's count.")


def _read_all(broker, clock: MockClock, tps: list[TopicPartition]) -> dict[str, list[bytes]]:
    """Every record of ``tps`` from the beginning, by topic: the task's view of its partitions."""
    consumer = Consumer(broker, client_id="lab-join-task", clock=clock, max_poll_records=10_000)
    consumer.assign(tps)
    consumer.seek_to_beginning()
    seen: dict[str, list[bytes]] = defaultdict(list)
    while True:
        batch = consumer.poll()
        if not batch:
            break
        for tp, recs in batch.items():
            seen[tp.topic].extend(r.key for r in recs)
    consumer.close()
    return seen


def _join(broker, clock: MockClock, payments: str, n_orders: int, n_payments: int,
          paid: set) -> list[dict]:
    tasks = []
    for i in range(max(n_orders, n_payments)):
        tps = [TopicPartition(t, i) for t, n in (("orders", n_orders), (payments, n_payments)) if i < n]
        seen = _read_all(broker, clock, tps)
        orders, pays = seen.get("orders", []), set(seen.get(payments, []))
        tasks.append({"task": i, "orders": len(orders),
                      "matches_exist": sum(1 for k in orders if k in paid),
                      "matches_found": sum(1 for k in orders if k in pays),
                      "payments_read": len(pays)})
    return tasks


def _repartition(broker, clock: MockClock, source: str, target: str, seed: int) -> int:
    """Copy every record of ``source`` to ``target`` with its key (murmur2 picks the new partition)."""
    n = broker.partition_count(source)
    consumer = Consumer(broker, client_id="lab-repartition", clock=clock, max_poll_records=10_000)
    consumer.assign([TopicPartition(source, p) for p in range(n)])
    consumer.seek_to_beginning()
    producer = Producer(broker, client_id="lab-repartition", seed=seed, clock=clock, linger_ms=0)
    copied = 0
    while True:
        batch = consumer.poll()
        if not batch:
            break
        for recs in batch.values():
            for r in recs:
                producer.send(target, key=r.key, value=r.value)
                copied += 1
    producer.close()
    consumer.close()
    return copied


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return per-task matches for both payment topics."""
    cfg = {**PARAMS, **params}
    for k in ("customers", "orders_partitions", "mismatched_partitions"):
        check_arg(k, cfg[k], "int", min=1)
    n, m = cfg["orders_partitions"], cfg["mismatched_partitions"]
    if not 0 < cfg["paid_share"] <= 1:
        raise InvalidArgumentError(f"paid_share must be in (0, 1], got {cfg['paid_share']!r}")
    rng = random.Random(seed)
    clock = lab_clock()
    customers = [f"customer-{i:05d}".encode() for i in range(cfg["customers"])]
    paid = {k for k in customers if rng.random() < cfg["paid_share"]}

    with fresh_broker(data_dir, clock) as broker:
        broker.create_topic("orders", n)
        broker.create_topic("payments-matching", n)
        broker.create_topic("payments-mismatched", m)
        producer = Producer(broker, client_id="lab-shop", seed=seed, clock=clock, linger_ms=0)
        for k in customers:
            producer.send("orders", key=k, value=b"order")
            clock.advance(1)
            if k in paid:
                producer.send("payments-matching", key=k, value=b"payment")
                producer.send("payments-mismatched", key=k, value=b"payment")
        producer.close()
        cases = {"matching": _join(broker, clock, "payments-matching", n, n, paid),
                 "mismatched": _join(broker, clock, "payments-mismatched", n, m, paid)}
        broker.create_topic("payments-repartitioned", n)
        copied = _repartition(broker, clock, "payments-mismatched", "payments-repartitioned", seed)
        cases["repartitioned"] = _join(broker, clock, "payments-repartitioned", n, n, paid)

    summary = {}
    for case, tasks in cases.items():
        exist = sum(t["matches_exist"] for t in tasks)
        found = sum(t["matches_found"] for t in tasks)
        summary[case] = {"matches_exist": exist, "matches_found": found,
                         "missed_pct": round(100.0 * (exist - found) / exist, 1) if exist else 0.0}
    echo(f"{len(customers)} customers placed one order each; {len(paid)} of them paid. Orders have "
         f"{n} partitions; payments-matching has {n}, payments-mismatched has {m}; "
         f"payments-repartitioned gets a copy of payments-mismatched with {n}.\n")
    for case, tasks in cases.items():
        topic = f"payments-{case}"
        if case == "repartitioned":
            echo(f"A consumer read payments-mismatched and a producer wrote its {copied} records, "
                 f"same keys, to payments-repartitioned ({n} partitions).")
        echo(f"Join of orders with {topic}, one task per partition number:")
        echo(table(["task", "orders read", "payments read", "matches that exist", "matches found"],
                   [[t["task"], t["orders"], t["payments_read"], t["matches_exist"], t["matches_found"]]
                    for t in tasks]))
        s = summary[case]
        echo(f"Found {s['matches_found']} of {s['matches_exist']} matches: "
             f"{s['missed_pct']}% missed.\n")
    mis = summary["mismatched"]
    if n != m:
        echo(f"With {n} and {m} partitions a key's two records meet only when its hash gives the "
             f"same remainder for both counts; here that was {mis['matches_found']} of "
             f"{mis['matches_exist']} paid orders. The other {mis['missed_pct']}% were not lost: "
             "each order and its payment sit on different partition numbers, read by different "
             "tasks. Kafka Streams refuses to start such a join; repartitioning one side to "
             f"{n} partitions found {summary['repartitioned']['matches_found']} of "
             f"{summary['repartitioned']['matches_exist']} again.")
    else:
        echo(f"payments-mismatched has {m} partitions too, so both topics are co-partitioned "
             "and nothing can be missed: the lab's second case needs a different count.")

    result: dict[str, Any] = {"claim": CLAIM, "simulated_ms": clock.now_ms() - START_MS,
                              "customers": len(customers),
                              "paid": len(paid), "paid_customers": sorted(k.decode() for k in paid),
                              "orders_partitions": n,
                              "mismatched_partitions": m, "repartitioned_records": copied,
                              "tasks": cases, "summary": summary,
                              "pictures": []}
    if plot_dir is not None:
        result["pictures"] = [_picture(plot_dir, cases, n, m)]
    for case in ("matching", "repartitioned"):
        ok = summary[case]
        check_claim(ok["matches_found"] == ok["matches_exist"], CLAIM,
                    f"with {n} partitions on both sides (payments-{case}) the join found "
                    f"{ok['matches_found']} of {ok['matches_exist']} matches")
    check_claim(mis["matches_found"] < mis["matches_exist"], CLAIM,
                f"with {n} and {m} partitions the join still found all {mis['matches_exist']} "
                "matches: the counts are not mismatched")
    return result


def _picture(plot_dir: str, cases: dict[str, list[dict]], n: int, m: int) -> str:
    figure, axes = fig.figure("A per-partition join finds every match only when the partition counts agree",
                              1, 3, sharey=True, size=(13, 5.2))
    for ax, (case, tasks) in zip(axes, cases.items()):
        exist = sum(t["matches_exist"] for t in tasks)
        found = sum(t["matches_found"] for t in tasks)
        counts = f"{n} and {m if case == 'mismatched' else n} partitions"
        fig.grouped([t["task"] for t in tasks],
                    {"matches that exist": [t["matches_exist"] for t in tasks],
                     "matches the task found": [t["matches_found"] for t in tasks]},
                    title=f"orders with payments-{case}\n({counts}): found {found} of {exist}",
                    xlabel="task = partition number", ylabel="", ax=ax)
    axes[0].set_ylabel("order-payment matches (records)")
    for ax in axes[1:]:
        ax.get_legend().remove()          # one legend, on the first panel, is enough
    return fig.save(figure, plot_dir, "co-partitioning-matches")


if __name__ == "__main__":
    raise SystemExit(main_for("co-partitioning"))
