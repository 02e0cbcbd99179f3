"""Durable cluster metadata of one data dir: topics (``meta/topics/<topic_id>.json``), the
producer-id block (``meta/producer-ids.json``) and the finalized feature levels
(``meta/features.json``), per storage/FORMAT.md §1.2 and §1.3.

Every write is :func:`kafkasim.storage.files.atomic_write` (``<file>.tmp``, fsync, rename,
fsync of the directory), so a crash leaves either the old or the new file, never half of
one. A topic exists iff its metadata file exists. Every ``OSError`` becomes a
:class:`~kafkasim.errors.KafkaStorageError` naming the action and the file
(:func:`kafkasim.storage.files.storage_errors`); a file that reads but does not parse is
a ``KafkaStorageError`` too ("unreadable ...").

The rules a topic's fields obey live here, once, and hold on create
(:meth:`kafkasim.broker.admin.TopicAdmin.create_topic` raises their Kafka errors) and on
load (:meth:`MetadataStore.load_topics`: a file breaking one is a ``KafkaStorageError``
naming the file, the field and the value, before anything is opened): the name is a
legal topic name (:func:`kafkasim.storage.layout.validate_topic`, so a partition
directory never escapes the data dir), ``partitions`` an int in [1, MAX_PARTITIONS],
``replication_factor`` an int >= 1, ``configs`` a mapping of valid topic configs;
on load also ``topic_id`` a plain id (it names the file) and ``created_ms`` an int >= 0,
``partition_history`` (optional: older files lack it) a history obeying the rules of
:mod:`kafkasim.storage.partition_history`, no field missing or unknown, and no two files
naming one topic.

Not thread-safe: the broker serialises calls under its metadata lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from kafkasim.arguments import check_arg
from kafkasim.config import MAX_PARTITIONS, LogConfig
from kafkasim.errors import (
    InvalidPartitionsError, InvalidReplicationFactorError, KafkaSimError, KafkaStorageError,
)
from kafkasim.storage.files import TMP_SUFFIX, atomic_write, fsync_dir, make_dirs, storage_errors
from kafkasim.storage.layout import META_DIR, validate_topic
from kafkasim.storage.partition_history import check_partition_history

__all__ = ["TopicMetadata", "MetadataStore", "check_partition_count", "check_replication_factor",
           "check_topic_configs", "TRANSACTION_VERSION_FEATURE", "SUPPORTED_FEATURES", "DEFAULT_FEATURE_LEVELS"]

TRANSACTION_VERSION_FEATURE = "transaction.version"
SUPPORTED_FEATURES = {TRANSACTION_VERSION_FEATURE: (0, 2)}
"""Feature name → (min, max) level the broker supports (Kafka 4.0's TransactionVersion TV_0–TV_2)."""
DEFAULT_FEATURE_LEVELS = {TRANSACTION_VERSION_FEATURE: 2}
"""The finalized levels of a new data dir: what ``kafka-storage.sh format`` gives a Kafka 4.0 cluster."""

_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


@dataclass
class TopicMetadata:
    """What the broker knows about a topic besides its data."""

    name: str
    topic_id: str
    partitions: int
    replication_factor: int
    configs: dict[str, Any] = field(default_factory=dict)
    created_ms: int = 0
    partition_history: list[dict] = field(default_factory=list)
    """One entry per growth of the partition count (:mod:`kafkasim.storage.partition_history`)."""


def _dump(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


# -- the rules of a topic's fields: on create and on load ----------------------------------------
def _check_count(what: str, value: Any, error: type, message: str, limit: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{message}: {what}={value!r} is not an integer")
    if value < 1:
        raise error(f"{message}: {what}={value}")
    if limit is not None and value > limit:
        raise error(f"{what}={value} exceeds the simulator's limit of {limit} partitions per topic")
    return int(value)


def check_partition_count(value: Any, what: str = "partitions") -> int:
    """A topic's partition count: an int in [1, MAX_PARTITIONS] (InvalidPartitionsError)."""
    return _check_count(what, value, InvalidPartitionsError, "Number of partitions must be larger than 0",
                        MAX_PARTITIONS)


def check_replication_factor(value: Any) -> int:
    """A topic's replication factor: an int >= 1 (InvalidReplicationFactorError)."""
    return _check_count("replication_factor", value, InvalidReplicationFactorError,
                        "Replication factor must be larger than 0", None)


def check_topic_configs(configs: Any, defaults: LogConfig) -> tuple[LogConfig, dict[str, Any]]:
    """``(effective config, canonical overrides)`` of a topic's config overrides: a mapping of
    Kafka config names to values (InvalidArgumentError), each valid (InvalidConfigurationError)."""
    check_arg("configs", configs, "mapping", what="a mapping of config names to values")
    config = defaults.with_overrides(configs)
    kafka = config.to_kafka()
    return config, {k: kafka[k] for k in configs}


def _check_topic_id(value: Any) -> None:
    if not isinstance(value, str) or not _TOPIC_ID.fullmatch(value):
        raise KafkaStorageError("a topic id is 1-128 characters from [A-Za-z0-9_-] (it names the file)")


def _check_created_ms(value: Any) -> None:
    check_arg("created_ms", value, "int", min=0)


def topic_from_json(raw: Any, path: str, defaults: LogConfig) -> "TopicMetadata":
    """The TopicMetadata a metadata file holds, checked by the same rules as a create;
    KafkaStorageError naming ``path``, the field and the value otherwise."""
    where = f"invalid topic metadata in {path}"
    if not isinstance(raw, dict):
        raise KafkaStorageError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    known = {f.name for f in fields(TopicMetadata)}
    required = {f.name for f in fields(TopicMetadata) if f.default is MISSING and f.default_factory is MISSING}
    missing, unknown = sorted(required - raw.keys()), sorted(raw.keys() - known)
    if missing or unknown:
        raise KafkaStorageError(f"{where}: " + "; ".join(
            ([f"missing field(s) {', '.join(missing)}"] if missing else [])
            + ([f"unknown field(s) {', '.join(unknown)}"] if unknown else [])))
    rules = (("name", validate_topic), ("partitions", check_partition_count),
             ("replication_factor", check_replication_factor),
             ("configs", lambda c: check_topic_configs(c, defaults)), ("topic_id", _check_topic_id),
             ("created_ms", _check_created_ms))
    for name, rule in rules:
        if name not in raw:
            continue
        value = raw[name]
        try:
            rule(value)
        except KafkaSimError as exc:
            what = f"invalid topic name {value!r:.80}" if name == "name" else f"{name}: {value!r:.80} is invalid"
            raise KafkaStorageError(f"{where}: {what} ({exc})") from exc
    if "partition_history" in raw:      # absent in files written before the history was kept
        try:
            check_partition_history(raw["partition_history"], raw["partitions"])
        except KafkaStorageError as exc:
            raise KafkaStorageError(f"{where}: {exc}") from exc
    return TopicMetadata(**raw)


class MetadataStore:
    """Reads and writes ``<data_dir>/meta``."""

    def __init__(self, data_dir: str) -> None:
        self.topics_dir = os.path.join(data_dir, META_DIR, "topics")
        self.producer_ids_path = os.path.join(data_dir, META_DIR, "producer-ids.json")
        self.features_path = os.path.join(data_dir, META_DIR, "features.json")
        with storage_errors("create", self.topics_dir):
            make_dirs(self.topics_dir)   # durable: a lost meta/ directory loses every topic
        with storage_errors("clean up", self.topics_dir):
            for name in os.listdir(self.topics_dir):  # leftovers of an interrupted write
                if name.endswith(TMP_SUFFIX):
                    os.unlink(os.path.join(self.topics_dir, name))

    def _path(self, topic_id: str) -> str:
        # named by topic id: a 249-character topic name plus ".json.tmp" would pass
        # the 255-byte file-name limit
        return os.path.join(self.topics_dir, f"{topic_id}.json")

    def load_topics(self, defaults: LogConfig) -> dict[str, TopicMetadata]:
        """Every topic's metadata, each file checked by the rules of a create (the module
        docstring; ``defaults`` are the broker's topic config defaults); the first file
        that breaks one is a KafkaStorageError naming it, the field and the value."""
        out: dict[str, TopicMetadata] = {}
        paths: dict[str, str] = {}
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
                raw = json.loads(text)
            except ValueError as exc:
                raise KafkaStorageError(f"unreadable topic metadata {path}: {exc}") from exc
            meta = topic_from_json(raw, path, defaults)
            if meta.name in out:
                raise KafkaStorageError(
                    f"invalid topic metadata: {paths[meta.name]} and {path} both describe topic {meta.name!r}")
            out[meta.name], paths[meta.name] = meta, path
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

    def load_features(self) -> tuple[dict[str, int], int]:
        """``(levels, epoch)``: :data:`DEFAULT_FEATURE_LEVELS` at epoch 0, updated by
        ``meta/features.json`` when there is one — an object ``levels`` of supported feature
        names → a level in :data:`SUPPORTED_FEATURES`' range, an int ``epoch`` ≥ 0, nothing
        else (a KafkaStorageError naming the file otherwise)."""
        path = self.features_path
        with storage_errors("read", path):
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                return dict(DEFAULT_FEATURE_LEVELS), 0
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise KafkaStorageError(f"unreadable {path}: {exc}") from exc
        if not isinstance(raw, dict) or set(raw) != {"levels", "epoch"}:
            raise KafkaStorageError(f"invalid {path}: expected the fields epoch and levels, got {raw!r}")
        levels, epoch = raw["levels"], raw["epoch"]
        if type(epoch) is not int or epoch < 0:
            raise KafkaStorageError(f"invalid {path}: epoch {epoch!r} is not an int >= 0")
        if not isinstance(levels, dict) or any(type(v) is not int for v in levels.values()):
            raise KafkaStorageError(f"invalid {path}: levels {levels!r} is not an object of int levels")
        for name, level in sorted(levels.items()):
            lo, hi = SUPPORTED_FEATURES.get(name, (0, -1))
            if not lo <= level <= hi:
                raise KafkaStorageError(f"invalid {path}: feature {name!r} level {level} is not supported")
        return {**DEFAULT_FEATURE_LEVELS, **levels}, epoch

    def save_features(self, levels: dict[str, int], epoch: int) -> None:
        atomic_write(self.features_path, _dump({"levels": dict(sorted(levels.items())), "epoch": epoch}))
