"""``kafkasim groups list|describe``: consumer groups (like kafka-consumer-groups), thin over Broker."""

from __future__ import annotations

import argparse

from kafkasim.cli.common import add_data_dir, add_json, command, emit, open_broker

__all__ = ["register"]


def register(sub) -> None:
    groups = sub.add_parser("groups", help="list and describe consumer groups",
                            description="Consumer groups (like kafka-consumer-groups.sh).",
                            epilog="Example:\n  kafkasim groups describe billing",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    gsub = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)
    p = command(gsub, "list", help="every group with its state", example="kafkasim groups list --json",
                handler=_list)
    add_data_dir(p)
    add_json(p)
    p = command(gsub, "describe",
                help="state, generation, members, assignment; committed offset, log end and lag per partition",
                example="kafkasim groups describe billing --json", handler=_describe)
    p.add_argument("group")
    add_data_dir(p)
    add_json(p)



def _list(args) -> int:
    with open_broker(args) as b:
        groups = b.list_groups()
    emit(args, groups, lambda gs: "\n".join(f"{g['group_id']}\t{g['state']}" for g in gs)
         or "(no groups)")
    return 0


def _plain(desc: dict) -> dict:
    out = {k: v for k, v in desc.items() if k != "offsets"}
    out["members"] = [{**m, "assignment": [[tp[0], tp[1]] for tp in m["assignment"]]}
                      for m in desc["members"]]
    return out


def _describe_text(d: dict) -> str:
    lines = [f"Group: {d['group_id']}  State: {d['state']}  Generation: {d['generation']}  "
             f"Protocol: {d['protocol']}  Leader: {d['leader']}",
             f"Members: {len(d['members'])}"]
    for m in d["members"]:
        parts = ",".join(f"{t}-{p}" for t, p in m["assignment"]) or "-"
        static = f" (static {m['group_instance_id']})" if m["group_instance_id"] else ""
        lines.append(f"  {m['member_id']}{static} client={m['client_id']} partitions={parts}")
    lines.append(f"{'TOPIC':20} {'PARTITION':>9} {'CURRENT-OFFSET':>14} {'LOG-END-OFFSET':>14} "
                 f"{'LAG':>8}  CONSUMER-ID")
    for r in d["partitions"]:
        def show(v):
            return "-" if v is None else str(v)
        lines.append(f"{r['topic']:20} {r['partition']:>9} {show(r['committed']):>14} "
                     f"{show(r['log_end_offset']):>14} {show(r['lag']):>8}  {r['member_id'] or '-'}")
    return "\n".join(lines)


def _describe(args) -> int:
    with open_broker(args) as b:
        desc = _plain(b.describe_group(args.group))
    emit(args, desc, _describe_text)
    return 0
