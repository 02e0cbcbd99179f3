"""Test helper: lay out a data dir by hand (FORMAT.md §1) with storage's batch encoder.

Used where a test needs exact control of the bytes (corruption, explicit batches);
logs of whole scenarios are written with the project's broker and producer.
"""

from __future__ import annotations

import json
import os

from kafkasim.storage import layout
from kafkasim.records.record_batch import encode_batch


def write_topic_meta(data_dir: str, topic: str, partitions: int) -> None:
    d = os.path.join(data_dir, layout.META_DIR, "topics")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{topic}.json"), "w") as f:
        json.dump({"name": topic, "topic_id": "0" * 32, "partitions": partitions,
                   "replication_factor": 1, "configs": {}, "created_ms": 0}, f)


def write_segment(data_dir: str, topic: str, partition: int, base_offset: int,
                  batches: list[list[tuple]], **batch_kw) -> str:
    """Write one segment whose batches hold ``(timestamp, key, value, headers)`` records,
    offsets assigned contiguously from ``base_offset``. Returns the .log path."""
    pdir = os.path.join(data_dir, layout.partition_dir_name(topic, partition))
    os.makedirs(pdir, exist_ok=True)
    path = os.path.join(pdir, layout.segment_name(base_offset))
    off = base_offset
    with open(path, "wb") as f:
        for recs in batches:
            f.write(encode_batch(off, [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(recs)],
                                 **batch_kw))
            off += len(recs)
    return path
