"""Lab: add a broker — it sits idle until a reassignment moves replicas to it.

What you will see
-----------------
The seed example: three brokers, a topic of 9 partitions with replication factor 2
(18 replicas, 6 per broker), and ``records`` keyed records produced into it. A fourth
broker joins the cluster — and holds **nothing**: 0 replicas, 0 bytes. "Adding a broker
rebalances partitions automatically" is a misconception; Kafka never moves a partition on
its own. Operators watch the max/min partitions per broker and reassign when it passes
1.3; with an idle broker the ratio is infinite.

The lab then plans a reassignment with :func:`kafkasim.placement.reassign.plan_reassignment`
(every broker within one replica and one leader of the average, with the fewest replica
moves), compares its moves with the lower bound
(:func:`kafkasim.placement.reassign.lower_bound_moves`), and executes it on the cluster
at a replication throttle (``kafka-reassign-partitions --execute --throttle``): the lab
prints the bytes copied and the simulated time they took at the throttle, verifies the
plan, runs a preferred leader election so the planned leaders lead, and reads every
record back from the new replicas' leaders.

Last, the **Fixed Partitions** pattern against **hash mod node count** on the same keys
(:mod:`kafkasim.placement.fixed_partitions`): with fixed partitions a key's partition
(``murmur2(key) % P``) never changes and only whole partitions move between nodes, so adding
two nodes to three moves about 2/5 of the keys; with ``hash(key) % nodes`` a key moves
whenever ``h % 3 != h % 5``, about 4/5 of them.

Why
---
Partitions are the unit of placement. A new broker only gets work when partitions are
reassigned to it, and moving a replica means copying its whole log (bytes, time, network),
so a good plan moves as few replicas as balance allows — here the counting lower bound.
Keeping the key → partition mapping fixed is what lets Kafka grow a cluster without
rehashing every key.

Kafka references: ``kafka-reassign-partitions.sh`` (``--generate``, ``--execute
--throttle``, ``--verify``), ``leader.replication.throttled.rate``,
``kafka-leader-election.sh --election-type PREFERRED``; Kleppmann, "Designing
Data-Intensive Applications", ch. 6 "Rebalancing partitions" (fixed number of partitions;
"hash mod N" is why not).

Run it: ``kafkasim scenario run add-broker-reassign --plot-dir pics`` or
``python -m kafkasim.scenarios.add_broker_reassign``.

Invariants: the same seed and params give the same text, result and PNG bytes (MockClock,
seeded keys and placement). Thread-safety: none; one run per data dir at a time.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from typing import Any, Callable, Optional

from kafkasim.broker.cluster import Cluster
from kafkasim.broker.reassign import SKEW_LIMIT
from kafkasim.errors import InvalidArgumentError
from kafkasim.partitioning.base import murmur2_partition
from kafkasim.partitioning.hashing import murmur2, to_positive
from kafkasim.placement.fixed_partitions import compare_remapping, partition_owners
from kafkasim.placement.reassign import leader_changes, lower_bound_moves, plan_reassignment, replica_moves
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import check_claim, fresh_dir, lab_clock, main_for, table

__all__ = ["PARAMS", "CLAIM", "run"]

CLAIM = ("A broker added to the cluster holds nothing until a reassignment; the plan brings "
         "max/min replicas per broker within 1.3 with no more replica moves than the lower "
         "bound, every record stays readable, and with fixed partitions adding two nodes to "
         "three moves far fewer keys than hash mod node count.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "brokers": 3,                     # brokers before the new one (ids 0 .. brokers-1)
    "partitions": 9,                  # partitions of the topic
    "replication_factor": 2,          # replicas per partition
    "keys": 3000,                     # distinct keys (users)
    "records": 9000,                  # records produced before the broker is added
    "value_bytes": 100,               # bytes per record value
    "throttle_bytes_per_s": 102400,   # replication throttle during the reassignment (100 KiB/s)
    "fixed_partitions": 60,           # partitions of the Fixed Partitions comparison
    "nodes_added": 2,                 # nodes added in the Fixed Partitions comparison
}

TOPIC = "events"
_BATCH = 500


def _produce(cluster: Cluster, cfg: dict, rng: random.Random, now: int) -> tuple[dict, list, dict]:
    """``records`` keyed records (murmur2 partitions), in batches; returns what each partition
    holds (keys, in order), the key list and the bytes per key."""
    n = cfg["partitions"]
    names = [f"user-{i:05d}".encode() for i in range(cfg["keys"])]
    per_part: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(n)}
    size = Counter()
    for _ in range(cfg["records"]):
        key = rng.choice(names)
        value = rng.randbytes(cfg["value_bytes"])
        per_part[murmur2_partition(key, n)].append((key, value))
        size[key] += len(key) + len(value)
    for p, recs in per_part.items():
        for i in range(0, len(recs), _BATCH):
            cluster.append_records(TOPIC, p, [(now, k, v, ()) for k, v in recs[i:i + _BATCH]])
    return per_part, names, size


def _loads(cluster: Cluster) -> dict:
    d = cluster.describe_cluster()
    return {"replicas": {b["id"]: b["replicas"] for b in d["brokers"]},
            "leaders": {b["id"]: b["leaders"] for b in d["brokers"]},
            "bytes": {b["id"]: b["bytes"] for b in d["brokers"]},
            "replicas_ratio": d["skew"]["replicas"]["ratio"], "flagged": d["skew"]["replicas"]["flagged"],
            "under_replicated": d["under_replicated"],
            "replicas_in_sync": all(len(set(p["log_end_offsets"].values())) == 1 for p in d["partitions"])}


def _ratio(x: float) -> str:
    return "infinite" if x == float("inf") else f"{x:.2f}"


def _json_loads(loads: dict) -> dict:
    out = {k: ({str(b): v for b, v in val.items()} if isinstance(val, dict) else val)
           for k, val in loads.items()}
    out["replicas_ratio"] = "inf" if loads["replicas_ratio"] == float("inf") else round(loads["replicas_ratio"], 4)
    return out


def _read_back(cluster: Cluster, per_part: dict) -> list[int]:
    """Partitions whose records (keys and values, in order) differ from what was written."""
    bad = []
    for p, written in per_part.items():
        got, offset = [], 0
        while records := cluster.fetch(TOPIC, p, offset).records:
            got.extend((r.key, r.value) for r in records)
            offset = records[-1].offset + 1
        if got != written:
            bad.append(p)
    return bad


def _key_grid(keys: list, cfg: dict) -> dict:
    """Keys by node before x node after, under fixed partitions and under hash mod N."""
    before_n, after_n, n = cfg["brokers"], cfg["brokers"] + cfg["nodes_added"], cfg["fixed_partitions"]
    owners_before, owners_after = partition_owners(n, before_n, after_n)
    grids = {s: [[0] * after_n for _ in range(before_n)] for s in ("fixed", "modn")}
    for k in keys:
        h = to_positive(murmur2(k))
        grids["fixed"][owners_before[h % n]][owners_after[h % n]] += 1
        grids["modn"][h % before_n][h % after_n] += 1
    return grids


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return loads, the plan, the copy and key moves."""
    cfg = {**PARAMS, **params}
    for name in ("brokers", "partitions", "replication_factor", "keys", "records", "value_bytes",
                 "throttle_bytes_per_s", "fixed_partitions", "nodes_added"):
        if not isinstance(cfg[name], int) or cfg[name] < 1:
            raise InvalidArgumentError(f"param {name}: expected an integer >= 1, got {cfg[name]!r}")
    nb, n, rf = cfg["brokers"], cfg["partitions"], cfg["replication_factor"]
    root = fresh_dir(data_dir)
    rng = random.Random(seed)
    clock = lab_clock()
    new_id = nb
    cluster = Cluster(os.path.join(root, "cluster"), brokers=list(range(nb)), clock=clock, seed=seed)
    try:
        cluster.create_topic(TOPIC, n, rf)
        per_part, names, key_bytes = _produce(cluster, cfg, rng, clock.now_ms())
        initial = _loads(cluster)
        cluster.add_broker(new_id)
        added = _loads(cluster)
        current = cluster.assignment()
        brokers = {b: None for b in range(nb + 1)}
        plan = plan_reassignment(current, brokers)
        moves = replica_moves(current, plan)
        bound = lower_bound_moves(current, brokers)
        leaders_moved = leader_changes(current, plan)
        copy = cluster.reassign(plan, throttle_bytes_per_s=cfg["throttle_bytes_per_s"])
        copy_ms = copy["time_ms"]          # bytes / throttle, as simulated time
        verified = cluster.verify(plan)["complete"]
        elected = cluster.elect_leaders()
        final = _loads(cluster)
        misread = _read_back(cluster, per_part)
    finally:
        cluster.close()
    remap = compare_remapping(names, cfg["fixed_partitions"], nb, nb + cfg["nodes_added"],
                              key_hash=lambda k: to_positive(murmur2(k)),
                              sizes=[key_bytes[k] for k in names])
    grids = _key_grid(names, cfg)

    total_bytes = sum(initial["bytes"].values())
    echo(f"{nb} brokers, topic {TOPIC} with {n} partitions and replication factor {rf}: "
         f"{n * rf} replicas. {cfg['records']:,} records of {cfg['value_bytes']} bytes from "
         f"{cfg['keys']:,} keys were produced ({total_bytes:,} bytes over all replicas).\n")
    echo(f"Broker {new_id} joins the cluster. Replicas, leaders and bytes per broker:")
    echo(table(["broker", "replicas", "leaders", "bytes"],
               [[b, added["replicas"][b], added["leaders"][b], f"{added['bytes'][b]:,}"] for b in sorted(added["replicas"])]))
    echo(f"Broker {new_id} holds {added['replicas'][new_id]} replicas and {added['bytes'][new_id]} bytes: "
         f"adding a broker moves nothing. Max/min replicas per broker is "
         f"{_ratio(added['replicas_ratio'])}, beyond the {SKEW_LIMIT} rule.\n")
    changed = [tp for tp in sorted(plan) if plan[tp] != current[tp]]
    echo(f"The plan (kafkasim.placement.reassign, as kafkasim cluster reassign --generate) changes "
         f"{len(changed)} of {n} partitions:")
    echo(table(["partition", "replicas before", "replicas after", "new replicas"],
               [[tp.partition, ", ".join(map(str, current[tp])), ", ".join(map(str, plan[tp])),
                 ", ".join(str(b) for b in plan[tp] if b not in current[tp]) or "none (reorder)"]
                for tp in changed]))
    echo(f"It moves {moves} replicas ({moves / (n * rf):.0%} of {n * rf}); the lower bound for a "
         f"balanced target is {bound}. {leaders_moved} partitions change preferred leader.")
    echo(f"Executed at a throttle of {cfg['throttle_bytes_per_s']:,} bytes/s: {copy['bytes_moved']:,} "
         f"bytes copied in {copy_ms / 1000:.2f} s of simulated time; the plan verifies "
         f"{'complete' if verified else 'INCOMPLETE'}, and a preferred leader election moved "
         f"{len(elected)} leaders.\n")
    echo("Balance before and after:")
    echo(table(["broker", "replicas before", "replicas after", "leaders after", "bytes after"],
               [[b, added["replicas"][b], final["replicas"][b], final["leaders"][b], f"{final['bytes'][b]:,}"]
                for b in sorted(final["replicas"])]))
    echo(f"Max/min replicas per broker: {_ratio(added['replicas_ratio'])} before, "
         f"{_ratio(final['replicas_ratio'])} after (rule: at most {SKEW_LIMIT}). "
         f"{cfg['records']:,} of {cfg['records']:,} records read back unchanged."
         if not misread else f"Partitions {misread} did not read back as written")
    if final["flagged"]:
        echo(f"Note: even a perfect plan leaves max/min at {_ratio(final['replicas_ratio'])}: "
             f"{n * rf} replicas on {nb + 1} brokers cannot come closer than one replica apart, "
             f"and with so few replicas per broker one replica is more than 30%.")
    echo("")
    echo(f"Fixed partitions against hash mod node count, {cfg['keys']:,} keys, {nb} → "
         f"{nb + cfg['nodes_added']} nodes:")
    echo(table(["scheme", "keys moved", "share of keys", "bytes moved", "share of bytes"],
               [[f"fixed partitions ({cfg['fixed_partitions']} partitions, "
                 f"{remap.partitions_moved} moved)", f"{remap.fixed_keys_moved:,}",
                 f"{remap.fixed_keys_fraction:.1%}", f"{remap.fixed_bytes_moved:,}",
                 f"{remap.fixed_bytes_fraction:.1%}"],
                [f"hash mod node count", f"{remap.modn_keys_moved:,}", f"{remap.modn_keys_fraction:.1%}",
                 f"{remap.modn_bytes_moved:,}", f"{remap.modn_bytes_fraction:.1%}"]]))

    pictures = _pictures(plot_dir, added, final, grids, remap, cfg) if plot_dir is not None else []
    result = {"claim": CLAIM, "pictures": pictures, "brokers_before": nb, "new_broker": new_id,
              "partitions": n, "replication_factor": rf, "records": cfg["records"],
              "loads_initial": _json_loads(initial), "loads_after_add": _json_loads(added),
              "loads_after_reassign": _json_loads(final),
              "plan": {str(tp.partition): plan[tp] for tp in sorted(plan)},
              "current": {str(tp.partition): current[tp] for tp in sorted(current)},
              "replica_moves": moves, "lower_bound_moves": bound, "leader_changes": leaders_moved,
              "bytes_moved": copy["bytes_moved"], "copy_simulated_ms": copy_ms,
              "throttle_bytes_per_s": cfg["throttle_bytes_per_s"], "verified": verified,
              "leaders_elected": elected, "partitions_misread": misread,
              "fixed_partitions": remap.as_dict(), "key_grids": grids}
    check_claim(added["replicas"][new_id] == 0 and added["bytes"][new_id] == 0, CLAIM,
                f"broker {new_id} holds {added['replicas'][new_id]} replicas after joining")
    check_claim(verified and not final["flagged"] and final["replicas"][new_id] > 0 and moves <= bound,
                CLAIM, f"after the reassignment: verified {verified}, max/min "
                       f"{_ratio(final['replicas_ratio'])}, moves {moves} against the bound {bound}")
    check_claim(not misread and final["replicas_in_sync"], CLAIM,
                f"partitions read back wrong: {misread}; replicas in sync: {final['replicas_in_sync']}")
    check_claim(remap.fixed_keys_fraction < remap.modn_keys_fraction, CLAIM,
                f"keys moved: fixed {remap.fixed_keys_fraction:.3f}, mod N {remap.modn_keys_fraction:.3f}")
    return result


def _annotate(ax, matrix: list) -> None:
    """Each non-zero cell's count, white on the darker half of the colour scale (of this panel)."""
    values = [v for row in matrix for v in row]
    lo, hi = min(values), max(values)
    for i, row in enumerate(matrix):
        for j, v in enumerate(row):
            if v:
                dark = hi > lo and (v - lo) / (hi - lo) > 0.5
                ax.text(j, i, f"{v:,}", ha="center", va="center", fontsize=8,
                        color="white" if dark else "black")


def _pictures(plot_dir: str, added: dict, final: dict, grids: dict, remap, cfg: dict) -> list[str]:
    ids = sorted(final["replicas"])
    labels = [f"broker {b}" for b in ids]
    figure, axes = fig.figure(f"Replicas and bytes per broker after broker {ids[-1]} joins, before and "
                              f"after the reassignment (red line: {SKEW_LIMIT} x the least-loaded broker)",
                              2, 2, size=(12, 8))
    for col, (name, loads) in enumerate((("before the reassignment", added), ("after", final))):
        reps = [loads["replicas"][b] for b in ids]
        fig.bars(labels, reps, ax=axes[col], title=f"replicas, {name}: max/min {_ratio(loads['replicas_ratio'])}",
                 xlabel="broker", ylabel="replicas", limit=SKEW_LIMIT * min(reps), limit_label=f"{SKEW_LIMIT} x min")
        mb = [loads["bytes"][b] / 1e6 for b in ids]
        fig.bars(labels, mb, ax=axes[2 + col], title=f"bytes stored, {name}", xlabel="broker",
                 ylabel="bytes (MB)", limit=SKEW_LIMIT * min(mb), limit_label=f"{SKEW_LIMIT} x min")
    paths = [fig.save(figure, plot_dir, "add-broker-reassign-balance")]
    nb, na = cfg["brokers"], cfg["brokers"] + cfg["nodes_added"]
    figure, axes = fig.figure(f"Keys by node before ({nb} nodes) x after ({na} nodes): off the first "
                              f"{nb} diagonal cells a key moved", 1, 2, size=(12, 5))
    for ax, scheme, title, frac in ((axes[0], "fixed", f"fixed partitions ({cfg['fixed_partitions']})",
                                     remap.fixed_keys_fraction),
                                    (axes[1], "modn", "hash mod node count", remap.modn_keys_fraction)):
        fig.grid(grids[scheme], [f"node {i}" for i in range(nb)], [f"node {j}" for j in range(na)],
                 ax=ax, title=f"{title}: {frac:.1%} of keys move", xlabel="node after",
                 ylabel="node before", colourbar="keys", annotate=False)
        _annotate(ax, grids[scheme])
    paths.append(fig.save(figure, plot_dir, "add-broker-reassign-key-moves"))
    return paths


if __name__ == "__main__":
    raise SystemExit(main_for("add_broker_reassign"))
