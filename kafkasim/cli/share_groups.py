"""``kafkasim share-groups list|describe|reset-offsets|delete-offsets|delete``: kafka-share-groups,
thin over kafkasim.admin.share_groups.

Kafka's actions (``--list``, ``--describe``, ``--reset-offsets``, ``--delete-offsets``,
``--delete``) are subcommands, as ``kafkasim groups`` does for kafka-consumer-groups; the
other options keep Kafka's names (``--group``, ``--all-groups``, ``--members``,
``--offsets``, ``--state``, ``--verbose``, ``--topic``, ``--all-topics``, ``--to-earliest``,
``--to-latest``, ``--to-current``, ``--to-offset``, ``--to-datetime``, ``--dry-run``,
``--execute``), and the tables Kafka 4.2's columns (see the admin module).
"""

from __future__ import annotations

import argparse
import sys

from kafkasim.cli.common import add_broker_options, add_json, command, emit, open_broker
from kafkasim.cli.output import table
from kafkasim.errors import InvalidArgumentError

__all__ = ["register"]


def _group_options(p: argparse.ArgumentParser, *, many: bool, all_groups: bool) -> None:
    p.add_argument("group", nargs="*" if many else "?", help="the share group" + ("s" if many else "")
                   + " (or --group)")
    p.add_argument("--group", dest="group_option", action="append", default=[], metavar="GROUP",
                   help="the share group to act on (Kafka's --group" + (", repeatable)" if many else ")"))
    if all_groups:
        p.add_argument("--all-groups", action="store_true", help="every share group")


def register(sub) -> None:
    groups = sub.add_parser("share-groups", help="list, describe, reset and delete share groups (KIP-932)",
                            description="Share groups (like kafka-share-groups.sh).",
                            epilog="Example:\n  kafkasim share-groups describe --group workers --members --verbose",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    gsub = groups.add_subparsers(dest="share_groups_command", metavar="ACTION", required=True)

    p = command(gsub, "list", help="every share group (Kafka's --list), with --state their states",
                example="kafkasim share-groups list --state Stable", handler=_list)
    p.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                   help="show each group's state; with STATES (comma-separated: Empty, Stable, Dead, "
                        "Unknown) only groups in those states")
    add_broker_options(p)
    add_json(p)

    p = command(gsub, "describe",
                help="start offset and lag per partition (Kafka's --describe [--offsets]), or --members / --state",
                example="kafkasim share-groups describe --group workers --offsets --verbose", handler=_describe)
    _group_options(p, many=True, all_groups=True)
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true",
                      help="GROUP TOPIC PARTITION START-OFFSET LAG (the default)")
    view.add_argument("--members", action="store_true",
                      help="GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT")
    view.add_argument("--state", action="store_true", help="GROUP COORDINATOR (ID) STATE #MEMBERS")
    p.add_argument("--verbose", action="store_true",
                   help="with --offsets: LEADER-EPOCH; with --members: MEMBER-EPOCH; "
                        "with --state: GROUP-EPOCH ASSIGNMENT-EPOCH")
    add_broker_options(p)
    add_json(p)

    p = command(gsub, "reset-offsets",
                help="plan (default, --dry-run) or --execute new start offsets of an empty share group",
                example="kafkasim share-groups reset-offsets --group workers --topic jobs --to-earliest --execute",
                handler=_reset)
    _group_options(p, many=False, all_groups=False)
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                       help="a topic, or topic:0,2 for some partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has state for")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_const", const="to_earliest", dest="scenario",
                    help="the log start offset")
    to.add_argument("--to-latest", action="store_const", const="to_latest", dest="scenario",
                    help="the log end offset")
    to.add_argument("--to-current", action="store_const", const="to_current", dest="scenario",
                    help="the current start offset (the log end where there is none)")
    to.add_argument("--to-offset", type=int, metavar="N", help="this offset (clamped to [log start, log end])")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                    help="the first offset at or after this time (UTC unless a zone is given)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    mode.add_argument("--execute", action="store_true", help="apply the new start offsets")
    add_broker_options(p)
    add_json(p)

    p = command(gsub, "delete-offsets", help="delete an empty share group's state for whole topics",
                example="kafkasim share-groups delete-offsets --group workers --topic jobs", handler=_delete_offsets)
    _group_options(p, many=False, all_groups=False)
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC", required=True,
                   help="a topic whose share-partition state is deleted (repeatable)")
    add_broker_options(p)
    add_json(p)

    p = command(gsub, "delete", help="delete empty share groups and their state",
                example="kafkasim share-groups delete --group workers", handler=_delete)
    _group_options(p, many=True, all_groups=True)
    add_broker_options(p)
    add_json(p)


def _groups(args, *, many: bool) -> list[str]:
    """The groups named by GROUP and --group (Kafka's --group), in order, once each."""
    given = list(args.group if isinstance(args.group, list) else [args.group] if args.group else [])
    given += args.group_option
    given = list(dict.fromkeys(given))
    if getattr(args, "all_groups", False):
        if given:
            raise InvalidArgumentError("Option [all-groups] cannot be used with [group]")
        return []
    if not given:
        raise InvalidArgumentError(f"Option [{args.share_groups_command}] takes one of these options: "
                                   + ("[all-groups], [group]" if hasattr(args, "all_groups") else "[group]"))
    if not many and len(given) > 1:
        raise InvalidArgumentError(f"Option [{args.share_groups_command}] supports one share group at a time "
                                   f"(given: {', '.join(given)})")
    return given


def _list(args) -> int:
    from kafkasim.admin import share_groups as admin

    states = None if args.state is None else args.state.split(",")
    with open_broker(args) as b:
        rows = admin.list_groups(b, states)
    if args.state is None:
        emit(args, rows, lambda rs: "\n".join(r["group"] for r in rs))
    else:
        emit(args, rows, lambda rs: table(["GROUP", "STATE"], [[r["group"], r["state"]] for r in rs]))
    return 0


def _describe(args) -> int:
    from kafkasim.admin import share_groups as admin

    names = _groups(args, many=True)
    with open_broker(args) as b:
        if args.all_groups:
            names = [r["group"] for r in admin.list_groups(b)]
        how = admin.members if args.members else admin.state if args.state else admin.describe
        results = [how(b, g) for g in sorted(names)]
    texts = []
    for d in results:
        if not args.json and (args.members or args.state) and d["state"] == "Empty":
            print(f"\nShare group '{d['group']}' has no active members.", file=sys.stderr)
        texts.append(_describe_text(d, args))
    emit(args, results if len(results) != 1 or args.all_groups else results[0],
         lambda _: "\n\n".join(t for t in texts if t))
    return 0


def _describe_text(d: dict, args) -> str:
    if args.state:
        if args.verbose:
            return table(["GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"],
                         [[d["group"], d["coordinator"], d["state"], d["group_epoch"], d["assignment_epoch"],
                           d["members"]]])
        return table(["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"],
                     [[d["group"], d["coordinator"], d["state"], d["members"]]])
    if args.members:
        if not d["rows"]:
            return ""
        cols = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"] \
            + (["MEMBER-EPOCH"] if args.verbose else []) + ["ASSIGNMENT"]
        return table(cols, [[r["group"], r["consumer_id"], r["host"] or None, r["client_id"], r["partitions"]]
                            + ([r["member_epoch"]] if args.verbose else []) + [r["assignment"] or None]
                            for r in d["rows"]])
    if not d["rows"]:
        return f"Share group '{d['group']}' has no offset information."
    cols = ["GROUP", "TOPIC", "PARTITION"] + (["LEADER-EPOCH"] if args.verbose else []) + ["START-OFFSET", "LAG"]
    return table(cols, [[r["group"], r["topic"], r["partition"]] + ([r["leader_epoch"]] if args.verbose else [])
                        + [r["start_offset"], r["lag"]] for r in d["rows"]])


def _reset(args) -> int:
    from kafkasim.admin import groups as consumer_admin
    from kafkasim.admin import share_groups as admin

    (group,) = _groups(args, many=False)
    if args.to_offset is not None:
        scenario, value = "to_offset", args.to_offset
    elif args.to_datetime is not None:
        scenario, value = "to_datetime", consumer_admin.parse_datetime(args.to_datetime)
    else:
        scenario, value = args.scenario, None
    with open_broker(args) as b:
        plan = admin.reset_offsets(b, group, scenario=scenario, value=value, topics=args.topic,
                                   all_topics=args.all_topics, execute=args.execute)
    emit(args, plan, lambda p: table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                                     [[r["group"], r["topic"], r["partition"], r["new_offset"]] for r in p["rows"]])
         + ("" if p["executed"] else "\n(dry run: nothing changed; add --execute)"))
    return 0


def _delete_offsets(args) -> int:
    from kafkasim.admin import share_groups as admin

    (group,) = _groups(args, many=False)
    with open_broker(args) as b:
        result = admin.delete_offsets(b, group, args.topic)
    emit(args, result, lambda r: table(["TOPIC", "STATUS"], [[row["topic"], row["status"]] for row in r["rows"]]))
    return 1 if any(row["status"] != "Successful" for row in result["rows"]) else 0


def _delete(args) -> int:
    from kafkasim.admin import share_groups as admin

    names = _groups(args, many=True)
    with open_broker(args) as b:
        if args.all_groups:
            names = [r["group"] for r in admin.list_groups(b)]
        result = admin.delete(b, names)

    def text(r: dict) -> str:
        if not r["failed"]:
            return ("Deletion of requested share groups ("
                    + ", ".join(f"'{g}'" for g in r["deleted"]) + ") was successful.")
        lines = ["Error: Deletion of some share groups failed:"]
        lines += [f"* Group '{g}' could not be deleted due to: {e}" for g, e in r["failed"].items()]
        if r["deleted"]:
            lines.append("\nThese share groups were deleted successfully: "
                         + ", ".join(f"'{g}'" for g in r["deleted"]))
        return "\n".join(lines)

    emit(args, result, text)
    return 1 if result["failed"] else 0
