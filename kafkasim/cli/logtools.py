"""``kafkasim dump-log`` and ``kafkasim verify-log``: thin calls into kafkasim.storage.inspection.

``dump-log PATH`` prints a segment's batches (``--records``: and their records, with
their stored key and value sizes in bytes; ``--offsets-decoder``: ``__consumer_offsets``
records decoded), or an index file's entries, like Kafka's kafka-dump-log; exit 1 if the
file holds a corrupt batch. ``verify-log`` checks every partition of the data dir and exits 1 on any
corruption, naming file and position. ``upgrade-data-dir DATA_DIR`` converts a data dir
written in kafkasim's old record format (format version 1) to Kafka's record batch v2, once,
atomically per segment and safe to rerun (:mod:`kafkasim.storage.upgrade`); it refuses while a
server holds the data dir.
"""

from __future__ import annotations

import json
import os
import sys

from kafkasim.cli.common import add_data_dir, add_json, command, emit, existing_data_dir

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "dump-log", help="print the batches and records of a segment file (like kafka-dump-log)",
                example="kafkasim dump-log kafkasim-data/orders-0/00000000000000000000.log --records",
                handler=_dump)
    p.add_argument("path", help="a .log, .index or .timeindex file")
    p.add_argument("--records", action="store_true", help="also print every record of each batch")
    p.add_argument("--offsets-decoder", action="store_true",
                   help="decode __consumer_offsets records as kafka-dump-log does "
                        "(offset_commit::group=G,partition=T-P / group_metadata::group=G); implies --records")
    add_json(p)

    p = command(sub, "upgrade-data-dir",
                help="convert a data dir written in kafkasim's old record format to Kafka's record batch v2 "
                     "(once, with no server running on it; safe to rerun after a crash)",
                example="kafkasim upgrade-data-dir ./kafkasim-data", handler=_upgrade)
    p.add_argument("data_dir_path", metavar="DATA_DIR", help="the data directory to convert in place")
    add_json(p)

    p = command(sub, "verify-log", help="check CRCs, offsets and indexes of every partition; exit 1 on corruption",
                example="kafkasim verify-log --data-dir kafkasim-data --json", handler=_verify)
    add_data_dir(p)
    add_json(p)


def _dump(args) -> int:
    from kafkasim.storage.inspection import dump_segment
    decoder = _offsets_decoder if args.offsets_decoder else None
    entries = list(dump_segment(args.path, records=args.records or args.offsets_decoder, decoder=decoder))
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
                    f"keySize: {r['key_size']} valueSize: {r['value_size']} sequence: {r['sequence']} "
                    f"headerKeys: [{keys}] key: {r['key']} payload: {r['value']}")
        elif "position" in e and "offset" in e:
            lines.append(f"offset: {e['offset']} position: {e['position']}")
        elif "timestamp" in e:
            lines.append(f"timestamp: {e['timestamp']} offset: {e['offset']}")
        if "error" in e:
            lines.append(f"ERROR at position {e['position']}: {e['error']}")
    return "\n".join(lines)


def _offsets_decoder(key, value) -> tuple:
    """kafka-dump-log's --offsets-decoder rendering of one __consumer_offsets record (Kafka 3.x's
    OffsetsMessageParser): ``offset_commit::group=G,partition=T-P`` / ``offset=N[,metadata=M]``,
    ``group_metadata::group=G`` / a JSON summary, ``<DELETE>`` for a tombstone."""
    from kafkasim.errors import CorruptRecordError
    from kafkasim.protocol.offsets import GroupKey, decode_record

    try:
        k, v = decode_record(key, value)
    except CorruptRecordError as exc:
        return f"<undecodable: {exc}>", None
    if isinstance(k, GroupKey):
        text = "<DELETE>" if v is None else json.dumps({
            "protocolType": v.get("protocol_type"), "protocol": v.get("protocol"),
            "generationId": v.get("generation"),
            "assignment": "{" + ",".join(
                f"{m['member_id']}=[{', '.join(f'{t}-{p}' for t, p in m.get('assignment') or [])}]"
                for m in v.get("members") or []) + "}"}, separators=(",", ":"))
        return f"group_metadata::group={k.group}", text
    if v is None:
        text = "<DELETE>"
    else:
        text = f"offset={v.offset}" + (f",metadata={v.metadata}" if v.metadata else "")
    return f"offset_commit::group={k.group},partition={k.topic}-{k.partition}", text


def _upgrade(args) -> int:
    from kafkasim.storage.upgrade import upgrade_data_dir

    def line(r) -> str:
        name = os.path.relpath(r.path, args.data_dir_path)
        if r.segments_converted:
            text = (f"{name}: converted {r.segments_converted} of {r.segments_total} segments to Kafka v2 "
                    f"({r.batches} batches, {r.records} records, {r.bytes_before} -> {r.bytes_after} bytes)")
        elif r.indexes_rebuilt:
            text = f"{name}: already Kafka v2; rebuilt {r.indexes_rebuilt} missing indexes"
        else:
            text = f"{name}: already Kafka v2"
        return "\n".join([text, *(f"  {n}" for n in r.notes)])

    quiet = getattr(args, "json", False)
    results = upgrade_data_dir(args.data_dir_path,
                               on_partition=None if quiet else (lambda r: print(line(r), flush=True)))
    converted = sum(1 for r in results if r.segments_converted)
    summary = {"data_dir": args.data_dir_path, "partitions": len(results), "partitions_converted": converted,
               "segments_converted": sum(r.segments_converted for r in results),
               "records": sum(r.records for r in results),
               "details": [{**r._asdict(), "path": os.path.relpath(r.path, args.data_dir_path)} for r in results]}
    emit(args, summary, lambda s: (f"{s['partitions_converted']} of {s['partitions']} partitions converted "
                                   f"({s['segments_converted']} segments, {s['records']} records) in {s['data_dir']}"))
    return 0


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
