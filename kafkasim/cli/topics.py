"""``kafkasim topics create|list|describe|delete|add-partitions|alter``: thin calls into Broker.

On a data dir holding a cluster (``kafkasim cluster create``) they call the Cluster: topics
are placed on its brokers, and ``describe`` shows Leader, Replicas and Isr as kafka-topics
does, filtered with ``--under-replicated-partitions`` / ``--unavailable-partitions``."""

from __future__ import annotations

import argparse

from kafkasim.cli.cluster import open_cluster_or_broker as open_broker
from kafkasim.cli.common import add_broker_options, add_json, command, emit
from kafkasim.errors import InvalidArgumentError

__all__ = ["register"]


def register(sub) -> None:
    topics = sub.add_parser("topics", help="create, list, describe, delete and grow topics",
                            description="Manage topics (like kafka-topics.sh).",
                            epilog="Example:\n  kafkasim topics create orders --partitions 6 --config retention.ms=3600000",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    tsub = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)

    p = command(tsub, "create", help="create a topic",
                example="kafkasim topics create orders --partitions 6 --config cleanup.policy=compact",
                handler=_create)
    p.add_argument("name")
    p.add_argument("--partitions", type=int, default=1, help="number of partitions (default 1)")
    p.add_argument("--replication-factor", type=int, default=1, help="replicas per partition (default 1); on a cluster, placed as Kafka does")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                   help="a topic config with Kafka's name, e.g. segment.bytes=1048576 (repeatable)")
    add_broker_options(p)
    add_json(p)

    p = command(tsub, "list", help="list topics", example="kafkasim topics list --json", handler=_list)
    p.add_argument("--internal", action="store_true", help="include internal topics such as __consumer_offsets")
    add_broker_options(p)
    add_json(p)

    p = command(tsub, "describe", help="partitions (leader, replicas, ISR), offsets, sizes and configs",
                example="kafkasim topics describe orders; kafkasim topics describe --under-replicated-partitions",
                handler=_describe)
    p.add_argument("name", nargs="?", help="the topic (default: every topic)")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than their replica list")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="only partitions without a leader")
    add_broker_options(p)
    add_json(p)

    p = command(tsub, "delete", help="delete a topic and its data",
                example="kafkasim topics delete orders", handler=_delete)
    p.add_argument("name")
    add_broker_options(p)

    p = command(tsub, "add-partitions", help="grow a topic to a new total partition count (forward only)",
                example="kafkasim topics add-partitions orders --partitions 12", handler=_add_partitions)
    p.add_argument("name")
    p.add_argument("--partitions", type=int, required=True, help="the new total number of partitions")
    add_broker_options(p)
    add_json(p)

    p = command(tsub, "alter", help="set or remove topic config overrides",
                example="kafkasim topics alter orders --config retention.ms=60000 --delete-config segment.ms",
                handler=_alter)
    p.add_argument("name")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--delete-config", action="append", default=[], metavar="NAME")
    add_broker_options(p)
    add_json(p)



def _configs(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise InvalidArgumentError(f"--config expects NAME=VALUE, got {pair!r}")
        out[name.strip()] = value.strip()
    return out


def _describe_text(d: dict) -> str:
    lines = [f"Topic: {d['name']}\tTopicId: {d['topic_id']}\tPartitionCount: {len(d['partitions'])}\t"
             f"ReplicationFactor: {d['replication_factor']}\tConfigs: "
             + ",".join(f"{k}={v}" for k, v in sorted(d["configs"].items()))]
    for p in d["partitions"]:
        leader = "none" if p["leader"] < 0 else p["leader"]     # kafka-topics prints "none" when offline
        lines.append(f"\tPartition: {p['partition']}\tLeader: {leader}\tReplicas: "
                     f"{','.join(map(str, p['replicas']))}\tIsr: {','.join(map(str, p['isr']))}\t"
                     f"LogStart: {p['log_start_offset']}\tLogEnd: {p['log_end_offset']}\t"
                     f"Segments: {p['segments']}\tBytes: {p['size_bytes']}")
    return "\n".join(lines)


def _create(args) -> int:
    with open_broker(args, create=True) as b:
        d = b.create_topic(args.name, args.partitions, args.replication_factor, _configs(args.config))
    emit(args, d, lambda d: f"Created topic {d['name']} with {len(d['partitions'])} partition(s).")
    return 0


def _list(args) -> int:
    with open_broker(args) as b:
        names = b.list_topics(include_internal=args.internal)
    emit(args, names, lambda ns: "\n".join(ns))
    return 0


def _describe(args) -> int:
    with open_broker(args) as b:
        names = [args.name] if args.name else b.list_topics()
        topics = [b.describe_topic(n) for n in names]
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    if filtered:
        for d in topics:
            d["partitions"] = [p for p in d["partitions"]
                               if (args.under_replicated_partitions and len(p["isr"]) < len(p["replicas"]))
                               or (args.unavailable_partitions and p["leader"] < 0)]
        topics = [d for d in topics if d["partitions"]]
    if args.name and not filtered:
        emit(args, topics[0], _describe_text)
    else:
        emit(args, topics, lambda ts: "\n".join(_describe_text(d) for d in ts))
    return 0


def _delete(args) -> int:
    with open_broker(args) as b:
        b.delete_topic(args.name)
    print(f"Deleted topic {args.name}.")
    return 0


def _add_partitions(args) -> int:
    with open_broker(args) as b:
        d = b.create_partitions(args.name, args.partitions)
    emit(args, d, lambda d: f"Topic {d['name']} now has {len(d['partitions'])} partitions.")
    return 0


def _alter(args) -> int:
    changes: dict = dict(_configs(args.config))
    for name in args.delete_config:
        changes[name] = None
    if not changes:
        raise InvalidArgumentError("nothing to alter: give --config NAME=VALUE or --delete-config NAME")
    with open_broker(args) as b:
        d = b.alter_topic_configs(args.name, changes)
    emit(args, d, _describe_text)
    return 0
