"""``kafkasim replicas``: the replica placement calculator and rebalance planner.

A thin call into kafkasim.placement: ``--policy admin-utils`` (Kafka's
``AdminUtils.assignReplicasToBrokers``, ZooKeeper-era and ``kafka-reassign-partitions
--generate``), ``--policy striped`` (the KRaft controller's ``StripedReplicaPlacer``,
Kafka ≥ 3), or ``--rebalance FILE`` (the minimal-move plan of
``kafkasim.placement.reassign`` for a current assignment in Kafka's reassignment JSON).
"""

from __future__ import annotations

import random

from kafkasim.cli.common import add_json, command, emit
from kafkasim.cli.output import table
from kafkasim.errors import InvalidArgumentError

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "replicas",
                help="place replicas on brokers and racks as Kafka does (AdminUtils.assignReplicasToBrokers, "
                     "or the KRaft StripedReplicaPlacer), or plan a minimal-move rebalance",
                example="kafkasim replicas --brokers 0:rack1,1:rack3,2:rack3,3:rack2,4:rack2,5:rack1 "
                        "--partitions 7 --replication-factor 3 --start-index 0\n"
                        "  kafkasim replicas --brokers 0,1,2,3 --partitions 5 --replication-factor 3 --policy striped\n"
                        "  kafkasim replicas --brokers 0,1,2,3 --rebalance current.json   # Kafka reassignment JSON",
                handler=_replicas)
    p.add_argument("--brokers", required=True, metavar="ID[:RACK],...",
                   help="broker ids, each with its rack (0:rack1,1:rack2) or none at all (0,1,2)")
    p.add_argument("--partitions", type=int, metavar="N")
    p.add_argument("--replication-factor", type=int, metavar="R")
    p.add_argument("--policy", choices=["admin-utils", "striped"], default="admin-utils",
                   help="admin-utils: AdminUtils.assignReplicasToBrokers, which creates topics in ZooKeeper "
                        "mode (Kafka < 4.0) and which kafka-reassign-partitions --generate uses; striped: the "
                        "StripedReplicaPlacer of the KRaft controller, which creates topics in KRaft mode "
                        "(Kafka >= 3.0, the only mode of Kafka 4) (default: admin-utils)")
    p.add_argument("--start-index", type=int, default=-1, metavar="I",
                   help="admin-utils only: Kafka's fixedStartIndex (default: random, from --seed)")
    p.add_argument("--start-partition", type=int, default=-1, metavar="P",
                   help="admin-utils only: Kafka's startPartitionId, for partitions added to an existing topic")
    p.add_argument("--fenced", default="", metavar="ID,...",
                   help="striped only: fenced brokers (never leaders; used only when unfenced ones run out)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the random start (admin-utils: Python's random.Random; striped: "
                        "java.util.Random, as the controller's) (default 0)")
    p.add_argument("--rebalance", metavar="FILE",
                   help="plan the fewest replica moves that bring replicas and leaders per broker within one "
                        "of the average on --brokers, for the current assignment in FILE (Kafka's reassignment "
                        "JSON, as printed by kafka-reassign-partitions --generate)")
    add_json(p)


def _replicas(args) -> int:
    from kafkasim.placement.admin_utils import parse_brokers

    brokers = parse_brokers(args.brokers)
    if args.rebalance:
        return _rebalance(args, brokers)
    for name in ("partitions", "replication_factor"):
        if getattr(args, name) is None:
            raise InvalidArgumentError(f"--{name.replace('_', '-')} is required (unless --rebalance)")
    if args.policy == "striped":
        assignment = _striped(args, brokers)
    else:
        if args.fenced:
            raise InvalidArgumentError("--fenced applies to --policy striped only")
        from kafkasim.placement.admin_utils import assign_replicas_to_brokers
        assignment = assign_replicas_to_brokers(brokers, args.partitions, args.replication_factor,
                                                args.start_index, args.start_partition,
                                                rng=random.Random(args.seed))
    racks = {b.id: b.rack for b in brokers}
    data = {"assignment": {str(p): r for p, r in sorted(assignment.items())}}
    emit(args, data, lambda d: table(
        ["PARTITION", "REPLICAS", "RACKS"],
        [(p, ",".join(map(str, r)), ",".join(racks[b] or "-" for b in r) if any(racks.values()) else None)
         for p, r in ((int(k), v) for k, v in d["assignment"].items())]))
    return 0


def _striped(args, brokers) -> dict[int, list[int]]:
    from kafkasim.placement.java_random import JavaRandom
    from kafkasim.placement.striped import UsableBroker, striped_place

    if args.start_index != -1 or args.start_partition != -1:
        raise InvalidArgumentError("--start-index and --start-partition apply to --policy admin-utils only")
    ids = {b.id for b in brokers}
    fenced = set()
    for item in filter(None, (s.strip() for s in args.fenced.split(","))):
        if not item.isdigit() or int(item) not in ids:
            raise InvalidArgumentError(f"--fenced {item!r}: not one of the --brokers ids")
        fenced.add(int(item))
    usable = [UsableBroker(b.id, b.rack, b.id in fenced) for b in brokers]
    return striped_place(usable, args.partitions, args.replication_factor, rng=JavaRandom(args.seed))


def _rebalance(args, brokers) -> int:
    import json

    from kafkasim.placement.reassign import leader_changes, lower_bound_moves, plan_reassignment, replica_moves
    from kafkasim.placement.reassign_json import dumps_reassignment, loads_reassignment
    from kafkasim.placement.skew import broker_skew

    try:
        with open(args.rebalance, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise InvalidArgumentError(f"--rebalance {args.rebalance}: {exc.strerror}") from exc
    current = loads_reassignment(text)
    rack_map = {b.id: b.rack for b in brokers}
    plan = plan_reassignment(current, rack_map)
    before, after = broker_skew(current, set(rack_map) | {b for r in current.values() for b in r}), \
        broker_skew(plan, rack_map)
    data = {"current": json.loads(dumps_reassignment(current)), "proposed": json.loads(dumps_reassignment(plan)),
            "replica_moves": replica_moves(current, plan), "lower_bound_moves": lower_bound_moves(current, rack_map),
            "leader_changes": leader_changes(current, plan),
            "skew_before": before.as_dict(), "skew_after": after.as_dict()}

    def text_of(d) -> str:
        rows = [(str(tp), ",".join(map(str, current[tp])), ",".join(map(str, plan[tp])),
                 len(set(plan[tp]) - set(current[tp])))
                for tp in sorted(plan) if plan[tp] != list(current[tp])]
        changed = table(["PARTITION", "CURRENT", "PROPOSED", "MOVES"], rows, title="Changed partitions")
        loads = table(["BROKER", "REPLICAS BEFORE", "REPLICAS AFTER", "LEADERS BEFORE", "LEADERS AFTER"],
                      [(b.broker, b.replicas, a.replicas if a else 0, b.leaders, a.leaders if a else 0)
                       for b in before.brokers
                       for a in [next((x for x in after.brokers if x.broker == b.broker), None)]],
                      title="Per broker")
        return (f"{changed}\n\n{loads}\n\nreplica moves: {d['replica_moves']} (lower bound "
                f"{d['lower_bound_moves']}), leader changes: {d['leader_changes']}\n\n"
                f"Current partition replica assignment\n{dumps_reassignment(current)}\n\n"
                f"Proposed partition reassignment configuration\n{dumps_reassignment(plan)}")

    emit(args, data, text_of)
    return 0
