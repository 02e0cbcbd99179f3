"""``kafkasim transactions list|describe|describe-producers|abort|find-hanging``:
kafka-transactions.sh, thin over :mod:`kafkasim.admin.transactions`.

Subcommands, options, columns and messages are Kafka's ``TransactionsCommand``'s. Tables are
printed as Kafka prints them: each column padded to its widest value and followed by a tab.
A failure prints Kafka's one-line message on stderr and exits 1, as Kafka's tool does.
Works on the data dir (embedded) or against a running ``kafkasim serve``
(``--bootstrap-server``, or the server holding the data dir).
"""

from __future__ import annotations

import argparse
import sys

from kafkasim.cli.common import add_broker_options, add_json, command, emit, non_negative_int, open_broker

__all__ = ["register"]


def register(sub) -> None:
    tx = sub.add_parser("transactions", help="list, describe and abort transactions (kafka-transactions.sh)",
                        description="This tool is used to analyze the transactional state of producers in the "
                                    "cluster. It can be used to detect and recover from hanging transactions.",
                        epilog="Example:\n  kafkasim transactions find-hanging --topic orders",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    tsub = tx.add_subparsers(dest="transactions_command", metavar="COMMAND", required=True)

    p = command(tsub, "list", help="list transactions", example="kafkasim transactions list", handler=_list)
    add_broker_options(p)
    add_json(p)

    p = command(tsub, "describe", help="describe the state of an active transactional-id",
                example="kafkasim transactions describe --transactional-id payments-tx", handler=_describe)
    p.add_argument("--transactional-id", required=True, help="transactional id")
    add_broker_options(p)
    add_json(p)

    p = command(tsub, "describe-producers", help="describe the states of active producers for a topic partition",
                example="kafkasim transactions describe-producers --topic orders --partition 0",
                handler=_describe_producers)
    p.add_argument("--broker-id", type=int, default=None,
                   help="optional broker id to describe the producer state on a specific replica")
    p.add_argument("--topic", required=True, help="topic name")
    p.add_argument("--partition", type=non_negative_int, required=True, help="partition number")
    add_broker_options(p)
    add_json(p)

    p = command(tsub, "abort", help="abort a hanging transaction (requires administrative privileges)",
                example="kafkasim transactions abort --topic orders --partition 0 --start-offset 42",
                handler=_abort)
    p.add_argument("--topic", required=True, help="topic name")
    p.add_argument("--partition", type=non_negative_int, required=True, help="partition number")
    new = p.add_argument_group("Brokers on versions 3.0 and above",
                               "For newer brokers, only the start offset of the transaction to be aborted is required")
    new.add_argument("--start-offset", type=int, default=None, help="start offset of the transaction to abort")
    old = p.add_argument_group("Brokers on versions older than 3.0",
                               "For older brokers, you must provide all of these arguments")
    old.add_argument("--producer-id", type=int, default=None, help="producer id")
    old.add_argument("--producer-epoch", type=int, default=None, help="producer epoch")
    old.add_argument("--coordinator-epoch", type=int, default=None, help="coordinator epoch")
    add_broker_options(p)
    add_json(p)

    p = command(tsub, "find-hanging", help="find hanging transactions",
                example="kafkasim transactions find-hanging --broker-id 0 --max-transaction-timeout 5",
                handler=_find_hanging)
    p.add_argument("--broker-id", type=int, default=None, help="broker id to search for hanging transactions")
    p.add_argument("--max-transaction-timeout", type=int, default=15,
                   help="maximum transaction timeout in minutes to limit the scope of the search (default: 15)")
    p.add_argument("--topic", default=None, help="topic name to limit search to")
    p.add_argument("--partition", type=non_negative_int, default=None, help="partition number")
    add_broker_options(p)
    add_json(p)


def pretty_table(headers, rows) -> str:
    """Kafka's ``prettyPrintTable``: every column padded to its widest cell, then a tab."""
    rows = [[_text(v) for v in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return "\n".join("".join(v.ljust(w) + "\t" for v, w in zip(r, widths)) for r in [list(headers)] + rows)


def _text(v) -> str:
    if v is None:
        return "None"
    if isinstance(v, list):
        return ",".join(map(str, v))
    return str(v)


def _run(args, fn) -> int:
    """Run ``fn(broker)``; a TransactionsCommandError is Kafka's one line on stderr, exit 1."""
    from kafkasim.admin.transactions import TransactionsCommandError

    try:
        with open_broker(args) as b:
            return fn(b)
    except TransactionsCommandError as exc:
        print(exc, file=sys.stderr)
        return 1


def _now(b) -> int:
    import time

    clock = getattr(b, "clock", None)
    return clock.now_ms() if clock is not None else int(time.time() * 1000)


def _list(args) -> int:
    from kafkasim.admin import transactions as admin

    def go(b):
        rows = admin.list_transactions(b)
        emit(args, rows, lambda rs: pretty_table(admin.LIST_HEADERS, [list(r.values()) for r in rs]))
        return 0
    return _run(args, go)


def _describe(args) -> int:
    from kafkasim.admin import transactions as admin

    def go(b):
        row = admin.describe(b, args.transactional_id, _now(b))
        emit(args, row, lambda r: pretty_table(admin.DESCRIBE_HEADERS, [list(r.values())]))
        return 0
    return _run(args, go)


def _describe_producers(args) -> int:
    from kafkasim.admin import transactions as admin

    def go(b):
        rows = admin.describe_producers(b, args.topic, args.partition, args.broker_id)
        emit(args, rows, lambda rs: pretty_table(admin.PRODUCERS_HEADERS, [list(r.values()) for r in rs]))
        return 0
    return _run(args, go)


def _abort(args) -> int:
    from kafkasim.admin import transactions as admin

    def go(b):
        spec = admin.abort(b, args.topic, args.partition, start_offset=args.start_offset,
                           producer_id=args.producer_id, producer_epoch=args.producer_epoch,
                           coordinator_epoch=args.coordinator_epoch)
        if args.json:
            emit(args, spec, str)
        return 0
    return _run(args, go)


def _find_hanging(args) -> int:
    from kafkasim.admin import transactions as admin

    def go(b):
        rows = admin.find_hanging(b, _now(b), broker_id=args.broker_id, topic=args.topic, partition=args.partition,
                                  max_transaction_timeout_min=args.max_transaction_timeout)
        emit(args, rows, lambda rs: pretty_table(admin.HANGING_HEADERS, [list(r.values()) for r in rs]))
        return 0
    return _run(args, go)
