"""File-system helpers every durable writer shares: OSError translation, atomic writes, dir fsync.

- :func:`storage_errors` turns an ``OSError`` raised inside its block into
  :class:`~kafkasim.errors.KafkaStorageError` carrying what was being done and the path
  (``cannot write /d/t-0/recovery-point-offset-checkpoint: [Errno 28] No space left``),
  chained with ``raise ... from``. It is the one place this translation is written.
- :func:`atomic_write` replaces a small file all-or-nothing: write ``<path>.tmp``,
  fsync it, ``os.replace`` it over ``path``, fsync the directory. A crash leaves the
  old file or the new one, never a mix; a failure removes the ``.tmp`` and raises
  ``KafkaStorageError``.
- :func:`fsync_dir` makes a rename or a new file durable; file systems that refuse to
  fsync a directory are tolerated (the data files themselves are synced).
- :func:`lock_data_dir` takes the exclusive ``flock`` on ``<data_dir>/.lock`` that a broker
  (or a cluster) holds while it runs, as Kafka locks its log dirs; ``kafkasim upgrade-data-dir``
  takes the same lock, so it never rewrites a data dir a server is using.
- :func:`make_dirs` is ``os.makedirs(path, exist_ok=True)`` that fsyncs the parent of every
  directory it creates (as Kafka flushes the parent of a log directory it creates): without
  it a power cut can lose a new partition or ``meta`` directory, and every fsynced file in it.

Stateless; thread-safe as the underlying system calls are (two writers of the same
path must be serialised by their caller).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Union

from kafkasim.errors import KafkaStorageError

__all__ = ["storage_errors", "atomic_write", "fsync_dir", "make_dirs", "lock_data_dir", "LOCK_FILE", "TMP_SUFFIX"]

TMP_SUFFIX = ".tmp"
LOCK_FILE = ".lock"


class storage_errors:
    """Translate an ``OSError`` in the block into ``KafkaStorageError("cannot <action> <path>: ...")``.

    A small class rather than a ``contextlib`` generator: it sits on the append and read
    paths, where entering it must cost next to nothing.
    """

    __slots__ = ("action", "path")

    def __init__(self, action: str, path: Union[str, os.PathLike]) -> None:
        self.action = action
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ, exc, tb) -> bool:
        if typ is not None and issubclass(typ, OSError):
            raise KafkaStorageError(f"cannot {self.action} {os.fspath(self.path)}: {exc}") from exc
        return False


def fsync_dir(path: Union[str, os.PathLike]) -> None:
    """fsync a directory so that renames and new files in it survive a power loss."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the data files are synced


def make_dirs(path: Union[str, os.PathLike]) -> None:
    """Create ``path`` and its missing parents, each made durable by an fsync of its parent
    directory; nothing to do when it exists. Raises ``OSError`` (callers translate it)."""
    path = os.path.abspath(os.fspath(path))
    created = []
    p = path
    while not os.path.isdir(p):
        created.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    os.makedirs(path, exist_ok=True)
    for d in reversed(created):
        fsync_dir(os.path.dirname(d))


def atomic_write(path: Union[str, os.PathLike], data: Union[str, bytes], *, encoding: str = "utf-8",
                 fsync: bool = True, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``data`` all-or-nothing (see the module docstring).

    ``sync_dir=False`` skips the directory fsync: after a power cut the file is then the
    new one or an older one (never a mix), for a hint that may lag (the recovery point)."""
    path = os.fspath(path)
    tmp = path + TMP_SUFFIX
    payload = data.encode(encoding) if isinstance(data, str) else data
    with storage_errors("write", path):
        try:
            with open(tmp, "wb") as f:
                f.write(payload)
                f.flush()
                if fsync:
                    os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    if fsync and sync_dir:
        fsync_dir(os.path.dirname(path) or ".")


def lock_data_dir(data_dir: Union[str, os.PathLike]):
    """Take an exclusive lock on ``<data_dir>/.lock``, as Kafka does on its log dirs, so two
    writers never share one data dir. Released by closing the returned file; a lock held
    elsewhere (any process or thread) is a ``KafkaStorageError`` naming the data dir."""
    data_dir = os.fspath(data_dir)
    path = os.path.join(data_dir, LOCK_FILE)
    with storage_errors("open lock file", path):
        f = open(path, "a+b")
    try:
        with storage_errors("lock", path):
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise KafkaStorageError(
                    f"Failed to acquire lock on file .lock in {data_dir}. A broker in another process "
                    "or thread is using this directory (close it first).") from None
    except BaseException:
        f.close()
        raise
    return f
