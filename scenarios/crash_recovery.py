"""Lab: crash recovery — a broker killed during writes: the torn tail is truncated, what was written survives.

What you will see
-----------------
A separate **process** opens a broker on the lab's data dir and produces payment records
with the real producer (``records_per_batch`` records per batch; each value a msgpack map
``{"payment": n, "amount": a, "currency": "EUR"}``, ``value_serializer=msgpack.dumps`` as in
kafka-python's README):

1. ``flushed_records`` records, then ``Broker.flush()``: the segment is fsynced and the
   recovery point checkpoint names its end;
2. ``unflushed_records`` more records, acknowledged by the broker (``acks=1``) but never
   fsynced;
3. the process is then killed with ``SIGKILL`` (no clean shutdown, no marker file).

A kill in the middle of a ``write()`` leaves part of a batch at the end of the segment.
The lab writes that **torn tail** deterministically: the first ``torn_fraction`` of the
bytes of the next batch, encoded exactly as the broker would have written it, appended
to the real segment file. Then a new broker opens the data dir. Its recovery report (the
log's ``recovery_report``, also raised as a ``RuntimeWarning``) names the truncation,
and the table shows the log end offset and the segment size at every step.

Why
---
Without the clean-shutdown marker, the log does not trust its active segment: it
validates every batch from the recovery point (the last flush) to the end of the
file — length, CRC, contiguous offsets — and truncates the first invalid batch and
everything after it (Kafka's ``LogLoader`` / ``LogSegment.recover``). A batch is the unit
of atomicity: half a batch fails its length or CRC check and disappears, whole batches
stay. So **everything that was flushed survives**, and here so does everything that was
acknowledged: ``SIGKILL`` ends the process, not the operating system, and the page
cache still holds what the broker wrote. Only a power loss could lose the acknowledged
but unflushed records — Kafka answers that with replication (``acks=all``,
``min.insync.replicas``), not with an fsync per write. The consumer then reads every
acknowledged record, in order, and nothing of the torn batch.

The picture ``crash-recovery-segment.png`` draws the segment file before and after
recovery: flushed bytes, acknowledged but unflushed bytes, and the torn tail.

Kafka references: ``LogLoader`` (recovery from the recovery point),
``LogSegment.recover``, ``log.flush.interval.messages`` / ``flush.ms`` (Kafka leaves
fsync to the OS by default), "Kafka: The Definitive Guide" ch. 6 (reliability).

Invariants: the same seed and params give the same text, JSON and PNG bytes; the lab
writes only into its data dir (wiped first) and ``plot_dir``. The writer process is always killed
and reaped before ``run`` returns (if the lab itself dies, the writer's stdin closes and it exits).
Thread-safety: one run per data dir at a time; the module keeps no state between runs.

Run it: ``kafkasim scenario run crash-recovery`` or
``python -m kafkasim.scenarios.crash_recovery``.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import warnings
from typing import Any, Callable, Optional

import msgpack

from kafkasim.broker import Broker
from kafkasim.arguments import check_arg
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.errors import InvalidArgumentError, KafkaTimeoutError
from kafkasim.producer import Producer
from kafkasim.records.record_batch import encode_batch
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import START_MS, check_claim, fresh_broker, main_for, table, lab_clock
from kafkasim.storage.layout import partition_dir_name, segment_name
from kafkasim.types import TopicPartition

__all__ = ["PARAMS", "CLAIM", "run", "child_main"]

PARAMS: dict[str, Any] = {
    "flushed_records": 200,     # written, then fsynced by Broker.flush()
    "unflushed_records": 60,    # written and acknowledged, never fsynced
    "records_per_batch": 10,    # records per produced batch
    "torn_fraction": 0.5,       # share of the next batch's bytes left by the kill (0 = none)
}

CLAIM = ("After a kill during writes, reopening the log truncates the torn tail and keeps every "
         "record that was written before it, flushed ones included.")

TOPIC = "payments"
WRITER_TIMEOUT_S = 120
"""Wall-clock seconds the writer process gets to report its writes before it is killed anyway."""


def _value(i: int, rng: random.Random) -> dict:
    """Payment ``i``, a structured value (sent with ``value_serializer=msgpack.dumps``)."""
    return {"payment": i, "amount": rng.randint(1, 500), "currency": "EUR"}


def child_main(argv: Optional[list[str]] = None) -> None:
    """The writer process: ``data_dir flushed unflushed per_batch seed``; prints one JSON line
    per step and waits on stdin for the parent's SIGKILL."""
    data_dir, flushed, unflushed, per_batch, seed = (argv or sys.argv[1:])[:5]
    flushed, unflushed, per_batch = int(flushed), int(unflushed), int(per_batch)
    rng = random.Random(int(seed))
    clock = MockClock(START_MS)
    broker = Broker(data_dir, clock=clock)
    producer = Producer(broker, client_id="lab-payments", clock=clock, linger_ms=0, acks=1,
                        value_serializer=msgpack.dumps)

    def write(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.send(TOPIC, key=f"account-{i % 7}".encode(), value=_value(i, rng))
            if (i + 1) % per_batch == 0:
                producer.flush()
                clock.advance(1)
        producer.flush()

    def state(step: str) -> None:
        p = broker.describe_topic(TOPIC)["partitions"][0]
        print(json.dumps({"step": step, "log_end_offset": p["log_end_offset"],
                          "size_bytes": p["size_bytes"], "clock_ms": clock.now_ms()}), flush=True)

    write(0, flushed)
    broker.flush()
    state("flushed")
    write(flushed, unflushed)
    state("acknowledged")
    sys.stdin.read()          # the parent kills us here


def _kill_during_writes(data_dir: str, cfg: dict, seed: int) -> tuple[dict, dict, int]:
    cmd = [sys.executable, "-c",
           "from kafkasim.scenarios.crash_recovery import child_main; child_main()",
           data_dir, str(cfg["flushed_records"]), str(cfg["unflushed_records"]),
           str(cfg["records_per_batch"]), str(seed)]
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(WRITER_TIMEOUT_S, child.kill)   # a stuck writer cannot hang the lab
    watchdog.start()
    try:
        flushed = json.loads(child.stdout.readline() or "null")
        acked = json.loads(child.stdout.readline() or "null")
        if flushed is None or acked is None:
            raise KafkaTimeoutError(f"the writer process did not report its writes within "
                                    f"{WRITER_TIMEOUT_S} s or failed: {child.stderr.read()[-2000:]}")
        child.send_signal(signal.SIGKILL)
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
        code = child.wait()
        child.stdin.close()
        child.stdout.close()
        child.stderr.close()
    return flushed, acked, code


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return offsets and sizes at every step."""
    cfg = {**PARAMS, **params}
    if not 0 <= cfg["torn_fraction"] < 1:
        raise InvalidArgumentError(f"torn_fraction must be in [0, 1), got {cfg['torn_fraction']!r}")
    check_arg("records_per_batch", cfg["records_per_batch"], "int", min=1)
    check_arg("flushed_records", cfg["flushed_records"], "int", min=1)
    check_arg("unflushed_records", cfg["unflushed_records"], "int", min=0)
    clock = lab_clock()
    with fresh_broker(data_dir, clock) as broker:
        broker.create_topic(TOPIC, 1)
        data_dir = broker.data_dir
    flushed, acked, code = _kill_during_writes(data_dir, cfg, seed)

    segment = os.path.join(data_dir, partition_dir_name(TOPIC, 0), segment_name(0))
    next_offset = acked["log_end_offset"]
    ts = acked["clock_ms"]
    batch = encode_batch(next_offset, [(d, ts, b"account-0", msgpack.dumps({"payment": next_offset + d, "torn": True}),
                                        ()) for d in range(cfg["records_per_batch"])])
    torn = batch[:int(len(batch) * cfg["torn_fraction"])]
    with open(segment, "ab") as f:
        f.write(torn)
    size_torn = os.path.getsize(segment)

    quiet = logging.NullHandler()      # the report is shown below; no stray last-resort stderr line
    storage_log = logging.getLogger("kafkasim.storage")
    storage_log.addHandler(quiet)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            broker = Broker(data_dir, clock=clock)
        finally:
            storage_log.removeHandler(quiet)
        with broker:
            report = broker.log(TOPIC, 0).recovery_report
            after = broker.describe_topic(TOPIC)["partitions"][0]
            consumer = Consumer(broker, client_id="lab-audit", clock=clock, max_poll_records=100_000,
                                value_deserializer=msgpack.loads)
            consumer.assign([TopicPartition(TOPIC, 0)])
            consumer.seek_to_beginning()
            values = [r.value for recs in consumer.poll().values() for r in recs]
            consumer.close()
    warned = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    rng = random.Random(seed)
    expected = [_value(i, rng) for i in range(acked["log_end_offset"])]

    steps = [
        {"step": f"{cfg['flushed_records']} records written, then fsynced (the recovery point)",
         "log_end_offset": flushed["log_end_offset"], "size_bytes": flushed["size_bytes"]},
        {"step": f"{cfg['unflushed_records']} more written and acknowledged, not fsynced",
         "log_end_offset": acked["log_end_offset"], "size_bytes": acked["size_bytes"]},
        {"step": f"writer killed with SIGKILL (exit status {code}), {len(torn)} of the next batch's "
                 f"{len(batch)} bytes on disk", "log_end_offset": None, "size_bytes": size_torn},
        {"step": "reopened: validated from the recovery point, torn tail truncated",
         "log_end_offset": after["log_end_offset"], "size_bytes": after["size_bytes"]},
    ]
    echo("A writer process produced to partition payments-0 and was killed; then a new broker "
         "opened the same data dir.\n")
    echo(table(["step", "log end offset", "segment size"],
               [[s["step"], "-" if s["log_end_offset"] is None else s["log_end_offset"],
                 f"{s['size_bytes']} bytes"] for s in steps]))
    echo("\nThe broker's recovery report:")
    report = [line.replace(data_dir + os.sep, "") for line in report]
    for line in report or ["(nothing to report)"]:
        echo(f"  {line}")
    intact = values == expected
    if intact:
        echo(f"\nThe consumer read {len(values)} records: every acknowledged record, in order, "
             f"with its value (offsets 0 to {len(values) - 1}); none of the torn batch.")
        echo(f"The {cfg['unflushed_records']} acknowledged but unflushed records survived too: "
             "SIGKILL ends the process, and the page cache still held what it had written. A power "
             "loss could lose them; Kafka protects against that with replicas, not with fsync.")
    else:
        echo(f"\nThe consumer read {len(values)} records, not the {len(expected)} acknowledged ones "
             "in order: recovery lost or changed records it should have kept.")

    result: dict[str, Any] = {
        "claim": CLAIM, "simulated_ms": clock.now_ms() - START_MS, "steps": steps, "exit_status": code,
        "torn_bytes": len(torn), "batch_bytes": len(batch), "recovery_report": report,
        "warnings": len(warned), "records_read": len(values), "records_intact": intact,
        "pictures": [],
    }
    if plot_dir is not None:
        result["pictures"] = [_picture(plot_dir, flushed, acked, size_torn, after)]
    check_claim(intact and after["log_end_offset"] == acked["log_end_offset"], CLAIM,
                f"after recovery the log ends at offset {after['log_end_offset']} and {len(values)} "
                f"records were read; {acked['log_end_offset']} were acknowledged")
    check_claim(after["size_bytes"] == acked["size_bytes"] and any("truncated" in line for line in report),
                CLAIM, f"recovery truncated nothing (segment {size_torn} bytes before, "
                f"{after['size_bytes']} after, torn tail {len(torn)} bytes): there was no torn tail to cut")
    return result


def _picture(plot_dir: str, flushed: dict, acked: dict, size_torn: int, after: dict) -> str:
    figure, (ax,) = fig.figure("Segment 0 of payments-0: the torn tail is cut, everything written "
                               "before it stays", size=(10, 3.6))
    f, a = flushed["size_bytes"], acked["size_bytes"]
    green, blue, red = fig.PALETTE[2], fig.PALETTE[0], fig.LIMIT
    rows = [("before recovery", [(0, f, green, "flushed (fsynced)"),
                                 (f, a - f, blue, "acknowledged, not fsynced"),
                                 (a, size_torn - a, red, "torn tail")]),
            ("after recovery", [(0, f, green, None),
                                (f, after["size_bytes"] - f, blue, None)])]
    for y, (_, parts) in enumerate(rows):
        for start, width, colour, label in parts:
            if width > 0:
                ax.barh(y, width, left=start, color=colour, label=label, edgecolor="black")
    ax.text(f, -0.5, f"offset {flushed['log_end_offset']} (recovery point)", ha="right", fontsize=8)
    ax.text(a, -0.5, f"offset {acked['log_end_offset']}", ha="right", fontsize=8)
    if size_torn > a:
        ax.text(size_torn, 0, f" {size_torn - a} bytes torn", ha="left", va="center", fontsize=8)
    ax.set_yticks([0, 1], [r[0] for r in rows])
    ax.set_ylim(1.5, -0.7)
    ax.set_xlim(0, size_torn * 1.15)
    ax.set_xlabel("position in the segment file (bytes)")
    ax.grid(axis="y", visible=False)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=3)
    return fig.save(figure, plot_dir, "crash-recovery-segment")


if __name__ == "__main__":
    raise SystemExit(main_for("crash-recovery"))
