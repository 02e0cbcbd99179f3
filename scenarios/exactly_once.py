"""Lab: exactly-once — a consume-transform-produce job crashes; only transactions keep its totals exact.

What you will see
-----------------
A job reads topic ``payments`` (key: the account, value: a msgpack map
``{"payment": n, "amount": a, "currency": "EUR"}``, as in the crash-recovery lab) and
writes each account's **running total** to an output topic (key: the account, value:
``{"account": ..., "total": t, "currency": "EUR"}``). Its loop is Kafka's
consume-transform-produce: ``poll`` a batch, add each amount to the account's total,
``send`` the new total, then commit the consumed offsets. Every output record carries the
header ``kafkasim-input`` whose value is the ASCII text ``"<input partition>:<input offset>"``
of the payment it counts, so any audit (this lab's, or ``kafkasim audit`` in Spark) can find
input offsets that were counted more than once in the committed output.

After ``crash_after`` payments the job **crashes**: its last totals reached the broker, its
offsets were not committed. A new instance restarts it: it restores each account's total
from the output topic (the last total per key, as a state store restores from its
changelog), joins the group once the dead member's session has timed out, and carries on
from the committed offsets. The lab runs this three times, with the same payments, the same
crash and the same lost produce responses (``fault_rate`` of first attempts), once per
delivery guarantee:

1. **at-least-once**: a plain producer (``enable_idempotence=False``, ``acks="all"``, one
   request in flight so retries keep order), ``commit()`` after the produce. The payments
   since the last commit are counted **twice** (the restored totals already hold them), and
   each lost response wrote a record twice.
2. **idempotent**: ``enable_idempotence=True``. The broker now drops the retried batches
   (same producer id and sequence), but the restarted job is a *new* producer (a new
   producer id): the re-processed payments are new records to the broker, and the totals
   are still counted twice.
3. **transactional**: ``transactional_id="totals-job"``; each poll's totals and its offsets
   (``send_offsets_to_transaction(offsets, consumer.group_metadata())``) are one
   transaction. The restarted job's ``init_transactions()`` fences the crashed instance and
   aborts its open transaction; the offsets were never committed, so the same payments are
   processed again, and a ``read_committed`` reader (the restore and the downstream audit)
   never sees the aborted totals: every account's total is **exact**. When the crashed
   instance wakes up (a zombie) and tries to commit, it gets ``ProducerFencedError``.

Two parameters break the transactional run on purpose: ``downstream_isolation=read_uncommitted``
(the reader sees the aborted totals: payments counted twice) and ``same_transactional_id=false``
(the restarted instance takes a new id, so nobody fences the crashed one: when it wakes up,
its late ``commit_transaction()`` succeeds and its stale totals are committed too). Either
ends in ``ClaimFailedError``.

Each run is checked against a recount of the input: the final total of every account
against the sum of its payments, and every input offset against the ``kafkasim-input``
headers of the output (read as downstream reads it: ``read_committed`` for the
transactional run).

Why
---
Idempotence (KIP-98) makes *one producer session's* retries safe: the broker knows the
producer id and sequence of what it has. It cannot know that a new producer's record
repeats work an old one did. Exactly-once needs the output and the consumed offsets to be
committed **atomically**: transactions write both (the offsets go to
``__consumer_offsets`` through the transaction coordinator), a COMMIT or ABORT marker
ends the transaction in every partition it touched, and ``isolation_level=read_committed``
readers skip aborted records and stop at the last stable offset. The transactional id is
what makes a restart safe: the same id fences the zombie (its epoch is bumped, its late
writes fail with ``ProducerFencedError``) and aborts what it left open. Writing the records
is not enough; the reader downstream must also read committed.

Kafka references: KIP-98 (exactly-once delivery and transactional messaging), KIP-447
(``sendOffsetsToTransaction`` with ``ConsumerGroupMetadata``), producer configs
``enable.idempotence``, ``transactional.id``, ``transaction.timeout.ms``, consumer config
``isolation.level``; Kafka Streams' ``processing.guarantee=exactly_once_v2``.

The picture: per account, its final total minus the recount of its payments (0 is exact),
for each guarantee; and per guarantee, the input payments counted more than once in the
output, split by what the copy is: the same record written again (a retried lost response,
or a zombie's late commit) or the payment counted again into a new total (the restart).

Run it: ``kafkasim scenario run exactly-once --plot-dir pics``.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Callable, Iterable, Optional

import msgpack

from kafkasim.consumer import Consumer
from kafkasim.errors import InvalidArgumentError, KafkaTimeoutError, ProducerFencedError
from kafkasim.producer import LOST_RESPONSE, Producer
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import START_MS, check_claim, fresh_broker, lab_clock, main_for, table
from kafkasim.types import OffsetAndMetadata, TopicPartition

__all__ = ["PARAMS", "CLAIM", "INPUT_HEADER", "GUARANTEES", "run", "audit_output", "input_ref"]

CLAIM = ("After a crash, at-least-once and idempotence alone count payments twice in the totals; "
         "transactions with read_committed give exact totals.")
"""The lab's point, asserted by :func:`run`."""

INPUT_HEADER = "kafkasim-input"
"""Header of every output record: ASCII ``"<input partition>:<input offset>"`` of the input it counts."""

GUARANTEES = ("at-least-once", "idempotent", "transactional")
"""The three runs, in the order the lab shows them."""

PARAMS: dict[str, Any] = {
    "partitions": 3,              # of payments and of each totals topic
    "accounts": 8,
    "records": 600,               # payments
    "max_poll_records": 50,       # one poll = one transaction in the transactional run
    "crash_after": 275,           # payments processed by the first instance before it crashes
    "fault_rate": 0.03,           # share of produce requests whose first response is lost
    "session_timeout_ms": 10_000,
    "downstream_isolation": "read_committed",   # how the transactional run's output is read
    "same_transactional_id": True,  # False: the restarted instance takes a new id and fences nothing
}

IN_TOPIC = "payments"


def input_ref(partition: int, offset: int) -> bytes:
    """The ``kafkasim-input`` header value of the input record at ``partition``, ``offset``."""
    return f"{partition}:{offset}".encode("ascii")


def audit_output(inputs: dict[bytes, tuple[bytes, int]], outputs: Iterable[tuple[bytes, int, bytes]]) -> dict:
    """Check an output against a recount of its input.

    ``inputs``: ``{input ref: (account, amount)}`` for every payment; ``outputs``: the output
    records as downstream reads them, in offset order within each partition, as
    ``(account, total, input ref)``. Returns the recount per account, the final (last)
    total per account, the accounts whose total is wrong and by how much in all
    (``excess``), and per input ref how often it was counted: ``duplicated_inputs`` (refs
    seen more than once), ``extra_records`` (copies past the first), split into
    ``rewritten_copies`` (a copy with the same total: the same record written again) and
    ``recounted_copies`` (a copy with another total: the payment counted again), and
    ``missing`` (refs never seen). ``exact`` is True when nothing is wrong.

    Example: inputs ``{b"0:0": (b"a", 5), b"0:1": (b"a", 7)}`` and outputs
    ``[(b"a", 5, b"0:0"), (b"a", 12, b"0:1"), (b"a", 19, b"0:1")]`` → recount a = 12, final
    a = 19, excess 7, one duplicated input with one restart copy.
    """
    recount: dict[bytes, int] = {}
    for account, amount in inputs.values():
        recount[account] = recount.get(account, 0) + amount
    final: dict[bytes, int] = {}
    totals_per_ref: dict[bytes, list[int]] = {}
    for account, total, ref in outputs:
        final[account] = total
        totals_per_ref.setdefault(ref, []).append(total)
    counts = Counter({ref: len(ts) for ref, ts in totals_per_ref.items()})
    recounted_copies = sum(len(set(ts)) - 1 for ts in totals_per_ref.values())
    extra = sum(c - 1 for c in counts.values())
    wrong = {a.decode(): final.get(a, 0) - recount[a] for a in sorted(recount) if final.get(a, 0) != recount[a]}
    missing = sorted(set(inputs) - set(counts))
    unknown = sorted(set(counts) - set(inputs))
    out = {
        "output_records": sum(counts.values()),
        "duplicated_inputs": sum(1 for c in counts.values() if c > 1),
        "extra_records": extra, "rewritten_copies": extra - recounted_copies, "recounted_copies": recounted_copies,
        "missing": len(missing), "unknown_refs": len(unknown),
        "recount": {a.decode(): v for a, v in sorted(recount.items())},
        "final": {a.decode(): final.get(a, 0) for a in sorted(recount)},
        "wrong_totals": len(wrong), "excess": sum(wrong.values()), "wrong": wrong,
    }
    out["exact"] = extra == 0 and not missing and not unknown and not wrong
    return out


def _payments(broker, clock, seed: int, cfg: dict) -> dict[bytes, tuple[bytes, int]]:
    """Write the payments; ``{input ref: (account, amount)}`` from their acknowledged offsets."""
    rng = random.Random(f"{seed}:payments")
    accounts = [b"account-%02d" % i for i in range(cfg["accounts"])]
    p = Producer(broker, client_id="payments-feed", clock=clock, seed=seed, value_serializer=msgpack.dumps)
    sent = []
    for i in range(cfg["records"]):
        account, amount = rng.choice(accounts), rng.randint(1, 500)
        sent.append((account, amount, p.send(IN_TOPIC, {"payment": i, "amount": amount, "currency": "EUR"},
                                             key=account)))
    p.flush()
    p.close()
    out = {}
    for account, amount, future in sent:
        md = future.get()
        out[input_ref(md.partition, md.offset)] = (account, amount)
    return out


def _producer(broker, clock, guarantee: str, incarnation: int, seed: int, cfg: dict) -> Producer:
    """The job's producer for ``guarantee``; the ``incarnation``-th instance of the job."""
    common = dict(clock=clock, client_id=f"totals-job-{guarantee}-{incarnation}", seed=f"{seed}:{guarantee}:{incarnation}",
                  value_serializer=msgpack.dumps, fault_rate=cfg["fault_rate"], fault_mode=LOST_RESPONSE,
                  linger_ms=0)             # a request per record: each can lose its response
    if guarantee == "at-least-once":    # the pre-3.0 way: no idempotence, order kept by 1 in flight
        return Producer(broker, enable_idempotence=False, acks="all",
                        max_in_flight_requests_per_connection=1, **common)
    if guarantee == "idempotent":
        return Producer(broker, enable_idempotence=True, acks="all", **common)
    txn_id = "totals-job" if cfg["same_transactional_id"] else f"totals-job-{incarnation}"
    return Producer(broker, transactional_id=txn_id, **common)


def _read(broker, topic: str, partitions: int, isolation_level: str) -> list:
    """Every record of ``topic`` a reader with ``isolation_level`` sees now, partition by partition."""
    c = Consumer(broker, auto_offset_reset="earliest", isolation_level=isolation_level,
                 value_deserializer=msgpack.loads)
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    out = []
    while True:
        got = c.poll(max_records=10_000)
        if not got:
            break
        for recs in got.values():
            out.extend(recs)
    c.close()
    return sorted(out, key=lambda r: (r.partition, r.offset))


def _restore(broker, topic: str, partitions: int, isolation_level: str) -> dict[bytes, int]:
    """The job's state, restored from its output topic: the last total of each account."""
    return {r.key: r.value["total"] for r in _read(broker, topic, partitions, isolation_level)}


def _instance(broker, clock, guarantee: str, incarnation: int, seed: int, cfg: dict,
              crash_after: Optional[int]) -> dict:
    """One instance of the job: restore, then poll → transform → produce → commit until the
    input is done, or until it has processed ``crash_after`` payments (then it stops dead:
    no commit, no close, no abort)."""
    out_topic = f"totals-{guarantee}"
    group = f"totals-job-{guarantee}"
    transactional = guarantee == "transactional"
    isolation = cfg["downstream_isolation"] if transactional else "read_uncommitted"
    producer = _producer(broker, clock, guarantee, incarnation, seed, cfg)
    if transactional:
        producer.init_transactions()     # fences the previous instance, aborts its open transaction
    totals = _restore(broker, out_topic, cfg["partitions"], isolation)
    restored = sum(totals.values())
    consumer = Consumer(broker, IN_TOPIC, group_id=group, client_id=f"{group}-{incarnation}",
                        enable_auto_commit=False, auto_offset_reset="earliest",
                        isolation_level="read_committed" if transactional else "read_uncommitted",
                        max_poll_records=cfg["max_poll_records"], value_deserializer=msgpack.loads,
                        session_timeout_ms=cfg["session_timeout_ms"],
                        heartbeat_interval_ms=min(3_000, cfg["session_timeout_ms"] // 3))
    started_ms = clock.now_ms()
    first_record_ms: Optional[int] = None
    processed = 0
    ends = None
    while True:
        got = consumer.poll(timeout_ms=500)
        records = sorted((r for recs in got.values() for r in recs), key=lambda r: (r.partition, r.offset))
        if not records:
            if ends is None:
                ends = consumer.end_offsets([TopicPartition(IN_TOPIC, p) for p in range(cfg["partitions"])])
            if consumer.assignment() and all(consumer.position(tp) >= end for tp, end in ends.items()):
                break
            if clock.now_ms() - started_ms > 10 * cfg["session_timeout_ms"]:
                raise KafkaTimeoutError(f"exactly-once: the {guarantee} job did not finish the input within "
                                        f"{10 * cfg['session_timeout_ms']} ms of polling")
            continue
        if first_record_ms is None:
            first_record_ms = clock.now_ms()
        if transactional:
            producer.begin_transaction()
        for r in records:
            totals[r.key] = totals.get(r.key, 0) + r.value["amount"]
            producer.send(out_topic, {"account": r.key.decode(), "total": totals[r.key], "currency": "EUR"},
                          key=r.key, headers=[(INPUT_HEADER, input_ref(r.partition, r.offset))])
            processed += 1
            if processed == crash_after:
                producer.flush()         # its totals reached the broker; its offsets were never committed
                return {"processed": processed, "crashed": True, "restored_total": restored,
                        "metrics": producer.metrics()["producer-metrics"], "waited_ms": 0,
                        "zombie": producer}
        offsets = {}
        for r in records:
            offsets[TopicPartition(IN_TOPIC, r.partition)] = OffsetAndMetadata(r.offset + 1, "")
        if transactional:
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            producer.commit_transaction()
        else:
            producer.flush()
            consumer.commit(offsets)     # commit after the produce: at-least-once
    metrics = producer.metrics()["producer-metrics"]
    producer.close()
    consumer.close()
    return {"processed": processed, "crashed": False, "restored_total": restored, "metrics": metrics,
            "waited_ms": (first_record_ms or started_ms) - started_ms}


def _one_guarantee(broker, clock, guarantee: str, inputs: dict, seed: int, cfg: dict) -> dict:
    broker.create_topic(f"totals-{guarantee}", cfg["partitions"])
    first = _instance(broker, clock, guarantee, 0, seed, cfg, crash_after=cfg["crash_after"])
    second = _instance(broker, clock, guarantee, 1, seed, cfg, crash_after=None)
    transactional = guarantee == "transactional"
    zombie_commit = None
    if transactional:               # the crashed instance wakes up and commits what it had sent
        try:
            first["zombie"].commit_transaction()
            zombie_commit = "committed"
        except ProducerFencedError as exc:
            zombie_commit = type(exc).__name__
    isolation = cfg["downstream_isolation"] if transactional else "read_uncommitted"
    records = _read(broker, f"totals-{guarantee}", cfg["partitions"], isolation)
    outputs = [(r.key, r.value["total"], dict(r.headers)[INPUT_HEADER]) for r in records]
    audit = audit_output(inputs, outputs)
    audit.update({
        "downstream_isolation": isolation,
        "processed_before_crash": first["processed"], "processed_after_restart": second["processed"],
        "reprocessed": first["processed"] + second["processed"] - len(inputs),
        "restored_total": second["restored_total"],
        "restart_wait_ms": second["waited_ms"],
        "zombie_commit": zombie_commit,
        "lost_responses": int(first["metrics"]["injected-fault-total"] + second["metrics"]["injected-fault-total"]),
        "duplicate_batches_detected_by_broker": int(first["metrics"]["duplicate-batch-total"]
                                                    + second["metrics"]["duplicate-batch-total"]),
    })
    if transactional:
        dirty = _read(broker, f"totals-{guarantee}", cfg["partitions"], "read_uncommitted")
        audit["records_in_log"] = len(dirty)
        audit["invisible_records"] = len(dirty) - len(records)     # aborted, or past the last stable offset
        audit["transactions"] = [{"transactional_id": d.transactional_id, "state": d.state}
                                 for d in broker.describe_transactions(
                                     ["totals-job"] if cfg["same_transactional_id"] else ["totals-job-0", "totals-job-1"])]
    else:
        audit["records_in_log"] = len(records)
        audit["invisible_records"] = 0
    return audit


def _check_params(cfg: dict) -> None:
    if cfg["downstream_isolation"] not in ("read_committed", "read_uncommitted"):
        raise InvalidArgumentError(f"exactly-once: downstream_isolation {cfg['downstream_isolation']!r}: "
                                   "read_committed or read_uncommitted")
    if not 0 < cfg["crash_after"] < cfg["records"]:
        raise InvalidArgumentError(f"exactly-once: crash_after {cfg['crash_after']} must be between 1 and "
                                   f"records - 1 ({cfg['records'] - 1})")
    for k in ("partitions", "accounts", "max_poll_records"):
        if cfg[k] < 1:
            raise InvalidArgumentError(f"exactly-once: {k} {cfg[k]} must be at least 1")
    if not 0 <= cfg["fault_rate"] < 1:
        raise InvalidArgumentError(f"exactly-once: fault_rate {cfg['fault_rate']} must be in [0, 1)")


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return the audit per guarantee."""
    cfg = {**PARAMS, **params}
    _check_params(cfg)
    clock = lab_clock()
    out: dict[str, dict] = {}
    with fresh_broker(data_dir, clock) as broker:
        broker.create_topic(IN_TOPIC, cfg["partitions"])
        inputs = _payments(broker, clock, seed, cfg)
        for guarantee in GUARANTEES:
            out[guarantee] = _one_guarantee(broker, clock, guarantee, inputs, seed, cfg)

    echo(f"{cfg['records']} payments of {cfg['accounts']} accounts on {cfg['partitions']} partitions; "
         f"the job crashes after {cfg['crash_after']} payments, before committing its offsets, and "
         f"restarts; {cfg['fault_rate']:.0%} of produce responses are lost on the first attempt.\n")
    rows = [[g, a["output_records"], a["lost_responses"], a["duplicate_batches_detected_by_broker"],
             a["reprocessed"], a["duplicated_inputs"], a["rewritten_copies"], a["recounted_copies"], a["missing"],
             a["wrong_totals"], f"{a['excess']:,} EUR"] for g, a in out.items()]
    echo(table(["guarantee", "output records", "lost responses", "dups caught by broker", "reprocessed",
                "in twice", "same record again", "counted again", "missing", "wrong totals", "excess"],
               rows))
    alo, idem, txn = (out[g] for g in GUARANTEES)
    echo(f"\nat-least-once: the restarted job re-processed the {alo['reprocessed']} payments after the "
         f"last commit on top of restored totals that already held them, so {alo['wrong_totals']} of "
         f"{cfg['accounts']} account totals are {alo['excess']:,} EUR too high; the lost responses "
         f"wrote {alo['rewritten_copies']} records twice more.")
    echo(f"idempotent: the broker recognised {idem['duplicate_batches_detected_by_broker']} retried "
         f"batches, yet the restart still counted {idem['recounted_copies']} payments twice "
         f"({idem['wrong_totals']} wrong totals, {idem['excess']:,} EUR too much): the new instance is a "
         "new producer id, its records are new to the broker.")
    if txn["exact"]:
        echo(f"transactional: the new instance's init_transactions() aborted the crashed one's open "
             f"transaction ({txn['invisible_records']} records in the log that a read_committed reader skips); "
             f"it re-processed the same {txn['reprocessed']} payments from the uncommitted offsets, and every "
             f"total matches the recount: exactly once. When the crashed instance woke up, its commit "
             f"failed: {txn['zombie_commit']}.")
    else:
        echo(f"transactional, read with {txn['downstream_isolation']}: {txn['duplicated_inputs']} payments "
             f"counted twice, {txn['missing']} missing, {txn['wrong_totals']} wrong totals.")
        if txn["duplicated_inputs"] and txn["downstream_isolation"] == "read_uncommitted":
            echo("  A reader that does not read committed sees the aborted transaction's records.")
        if txn["zombie_commit"] == "committed":
            echo("  Nobody fenced the crashed instance's transactional id: when it woke up, its late commit "
                 "went through, and the payments it had counted before the crash are in the committed output twice.")
        if txn["missing"]:
            echo("  A transaction is still open: read_committed readers stop at its first offset (the last "
                 "stable offset) until it ends.")
    echo(f"\nEvery output record names its payment in the header {INPUT_HEADER} "
         "(\"<input partition>:<input offset>\"), which is how the audit found the payments counted twice.")

    pictures = []
    if plot_dir is not None:
        accounts = sorted(alo["recount"])
        figure, axes = fig.figure(f"A consume-transform-produce job crashes after {cfg['crash_after']} of "
                                  f"{cfg['records']} payments and restarts: totals against a recount "
                                  "of the input", 1, 2, size=(14, 5.6))
        fig.grouped([a.split("-")[-1] for a in accounts],
                    {g: [out[g]["final"][a] - out[g]["recount"][a] for a in accounts] for g in GUARANTEES},
                    ax=axes[0], title="final total minus recount, per account (0 = exact)",
                    xlabel="account (account-NN)", ylabel="difference (EUR)")
        axes[0].axhline(0, color=fig.LIMIT, linewidth=1.5, label="exact (the recount)")
        axes[0].legend(loc="best", fontsize=8)
        fig.grouped(list(GUARANTEES),
                    {"the same record written again (a retry)": [out[g]["rewritten_copies"] for g in GUARANTEES],
                     "counted again into a new total (the restart)": [out[g]["recounted_copies"] for g in GUARANTEES],
                     "missing": [out[g]["missing"] for g in GUARANTEES]},
                    ax=axes[1], title="payments counted more than once in the output, by cause",
                    xlabel="delivery guarantee", ylabel="payments (input offsets)")
        axes[1].axhline(0, color=fig.LIMIT, linewidth=1.5, label="exactly once: 0")
        axes[1].legend(loc="best", fontsize=8)
        axes[1].set_ylim(0, 1.4 * max([1.0] + [b.get_height() for b in axes[1].patches]))   # room for the legend
        for bar in axes[1].patches:     # a zero bar is invisible: write every count
            axes[1].annotate(f"{bar.get_height():.0f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                             ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
        pictures.append(fig.save(figure, plot_dir, "exactly-once"))

    result = {"claim": CLAIM, "pictures": pictures, "simulated_ms": clock.now_ms() - START_MS,
              "records": cfg["records"], "crash_after": cfg["crash_after"], "input_header": INPUT_HEADER,
              **{g.replace("-", "_"): a for g, a in out.items()}}
    check_claim(alo["recounted_copies"] > 0 and alo["excess"] > 0 and alo["missing"] == 0
                and idem["recounted_copies"] > 0 and idem["excess"] > 0 and idem["missing"] == 0
                and idem["rewritten_copies"] == 0 and txn["exact"] and txn["zombie_commit"] == "ProducerFencedError",
                CLAIM,
                f"at-least-once: {alo['duplicated_inputs']} payments counted twice, {alo['excess']} EUR "
                f"excess; idempotent: {idem['duplicated_inputs']} counted twice ({idem['rewritten_copies']} "
                f"records written again), {idem['excess']} EUR excess; transactional (read with "
                f"{txn['downstream_isolation']}): {txn['duplicated_inputs']} counted twice, "
                f"{txn['missing']} missing, {txn['wrong_totals']} wrong totals, the zombie's late commit: "
                f"{txn['zombie_commit']}")
    return result


if __name__ == "__main__":
    raise SystemExit(main_for("exactly_once"))
