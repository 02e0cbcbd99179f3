"""``kafkasim fault add|list|remove|clear``: script faults on a running ``kafkasim serve``.

Thin over :func:`kafkasim.server.control.fault_control`: the rules live in the running
server (:mod:`kafkasim.faults`), reached through its data dir's control directory
(``--data-dir``), a ``--bootstrap-server`` that data dir's server listens on, or its HTTP
control endpoint (``--control-url``, ``kafkasim serve --control-port``). Each command makes
one call and prints the result (a table, or JSON with ``--json``).
"""

from __future__ import annotations

import argparse

from kafkasim.cli.common import add_json, command, data_dir_of, emit
from kafkasim.cli.output import table
from kafkasim.errors import InvalidArgumentError

__all__ = ["register"]


def register(sub) -> None:
    fl = sub.add_parser("fault", help="script faults on a running 'kafkasim serve': error codes, latency, drops",
                        description="Install, list and remove fault rules on a running 'kafkasim serve': the "
                                    "next N matching requests get a Kafka error code, latency, a dropped "
                                    "connection or a throttle (docs/server.md, Fault control).",
                        epilog="Example:\n  kafkasim fault add --api Produce --error NOT_LEADER_OR_FOLLOWER "
                               "--count 3 --topic orders --partition 0",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    fsub = fl.add_subparsers(dest="fault_command", metavar="ACTION", required=True)

    p = command(fsub, "add", help="install a rule: requests matching --api/--broker/--topic/--partition/"
                                  "--client-id (each left out matches any) get --error, --latency-ms, --drop "
                                  "or --throttle-ms, for --count requests or --duration-ms (else until removed)",
                example="kafkasim fault add --api Produce --error NOT_LEADER_OR_FOLLOWER --count 3 "
                        "--topic orders --partition 0\n"
                        "  kafkasim fault add --api Fetch --latency-ms 300 --duration-ms 60000\n"
                        "  kafkasim fault add --api Produce --drop after --probability 0.2",
                handler=_add)
    p.add_argument("--api", metavar="NAME", help="Kafka's name of the API to match, e.g. Produce, Fetch, Metadata")
    p.add_argument("--error", metavar="NAME|CODE",
                   help="answer this Kafka error: its name (NOT_LEADER_OR_FOLLOWER) or its code (6)")
    p.add_argument("--count", type=int, metavar="N", help="act on the next N matching requests, then expire")
    p.add_argument("--topic", metavar="T", help="match requests naming this topic (the error is that partition's)")
    p.add_argument("--partition", type=int, metavar="P", help="match requests naming this partition")
    p.add_argument("--broker", type=int, metavar="B", help="match requests to this broker id")
    p.add_argument("--client-id", metavar="C", help="match requests whose client.id is C")
    p.add_argument("--latency-ms", type=int, default=0, metavar="MS", help="wait MS before answering")
    p.add_argument("--latency-jitter-ms", type=int, default=0, metavar="MS",
                   help="plus up to MS more, drawn from the server's seeded RNG")
    p.add_argument("--drop", metavar="before|after",
                   help="close the connection without an answer, before or after the request is applied "
                        "('after' makes duplicates without idempotence)")
    p.add_argument("--probability", type=float, default=1.0, metavar="X",
                   help="hit a matching request with probability X in (0, 1] (default 1)")
    p.add_argument("--throttle-ms", type=int, default=0, metavar="MS",
                   help="answer with throttle_time_ms=MS, as a quota does")
    p.add_argument("--duration-ms", type=int, metavar="MS", help="expire MS after the rule is added")
    _common(p)

    p = command(fsub, "list", help="every installed rule with its hit count (expired ones until removed)",
                example="kafkasim fault list --json", handler=_list)
    _common(p)

    p = command(fsub, "remove", help="remove one rule by its id", example="kafkasim fault remove 1",
                handler=_remove)
    p.add_argument("rule_id", type=int, metavar="ID")
    _common(p)

    p = command(fsub, "clear", help="remove every rule", example="kafkasim fault clear", handler=_clear)
    _common(p)


def _common(p) -> None:
    p.add_argument("--data-dir", default=None,
                   help="the data dir a running 'kafkasim serve' serves (default: $KAFKASIM_DATA_DIR or "
                        "./kafkasim-data); the command talks to it through the data dir")
    p.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT",
                   help="the server listening at HOST:PORT, when it is the one serving --data-dir (Kafka's "
                        "protocol cannot say where its control endpoint is: for a server elsewhere use --control-url)")
    p.add_argument("--control-url", default=None, metavar="URL",
                   help="the server's fault control endpoint, http://HOST:P ('kafkasim serve --control-port P')")
    add_json(p)


def _control(args):
    from kafkasim.server.control import fault_control

    return fault_control(data_dir_of(args), bootstrap=args.bootstrap_server, control_url=args.control_url)


def _rule_fields(args) -> dict:
    """The options given, as :meth:`Faults.add`'s keyword arguments; the ones a person gets
    wrong most (--error, --drop) checked here, naming the option and the value."""
    from kafkasim.faults import error_code_named

    rule = {}
    if args.error is not None:
        try:
            rule["error"] = error_code_named(args.error)[1]
        except InvalidArgumentError:
            raise InvalidArgumentError(f"--error {args.error}: not a Kafka error name or code (e.g. "
                                       "NOT_LEADER_OR_FOLLOWER or 6; kafkasim.errors lists them)") from None
    if args.drop is not None and args.drop not in ("before", "after"):
        raise InvalidArgumentError(f"--drop {args.drop}: expected 'before' or 'after'")
    for name in ("api", "count", "topic", "partition", "broker", "client_id", "drop", "duration_ms"):
        value = getattr(args, name)
        if value is not None:
            rule[name] = value
    for name in ("latency_ms", "latency_jitter_ms", "throttle_ms"):
        if getattr(args, name):
            rule[name] = getattr(args, name)
    if args.probability != 1.0:
        rule["probability"] = args.probability
    if not any(k in rule for k in ("error", "drop", "latency_ms", "latency_jitter_ms", "throttle_ms")):
        raise InvalidArgumentError("a rule must do something: give --error, --latency-ms, --drop or --throttle-ms")
    return rule


def _action(r: dict) -> str:
    parts = []
    if r.get("error") is not None:
        parts.append(f"error {r.get('error_name') or r['error']}")
    if r.get("latency_ms") or r.get("latency_jitter_ms"):
        jitter = f"+0..{r['latency_jitter_ms']}" if r.get("latency_jitter_ms") else ""
        parts.append(f"latency {r.get('latency_ms', 0)}{jitter} ms")
    if r.get("drop"):
        parts.append(f"drop {r['drop']}")
    if r.get("throttle_ms"):
        parts.append(f"throttle {r['throttle_ms']} ms")
    if r.get("probability", 1.0) != 1.0:
        parts.append(f"p={r['probability']:g}")
    return ", ".join(parts)


def _rules_text(rules: list) -> str:
    if not rules:
        return "No fault rules installed."
    return table(["ID", "API", "BROKER", "TOPIC", "PARTITION", "CLIENT", "ACTION", "COUNT", "DURATION_MS",
                  "HITS", "EXPIRED"],
                 [(r["rule_id"], r["api"], r["broker"], r["topic"], r["partition"], r["client_id"], _action(r),
                   r["count"], r["duration_ms"], r["hits"], "yes" if r.get("expired") else "no") for r in rules])


def _add(args) -> int:
    rule = _rule_fields(args)
    with _control(args) as control:
        added = control.fault_add(**rule)
    emit(args, added, lambda r: f"Added fault rule {r['rule_id']}: {_action(r)}.")
    return 0


def _list(args) -> int:
    with _control(args) as control:
        rules = control.fault_list()
    emit(args, rules, _rules_text)
    return 0


def _remove(args) -> int:
    with _control(args) as control:
        removed = control.fault_remove(args.rule_id)
    emit(args, removed, lambda r: f"Removed fault rule {r['rule_id']} ({r['hits']} hits).")
    return 0


def _clear(args) -> int:
    with _control(args) as control:
        n = control.fault_clear()
    emit(args, {"removed": n}, lambda d: f"Removed {d['removed']} fault rule(s).")
    return 0
