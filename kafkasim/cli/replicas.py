"""``kafkasim replicas``: the replica placement calculator (a thin call into kafkasim.placement)."""

from __future__ import annotations

import random

from kafkasim.cli.common import add_json, command, emit
from kafkasim.cli.output import table

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "replicas",
                help="place replicas on brokers and racks as Kafka's AdminUtils.assignReplicasToBrokers",
                example="kafkasim replicas --brokers 0:rack1,1:rack3,2:rack3,3:rack2,4:rack2,5:rack1 "
                        "--partitions 7 --replication-factor 3 --start-index 0",
                handler=_replicas)
    p.add_argument("--brokers", required=True, metavar="ID[:RACK],...",
                   help="broker ids, each with its rack (0:rack1,1:rack2) or none at all (0,1,2)")
    p.add_argument("--partitions", type=int, required=True, metavar="N")
    p.add_argument("--replication-factor", type=int, required=True, metavar="R")
    p.add_argument("--start-index", type=int, default=-1, metavar="I",
                   help="Kafka's fixedStartIndex (default: random, from --seed)")
    p.add_argument("--start-partition", type=int, default=-1, metavar="P",
                   help="Kafka's startPartitionId, for partitions added to an existing topic")
    p.add_argument("--seed", type=int, default=0, help="seed of the random start when no --start-index (default 0)")
    add_json(p)


def _replicas(args) -> int:
    from kafkasim.placement.admin_utils import assign_replicas_to_brokers, parse_brokers

    brokers = parse_brokers(args.brokers)
    assignment = assign_replicas_to_brokers(brokers, args.partitions, args.replication_factor,
                                            args.start_index, args.start_partition, rng=random.Random(args.seed))
    racks = {b.id: b.rack for b in brokers}
    data = {"assignment": {str(p): r for p, r in sorted(assignment.items())}}
    emit(args, data, lambda d: table(
        ["PARTITION", "REPLICAS", "RACKS"],
        [(p, ",".join(map(str, r)), ",".join(racks[b] for b in r) if racks[r[0]] else None)
         for p, r in ((int(k), v) for k, v in d["assignment"].items())]))
    return 0
