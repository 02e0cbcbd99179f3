"""Lab: retries and duplicates with a real client — confluent-kafka through ``kafkasim serve``.

What you will see
-----------------
The real-client counterpart of lab ``retry-reorder``. ``kafkasim serve`` runs in-process
on 127.0.0.1 with fault rules (:mod:`kafkasim.faults`, seeded), and a **confluent-kafka**
``Producer`` (librdkafka, the client most non-Java applications use) sends ``records``
records of one key (``account-17``) to a one-partition topic, ``batch_records`` records per
batch (``batch.num.messages``, ``linger.ms=50``: full batches), with
``max.in.flight.requests.per.connection`` = ``max_in_flight`` (5, the default) and
``acks=all``. Each record carries its send number in the header ``kafkasim.seq`` (and the
producer in ``kafkasim.producer``), so the log can be audited afterwards. Three cases, each
on a topic of its own:

1. ``payments-drops`` — ``enable.idempotence=false``, retries on: a rule
   ``drop="after"`` closes the connection after ``drop_probability`` of the Produce
   requests were **applied** (the records are in the log, the answer never comes). The
   client retries the batch and the broker, which cannot tell a retry from new data, writes
   it again: **duplicates**.
2. ``payments-errors`` — the same producer: a rule answers ``error_probability`` of the
   Produce requests to the partition with ``error`` (``NOT_LEADER_OR_FOLLOWER``, retriable;
   nothing is written), ``error_latency_ms`` late. The batches sent after it were already in
   flight and are written; the failed batch is retried behind them: **reordering** (a later
   batch lands before an earlier one).
3. ``payments-idempotent`` — ``enable.idempotence=true`` and **both** rules: the log holds
   every record once, in send order.

After the server stops, the lab reads each topic's log from the data dir and counts records
out of order (a first copy that lands after a higher send number), duplicated records (extra
copies) and lost ones, with the audit of lab ``retry-reorder``; ``kafkasim audit ordering
--data-dir D`` (Spark) over the same data dir names the same duplicates and inversions.

Real time is involved: the server and the client run on the wall clock, so how many requests
a rule hits (its draws are seeded, but which request is the n-th depends on when batches and
retries go out) and so the counts vary a little from run to run. The claim does not: without
idempotence there are duplicates and reorderings, with it none. (At the defaults a case sends
about 30 Produce requests, so a rule with probability 0.2 misses all of them about once in
800 runs; the lab then says so and its claim fails.) This lab is the one whose text is not
the same for the same seed.

Why
---
Without idempotence a Produce request carries no identity: a retry after a lost answer is new
data, and a batch retried behind batches that were in flight is written after them. With
idempotence (KIP-98; librdkafka's ``enable.idempotence``) each batch carries the producer id,
epoch and a per-partition sequence number: the broker answers a batch it already has as a
duplicate (acknowledged, not written again) and refuses one whose sequence skips ahead
(``OUT_OF_ORDER_SEQUENCE_NUMBER``), so the client resends in order. That is why
``max.in.flight.requests.per.connection`` may stay at 5 with idempotence. Without it, Kafka's
documentation says to use 1 in flight for order; a lost answer still duplicates then. Try
``--param max_in_flight=1``: with librdkafka 2.16 the batch right after a failed one still
went out before the retry in our runs (the retry is put back on the partition's queue after
the next request was built), so records still reorder; idempotence is the setting that
keeps the order.

Kafka references: KIP-98; producer configs ``enable.idempotence``, ``acks``, ``retries``,
``max.in.flight.requests.per.connection``; librdkafka CONFIGURATION.md and INTRODUCTION.md
("Idempotent Producer"); faults like librdkafka's mock cluster
(``rd_kafka_mock_push_request_errors``).

The picture: for each case, each record's send number (``kafkasim.seq``) against its position
in the log (the diagonal is perfect order), duplicates marked with a red x and records out of
order with an orange dot; the panel titles give the counts.

Run it: ``kafkasim scenario run retries-and-duplicates --plot-dir pics`` (needs confluent-kafka,
installed with ``pip install -e '.[dev]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from typing import Any, Callable, Iterator, Optional

from kafkasim.errors import InvalidArgumentError, KafkaTimeoutError
from kafkasim.faults import Faults, error_code_named
from kafkasim.types import PRODUCER_HEADER, SEQUENCE_HEADER
from kafkasim.broker import Broker
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import check_claim, fresh_dir, lab_clock, main_for, table
from kafkasim.scenarios.retry_reorder import audit_log

__all__ = ["PARAMS", "CLAIM", "CASES", "run", "log_findings"]

CLAIM = ("With a real confluent-kafka producer, dropped answers duplicate records and retriable errors "
         "with 5 requests in flight reorder them unless the producer is idempotent; with idempotence "
         "there are neither.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "records": 300,
    "batch_records": 10,          # batch.num.messages
    "max_in_flight": 5,           # max.in.flight.requests.per.connection
    "drop_probability": 0.2,     # of Produce requests: applied, then the connection drops
    "error_probability": 0.2,    # of Produce requests: answered with `error`, not applied
    "error": "NOT_LEADER_OR_FOLLOWER",
    "error_latency_ms": 30,       # the error answer comes this late (later batches are in flight)
}

CASES = (("payments-drops", "not idempotent, drops", False, ("drop",)),
         ("payments-errors", "not idempotent, errors", False, ("error",)),
         ("payments-idempotent", "idempotent, both", True, ("drop", "error")))
"""``(topic, label, enable.idempotence, faults)`` of the three cases, in order."""

KEY = b"account-17"
START_TIMEOUT_S = 60.0
FLUSH_TIMEOUT_S = 120.0


def log_findings(seqs: list[int], expected: int) -> dict:
    """:func:`~kafkasim.scenarios.retry_reorder.audit_log` of the send numbers in log order,
    plus the positions (n-th record read) of the duplicates and of the out-of-order records."""
    out = audit_log(seqs, expected)
    seen: set[int] = set()
    high = -1
    dup_at, late_at = [], []
    for i, s in enumerate(seqs):
        if s in seen:
            dup_at.append(i)
            continue
        seen.add(s)
        if s < high:
            late_at.append(i)
        high = max(high, s)
    out.update(duplicate_positions=dup_at, out_of_order_positions=late_at)
    return out


@contextlib.contextmanager
def _served(data_dir: str, faults: Faults) -> Iterator[str]:
    """``kafkasim serve`` over ``data_dir`` on 127.0.0.1 and a free port, on a thread of its
    own, applying ``faults``; yields the bootstrap address; always stopped and joined."""
    from kafkasim.server.runner import serve     # the wire stack loads when the lab runs, not when it is listed

    ready: queue.Queue = queue.Queue()
    stop = asyncio.Event()

    def on_ready(host, port, _metrics_port):
        ready.put((f"{host}:{port}", asyncio.get_running_loop()))

    def run_server():
        try:
            serve(data_dir, "127.0.0.1", 0, on_ready=on_ready, stop=stop, faults=faults)
        except BaseException as exc:        # reported to the lab, not lost in the thread
            ready.put(exc)

    thread = threading.Thread(target=run_server, name="retries-and-duplicates-serve", daemon=True)
    thread.start()
    try:
        got = ready.get(timeout=START_TIMEOUT_S)
    except queue.Empty:
        raise KafkaTimeoutError(f"retries-and-duplicates: kafkasim serve did not listen within "
                                f"{START_TIMEOUT_S:.0f} s") from None
    if isinstance(got, BaseException):
        raise got
    bootstrap, loop = got
    try:
        yield bootstrap
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)


def _client():
    try:
        import confluent_kafka
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError as exc:
        raise InvalidArgumentError("lab retries-and-duplicates needs confluent-kafka, the real client it "
                                   "drives (pip install -e '.[dev]')") from exc
    return confluent_kafka.Producer, AdminClient, NewTopic


def _produce(producer_cls, bootstrap: str, topic: str, idempotent: bool, cfg: dict) -> dict:
    """Send the case's records with a confluent-kafka producer; delivery counts."""
    conf = {"bootstrap.servers": bootstrap, "client.id": topic, "acks": "all",
            "enable.idempotence": idempotent, "linger.ms": 50, "batch.num.messages": cfg["batch_records"],
            "max.in.flight.requests.per.connection": cfg["max_in_flight"],
            "retry.backoff.ms": 20, "retry.backoff.max.ms": 50, "message.timeout.ms": 60_000,
            "log_level": 0}                  # the drops are meant: no librdkafka warnings on stderr
    if not idempotent:
        conf["retries"] = 2_147_483_647     # retries on (librdkafka's default, said out loud)
    producer = producer_cls(conf)
    acked: list[int] = []
    failed: list[str] = []

    def report(err, msg):
        if err is None:
            acked.append(msg.offset())
        else:
            failed.append(err.name())
    for i in range(cfg["records"]):
        producer.produce(topic, b"payment %d" % i, KEY, headers=[
            (PRODUCER_HEADER, topic.encode()), (SEQUENCE_HEADER, str(i).encode())], on_delivery=report)
    left = producer.flush(FLUSH_TIMEOUT_S)
    if left:
        raise KafkaTimeoutError(f"retries-and-duplicates: {left} records of {topic} were not delivered "
                                f"within {FLUSH_TIMEOUT_S:.0f} s")
    return {"acknowledged": len(acked), "failed": len(failed), "failures": sorted(set(failed))}


def _sequences(broker: Broker, topic: str) -> list[int]:
    """The ``kafkasim.seq`` header of every record of partition 0 of ``topic``, in log order."""
    seqs: list[int] = []
    offset = 0
    while True:
        res = broker.fetch(topic, 0, offset)
        if not res.records:
            return seqs
        seqs.extend(int(dict(r.headers)[SEQUENCE_HEADER]) for r in res.records)
        offset = res.records[-1].offset + 1


def _check(cfg: dict) -> None:
    for k in ("records", "batch_records"):
        if not isinstance(cfg[k], int) or cfg[k] < 1:
            raise InvalidArgumentError(f"retries-and-duplicates: {k} {cfg[k]!r} must be an integer of at least 1")
    if not isinstance(cfg["max_in_flight"], int) or not 1 <= cfg["max_in_flight"] <= 5:
        raise InvalidArgumentError(f"retries-and-duplicates: max_in_flight {cfg['max_in_flight']!r} must be "
                                   "from 1 to 5 (an idempotent producer allows at most 5)")
    for k in ("drop_probability", "error_probability"):
        if not 0 <= cfg[k] <= 1:
            raise InvalidArgumentError(f"retries-and-duplicates: {k} {cfg[k]!r} must be in [0, 1]")
    if not isinstance(cfg["error_latency_ms"], int) or cfg["error_latency_ms"] < 0:
        raise InvalidArgumentError(f"retries-and-duplicates: error_latency_ms {cfg['error_latency_ms']!r} "
                                   "must be an integer of at least 0")
    error_code_named(cfg["error"])       # a Kafka error name or code, else InvalidArgumentError naming it


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return the audit of each case's log."""
    cfg = {**PARAMS, **params}
    _check(cfg)
    producer_cls, admin_cls, new_topic = _client()
    data_dir = fresh_dir(data_dir)
    faults = Faults(seed=seed)            # the rules' draws are seeded; the server's time is real
    rules: dict[str, list[dict]] = {}
    deliveries: dict[str, dict] = {}
    with _served(data_dir, faults) as bootstrap:
        admin = admin_cls({"bootstrap.servers": bootstrap, "log_level": 0})
        for future in admin.create_topics([new_topic(topic, 1, 1) for topic, *_ in CASES]).values():
            future.result(30)
        for topic, _label, idempotent, kinds in CASES:
            added = []
            if "drop" in kinds and cfg["drop_probability"] > 0:
                added.append(faults.add(api="Produce", topic=topic, partition=0, drop="after",
                                        probability=cfg["drop_probability"]))
            if "error" in kinds and cfg["error_probability"] > 0:
                added.append(faults.add(api="Produce", topic=topic, partition=0, error=cfg["error"],
                                        latency_ms=cfg["error_latency_ms"],
                                        probability=cfg["error_probability"]))
            deliveries[topic] = _produce(producer_cls, bootstrap, topic, idempotent, cfg)
            rules[topic] = [r.to_json() for r in added]
    out: dict[str, dict] = {}
    with Broker(data_dir, clock=lab_clock()) as broker:      # the log as stored, read after the server stopped
        for topic, label, idempotent, _kinds in CASES:
            seqs = _sequences(broker, topic)
            findings = log_findings(seqs, cfg["records"])
            hits = {("drop" if r["drop"] else "error"): r["hits"] for r in rules[topic]}
            out[topic] = {"label": label, "enable_idempotence": idempotent, **deliveries[topic],
                          "dropped_after_append": hits.get("drop", 0), "errors_injected": hits.get("error", 0),
                          "rules": rules[topic], **findings, "sequences_in_log": seqs}
    drops, errors, idem = (out[topic] for topic, *_ in CASES)

    echo(f"{cfg['records']} records of one key to a one-partition topic, {cfg['batch_records']} per batch, "
         f"{cfg['max_in_flight']} requests in flight, acks=all, through kafkasim serve (confluent-kafka "
         f"{_version()}).")
    echo(f"Faults (seed {seed}): {cfg['drop_probability']:.0%} of Produce requests applied and then the "
         f"connection dropped; {cfg['error_probability']:.0%} answered {error_code_named(cfg['error'])[1]} "
         f"after {cfg['error_latency_ms']} ms, not applied.\n")
    echo(table(["case", "idempotence", "drops after append", "errors", "records in log", "out of order",
                "duplicates", "lost"],
               [[o["label"], "on" if o["enable_idempotence"] else "off", o["dropped_after_append"],
                 o["errors_injected"], o["records_in_log"], o["out_of_order"], o["duplicates"], o["lost"]]
                for o in out.values()]))
    echo("")
    for o in (drops, errors):
        echo(f"  {o['label']}:  {_excerpt(o)}")
    echo("")
    echo(f"Without idempotence each dropped answer made the client resend a batch the broker already had: "
         f"{drops['duplicates']} records are in the log twice. Each error made the client resend a batch "
         f"behind the ones already in flight: {errors['out_of_order']} records landed after a later one.")
    echo(f"With idempotence, under the same two rules ({idem['dropped_after_append']} drops, "
         f"{idem['errors_injected']} errors), the broker recognised every resent batch by its producer id "
         f"and sequence: {idem['duplicates']} duplicates, {idem['out_of_order']} out of order, "
         f"{idem['lost']} lost.")
    echo("The server runs on real time, so these counts vary a little between runs; the verdict does not.")
    if errors["errors_injected"] and not errors["out_of_order"]:
        echo(f"No record landed out of order in spite of {errors['errors_injected']} errors: no batch was "
             f"written between a failed batch and its retry (max_in_flight={cfg['max_in_flight']}).")
    for o, kind, p in ((drops, "dropped_after_append", "drop_probability"),
                       (errors, "errors_injected", "error_probability")):
        if not o[kind]:
            why = "it is 0" if not cfg[p] else "the seeded draws missed every request (rare)"
            echo(f"No fault hit {o['label']}: {p} {cfg[p]} and {why}; there was nothing to retry.")

    pictures: list[str] = []
    if plot_dir:
        pictures.append(_draw(out, cfg, plot_dir))
    result = {"claim": CLAIM, "pictures": pictures, "records": cfg["records"], "seed": seed,
              "cases": out, "timing_dependent": True}
    check_claim(drops["duplicates"] > 0 and errors["out_of_order"] > 0 and idem["duplicates"] == 0
                and idem["out_of_order"] == 0 and idem["lost"] == 0, CLAIM,
                f"not idempotent with drops: {drops['duplicates']} duplicates "
                f"({drops['dropped_after_append']} drops); not idempotent with errors: "
                f"{errors['out_of_order']} out of order ({errors['errors_injected']} errors, "
                f"max_in_flight={cfg['max_in_flight']}); idempotent: {idem['duplicates']} duplicates, "
                f"{idem['out_of_order']} out of order, {idem['lost']} lost")
    return result


def _excerpt(o: dict, before: int = 4, width: int = 24) -> str:
    """The send numbers in log order around the first duplicate or out-of-order record (from
    ``before`` records ahead of it), the whole log's start when there is none."""
    seqs = o["sequences_in_log"]
    first = min(o["duplicate_positions"][:1] + o["out_of_order_positions"][:1], default=before)
    start = max(0, first - before)
    text = " ".join(str(s) for s in seqs[start:start + width])
    return f"{'... ' if start else ''}{text}{' ...' if start + width < len(seqs) else ''}"


def _version() -> str:
    import confluent_kafka

    version = confluent_kafka.version()
    return f"{version[0] if isinstance(version, tuple) else version}, librdkafka {confluent_kafka.libversion()[0]}"


def _draw(out: dict, cfg: dict, plot_dir: str) -> str:
    figure, axes = fig.figure(f"A real confluent-kafka producer through kafkasim serve: drops duplicate, "
                              f"errors with {cfg['max_in_flight']} in flight reorder, idempotence neither",
                              1, len(out), size=(15, 5.2), sharey=True)
    for ax, o in zip(axes, out.values()):
        seqs = o["sequences_in_log"]
        fig.lines(list(range(len(seqs))), {"send number": seqs}, ax=ax,
                  title=f"{o['label']}: {o['duplicates']} duplicates, {o['out_of_order']} out of order",
                  xlabel="position in the log (n-th record stored)", ylabel="send number (kafkasim.seq)",
                  step=True)
        if o["duplicate_positions"]:
            ax.scatter(o["duplicate_positions"], [seqs[i] for i in o["duplicate_positions"]], marker="x",
                       color=fig.LIMIT, s=18, zorder=3, label=f"duplicate ({o['duplicates']})")
        if o["out_of_order_positions"]:
            ax.scatter(o["out_of_order_positions"], [seqs[i] for i in o["out_of_order_positions"]],
                       marker="o", color=fig.PALETTE[1], s=10, zorder=3,
                       label=f"out of order ({o['out_of_order']})")
        ax.legend(loc="upper left", fontsize=8)
    return fig.save(figure, plot_dir, "retries-and-duplicates")


if __name__ == "__main__":
    raise SystemExit(main_for("retries_duplicates"))
