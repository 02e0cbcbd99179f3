"""Where the Spark jobs find a data directory: local paths, ``file://`` and any pyarrow file system.

A data directory (storage/FORMAT.md §1) is addressed by a path string:

- a plain local path (``/data/kafkasim``, ``./kafkasim-data``): listed with
  ``kafkasim.storage.layout`` (``os.scandir``) and read through ``mmap`` (no copy);
- a URI (``file:///data/kafkasim``, ``hdfs://nn:8020/logs``, ``s3://bucket/logs``,
  ``gs://...``): opened with ``pyarrow.fs.FileSystem.from_uri`` and read whole into
  memory per segment. ``file://`` goes through this path too, so the remote code path is
  exercised by the tests. HDFS needs libhdfs (``ARROW_LIBHDFS_DIR``, ``HADOOP_HOME``,
  ``CLASSPATH`` as for pyarrow); S3 needs the usual AWS credentials/env.

Names on disk are parsed with ``kafkasim.storage.layout`` only (one place for names); batch bytes
are decoded by ``kafkasim.records.record_batch`` only (one reader). This module only lists and
reads bytes.

Invariants: :meth:`LogDir.partitions` is sorted by (topic, partition) and each
partition's segments by base offset; a segment's ``end_offset`` is the next segment's
base offset (``None`` for the last one), so segment ranges never overlap; a segment is
``contiguous`` when its base offset is at or past the partition's cleaner checkpoint
(never compacted: its offsets have no gaps, storage/FORMAT.md §2.4).

Thread-safety: a :class:`LogDir` holds no mutable state after construction; it is
picklable (the file system is re-opened lazily on each worker) and safe to share.
"""

from __future__ import annotations

import json
import mmap
import os
from contextlib import contextmanager
from typing import Iterator, NamedTuple, Optional

from kafkasim.errors import InvalidArgumentError, KafkaStorageError
from kafkasim.storage import checkpoints, layout

__all__ = ["LogDir", "SegmentRef", "TopicMeta"]


class SegmentRef(NamedTuple):
    """One ``.log`` file of one partition, with the offset range it can hold."""

    topic: str
    partition: int
    base_offset: int
    end_offset: Optional[int]  # next segment's base offset; None for the last (active) one
    path: str                  # as given to :meth:`LogDir.open_segment`
    size: int
    contiguous: bool = False   # never compacted: offsets without gaps (storage/FORMAT.md §2.4)


class TopicMeta(NamedTuple):
    """What ``meta/topics/<topic>.json`` says (FORMAT.md §1.2)."""

    name: str
    partitions: int
    configs: dict


def _is_uri(path: str) -> bool:
    return "://" in path


class LogDir:
    """A data directory addressed by a local path or URI (see module docstring)."""

    def __init__(self, path: str) -> None:
        if not path:
            raise InvalidArgumentError("data dir path is empty")
        self.path = path.rstrip("/") if _is_uri(path) else path
        self._fs = None
        self._root = None

    def __getstate__(self):
        return {"path": self.path}

    def __setstate__(self, state):
        self.path = state["path"]
        self._fs = None
        self._root = None

    # -- file system -------------------------------------------------------------------
    @property
    def is_local(self) -> bool:
        """True when read with os/mmap rather than a pyarrow file system."""
        return not _is_uri(self.path)

    def _pafs(self):
        if self._fs is None:
            from pyarrow import fs as pafs
            try:
                self._fs, self._root = pafs.FileSystem.from_uri(self.path)
            except Exception as exc:  # pyarrow raises ArrowInvalid/OSError for bad URIs
                raise InvalidArgumentError(f"cannot open data dir {self.path!r}: {exc}") from exc
        return self._fs, self._root

    def _listdir(self, path: str) -> list[tuple[str, str, bool, int]]:
        """``(name, full path, is_dir, size)`` of each entry of ``path``."""
        try:
            if self.is_local:
                with os.scandir(path) as it:
                    return [(e.name, e.path, e.is_dir(), 0 if e.is_dir() else e.stat().st_size)
                            for e in it]
            from pyarrow import fs as pafs
            fs, _ = self._pafs()
            infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=False))
            return [(i.base_name, i.path, i.type == pafs.FileType.Directory, i.size or 0)
                    for i in infos]
        except FileNotFoundError as exc:
            raise InvalidArgumentError(f"data dir {self.path!r}: no such directory {path!r}") from exc
        except OSError as exc:
            raise KafkaStorageError(f"cannot list {path!r}: {exc}") from exc

    def _root_path(self) -> str:
        return self.path if self.is_local else self._pafs()[1]

    # -- listing -----------------------------------------------------------------------
    def partitions(self, topics: Optional[set[str]] = None) -> list[tuple[str, int, str]]:
        """``(topic, partition, dir path)`` of every partition directory, sorted."""
        out = []
        for name, full, is_dir, _ in self._listdir(self._root_path()):
            if not is_dir:
                continue
            pd = layout.parse_partition_dir(name)
            if pd is not None and (topics is None or pd.topic in topics):
                out.append((pd.topic, pd.partition, full))
        return sorted(out)

    def segments(self, topics: Optional[set[str]] = None) -> list[SegmentRef]:
        """Every segment of every (selected) partition, in (topic, partition, base) order."""
        out = []
        for topic, part, pdir in self.partitions(topics):
            entries = self._listdir(pdir)
            segs = sorted((base, full, size) for name, full, is_dir, size in entries
                          if not is_dir and (base := layout.parse_segment_name(name)) is not None)
            checkpoint = next((full for name, full, is_dir, _ in entries
                               if not is_dir and name == checkpoints.CLEANER_CHECKPOINT_FILE), None)
            contiguous_from = checkpoints.parse_contiguous_from(
                None if checkpoint is None else self.read_bytes(checkpoint))
            for i, (base, full, size) in enumerate(segs):
                end = segs[i + 1][0] if i + 1 < len(segs) else None
                out.append(SegmentRef(topic, part, base, end, full, size, base >= contiguous_from))
        return out

    def topic_metadata(self) -> dict[str, TopicMeta]:
        """Every topic's metadata file, by name (topics with a partition dir but no
        metadata file are absent: FORMAT.md says a topic exists iff its file exists)."""
        meta_dir = self._join(self._root_path(), layout.META_DIR, "topics")
        try:
            entries = self._listdir(meta_dir)
        except InvalidArgumentError:
            return {}
        out = {}
        for name, full, is_dir, _ in entries:
            if is_dir or not name.endswith(".json"):
                continue
            try:
                doc = json.loads(self.read_bytes(full).decode("utf-8"))
                out[doc["name"]] = TopicMeta(doc["name"], int(doc["partitions"]), dict(doc.get("configs") or {}))
            except (ValueError, KeyError, TypeError) as exc:
                raise KafkaStorageError(f"unreadable topic metadata {full!r}: {exc}") from exc
        return out

    def _join(self, *parts: str) -> str:
        return os.path.join(*parts) if self.is_local else "/".join(p.rstrip("/") for p in parts)

    # -- reading -----------------------------------------------------------------------
    def read_bytes(self, path: str) -> bytes:
        try:
            if self.is_local:
                with open(path, "rb") as f:
                    return f.read()
            fs, _ = self._pafs()
            with fs.open_input_file(path) as f:
                return f.readall()
        except OSError as exc:
            raise KafkaStorageError(f"cannot read {path!r}: {exc}") from exc

    def read_range(self, path: str, pos: int, n: int) -> bytes:
        """Up to ``n`` bytes of ``path`` from ``pos`` (fewer at the end of the file)."""
        try:
            if self.is_local:
                with open(path, "rb") as f:
                    f.seek(pos)
                    return f.read(n)
            fs, _ = self._pafs()
            with fs.open_input_file(path) as f:
                return f.read_at(max(0, min(n, f.size() - pos)), pos)
        except OSError as exc:
            raise KafkaStorageError(f"cannot read {path!r}: {exc}") from exc

    @contextmanager
    def open_segment(self, path: str) -> Iterator[memoryview]:
        """The bytes of one segment as a read-only buffer (mmap for local files)."""
        if not self.is_local:
            yield memoryview(self.read_bytes(path))
            return
        try:
            f = open(path, "rb")
        except OSError as exc:
            raise KafkaStorageError(f"cannot open segment {path!r}: {exc}") from exc
        with f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                yield memoryview(b"")
                return
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            view = memoryview(m)
            try:
                yield view
            finally:
                view.release()
                try:
                    m.close()
                except BufferError:  # a consumer still holds a slice; the GC closes it
                    pass
