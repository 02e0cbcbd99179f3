"""Durable cluster metadata of one data dir: topics (``meta/topics/<topic_id>.json``) and the
producer-id block (``meta/producer-ids.json``), per storage/FORMAT.md §1.2.

Every write goes to ``<file>.tmp``, is fsynced and renamed over the target, so a
crash leaves either the old or the new file, never half of one. A topic exists iff
its metadata file exists.

Not thread-safe: the broker serialises calls under its metadata lock.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkasim.errors import KafkaStorageError
from kafkasim.storage.layout import META_DIR

__all__ = ["TopicMetadata", "MetadataStore"]


@dataclass
class TopicMetadata:
    """What the broker knows about a topic besides its data."""

    name: str
    topic_id: str
    partitions: int
    replication_factor: int
    configs: dict[str, Any] = field(default_factory=dict)
    created_ms: int = 0


def _write_atomically(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(os.path.dirname(path))
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise KafkaStorageError(f"cannot write {path}: {exc}") from exc


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class MetadataStore:
    """Reads and writes ``<data_dir>/meta``."""

    def __init__(self, data_dir: str) -> None:
        self.topics_dir = os.path.join(data_dir, META_DIR, "topics")
        self.producer_ids_path = os.path.join(data_dir, META_DIR, "producer-ids.json")
        try:
            os.makedirs(self.topics_dir, exist_ok=True)
        except OSError as exc:
            raise KafkaStorageError(f"cannot create {self.topics_dir}: {exc}") from exc
        for name in os.listdir(self.topics_dir):  # leftovers of an interrupted write
            if name.endswith(".tmp"):
                os.unlink(os.path.join(self.topics_dir, name))

    def _path(self, topic_id: str) -> str:
        # named by topic id: a 249-character topic name plus ".json.tmp" would pass
        # the 255-byte file-name limit
        return os.path.join(self.topics_dir, f"{topic_id}.json")

    def load_topics(self) -> dict[str, TopicMetadata]:
        out = {}
        for name in sorted(os.listdir(self.topics_dir)):
            if not name.endswith(".json"):
                continue
            path = os.path.join(self.topics_dir, name)
            try:
                with open(path, encoding="utf-8") as f:
                    raw = json.load(f)
                meta = TopicMetadata(**raw)
            except (OSError, ValueError, TypeError) as exc:
                raise KafkaStorageError(f"unreadable topic metadata {path}: {exc}") from exc
            out[meta.name] = meta
        return out

    def save_topic(self, meta: TopicMetadata) -> None:
        _write_atomically(self._path(meta.topic_id), asdict(meta))

    def delete_topic(self, meta: TopicMetadata) -> None:
        topic = meta.name
        try:
            os.unlink(self._path(meta.topic_id))
            _fsync_dir(self.topics_dir)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise KafkaStorageError(f"cannot delete metadata of topic {topic}: {exc}") from exc

    def load_next_producer_id(self) -> int:
        try:
            with open(self.producer_ids_path, encoding="utf-8") as f:
                return int(json.load(f)["next_block_start"])
        except FileNotFoundError:
            return 0
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise KafkaStorageError(f"unreadable {self.producer_ids_path}: {exc}") from exc

    def save_next_producer_id(self, next_block_start: int) -> None:
        _write_atomically(self.producer_ids_path, {"next_block_start": next_block_start})
