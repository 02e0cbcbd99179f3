"""``kafkasim dump-log`` and ``kafkasim verify-log``: thin calls into kafkasim.storage.inspection.

``dump-log PATH`` prints a segment's batches (``--records``: and their records), or an
index file's entries, like Kafka's kafka-dump-log; exit 1 if the file holds a corrupt
batch. ``verify-log`` checks every partition of the data dir and exits 1 on any
corruption, naming file and position.
"""

from __future__ import annotations

import sys

from kafkasim.cli.common import add_data_dir, add_json, command, emit, existing_data_dir

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "dump-log", help="print the batches and records of a segment file (like kafka-dump-log)",
                example="kafkasim dump-log kafkasim-data/orders-0/00000000000000000000.log --records",
                handler=_dump)
    p.add_argument("path", help="a .log, .index or .timeindex file")
    p.add_argument("--records", action="store_true", help="also print every record of each batch")
    add_json(p)

    p = command(sub, "verify-log", help="check CRCs, offsets and indexes of every partition; exit 1 on corruption",
                example="kafkasim verify-log --data-dir kafkasim-data --json", handler=_verify)
    add_data_dir(p)
    add_json(p)


def _dump(args) -> int:
    from kafkasim.storage.inspection import dump_segment
    entries = list(dump_segment(args.path, records=args.records))
    emit(args, entries, lambda es: _dump_text(args.path, es))
    return 1 if any("error" in e for e in entries) else 0


def _dump_text(path: str, entries: list) -> str:
    lines = [f"Dumping {path}"]
    for e in entries:
        if "base_offset" in e:
            lines.append(
                f"baseOffset: {e['base_offset']} lastOffset: {e['last_offset']} count: {e['count']} "
                f"baseSequence: {e['base_sequence']} lastSequence: {e['last_sequence']} "
                f"producerId: {e['producer_id']} producerEpoch: {e['producer_epoch']} "
                f"partitionLeaderEpoch: {e['partition_leader_epoch']} position: {e['position']} "
                f"{e['timestamp_type']}: {e['max_timestamp']} size: {e['size']} magic: {e['magic']} "
                f"crc: {e['crc']} isvalid: {str(e['crc_valid']).lower()}")
            for r in e.get("records", ()):
                keys = ",".join(k for k, _ in r["headers"])
                lines.append(
                    f"| offset: {r['offset']} {e['timestamp_type']}: {r['timestamp']} "
                    f"keySize: {-1 if r['key'] is None else len(r['key'])} "
                    f"valueSize: {-1 if r['value'] is None else len(r['value'])} sequence: {r['sequence']} "
                    f"headerKeys: [{keys}] key: {r['key']} payload: {r['value']}")
        elif "position" in e and "offset" in e:
            lines.append(f"offset: {e['offset']} position: {e['position']}")
        elif "timestamp" in e:
            lines.append(f"timestamp: {e['timestamp']} offset: {e['offset']}")
        if "error" in e:
            lines.append(f"ERROR at position {e['position']}: {e['error']}")
    return "\n".join(lines)


def _verify(args) -> int:
    from kafkasim.storage.inspection import verify_data_dir
    data_dir = existing_data_dir(args)
    stats: dict = {}
    problems = verify_data_dir(data_dir, stats)
    result = {"data_dir": data_dir, **stats, "ok": not any(p.severity == "error" for p in problems),
              "problems": [p._asdict() for p in problems]}

    def text(r: dict) -> str:
        lines = [str(p) for p in problems]
        lines.append(f"{'OK' if r['ok'] else 'CORRUPT'}: {r['partitions']} partitions, {r['segments']} segments, "
                     f"{r['batches']} batches, {r['records']} records checked in {data_dir}")
        return "\n".join(lines)

    emit(args, result, text)
    if not result["ok"]:
        print(f"kafkasim verify-log: corruption found in {data_dir}", file=sys.stderr)
        return 1
    return 0
