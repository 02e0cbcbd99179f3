"""``kafkasim partition KEY... --partitions N``: which partition each key goes to, and its hash."""

from __future__ import annotations

import binascii

from kafkasim.cli.common import add_json, command, emit
from kafkasim.cli.output import table
from kafkasim.errors import InvalidArgumentError

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "partition",
                help="show the partition and hash of each key (Kafka's murmur2 by default)",
                example="kafkasim partition merchant_000042 21 --partitions 64 --partitioner murmur2 --json",
                handler=_partition)
    p.add_argument("keys", nargs="+", metavar="KEY",
                   help="keys, UTF-8 (or hex with --hex); \"\" is the empty key")
    p.add_argument("--partitions", type=int, required=True, help="number of partitions")
    p.add_argument("--partitioner", default="murmur2",
                   help="a key-pure partitioner: murmur2 (default), murmur2_random, consistent_random, "
                        "consistent, fnv1a, murmur3, round_robin")
    p.add_argument("--hex", action="store_true", help="each KEY is hex-encoded bytes")
    add_json(p)


def _decode(key: str, hex_: bool) -> bytes:
    if not hex_:
        return key.encode("utf-8")
    try:
        return binascii.unhexlify(key)
    except (binascii.Error, ValueError) as exc:
        raise InvalidArgumentError(f"--hex key {key!r} is not valid hex: {exc}") from exc


def _partition(args) -> int:
    from kafkasim.partitioning.partitioners import explain_keys

    rows = explain_keys([_decode(k, args.hex) for k in args.keys], args.partitions, args.partitioner)
    data = [{"key": k, "partition": r["partition"], "hash": r["hash"]} for k, r in zip(args.keys, rows)]
    emit(args, data, _text)
    return 0


def _text(rows: list[dict]) -> str:
    return table(["KEY", "PARTITION", "HASH"],
                 [(repr(r["key"]), "random" if r["partition"] < 0 else r["partition"], r["hash"]) for r in rows])
