"""Lab: rack-aware placement — a whole rack fails and every partition stays writable.

What you will see
-----------------
The course's example: six brokers in three racks (``0:rack1 1:rack3 2:rack3 3:rack2
4:rack2 5:rack1``) and a topic of 7 partitions with replication factor 3. Kafka's
``AdminUtils.assignReplicasToBrokers`` first interleaves the brokers by rack
(``0, 3, 1, 5, 4, 2``: rack1, rack2, rack3, rack1, ...) and then deals replicas round robin
over that list, so with start index 0 the partitions land on ``0:[0,3,1] 1:[3,1,5] ...
6:[0,4,2]`` — every partition has one replica in each rack (partition 6 shifts its followers
instead of repeating partition 0's list). The lab prints that documented placement (start
index 0, from :func:`kafkasim.placement.admin_utils.assign_replicas_to_brokers`) and the
placement a real :class:`kafkasim.broker.cluster.Cluster` chose when it created the topic
(Kafka picks the start index at random; the cluster draws it from the seed).

Then the same records are written with ``acks=all`` and ``min.insync.replicas=2`` to two
clusters on the same six machines:

1. **rack-aware**: the brokers know their racks (``broker.rack``);
2. **rack-unaware**: the same brokers without ``broker.rack`` (as with Kafka's
   ``--disable-rack-aware``), so replicas are dealt over broker ids ``0..5`` and may share
   a rack.

A whole rack fails (both of its brokers stop: a power or top-of-rack switch failure). For
each partition the lab shows the leader, the ISR and whether an ``acks=all`` write still
succeeds. Rack-aware, every partition keeps a leader and two in-sync replicas, so every
write is acknowledged. Rack-unaware, some partition had two of its three replicas in the
failed rack: it keeps a leader, but its ISR has one member, fewer than
``min.insync.replicas``, and the write fails with ``NotEnoughReplicasError`` (Kafka's
``NOT_ENOUGH_REPLICAS``, code 19; the lab sends each batch to the leader itself and shows
that answer, where a Java producer would retry it, a retriable error, until
``delivery.timeout.ms`` and then fail the send). Finally the rack comes back, its replicas catch up and
rejoin the ISR, and every acknowledged record is read back.

Why
---
Replication is the durability dial: RF 3 with ``min.insync.replicas=2`` and ``acks=all``
survives the loss of any one replica *without* giving up writes. A rack is one failure
domain, so "any one replica" only holds per rack when no two replicas share one; that is
what rack-aware placement guarantees (each partition spans ``min(RF, racks)`` racks).

Kafka references: ``AdminUtils.assignReplicasToBrokers`` and ``AdminRackAwareTest``;
KIP-36 (rack-aware replica assignment); ``broker.rack``; ``min.insync.replicas`` and
``NotEnoughReplicasException``; ``Partition.appendRecordsToLeader``.

Run it: ``kafkasim scenario run rack-aware-placement --plot-dir pics`` or
``python -m kafkasim.scenarios.rack_aware_placement``.

Invariants: the same seed and params give the same text, result and PNG bytes (MockClock,
seeded placement). Thread-safety: none; one run per data dir at a time.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

import matplotlib
from matplotlib.colors import to_rgb
from matplotlib.patches import Patch

from kafkasim.broker.cluster import Cluster, parse_brokers
from kafkasim.errors import InvalidArgumentError, KafkaSimError
from kafkasim.placement.admin_utils import BrokerMetadata, assign_replicas_to_brokers, rack_alternated_broker_list
from kafkasim.records import record_batch as rb
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import check_claim, fresh_dir, lab_clock, main_for, table

__all__ = ["PARAMS", "CLAIM", "run"]

CLAIM = ("With RF 3 placed rack-aware over three racks, losing a whole rack leaves every "
         "partition a leader and at least min.insync.replicas in sync, so every acks=all write "
         "succeeds; the same brokers placed rack-unaware have a partition with two replicas in "
         "that rack, and its acks=all writes fail with NotEnoughReplicasError.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "brokers": "0:rack1,1:rack3,2:rack3,3:rack2,4:rack2,5:rack1",   # ID:RACK, the course's six
    "partitions": 7,                 # partitions of the topic
    "replication_factor": 3,         # replicas per partition
    "min_insync_replicas": 2,        # the topic's min.insync.replicas
    "failed_rack": "rack1",          # the rack whose brokers all stop
    "records_per_partition": 20,     # records written (acks=all) before and during the failure
}

TOPIC = "orders"
MODES = ("rack-aware", "rack-unaware")


def _batch(partition: int, start: int, n: int, ts: int) -> bytes:
    recs = [(i, ts, f"order-{partition}-{start + i}".encode(), b"x" * 64, ()) for i in range(n)]
    return rb.encode_batch(0, recs)


def _snapshot(cluster: Cluster) -> list[dict]:
    d = cluster.describe_cluster()
    down = {b["id"] for b in d["brokers"] if b["state"] != "alive"}
    return [{"partition": p["partition"], "replicas": p["replicas"], "leader": p["leader"],
             "isr": p["isr"], "down": [b for b in p["replicas"] if b in down],
             "under_min_isr": p["under_min_isr"], "offline": p["offline"]}
            for p in d["partitions"] if p["topic"] == TOPIC]


def _write(cluster: Cluster, n_partitions: int, n: int, acked: dict, ts: int) -> dict[int, str]:
    """One acks=all batch of ``n`` records per partition; partition → "ok" or the error name."""
    out = {}
    for p in range(n_partitions):
        try:
            cluster.produce(TOPIC, p, _batch(p, acked[p], n, ts), acks="all")
            acked[p] += n
            out[p] = "ok"
        except KafkaSimError as exc:
            out[p] = type(exc).__name__
    return out


def _read_all(cluster: Cluster, partition: int) -> list[bytes]:
    keys, offset = [], 0
    while records := cluster.fetch(TOPIC, partition, offset).records:
        keys.extend(r.key for r in records)
        offset = records[-1].offset + 1
    return keys


def _trial(root: str, mode: str, brokers: list, racks: dict, cfg: dict, seed: int) -> dict:
    clock = lab_clock()
    spec = brokers if mode == "rack-aware" else [(b, None) for b, _ in brokers]
    failed = sorted(b for b, r in racks.items() if r == cfg["failed_rack"])
    n, per = cfg["partitions"], cfg["records_per_partition"]
    cluster = Cluster(os.path.join(root, mode), brokers=spec, clock=clock, seed=seed)
    try:
        cluster.create_topic(TOPIC, n, cfg["replication_factor"],
                             configs={"min.insync.replicas": str(cfg["min_insync_replicas"])})
        acked = {p: 0 for p in range(n)}
        before_writes = _write(cluster, n, per, acked, clock.now_ms())
        before = _snapshot(cluster)
        for b in failed:
            clock.advance(1000)
            cluster.stop_broker(b)
        after = _snapshot(cluster)
        clock.advance(1000)
        during_writes = _write(cluster, n, per, acked, clock.now_ms())
        for b in failed:
            clock.advance(1000)
            cluster.start_broker(b)
        clock.advance(1000)
        cluster.tick()
        restored = _snapshot(cluster)
        readable = {p: _read_all(cluster, p) for p in range(n)}
    finally:
        cluster.close()
    lost = sum(max(0, acked[p] - len(readable[p])) for p in range(n))
    wrong = [p for p in range(n)
             if readable[p][:acked[p]] != [f"order-{p}-{i}".encode() for i in range(acked[p])]]
    return {"mode": mode, "assignment": {str(s["partition"]): s["replicas"] for s in before},
            "racks_spanned": {str(s["partition"]): len({racks[b] for b in s["replicas"]}) for s in before},
            "failed_brokers": failed, "before": before, "after": after, "restored": restored,
            "writes_before": {str(p): r for p, r in before_writes.items()},
            "writes_during": {str(p): r for p, r in during_writes.items()},
            "acked_records": sum(acked.values()), "acked_lost": lost, "partitions_misread": wrong}


def _names(replicas: list[int], racks: dict) -> str:
    return ", ".join(f"{b} ({racks[b]})" for b in replicas)


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return placements, snapshots and writes."""
    cfg = {**PARAMS, **params}
    brokers = parse_brokers(cfg["brokers"])
    if any(r is None for _, r in brokers):
        raise InvalidArgumentError(f"brokers {cfg['brokers']!r}: every broker needs a rack (ID:RACK)")
    racks = {b: r for b, r in brokers}
    if cfg["failed_rack"] not in racks.values():
        raise InvalidArgumentError(f"failed_rack {cfg['failed_rack']!r} is not a rack of "
                                   f"{', '.join(sorted(set(racks.values())))}")
    n, rf, min_isr = cfg["partitions"], cfg["replication_factor"], cfg["min_insync_replicas"]
    root = fresh_dir(data_dir)
    alternated = rack_alternated_broker_list(racks)
    documented = assign_replicas_to_brokers([BrokerMetadata(b, r) for b, r in brokers], n, rf,
                                            fixed_start_index=0)
    trials = [_trial(root, mode, brokers, racks, cfg, seed) for mode in MODES]
    aware, unaware = trials
    same = all(documented[p] == aware["assignment"][str(p)] for p in range(n))

    echo(f"{len(brokers)} brokers in {len(set(racks.values()))} racks: "
         + ", ".join(f"broker {b} in {r}" for b, r in brokers) + ".")
    echo(f"Kafka interleaves them by rack as {', '.join(map(str, alternated))} and deals "
         f"{n} partitions with replication factor {rf} over that list. With start index 0 "
         "(the documented example):")
    echo(table(["partition", "replicas (leader first)", "racks spanned"],
               [[p, _names(documented[p], racks), len({racks[b] for b in documented[p]})]
                for p in range(n)]))
    echo(f"The cluster created topic {TOPIC} with a start index drawn from seed {seed}: "
         + ("the same placement as the documented example." if same else
            "; ".join(f"{p}: {', '.join(map(str, aware['assignment'][str(p)]))}" for p in range(n))
            + " (the same rack-alternated list, another start index and follower shift)."))
    echo("")
    failed = aware["failed_brokers"]
    echo(f"Both clusters take {cfg['records_per_partition']} records per partition with acks=all "
         f"and min.insync.replicas={min_isr}. Then {cfg['failed_rack']} fails: brokers "
         f"{' and '.join(map(str, failed))} stop.\n")
    for t in trials:
        rows = []
        for b, a in zip(t["before"], t["after"]):
            p = str(a["partition"])
            rows.append([a["partition"], _names(a["replicas"], racks), b["leader"],
                         a["leader"] if a["leader"] >= 0 else "none",
                         ", ".join(map(str, a["isr"])), t["writes_during"][p]])
        echo(f"{t['mode']} placement, with {cfg['failed_rack']} down:")
        echo(table(["partition", "replicas (rack)", "leader before", "leader after", "ISR after",
                    "acks=all write"], rows))
        failing = [p for p, r in t["writes_during"].items() if r != "ok"]
        shrunk = sum(1 for a in t["after"] if len(a["isr"]) < len(a["replicas"]))
        offline = sum(1 for a in t["after"] if a["offline"])
        echo(f"{t['mode']}: {offline} of {n} partitions offline, {shrunk} with a shrunken ISR, "
             + (f"acks=all writes refused on partition(s) {', '.join(failing)} (ISR below "
                f"min.insync.replicas={min_isr})." if failing else "every acks=all write acknowledged.")
             + "\n")
    for t in trials:
        under = sum(1 for s in t["restored"] if len(s["isr"]) < len(s["replicas"]))
        echo(f"{t['mode']}: after {cfg['failed_rack']} returns, {under} partitions are under-replicated; "
             f"{t['acked_records']} records were acknowledged and {t['acked_lost']} of them are "
             f"missing when read back.")
    two_in_rack = [p for p, reps in unaware["assignment"].items()
                   if sum(1 for b in reps if b in failed) >= 2]
    if two_in_rack:
        echo(f"Rack-unaware, partition(s) {', '.join(two_in_rack)} kept two of three replicas in "
             f"{cfg['failed_rack']}: one failure domain held a majority of their copies.")
    else:
        echo(f"Note: this rack-unaware placement happened to keep at most one replica of each "
             f"partition in {cfg['failed_rack']}, so it survives this failure too; it is luck, "
             f"not a guarantee (another rack or another start index does put two in one rack).")
    if any(r != "ok" for r in aware["writes_during"].values()):
        n_racks = len(set(racks.values()))
        left = rf - 1 if rf <= n_racks else rf - -(-rf // n_racks)
        echo(f"Note: even rack-aware, a partition spans min(RF, racks) = {min(rf, n_racks)} racks; "
             f"losing one rack can leave it {left} in-sync replica(s), fewer than "
             f"min.insync.replicas={min_isr}, so acks=all writes to it are refused.")
    pictures = _pictures(plot_dir, trials, racks, cfg) if plot_dir is not None else []
    result = {"claim": CLAIM, "pictures": pictures, "brokers": [{"id": b, "rack": r} for b, r in brokers],
              "rack_alternated": alternated, "partitions": n, "replication_factor": rf,
              "min_insync_replicas": min_isr, "failed_rack": cfg["failed_rack"],
              "documented_assignment": {str(p): r for p, r in documented.items()},
              "cluster_matches_documented": same, "trials": trials}
    check_claim(all(not a["offline"] for a in aware["after"])
                and all(r == "ok" for r in aware["writes_during"].values()), CLAIM,
                f"rack-aware writes during the failure: {aware['writes_during']}")
    check_claim(any(r == "NotEnoughReplicasError" for r in unaware["writes_during"].values()), CLAIM,
                f"rack-unaware writes during the failure: {unaware['writes_during']}")
    check_claim(all(t["acked_lost"] == 0 and not t["partitions_misread"] for t in trials), CLAIM,
                "acknowledged records lost: " + ", ".join(f"{t['mode']} {t['acked_lost']}" for t in trials))
    return result


# ---------------------------------------------------------------------------- pictures

_FOLLOWER_TINT = 0.6      # a follower's cell is its rack colour mixed with this much white
_OFFLINE = fig.UNOWNED


def _cell_colour(role: str, rack_colour: str) -> tuple:
    if role == "leader":
        return to_rgb(rack_colour)
    if role == "follower":
        return tuple(c + (1 - c) * _FOLLOWER_TINT for c in to_rgb(rack_colour))
    if role == "down":
        return to_rgb(_OFFLINE)
    return (1.0, 1.0, 1.0)


def _grid_panel(ax, snapshot: list[dict], writes: dict, broker_ids: list[int], racks: dict,
                colours: dict, title: str) -> None:
    marks = {"leader": "L", "follower": "F", "down": "down", "": ""}
    cells, labels = [], []
    for b in broker_ids:
        row, text = [], []
        for s in snapshot:
            role = ("" if b not in s["replicas"] else "down" if b in s["down"]
                    else "leader" if b == s["leader"] else "follower")
            row.append(_cell_colour(role, colours[racks[b]]))
            text.append(marks[role] + ("*" if role == "follower" and b not in s["isr"] else ""))
        cells.append(row)
        labels.append(text)
    ax.imshow(cells, aspect="auto", interpolation="nearest")
    ax.grid(False)
    ax.set_title(title)
    for i, row in enumerate(labels):
        for j, t in enumerate(row):
            if t:
                ax.text(j, i, t, ha="center", va="center", fontsize=8,
                        color="white" if t == "L" else "black")
    ax.set_xticks(range(len(snapshot)),
                  [f"p{s['partition']}" + ("" if writes[str(s["partition"])] == "ok" else "\nrefused")
                   for s in snapshot])
    for tick, s in zip(ax.get_xticklabels(), snapshot):
        if writes[str(s["partition"])] != "ok":
            tick.set_color(fig.LIMIT)
    ax.set_yticks(range(len(broker_ids)), [f"broker {b} ({racks[b]})" for b in broker_ids])
    ax.set_xlabel("partition (red: acks=all write refused)")


def _pictures(plot_dir: str, trials: list[dict], racks: dict, cfg: dict) -> list[str]:
    broker_ids = sorted(racks)
    colours = fig.colour_map(sorted(set(racks.values())))
    figure, axes = fig.figure(f"Replicas by broker and partition (colour: rack; L leader, F follower, "
                              f"F* out of the ISR, down: broker stopped) before and after {cfg['failed_rack']} fails",
                              2, 2, size=(13, 8))
    with matplotlib.rc_context(fig.STYLE):
        for row, t in enumerate(trials):
            ok = {str(s["partition"]): "ok" for s in t["before"]}
            _grid_panel(axes[2 * row], t["before"], ok, broker_ids, racks, colours,
                        f"{t['mode']}: before")
            _grid_panel(axes[2 * row + 1], t["after"], t["writes_during"], broker_ids, racks, colours,
                        f"{t['mode']}: {cfg['failed_rack']} down")
        handles = [Patch(color=colours[r], label=r) for r in colours]
        handles += [Patch(color=_cell_colour("follower", "#444444"), label="follower (light)"),
                    Patch(color=_OFFLINE, label="replica on a stopped broker")]
        figure.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8)
    return [fig.save(figure, plot_dir, "rack-aware-placement-grid")]


if __name__ == "__main__":
    raise SystemExit(main_for("rack_aware_placement"))
