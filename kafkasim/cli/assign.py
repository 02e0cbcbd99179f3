"""``kafkasim assign``: the assignment calculator (a thin call into kafkasim.assignors.calculator)."""

from __future__ import annotations

from kafkasim.cli.common import add_json, command, emit
from kafkasim.cli.output import table

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "assign",
                help="run a partition assignor (range, roundrobin, sticky, cooperative-sticky) on a JSON spec",
                example="echo '{\"partitions_per_topic\": {\"t0\": 3}, "
                        "\"subscriptions\": {\"C0\": [\"t0\"], \"C1\": [\"t0\"]}}' "
                        "| kafkasim assign --strategy cooperative-sticky --spec - --json",
                handler=_assign)
    p.add_argument("--strategy", required=True, metavar="NAME",
                   help="partition.assignment.strategy name: range, roundrobin, sticky, cooperative-sticky "
                        "(or a registered custom assignor)")
    p.add_argument("--spec", required=True, metavar="FILE",
                   help="JSON spec file, or - for stdin: partitions_per_topic, subscriptions and optionally "
                        "previous_assignment, generation, group_instance_ids, racks, partition_racks "
                        "(see docs/assignors.md)")
    p.add_argument("--follow-up", action="store_true",
                   help="cooperative-sticky: run the follow-up rebalances until nothing is revoked "
                        "and print the final assignment")
    add_json(p)


def _assign(args) -> int:
    from kafkasim.assignors.calculator import calculate, read_spec

    result = calculate(args.strategy, read_spec(args.spec), follow_up=args.follow_up)
    emit(args, result, _text)
    return 0


def _text(result: dict) -> str:
    lines = [f"strategy: {result['strategy']}   rounds: {result['rounds']}",
             table(["MEMBER", "COUNT", "PARTITIONS"],
                   [(m, len(tps), ", ".join(f"{t}-{p}" for t, p in tps) or None)
                    for m, tps in result["assignment"].items()])]
    moved = result["moved"]
    lines.append(f"moved ({len(moved)}): " + (", ".join(
        f"{d['topic']}-{d['partition']} {d['from']}->{d['to'] if d['to'] is not None else '(none)'}"
        for d in moved) or "-"))
    revoked = result["revoked_first"]
    lines.append(f"revoked first ({len(revoked)}): " + (", ".join(f"{t}-{p}" for t, p in revoked) or "-"))
    if "rack_misaligned" in result:
        off = result["rack_misaligned"]
        lines.append(f"rack-misaligned ({len(off)}): " + (", ".join(
            f"{d['topic']}-{d['partition']} {d['member']}@{d['rack']}" for d in off) or "-"))
    return "\n".join(lines)
