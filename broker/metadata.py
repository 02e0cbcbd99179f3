"""Durable cluster metadata of one data dir: topics (``meta/topics/<topic_id>.json``) and the
producer-id block (``meta/producer-ids.json``), per storage/FORMAT.md §1.2.

Every write is :func:`kafkasim.storage.files.atomic_write` (``<file>.tmp``, fsync, rename,
fsync of the directory), so a crash leaves either the old or the new file, never half of
one. A topic exists iff its metadata file exists. Every ``OSError`` becomes a
:class:`~kafkasim.errors.KafkaStorageError` naming the action and the file
(:func:`kafkasim.storage.files.storage_errors`); a file that reads but does not parse is
a ``KafkaStorageError`` too ("unreadable ...").

Not thread-safe: the broker serialises calls under its metadata lock.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkasim.errors import KafkaStorageError
from kafkasim.storage.files import TMP_SUFFIX, atomic_write, fsync_dir, storage_errors
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


def _dump(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


class MetadataStore:
    """Reads and writes ``<data_dir>/meta``."""

    def __init__(self, data_dir: str) -> None:
        self.topics_dir = os.path.join(data_dir, META_DIR, "topics")
        self.producer_ids_path = os.path.join(data_dir, META_DIR, "producer-ids.json")
        with storage_errors("create", self.topics_dir):
            os.makedirs(self.topics_dir, exist_ok=True)
        with storage_errors("clean up", self.topics_dir):
            for name in os.listdir(self.topics_dir):  # leftovers of an interrupted write
                if name.endswith(TMP_SUFFIX):
                    os.unlink(os.path.join(self.topics_dir, name))

    def _path(self, topic_id: str) -> str:
        # named by topic id: a 249-character topic name plus ".json.tmp" would pass
        # the 255-byte file-name limit
        return os.path.join(self.topics_dir, f"{topic_id}.json")

    def load_topics(self) -> dict[str, TopicMetadata]:
        out = {}
        with storage_errors("list", self.topics_dir):
            names = sorted(os.listdir(self.topics_dir))
        for name in names:
            if not name.endswith(".json"):
                continue
            path = os.path.join(self.topics_dir, name)
            with storage_errors("read topic metadata", path):
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            try:
                meta = TopicMetadata(**json.loads(text))
            except (ValueError, TypeError) as exc:
                raise KafkaStorageError(f"unreadable topic metadata {path}: {exc}") from exc
            out[meta.name] = meta
        return out

    def save_topic(self, meta: TopicMetadata) -> None:
        atomic_write(self._path(meta.topic_id), _dump(asdict(meta)))

    def delete_topic(self, meta: TopicMetadata) -> None:
        path = self._path(meta.topic_id)
        with storage_errors(f"delete the metadata of topic {meta.name!r} at", path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                fsync_dir(self.topics_dir)

    def load_next_producer_id(self) -> int:
        path = self.producer_ids_path
        with storage_errors("read", path):
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                return 0            # a fresh data dir: no producer id handed out yet
        try:
            return int(json.loads(text)["next_block_start"])
        except (ValueError, KeyError, TypeError) as exc:
            raise KafkaStorageError(f"unreadable {path}: {exc}") from exc

    def save_next_producer_id(self, next_block_start: int) -> None:
        atomic_write(self.producer_ids_path, _dump({"next_block_start": next_block_start}))
