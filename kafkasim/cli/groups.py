"""``kafkasim groups list|describe|reset-offsets|delete``: kafka-consumer-groups, thin over kafkasim.admin.groups."""

from __future__ import annotations

import argparse
import sys

from kafkasim.cli.common import add_broker_options, add_json, command, emit, open_broker
from kafkasim.cli.output import table
from kafkasim.errors import InvalidArgumentError

__all__ = ["register"]


def register(sub) -> None:
    groups = sub.add_parser("groups", help="list, describe, reset and delete consumer groups",
                            description="Consumer groups (like kafka-consumer-groups.sh).",
                            epilog="Example:\n  kafkasim groups describe --group billing --members --verbose",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    gsub = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)

    p = command(gsub, "list", help="every group, with --state its state, with --type its type",
                example="kafkasim groups list --type consumer --state", handler=_list)
    p.add_argument("--state", action="store_true", help="show each group's state (Kafka's --list --state)")
    p.add_argument("--type", nargs="?", const="", default=None, metavar="TYPES",
                   help="show each group's type (Kafka's --list --type); with TYPES (comma-separated: "
                        "classic, consumer, share) only groups of those types")
    add_broker_options(p)
    add_json(p)

    p = command(gsub, "describe",
                help="committed offset, log end and lag per partition, with the owning member "
                     "(or --members / --state)",
                example="kafkasim groups describe billing --members --json", handler=_describe)
    p.add_argument("group", nargs="?", help="the group (or --group)")
    p.add_argument("--group", dest="group_option", metavar="GROUP", help="the group (Kafka's --group)")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="one row per member: CONSUMER-ID HOST CLIENT-ID #PARTITIONS")
    view.add_argument("--state", action="store_true",
                      help="COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS")
    p.add_argument("--verbose", action="store_true",
                   help="with --members: CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT UPGRADED; "
                        "with --state: GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH (epochs of consumer groups, KIP-848)")
    add_broker_options(p)
    add_json(p)

    p = command(gsub, "reset-offsets",
                help="plan (default, --dry-run) or --execute new committed offsets of an inactive group",
                example="kafkasim groups reset-offsets billing --topic orders --to-earliest --execute",
                handler=_reset)
    p.add_argument("group")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                       help="a topic, or topic:0,2 for some partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has committed")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_const", const=("to_earliest", None), dest="scenario")
    to.add_argument("--to-latest", action="store_const", const=("to_latest", None), dest="scenario")
    to.add_argument("--to-current", action="store_const", const=("to_current", None), dest="scenario")
    to.add_argument("--to-offset", type=int, metavar="N", help="this offset (clamped to [log start, log end])")
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                    help="the first offset at or after this time (UTC unless a zone is given)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    add_broker_options(p)
    add_json(p)

    p = command(gsub, "delete", help="delete inactive groups and their committed offsets",
                example="kafkasim groups delete billing", handler=_delete)
    p.add_argument("group", nargs="+")
    add_broker_options(p)
    add_json(p)


GROUP_TYPES = {"consumer": "Consumer", "classic": "Classic", "share": "Share"}
"""Kafka's ``GroupType`` names (what ListGroups carries -> what ``--list --type`` prints)."""


def _types(text: str) -> set[str]:
    """Kafka's ``consumerGroupTypesFromString``: comma-separated, any case; a bad name is an error."""
    types = {t.strip().lower() for t in text.split(",")}
    if not types <= set(GROUP_TYPES):
        raise InvalidArgumentError(f"Invalid types list '{text}'. Valid types are: "
                                   + ", ".join(GROUP_TYPES.values()))
    return types


def _list(args) -> int:
    wanted = _types(args.type) if args.type else None
    with open_broker(args, read_only=True) as b:
        groups = b.list_groups()
    if wanted is not None:
        groups = [g for g in groups if g.get("type", "classic") in wanted]
    columns = ["GROUP"] + (["TYPE"] if args.type is not None else []) + (["STATE"] if args.state else [])

    def text(gs: list) -> str:
        if len(columns) == 1:
            return "\n".join(g["group_id"] for g in gs)
        return table(columns, [[g["group_id"]]
                               + ([GROUP_TYPES.get(g.get("type", "classic"), "Unknown")] if args.type is not None else [])
                               + ([g["state"]] if args.state else []) for g in gs])
    emit(args, groups, text)
    return 0


def _describe(args) -> int:
    from kafkasim.admin import groups as admin

    if args.group and args.group_option and args.group != args.group_option:
        raise InvalidArgumentError(f"two groups given: {args.group!r} and --group {args.group_option!r}; "
                                   "describe one")
    args.group = args.group or args.group_option
    if not args.group:
        raise InvalidArgumentError("no group to describe: give GROUP or --group GROUP")
    with open_broker(args, read_only=True) as b:
        if args.members:
            data = admin.members(b, args.group)
        elif args.state:
            data = admin.state(b, args.group)
        else:
            data = admin.describe(b, args.group)
    if not args.json and data["state"] == "Empty":
        print(f"\nConsumer group '{args.group}' has no active members.", file=sys.stderr)
    elif not args.json and data["state"] in ("PreparingRebalance", "CompletingRebalance"):
        print(f"\nWarning: Consumer group '{args.group}' is rebalancing.", file=sys.stderr)
    emit(args, data, lambda d: _describe_text(d, args))
    return 0


def _describe_text(d: dict, args) -> str:
    if args.state:
        if args.verbose:
            return table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                          "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"],
                         [[d["group"], d["coordinator"], d["assignment_strategy"], d["state"], d["group_epoch"],
                           d["target_assignment_epoch"], d["members"]]])
        return table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                     [[d["group"], d["coordinator"], d["assignment_strategy"], d["state"], d["members"]]])
    if args.members:
        cols = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        rows = [[r["group"], r["consumer_id"], r["group_instance_id"], r["host"], r["client_id"], r["partitions"]]
                for r in d["rows"]]
        if not any(r["group_instance_id"] for r in d["rows"]):
            cols.pop(2)
            rows = [r[:2] + r[3:] for r in rows]
        if args.verbose:      # Kafka 4's columns; a classic group has no epochs or target ("-")
            cols += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "UPGRADED"]
            rows = [row + [r["current_epoch"], r["assignment"], r["target_epoch"], r["target_assignment"],
                           None if r["upgraded"] is None else str(r["upgraded"]).lower()]
                    for row, r in zip(rows, d["rows"])]
        return table(cols, rows)
    return table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                  "HOST", "CLIENT-ID"],
                 [[r["group"], r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"],
                   r["consumer_id"], r["host"], r["client_id"]] for r in d["rows"]])


def _reset(args) -> int:
    from kafkasim.admin import groups as admin

    if args.to_offset is not None:
        scenario, value = "to_offset", args.to_offset
    elif args.shift_by is not None:
        scenario, value = "shift_by", args.shift_by
    elif args.to_datetime is not None:
        scenario, value = "to_datetime", admin.parse_datetime(args.to_datetime)
    else:
        scenario, value = args.scenario
    with open_broker(args) as b:
        plan = admin.reset_offsets(b, args.group, scenario=scenario, value=value, topics=args.topic,
                                   all_topics=args.all_topics, execute=args.execute)
    emit(args, plan, lambda p: table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                                     [[r["group"], r["topic"], r["partition"], r["new_offset"]] for r in p["rows"]])
         + ("" if p["executed"] else "\n(dry run: nothing committed; add --execute)"))
    return 0


def _delete(args) -> int:
    from kafkasim.admin import groups as admin

    with open_broker(args) as b:
        result = admin.delete(b, args.group)

    def text(r: dict) -> str:
        if not r["failed"]:
            return ("Deletion of requested consumer groups ("
                    + ", ".join(f"'{g}'" for g in r["deleted"]) + ") was successful.")
        lines = ["Error: Deletion of some consumer groups failed:"]
        lines += [f"* Group '{g}' could not be deleted due to: {e}" for g, e in r["failed"].items()]
        if r["deleted"]:
            lines.append("\nThese consumer groups were deleted successfully: "
                         + ", ".join(f"'{g}'" for g in r["deleted"]))
        return "\n".join(lines)

    emit(args, result, text)
    return 1 if result["failed"] else 0
