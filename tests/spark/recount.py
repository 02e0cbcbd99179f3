"""Test helper: every figure ``kafkasim audit all`` reports, recounted by brute force.

Independent of the Spark jobs: the segment files are read with kafkasim's record reader
(``kafkasim.records``: ``iter_batches`` and ``iter_records``), the commits with the one codec
of ``__consumer_offsets`` (``kafkasim.protocol.offsets.decode_record``), and every figure is
counted with plain Python loops over the decoded records, from the definitions written in the
jobs' docstrings (spark_jobs/ordering.py, skew.py, lag.py) and docs/spark-audits.md. Nothing
here imports ``kafkasim.spark_jobs``. The one shared part is the murmur2 partitioner of the
partitioner check (``kafkasim.partitioning``), itself checked against Kafka's test vectors.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter, defaultdict
from typing import Optional

from kafkasim.partitioning.partitioners import partition_for_key
from kafkasim.protocol.offsets import OFFSETS_TOPIC, OffsetKey, decode_record
from kafkasim.records.framing import iter_batches
from kafkasim.records.record_batch import iter_records
from kafkasim.storage import layout
from kafkasim.types import INPUT_HEADER, PRODUCER_HEADER, SEQUENCE_HEADER


# -- reading --------------------------------------------------------------------------------
def read_partitions(data_dir: str) -> dict[tuple[str, int], list]:
    """``(topic, partition) -> [Record]`` of every partition under ``data_dir``, in offset order."""
    out = {}
    for pd, path in layout.list_partitions(data_dir):
        recs = []
        for _, seg in layout.list_segments(path):
            with open(seg, "rb") as f:
                buf = f.read()
            for pos, h in iter_batches(buf, where=seg):
                recs.extend(iter_records(buf, pos, h, where=seg))
        assert [r.offset for r in recs] == sorted(r.offset for r in recs), pd
        out[(pd.topic, pd.partition)] = recs
    return out


def topic_meta(data_dir: str) -> dict[str, dict]:
    """``meta/topics/<topic>.json`` of every topic (storage/FORMAT.md §1.2), read as JSON."""
    d = os.path.join(data_dir, layout.META_DIR, "topics")
    out = {}
    for name in sorted(os.listdir(d)):
        if name.endswith(".json"):
            with open(os.path.join(d, name)) as f:
                meta = json.load(f)
            out[meta["name"]] = meta
    return out


def _header(rec, name: str) -> Optional[bytes]:
    found = [v for k, v in rec.headers if k == name]
    return found[-1] if found else None


def _sequence(rec) -> tuple[Optional[str], Optional[int]]:
    """(producer, seq) from the producer-stamped headers; None where missing or not a number."""
    producer, seq = _header(rec, PRODUCER_HEADER), _header(rec, SEQUENCE_HEADER)
    try:
        seq = int(seq.decode()) if seq is not None else None
    except ValueError:
        seq = None
    return (producer.decode() if producer is not None else None), seq


# -- ordering -------------------------------------------------------------------------------
def _plausible_counts(topic: str, parts: dict[int, list], meta: dict) -> set[int]:
    """The partition counts ``topic`` plausibly had (ordering.py, check 3): the current one,
    every count of the recorded history, and the count before each add of partitions that
    the data shows (every partition >= q got its first record after every partition < q got
    its first)."""
    counts = {meta["partitions"]}
    hist = meta.get("partition_history") or []
    counts |= {e["from_partitions"] for e in hist} | {e["to_partitions"] for e in hist}
    first_ts = {p: min(r.timestamp for r in recs) for p, recs in parts.items() if recs}
    for q in sorted(first_ts):
        before = [p for p in first_ts if p < q]
        after = [p for p in first_ts if p >= q]
        if before and max(first_ts[p] for p in before) < min(first_ts[p] for p in after):
            counts.add(max(before) + 1)
    return counts


def ordering_violations(data: dict, metas: dict, topics: list[str]) -> dict[str, int]:
    """The six counts of the ordering report, by kind (definitions in ordering.py)."""
    out = dict.fromkeys(("key_in_multiple_partitions", "sequence_inversion", "sequence_gap", "duplicate",
                         "partitioner_mismatch", "input_order_inversion"), 0)
    for topic in topics:
        parts = {p: recs for (t, p), recs in data.items() if t == topic}
        # 1. keys in several partitions: how many keys
        where = defaultdict(set)
        for p, recs in parts.items():
            for r in recs:
                if r.key is not None:
                    where[r.key].add(p)
        out["key_in_multiple_partitions"] += sum(1 for ps in where.values() if len(ps) > 1)
        # 2. sequences per (producer, key)
        seqd = []        # (timestamp, partition, offset, producer, key, seq)
        for p, recs in parts.items():
            for r in recs:
                producer, seq = _sequence(r)
                if r.key is not None and producer is not None and seq is not None:
                    seqd.append((r.timestamp, p, r.offset, producer, r.key, seq))
        seen, originals = set(), []
        for row in sorted(seqd):                     # the first in (timestamp, partition, offset) is the original
            ident = (row[3], row[4], row[5])
            if ident in seen:
                out["duplicate"] += 1
            else:
                seen.add(ident)
                originals.append(row)
        is_original = {(r[1], r[2]) for r in originals}
        for p in parts:                              # 2b. below the largest sequence of an earlier offset
            highest = {}
            for ts, pp, offset, producer, key, seq in sorted((r for r in seqd if r[1] == p), key=lambda r: r[2]):
                prev = highest.get((producer, key))
                if (p, offset) in is_original and prev is not None and seq < prev:
                    out["sequence_inversion"] += 1
                highest[(producer, key)] = max(seq, prev if prev is not None else seq)
        by_key = defaultdict(list)                   # 2c. missing sequences between consecutive ones
        for r in originals:
            by_key[(r[3], r[4])].append(r[5])
        for seqs in by_key.values():
            seqs.sort()
            out["sequence_gap"] += sum(1 for a, b in zip(seqs, seqs[1:]) if b - a > 1)
        # 4. input order: per (output partition, key, input partition), the first output of each
        # input record below the largest input offset of an earlier output offset
        out["input_order_inversion"] += input_order_inversions(parts)
        # 3. records on a partition no plausible count's murmur2 partition explains
        counts = _plausible_counts(topic, parts, metas[topic])
        for p, recs in parts.items():
            for r in recs:
                if r.key is not None and all(partition_for_key(r.key, n) != p for n in counts):
                    out["partitioner_mismatch"] += 1
    return out


def input_order_inversions(parts: dict[int, list]) -> int:
    """Check 4 of ordering.py over one topic's partitions: ``kafkasim-input`` = "p:o"."""
    refs = []           # (timestamp, partition, offset, key, input partition, input offset)
    for p, recs in parts.items():
        for r in recs:
            ref = _header(r, INPUT_HEADER)
            try:
                ip, io = (int(x) for x in ref.decode().split(":")) if ref is not None else (None, None)
            except ValueError:
                ip = io = None
            if r.key is not None and io is not None:
                refs.append((r.timestamp, p, r.offset, r.key, ip, io))
    seen, firsts = set(), set()
    for row in sorted(refs):
        if (row[3], row[4], row[5]) not in seen:
            seen.add((row[3], row[4], row[5]))
            firsts.add((row[1], row[2]))
    found, highest = 0, {}
    for ts, p, offset, key, ip, io in sorted(refs, key=lambda r: (r[1], r[2])):
        prev = highest.get((p, key, ip))
        if (p, offset) in firsts:
            if prev is not None and io < prev:
                found += 1
            highest[(p, key, ip)] = io if prev is None else max(prev, io)
    return found


# -- skew -----------------------------------------------------------------------------------
def _payload_bytes(r) -> int:
    return (len(r.key or b"") + len(r.value or b"")
            + sum(len(k.encode()) + len(v or b"") for k, v in r.headers))


def summary(xs: list[int]) -> dict:
    """max/avg, max/min, drift %, cv and gini of per-partition values (skew.py's definitions)."""
    n, total = len(xs), sum(xs)
    mean = total / n
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / n)
    asc = sorted(xs)
    return {"partitions": n, "total": total,
            "max_over_avg": max(xs) / mean if mean > 0 else None,
            "max_over_min": max(xs) / min(xs) if min(xs) > 0 else None,
            "drift_pct": (max(xs) - mean) / mean * 100 if mean > 0 else None,
            "cv": std / mean if mean > 0 else None,
            "gini": sum((2 * i - n - 1) * x for i, x in enumerate(asc, 1)) / (n * total) if total > 0 else 0.0}


def skew(data: dict, metas: dict, topics: list[str], window_ms: int, top_k: int) -> dict:
    """Per-partition records and bytes, the overall and per-topic ratios, the windows and the
    hot keys of the skew report (definitions in skew.py)."""
    rows = []
    for topic in topics:
        for p in range(metas[topic]["partitions"]):
            recs = data.get((topic, p), [])
            rows.append({"topic": topic, "partition": p, "records": len(recs),
                         "bytes": sum(_payload_bytes(r) for r in recs)})
    for topic in topics:
        mine = [r for r in rows if r["topic"] == topic]
        for r in mine:
            r["share"] = r["records"] / sum(x["records"] for x in mine)
            r["byte_share"] = r["bytes"] / sum(x["bytes"] for x in mine)
    windows = []
    for topic in topics:
        per = defaultdict(Counter)
        seen = 0
        for (t, p), recs in data.items():
            if t == topic:
                for r in recs:
                    per[r.timestamp // window_ms * window_ms][p] += 1
                    seen = max(seen, p + 1)
        n = max(metas[topic]["partitions"], seen)
        for start, c in sorted(per.items()):
            total = sum(c.values())
            windows.append({"topic": topic, "window_start": start, "records": total,
                            "max_partition_records": max(c.values()), "max_over_avg": max(c.values()) / (total / n)})
    keys = {}
    for topic in topics:
        total = sum(len(recs) for (t, _), recs in data.items() if t == topic)
        acc = defaultdict(lambda: [0, 0, set()])
        for (t, p), recs in data.items():
            if t == topic:
                for r in recs:
                    if r.key is not None:
                        a = acc[r.key]
                        a[0] += 1
                        a[1] += _payload_bytes(r)
                        a[2].add(p)
        for k, (n, b, ps) in acc.items():
            keys[(topic, k)] = {"topic": topic, "key": k, "records": n, "bytes": b, "share": n / total,
                                "partitions": sorted(ps)}
    hot = sorted(keys.values(), key=lambda h: (-h["records"], h["topic"], h["key"]))[:top_k]
    return {"partitions": rows, "overall": summary([r["records"] for r in rows]),
            "bytes": summary([r["bytes"] for r in rows]),
            "topics": {t: summary([r["records"] for r in rows if r["topic"] == t]) for t in topics},
            "windows": windows, "hot_keys": hot}


# -- lag ------------------------------------------------------------------------------------
def lag(data: dict, metas: dict, topics: list[str]) -> dict:
    """Per (group, topic, partition) with a live commit: committed offset, log end offset,
    lag in records and in ms; and the partitions without a commit (lag.py, steps 1-4)."""
    last = {}
    for (t, p), recs in sorted(data.items()):
        if t != OFFSETS_TOPIC:
            continue
        for r in recs:                                   # in (partition, offset) order: the last wins
            k, v = decode_record(r.key, r.value)
            if isinstance(k, OffsetKey) and k.topic in topics:
                last[(k.group, k.topic, k.partition)] = v
    live = {gtp: v for gtp, v in last.items() if v is not None}
    rows = []
    for (g, t, p), v in sorted(live.items()):
        recs = data.get((t, p), [])
        leo = recs[-1].offset + 1 if recs else 0
        lag_records = max(0, leo - v.offset)
        nxt = next((r.timestamp for r in recs if r.offset >= v.offset), None)
        end_ts = recs[-1].timestamp if recs else None
        lag_ms = max(0, end_ts - nxt) if lag_records > 0 else 0
        rows.append({"group": g, "topic": t, "partition": p, "committed_offset": v.offset,
                     "log_end_offset": leo, "lag_records": lag_records, "lag_ms": lag_ms})
    no_commit = []
    for g, t in sorted({(g, t) for g, t, _ in live}):
        parts = set(range(metas[t]["partitions"])) | {p for (tt, p) in data if tt == t}
        for p in sorted(parts):
            if (g, t, p) not in live:
                recs = data.get((t, p), [])
                no_commit.append({"group": g, "topic": t, "partition": p,
                                  "log_end_offset": recs[-1].offset + 1 if recs else 0})
    return {"partitions": rows, "no_commit": no_commit}
