"""``kafkasim cluster ...``: a cluster of brokers in the data dir (thin calls into kafkasim.broker.cluster).

Each command opens the :class:`~kafkasim.broker.cluster.Cluster` of ``--data-dir`` (its
controller state is ``meta/cluster.json``), calls one method and prints the result (a table,
or JSON with ``--json``). Reassignment files are Kafka's ``kafka-reassign-partitions`` JSON:
``{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3]}]}``.
"""

from __future__ import annotations

import argparse
import json
import math
import os

from kafkasim.cli.common import add_data_dir, add_json, command, data_dir_of, emit, existing_data_dir, open_broker
from kafkasim.cli.output import table
from kafkasim.errors import InvalidArgumentError

__all__ = ["register", "open_cluster", "is_cluster_dir", "open_cluster_or_broker"]


def is_cluster_dir(path: str) -> bool:
    return os.path.exists(os.path.join(path, "meta", "cluster.json"))


def open_cluster(args):
    from kafkasim.broker.cluster import Cluster
    path = existing_data_dir(args)
    if not is_cluster_dir(path):
        raise InvalidArgumentError(f"{path} holds no cluster (no meta/cluster.json): "
                                   "create one with 'kafkasim cluster create --brokers 0:r1,1:r2,2:r3'")
    from kafkasim.server.control import served_cluster
    served = served_cluster(path)       # a running 'kafkasim serve' holds it: ask it
    return served if served is not None else Cluster(path)


def open_cluster_or_broker(args, *, create: bool = False):
    """The cluster of the data dir when it holds one (over the wire when a server runs),
    else the broker: :func:`kafkasim.cli.common.open_broker`."""
    return open_broker(args, create=create)


def register(sub) -> None:
    cl = sub.add_parser("cluster", help="a cluster of brokers: create, describe, faults, reassignment",
                        description="Run N brokers with racks in the data dir: replicas, ISR, failover, reassignment.",
                        epilog="Example:\n  kafkasim cluster create --brokers 0:r1,1:r2,2:r3",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    csub = cl.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)

    p = command(csub, "create", help="create a cluster of brokers (ID or ID:RACK, comma-separated)",
                example="kafkasim cluster create --brokers 0:r1,1:r2,2:r3 --seed 7", handler=_create)
    p.add_argument("--brokers", required=True, metavar="ID[:RACK],...")
    p.add_argument("--seed", type=int, default=0, help="seed of the placement's random start (default 0)")
    _common(p)

    p = command(csub, "describe", help="brokers, per-broker skew, and every partition's leader, replicas and ISR",
                example="kafkasim cluster describe --json", handler=_describe)
    _common(p)

    for name, verb, handler in (("stop-broker", "stop", _stop), ("start-broker", "start", _start)):
        p = command(csub, name, help=f"{verb} a broker (leadership moves; ISR shrinks or grows)",
                    example=f"kafkasim cluster {name} 1", handler=handler)
        p.add_argument("broker_id", type=int, metavar="ID")
        _common(p)

    p = command(csub, "isolate", help="cut a broker off from clients, its followers, or both: clients, peers "
                "and the controller (or --heal it)",
                example="kafkasim cluster isolate 2 --from followers && kafkasim cluster isolate 2 --heal",
                handler=_isolate)
    p.add_argument("broker_id", type=int, metavar="ID")
    p.add_argument("--from", dest="from_", choices=("both", "clients", "followers"), default="both",
                   help="both (default: fenced, leadership moves), clients (refuses clients, keeps leading) "
                        "or followers (replication stops; the ISR shrinks after replica.lag.time.max.ms)")
    p.add_argument("--heal", action="store_true", help="end the isolation")
    _common(p)

    for name, verb, handler in (("fill-disk", "fill a broker's disk: appends fail with KAFKA_STORAGE_ERROR, "
                                 "its log directory goes offline, its partitions move", _fill_disk),
                                ("clear-disk", "free a broker's disk (its log directory comes back when the "
                                 "broker restarts: stop-broker, start-broker)", _clear_disk)):
        p = command(csub, name, help=verb, example=f"kafkasim cluster {name} 1", handler=handler)
        p.add_argument("broker_id", type=int, metavar="ID")
        _common(p)

    p = command(csub, "slow", help="make a broker's follower fetches happen every DELAY ms (0: healthy)",
                example="kafkasim cluster slow 2 --delay-ms 60000", handler=_slow)
    p.add_argument("broker_id", type=int, metavar="ID")
    p.add_argument("--delay-ms", type=int, required=True)
    _common(p)

    p = command(csub, "add-broker", help="add an empty broker (nothing moves until a reassignment)",
                example="kafkasim cluster add-broker 3:r1", handler=_add_broker)
    p.add_argument("broker", metavar="ID[:RACK]")
    _common(p)

    p = command(csub, "reassign", help="generate, execute or verify a partition reassignment (Kafka's JSON)",
                example="kafkasim cluster reassign --execute plan.json --throttle 1048576", handler=_reassign)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--generate", action="store_true", help="propose a plan balancing replicas and leaders")
    mode.add_argument("--execute", metavar="FILE", help="execute the plan in FILE")
    mode.add_argument("--verify", metavar="FILE", help="check whether the plan in FILE is complete")
    p.add_argument("--throttle", type=int, default=None, metavar="BYTES_PER_S",
                   help="copy at most this many bytes per second of simulated time (with --execute)")
    _common(p)

    p = command(csub, "elect-leaders", help="preferred leader election: each first replica leads again",
                example="kafkasim cluster elect-leaders", handler=_elect)
    _common(p)


def _common(p) -> None:
    add_data_dir(p)
    add_json(p)


def _create(args) -> int:
    from kafkasim.broker.cluster import Cluster, parse_brokers
    path = data_dir_of(args)
    if is_cluster_dir(path):
        raise InvalidArgumentError(f"{path} already holds a cluster")
    if os.path.isdir(path) and os.listdir(path):
        raise InvalidArgumentError(f"{path} is not empty: a cluster starts in a new data dir")
    with Cluster(path, parse_brokers(args.brokers), seed=args.seed) as c:
        d = c.describe_cluster()
    emit(args, d, lambda d: f"Created a cluster of {len(d['brokers'])} brokers in {path}.")
    return 0


def _ratio(r: float) -> str:
    return "inf" if math.isinf(r) else f"{r:.2f}"


def _state_text(b: dict) -> str:
    """``alive``, ``stopped``, ``isolated``, plus the partial isolation and the disk faults."""
    extra = ([f"isolated from {b['isolated_from']}"] if b.get("isolated_from") else []) \
        + (["disk full"] if b.get("disk_full") else []) + (["log dir offline"] if b.get("log_dir_offline") else [])
    return ", ".join([b["state"]] + extra)


def _describe_text(d: dict) -> str:
    skew = d["skew"]
    brokers = table(["BROKER", "RACK", "STATE", "DELAY_MS", "REPLICAS", "LEADERS", "BYTES"],
                    [(b["id"], b["rack"], _state_text(b), b["delay_ms"], b["replicas"], b["leaders"], b["bytes"])
                     for b in d["brokers"]], title="Brokers")
    skews = table(["PER BROKER", "MAX", "MIN", "MAX/MIN", "OVER 1.3"],
                  [(k, v["max"], v["min"], _ratio(v["ratio"]), "yes" if v["flagged"] else "no")
                   for k, v in skew.items()], title="Skew (reassign when max/min > 1.3)")
    parts = table(["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "HW", "STATUS"],
                  [(p["topic"], p["partition"], p["leader"], p["leader_epoch"], ",".join(map(str, p["replicas"])),
                    ",".join(map(str, p["isr"])), p["high_watermark"], _status(p)) for p in d["partitions"]],
                  title="Partitions")
    summary = (f"under-replicated: {d['under_replicated']}  under-min-isr: {d['under_min_isr']}  "
               f"offline: {d['offline']}  lost records (unclean elections): {d['lost_records']}")
    return "\n\n".join([brokers, skews, parts, summary])


def _status(p: dict) -> str:
    flags = [name for name in ("offline", "under_min_isr", "under_replicated") if p[name]]
    return ",".join(f.replace("_", "-") for f in flags) or "ok"


def _describe(args) -> int:
    with open_cluster(args) as c:
        d = c.describe_cluster()
    emit(args, d, _describe_text)
    return 0


def _fault(args, method: str, done: str, *extra) -> int:
    with open_cluster(args) as c:
        getattr(c, method)(args.broker_id, *extra)
        d = c.describe_cluster()
    emit(args, d, lambda d: f"Broker {args.broker_id} {done}. under-replicated: {d['under_replicated']}, "
                            f"offline: {d['offline']}")
    return 0


def _stop(args) -> int:
    return _fault(args, "stop_broker", "stopped")


def _start(args) -> int:
    return _fault(args, "start_broker", "started")


def _isolate(args) -> int:
    if args.heal:
        return _fault(args, "heal", "healed")
    return _fault(args, "isolate", f"isolated from {args.from_}", args.from_)


def _fill_disk(args) -> int:
    return _fault(args, "fill_disk", "has a full disk (log directory offline)")


def _clear_disk(args) -> int:
    return _fault(args, "clear_disk", "has disk space again (restart it to bring its log directory back)")


def _slow(args) -> int:
    with open_cluster(args) as c:
        c.slow(args.broker_id, args.delay_ms)
        d = c.describe_cluster()
    emit(args, d, lambda d: f"Broker {args.broker_id} fetches every {args.delay_ms} ms.")
    return 0


def _add_broker(args) -> int:
    from kafkasim.broker.cluster import parse_brokers
    ((bid, rack),) = parse_brokers(args.broker)
    with open_cluster(args) as c:
        c.add_broker(bid, rack)
        d = c.describe_cluster()
    emit(args, d, lambda d: f"Added broker {bid}" + (f" in rack {rack}" if rack else "") +
         "; it holds no replicas until a reassignment.")
    return 0


def _plan_json(plan) -> dict:
    return {"version": 1, "partitions": [{"topic": tp.topic, "partition": tp.partition, "replicas": list(r)}
                                         for tp, r in sorted(plan.items())]}


def _read_plan(path: str) -> dict:
    from kafkasim.types import TopicPartition
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"reassignment file {path}: {exc}") from exc
    parts = raw.get("partitions") if isinstance(raw, dict) else None
    if not isinstance(parts, list):
        raise InvalidArgumentError(f"reassignment file {path}: expected {{\"version\": 1, \"partitions\": [...]}}")
    plan = {}
    for i, p in enumerate(parts):
        if not (isinstance(p, dict) and isinstance(p.get("topic"), str) and isinstance(p.get("partition"), int)
                and isinstance(p.get("replicas"), list) and all(isinstance(b, int) for b in p["replicas"])):
            raise InvalidArgumentError(f"reassignment file {path}: partitions[{i}]={p!r}: expected "
                                       "topic (string), partition (int), replicas (list of ints)")
        plan[TopicPartition(p["topic"], p["partition"])] = p["replicas"]
    return plan


def _reassign(args) -> int:
    if args.throttle is not None and not args.execute:
        raise InvalidArgumentError("--throttle goes with --execute")
    if args.throttle is not None and args.throttle < 1:
        raise InvalidArgumentError(f"--throttle {args.throttle}: expected bytes per second >= 1")
    with open_cluster(args) as c:
        if args.generate:
            try:
                from kafkasim.placement.reassign import plan_reassignment
            except ImportError as exc:
                raise InvalidArgumentError(f"plan generation is not available: {exc}") from exc
            current = c.assignment()
            proposed = plan_reassignment(current, {b: i.rack for b, i in c.brokers.items()})
            d = {"current": _plan_json(current), "proposed": _plan_json(proposed)}
            emit(args, d, lambda d: "Current partition replica assignment\n" + json.dumps(d["current"]) +
                 "\n\nProposed partition reassignment configuration\n" + json.dumps(d["proposed"]))
        elif args.execute:
            d = c.reassign(_read_plan(args.execute), args.throttle)
            emit(args, d, lambda d: f"Reassigned {len(d['partitions'])} partition(s): {d['replicas_added']} "
                 f"replica(s) added, {d['bytes_moved']} bytes moved in {d['time_ms']} ms of simulated time.")
        else:
            d = c.verify(_read_plan(args.verify))
            emit(args, d, lambda d: "\n".join(
                f"Reassignment of partition {p['topic']}-{p['partition']} is "
                + ("completed." if p["complete"] else f"still in progress (replicas {p['replicas']}, isr {p['isr']}).")
                for p in d["partitions"]))
            return 0 if d["complete"] else 1
    return 0


def _elect(args) -> int:
    with open_cluster(args) as c:
        changed = c.elect_leaders()
    emit(args, {"elected": changed}, lambda d: f"Preferred leader elected for {len(changed)} partition(s)"
         + (": " + ", ".join(changed) if changed else "."))
    return 0
