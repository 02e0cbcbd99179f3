"""``kafkasim dump-log`` and ``kafkasim verify-log``: thin calls into kafkasim.storage.inspection.

``dump-log PATH`` prints a segment's batches in the layout of Kafka's ``kafka-dump-log.sh
--files F`` (``--print-data-log``, alias ``--records``: and their records with key and payload;
``--deep-iteration``: records without them; ``--offsets-decoder``: ``__consumer_offsets`` records
decoded; ``--transaction-log-decoder``: ``__transaction_state`` records decoded; a transaction
marker's record shows ``endTxnMarker: COMMIT|ABORT coordinatorEpoch: N``), or an index file's entries; exit 1 if the file holds a corrupt batch (the reason on
stderr; stdout says ``Found N invalid bytes at the end of F`` as Kafka does). ``verify-log`` checks every partition of the data dir and exits 1 on any
corruption, naming file and position. ``upgrade-data-dir DATA_DIR`` converts a data dir
written in kafkasim's old record format (format version 1) to Kafka's record batch v2, once,
atomically per segment and safe to rerun (:mod:`kafkasim.storage.upgrade`); it refuses while a
server holds the data dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

from kafkasim.cli.common import add_data_dir, add_json, command, emit, existing_data_dir
from kafkasim.errors import InvalidArgumentError

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "dump-log", help="print the batches and records of segment files in kafka-dump-log's layout",
                example="kafkasim dump-log kafkasim-data/orders-0/00000000000000000000.log --print-data-log",
                handler=_dump)
    p.add_argument("path", nargs="*", help="a .log, .index or .timeindex file (or several)")
    p.add_argument("--files", default=None, metavar="FILE1,FILE2",
                   help="comma-separated files to dump, as kafka-dump-log takes them")
    p.add_argument("--print-data-log", "--records", dest="print_data_log", action="store_true",
                   help="also print every record with its key and payload (--records: the same)")
    p.add_argument("--deep-iteration", action="store_true",
                   help="print every record's metadata, without key and payload")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="with --print-data-log: print only each record's key and payload")
    p.add_argument("--offsets-decoder", action="store_true",
                   help="decode __consumer_offsets records as kafka-dump-log does "
                        "(offset_commit::group=G,partition=T-P / group_metadata::group=G); implies --print-data-log")
    p.add_argument("--transaction-log-decoder", action="store_true",
                   help="decode __transaction_state records as kafka-dump-log does "
                        "(transaction_metadata::transactionalId=T / producerId:..,state=..); "
                        "implies --print-data-log")
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
    paths = list(args.path) + ([f for f in args.files.split(",") if f] if args.files else [])
    if not paths:
        raise InvalidArgumentError("no file to dump: give a path, or --files FILE1,FILE2")
    if args.offsets_decoder and args.transaction_log_decoder:
        raise InvalidArgumentError("--offsets-decoder and --transaction-log-decoder cannot be used together")
    decoder = _offsets_decoder if args.offsets_decoder else _transaction_log_decoder if args.transaction_log_decoder \
        else None
    data = args.print_data_log or args.offsets_decoder or args.transaction_log_decoder
    records = data or args.deep_iteration
    dumps = [(path, list(dump_segment(path, records=records, decoder=decoder))) for path in paths]
    failed = False
    for path, entries in dumps:
        for e in entries:
            if "error" in e:
                failed = True
                print(f"kafkasim dump-log: {path} at position {e['position']}: {e['error']}", file=sys.stderr)
    if getattr(args, "json", False):
        emit(args, dumps[0][1] if len(dumps) == 1 else {p: es for p, es in dumps}, lambda _: "")
    else:
        print("\n".join(dump_text(p, es, data=data, skip_metadata=args.skip_record_metadata) for p, es in dumps))
    return 1 if failed else 0


def dump_text(path: str, entries: list, *, data: bool = False, skip_metadata: bool = False) -> str:
    """``entries`` of :func:`kafkasim.storage.inspection.dump_segment` in Kafka's kafka-dump-log
    layout (``DumpLogSegments``): ``Dumping <file>``, ``Log starting offset: N`` for a ``.log``, one
    line per batch, with records one ``| offset: ...`` line each (key and payload with ``data``)."""
    name = os.path.basename(path)
    lines = [f"Dumping {path}"]
    if name.endswith(".log"):
        stem = name.split(".", 1)[0]
        lines.append(f"Log starting offset: {int(stem) if stem.isdigit() else 0}")
    elif name.endswith(".index") and not entries:
        lines.append(f"{path} is empty.")
    valid = 0
    end = None
    for e in entries:
        if "error" in e:
            end = e["position"]
            break
        if "base_offset" in e:
            lines.append(_batch_line(e))
            valid = e["position"] + e["size"]
            for r in e.get("records", ()):
                lines.append(_record_line(e, r, data, skip_metadata))
        elif "position" in e and "offset" in e:
            lines.append(f"offset: {e['offset']} position: {e['position']}")
        elif "timestamp" in e:
            lines.append(f"timestamp: {e['timestamp']} offset: {e['offset']}")
    if end is not None and name.endswith(".log"):
        with contextlib.suppress(OSError):
            lines.append(f"Found {os.path.getsize(path) - valid} invalid bytes at the end of {name}")
    return "\n".join(lines)


def _batch_line(e: dict) -> str:
    """kafka-dump-log's batch line (DumpLogSegments.printBatchLevel, magic 2), field for field."""
    horizon = "OptionalLong.empty" if e["delete_horizon_ms"] is None else f"OptionalLong[{e['delete_horizon_ms']}]"
    return (f"baseOffset: {e['base_offset']} lastOffset: {e['last_offset']} count: {e['count']} "
            f"baseSequence: {e['base_sequence']} lastSequence: {e['last_sequence']} "
            f"producerId: {e['producer_id']} producerEpoch: {e['producer_epoch']} "
            f"partitionLeaderEpoch: {e['partition_leader_epoch']} isTransactional: {_bool(e['is_transactional'])} "
            f"isControl: {_bool(e['is_control'])} deleteHorizonMs: {horizon} "
            f"position: {e['position']} {e['timestamp_type']}: {e['max_timestamp']} size: {e['size']} "
            f"magic: {e['magic']} compresscodec: {e['compression']} crc: {e['crc']} isvalid: {_bool(e['crc_valid'])}")


def _record_line(e: dict, r: dict, data: bool, skip_metadata: bool) -> str:
    """kafka-dump-log's record line: ``| offset: ... headerKeys: [a,b]`` (the metadata, unless
    ``skip_metadata``), a control record's marker, then with ``data`` `` key: K`` (when the record
    has a key) and `` payload: V`` (when it has a value)."""
    out = "|"
    if not skip_metadata:
        out += (f" offset: {r['offset']} {e['timestamp_type']}: {r['timestamp']} keySize: {r['key_size']} "
                f"valueSize: {r['value_size']} sequence: {r['sequence']} "
                f"headerKeys: [{','.join(k for k, _ in r['headers'])}]")
        if "control_type" in r:
            out += (f" endTxnMarker: {r['control_type']} coordinatorEpoch: {r['coordinator_epoch']}"
                    if "coordinator_epoch" in r else f" controlType: {r['control_type']}")
    if data and "control_type" not in r:
        if r.get("key") is not None:
            out += f" key: {r['key']}"
        if r.get("value") is not None:
            out += f" payload: {r['value']}"
    return out


def _bool(b: bool) -> str:
    return "true" if b else "false"


def _offsets_decoder(key, value) -> tuple:
    """kafka-dump-log's --offsets-decoder rendering of one __consumer_offsets record (Kafka 3.x's
    OffsetsMessageParser): ``offset_commit::group=G,partition=T-P`` / ``offset=N[,metadata=M]``,
    ``group_metadata::group=G`` / a JSON summary, ``<DELETE>`` for a tombstone. A consumer group
    (KIP-848) record prints as Kafka 4's parser prints it: ``{"type":"3","data":{"groupId":"g"}}`` /
    ``{"version":"0","data":{"epoch":1}}`` (the generated JSON converters' field names)."""
    from kafkasim.errors import CorruptRecordError
    from kafkasim.protocol import consumer_group_log as cgl
    from kafkasim.protocol.offsets import GroupKey, decode_record

    if cgl.is_consumer_group_key(key):     # KIP-848 records: Kafka 4's JSON rendering
        try:
            ck = cgl.decode_key(key)
            cv = cgl.decode_value(ck.type, value)
        except CorruptRecordError as exc:
            return f"<undecodable: {exc}>", None
        compact = {"separators": (",", ":")}
        return (json.dumps(cgl.key_json(ck), **compact),
                "<DELETE>" if cv is None else json.dumps(cgl.value_json(cv), **compact))
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


def _transaction_log_decoder(key, value) -> tuple:
    """kafka-dump-log's --transaction-log-decoder rendering of one __transaction_state record
    (Kafka's ``TransactionLog.formatRecordKeyAndValue``): ``transaction_metadata::transactionalId=T``
    / ``producerId:P,producerEpoch:E,state=S,partitions=[t-0,...],txnLastUpdateTimestamp=N,
    txnTimeoutMs=N``, ``<DELETE>`` for a tombstone, ``unknown::version=V`` (no payload) for a key
    version Kafka does not know. The partitions are sorted (Kafka prints its set's order)."""
    from kafkasim.errors import CorruptRecordError
    from kafkasim.protocol.txn_log import decode_txn_record

    if key is None:
        return "<undecodable: Failed to decode message using transaction log decoder (message had a missing key)>", \
            None
    try:
        k, v = decode_txn_record(key, value)
    except CorruptRecordError as exc:
        return f"<undecodable: {exc}>", None
    if k.is_unknown:
        return f"unknown::version={k.version}", None
    if v is None:
        return f"transaction_metadata::transactionalId={k.transactional_id}", "<DELETE>"
    partitions = sorted((t, p) for t, ps in v.transaction_partitions or () for p in ps)
    return (f"transaction_metadata::transactionalId={k.transactional_id}",
            f"producerId:{v.producer_id},producerEpoch:{v.producer_epoch},state={v.state_name},"
            f"partitions=[{','.join(f'{t}-{p}' for t, p in partitions)}],"
            f"txnLastUpdateTimestamp={v.transaction_last_update_timestamp_ms},"
            f"txnTimeoutMs={v.transaction_timeout_ms}")


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

    def progress(r) -> None:   # what was converted; the partitions already in v2 only in the summary
        if r.changed:
            print(line(r), flush=True)

    quiet = getattr(args, "json", False)
    results = upgrade_data_dir(args.data_dir_path, on_partition=None if quiet else progress)
    converted = sum(1 for r in results if r.segments_converted)
    summary = {"data_dir": args.data_dir_path, "partitions": len(results), "partitions_converted": converted,
               "segments_converted": sum(r.segments_converted for r in results),
               "records": sum(r.records for r in results),
               "details": [{**r._asdict(), "path": os.path.relpath(r.path, args.data_dir_path)} for r in results]}
    emit(args, summary, lambda s: (f"{s['partitions_converted']} of {s['partitions']} partitions converted "
                                   f"({s['segments_converted']} segments, {s['records']} records; the others were "
                                   f"already Kafka v2 or empty) in {s['data_dir']}"))
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
