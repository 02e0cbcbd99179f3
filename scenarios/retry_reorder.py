"""Lab: retries reorder and duplicate records — unless the producer is idempotent (or transactional).

What you will see
-----------------
A producer sends ``records`` records of one key (one partition, so Kafka promises
their order), one batch per record (``linger_ms=0``), with ``max_in_flight_requests_per_connection=5``
(Kafka's default). Seeded fault injection makes some batches' *first* attempt fail:

- ``lost_request``: the request never reached the broker; the batch is retried, but
  the batches sent after it (in flight at the same time) were already written →
  the log holds a later record **before** an earlier one (reordering);
- ``lost_response``: the broker wrote the batch but the answer was lost; the retry
  writes it **again** (a duplicate).

The run is done three times with the same faults: with ``enable_idempotence=False`` (and
``acks=1``, the old defaults), with ``enable_idempotence=True``, and, the last step, with
``transactional_id`` set: the same records sent in transactions of ``txn_records`` records
(``init_transactions()``, then ``begin_transaction()`` … ``commit_transaction()``), read back
by a ``read_committed`` consumer. The lab reads each log back and counts, using the
producer's per-key sequence header (``kafkasim.seq``), records out of order, duplicated
records and lost records.

Why
---
Without idempotence the broker cannot tell a retry from new data, nor notice a gap.
With idempotence (KIP-98; on by default since Kafka 3.0) each batch carries the
producer id, epoch and a per-partition sequence number: the broker rejects a batch
whose sequence skips ahead (``OUT_OF_ORDER_SEQUENCE_NUMBER``, so the client retries in
order) and recognises one it already has (a duplicate, acknowledged without writing
it again). That is why Kafka allows up to 5 in-flight requests with idempotence and
still guarantees order; before it, order needed ``max.in.flight.requests.per.connection=1``.

A transactional producer is an idempotent one (``transactional_id`` requires
``enable.idempotence``; the broker drops its retried batches the same way), so its log is in
order and free of duplicates too. What transactions add is atomicity across partitions
and the consumed offsets, and a producer id that survives a restart: a new instance with
the same ``transactional_id`` fences the old one and aborts what it left open. Retries
inside one producer session are idempotence's job; a crash and restart of a
consume-transform-produce job is what only transactions fix (lab ``exactly-once``). Each
commit writes one COMMIT marker (a control batch) into the partition, which takes an
offset: the log's offsets are no longer dense, and a ``read_committed`` reader skips the
markers.

Kafka references: KIP-98, KIP-679 (idempotence on by default), producer configs
``enable.idempotence``, ``max.in.flight.requests.per.connection``, ``retries``; KIP-98
transactions (``transactional.id``, ``isolation.level``).

The picture: each record's per-key sequence number against its position in the log (the
n-th record read), for the three producers (a straight diagonal is perfect order), and the
audit's counts.

Run it: ``kafkasim scenario run retry-reorder --plot-dir pics``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from kafkasim.errors import InvalidArgumentError
from kafkasim.types import SEQUENCE_HEADER, TopicPartition
from kafkasim.consumer import Consumer
from kafkasim.producer import LOST_REQUEST, LOST_RESPONSE, Producer
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import START_MS, check_claim, fresh_broker, main_for, table, lab_clock

__all__ = ["PARAMS", "CLAIM", "run", "audit_log"]

CLAIM = ("With 5 requests in flight, retries reorder and duplicate records unless the producer is "
         "idempotent; a transactional producer keeps that order and adds no duplicates either.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "records": 300,
    "fault_rate": 0.15,          # probability that a batch's first attempt fails
    "lost_response_share": 0.5,  # of the faults, the share that lose the response (duplicates)
    "max_in_flight": 5,
    "txn_records": 50,           # records per transaction in the transactional step
}


def audit_log(seqs: list[int], expected: int) -> dict:
    """Order, duplicate and loss figures for the per-key sequence numbers of a log, in
    offset order: ``out_of_order`` = records whose first copy lands after a higher
    sequence; ``duplicates`` = extra copies; ``lost`` = sequences never written."""
    seen: set[int] = set()
    high = -1
    out_of_order = duplicates = 0
    for s in seqs:
        if s in seen:
            duplicates += 1
            continue
        seen.add(s)
        if s < high:
            out_of_order += 1
        high = max(high, s)
    return {"records_in_log": len(seqs), "out_of_order": out_of_order, "duplicates": duplicates,
            "lost": expected - len(seen), "in_order": out_of_order == 0 and duplicates == 0}


def _read_sequences(broker, topic: str, transactional: bool) -> list[int]:
    """The per-key sequence headers of partition 0 of ``topic`` in log order: the broker's
    records as stored, or, for the transactional step, what a ``read_committed`` consumer
    reads (committed records only, no markers)."""
    seqs: list[int] = []
    if transactional:
        c = Consumer(broker, auto_offset_reset="earliest", isolation_level="read_committed")
        c.assign([TopicPartition(topic, 0)])
        while got := c.poll(max_records=10_000):
            seqs.extend(int(dict(r.headers)[SEQUENCE_HEADER]) for rs in got.values() for r in rs)
        c.close()
        return seqs
    offset = 0
    while True:
        res = broker.fetch(topic, 0, offset)
        if not res.records:
            break
        seqs.extend(int(dict(r.headers)[SEQUENCE_HEADER]) for r in res.records)
        offset = res.records[-1].offset + 1
    return seqs


def _injector(seed: int, rate: float, response_share: float) -> Callable:
    rng = random.Random(f"{seed}:faults")

    def fault(tp, batch_no: int, attempt: int) -> Optional[str]:
        if attempt != 1 or rng.random() >= rate:
            return None
        return LOST_RESPONSE if rng.random() < response_share else LOST_REQUEST
    return fault


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return the audit per producer setting."""
    cfg = {**PARAMS, **params}
    clock = lab_clock()
    if cfg["txn_records"] < 1:
        raise InvalidArgumentError(f"retry-reorder: txn_records {cfg['txn_records']} must be at least 1")
    modes = [("not idempotent", dict(enable_idempotence=False, acks=1)),
             ("idempotent", dict(enable_idempotence=True, acks="all")),
             ("transactional", dict(transactional_id="payments-tx"))]
    out = {}
    with fresh_broker(data_dir, clock) as broker:
        for label, settings in modes:
            topic = "payments-" + {"not idempotent": "plain"}.get(label, label)
            broker.create_topic(topic, 1)
            p = Producer(broker, client_id=f"payments-{label.replace(' ', '-')}", seed=seed,
                         stamp_headers=True, linger_ms=0,   # linger 0: a batch per send
                         max_in_flight_requests_per_connection=cfg["max_in_flight"],
                         fault_injector=_injector(seed, cfg["fault_rate"], cfg["lost_response_share"]),
                         **settings)
            transactional = "transactional_id" in settings
            if transactional:
                p.init_transactions()
            futures = []
            for i in range(cfg["records"]):
                if transactional and i % cfg["txn_records"] == 0:
                    p.begin_transaction()
                futures.append(p.send(topic, key=b"account-17", value=f"payment {i}".encode()))
                if transactional and (i + 1 == cfg["records"] or (i + 1) % cfg["txn_records"] == 0):
                    p.commit_transaction()
            p.flush()
            failed = sum(1 for f in futures if f.failed())
            metrics = p.metrics()["producer-metrics"]
            p.close()
            seqs = _read_sequences(broker, topic, transactional)
            audit = audit_log(seqs, cfg["records"])
            audit.update({"batches": metrics["batch-total"], "requests": metrics["request-total"],
                          "injected_faults": metrics["injected-fault-total"],
                          "duplicate_batches_detected_by_broker": metrics["duplicate-batch-total"],
                          "sequences_in_log": seqs, "failed_sends": failed,
                          "transactions": -(-cfg["records"] // cfg["txn_records"]) if transactional else 0,
                          "log_end_offset": broker.list_offsets(topic, 0, -1)[0]})
            out[label.replace(" ", "_")] = audit
    echo(f"{cfg['records']} records of one key, one batch each (linger_ms=0), "
         f"{cfg['max_in_flight']} in flight, {cfg['fault_rate']:.0%} of first attempts fail.\n")
    rows = [[label] + [out[label.replace(' ', '_')][k] for k in
                       ("batches", "injected_faults", "records_in_log", "out_of_order", "duplicates",
                        "lost", "duplicate_batches_detected_by_broker")] for label, _ in modes]
    echo(table(["producer", "batches", "faults", "records in log", "out of order", "duplicates", "lost",
                "dups caught by broker"], rows))
    echo("\nThe first sequence numbers in the log, in offset order:")
    for label, _ in modes:
        seqs = out[label.replace(' ', '_')]["sequences_in_log"][:16]
        echo(f"  {label + ':':16} {' '.join(map(str, seqs))} ...")
    plain, idem, txn = out["not_idempotent"], out["idempotent"], out["transactional"]
    echo(f"\nWithout idempotence the retries put {plain['out_of_order']} records out of order and "
         f"wrote {plain['duplicates']} duplicates; with it, {idem['out_of_order']} out of order and "
         f"{idem['duplicates']} duplicates: the broker recognised "
         f"{idem['duplicate_batches_detected_by_broker']} retried batches it already had.")
    echo(f"The transactional producer (idempotent too) sent them in {txn['transactions']} transactions: "
         f"{txn['out_of_order']} out of order, {txn['duplicates']} duplicates, {txn['lost']} lost for a "
         f"read_committed reader; the broker recognised {txn['duplicate_batches_detected_by_broker']} "
         f"retried batches. Its log ends at offset {txn['log_end_offset']}, not {txn['records_in_log']}: each "
         "commit wrote a COMMIT marker, which takes an offset and which readers skip.")
    pictures = []
    if plot_dir is not None:
        figure, axes = fig.figure(f"{cfg['records']} records of one key, {cfg['max_in_flight']} "
                                  f"requests in flight, {cfg['fault_rate']:.0%} of first attempts "
                                  "lost: order in the log", 1, 2, size=(14, 5.5))
        show = min(80, max(len(o["sequences_in_log"]) for o in out.values()))
        fig.lines(list(range(show)),
                  {label: (out[label.replace(" ", "_")]["sequences_in_log"] + [float("nan")] * show)[:show]
                   for label, _ in modes}, ax=axes[0],
                  title=f"sequence number by position, first {show} records (diagonal = in order)",
                  xlabel="position in the log (n-th record read)", ylabel="per-key sequence number",
                  step=True)
        for line in axes[0].get_lines():     # transactional lies on idempotent: dash it to show both
            if line.get_label() == "transactional":
                line.set_linestyle((0, (4, 3)))
        axes[0].legend(loc="upper left", fontsize=8)
        fig.grouped(["out of order", "duplicates", "lost"],
                    {label: [out[label.replace(" ", "_")][k] for k in ("out_of_order", "duplicates", "lost")]
                     for label, _ in modes}, ax=axes[1], title="what the audit of the log finds",
                    xlabel="finding", ylabel="records")
        axes[1].axhline(0, color=fig.LIMIT, linewidth=1.5, label="in order, exactly once: 0")
        axes[1].legend(loc="upper right", fontsize=8)
        for bar in axes[1].patches:          # a zero bar is invisible: write every count
            axes[1].annotate(f"{bar.get_height():.0f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                             ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
        pictures.append(fig.save(figure, plot_dir, "retry-reorder"))
    result = {"claim": CLAIM, "pictures": pictures, "simulated_ms": clock.now_ms() - START_MS,
              "records": cfg["records"], **out}
    check_claim(plain["injected_faults"] > 0 and plain["out_of_order"] > 0 and plain["duplicates"] > 0
                and idem["in_order"] and idem["lost"] == 0 and plain["lost"] == 0
                and txn["in_order"] and txn["lost"] == 0, CLAIM,
                f"not idempotent: {plain['out_of_order']} out of order, {plain['duplicates']} "
                f"duplicates; idempotent: {idem['out_of_order']} out of order, "
                f"{idem['duplicates']} duplicates, {idem['lost']} lost; transactional: "
                f"{txn['out_of_order']} out of order, {txn['duplicates']} duplicates, {txn['lost']} lost")
    return result


if __name__ == "__main__":
    raise SystemExit(main_for("retry_reorder"))
