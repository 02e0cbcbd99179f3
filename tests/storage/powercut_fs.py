"""An in-memory FUSE file system that forgets what was not fsynced when the power is cut.

Usage (the test runs it; one process per mount)::

    python powercut_fs.py MOUNTPOINT IMAGE [--cut-at N] [--torn SEED]

It mounts at MOUNTPOINT (Debian's ``fuse3`` through ``mfusepy``), starting from the disk
image IMAGE (a pickle this program wrote; empty when missing). Operations run one at a time
(``-s``), so the order of changes is the order the broker made them.

The model (Linux, ext4-like, taken at its strictest; the broker's files are the only users):

- Each file has its current bytes and its *durable* bytes. ``fsync``/``fdatasync`` of the
  file makes the durable bytes equal to the current ones (size included: a truncation is
  durable only after it). Nothing else does: ``close`` does not, and neither does an
  fsync of its directory.
- Each directory has its current names and its durable names (name → inode). ``fsync`` of
  the directory makes the durable names equal to the current ones, all of them at once.
  A name created, renamed or removed is lost unless its directory was fsynced after the
  change; a rename across directories needs both fsynced. A new file's name without an
  fsync of the file leaves an empty file.
- The power cut: the *mutating* operations (create, mkdir, write, truncate, rename,
  unlink, rmdir, fsync, fsyncdir) are counted; operation number ``--cut-at`` does not
  happen, nor does any operation after it (they fail with EIO, as a dead disk would). The
  disk image is what is durable at that moment: the tree of durable names from the root,
  each file with its durable bytes. Unmounting without a cut cuts the power then.
- ``--torn SEED``: at the cut each file keeps, besides its durable bytes, a random prefix of
  the writes and truncations made to it since its last fsync, the last of them possibly torn
  part-way (seeded). Disks do write back unsynced data in the background; this gives the
  recovery of a torn tail something to do. Without it (the default, and what catches a
  missing fsync) every unsynced byte is lost.

The image keeps no hard links (no broker file has two names for long; a rename whose old
directory was not fsynced leaves two copies after the cut, as two names of one inode would).
Times are the last change of the current state; nothing in the broker reads them.
On exit it prints ``ops=<mutating operations done> cut=<0|1>`` on stdout.
"""

from __future__ import annotations

import errno
import os
import pickle
import random
import stat
import sys
import time

import mfusepy as fuse


class Node:
    """An inode: a file (``data``/``durable``, ``pending`` unsynced changes) or a directory
    (``entries``/``durable``)."""

    __slots__ = ("is_dir", "data", "durable", "entries", "pending", "mode", "mtime")

    def __init__(self, is_dir: bool, mode: int, content=None) -> None:
        self.is_dir = is_dir
        self.mode = mode
        self.mtime = time.time_ns()
        self.pending: list = []          # files: ("w", offset, bytes) / ("t", length) since the last fsync
        if is_dir:
            self.entries: dict = dict(content or {})
            self.durable = dict(self.entries)
        else:
            self.data = bytearray(content or b"")
            self.durable = bytes(self.data)


def _apply(data: bytearray, op: tuple) -> None:
    if op[0] == "w":
        _, off, buf = op
        if off > len(data):
            data.extend(bytes(off - len(data)))
        data[off:off + len(buf)] = buf
    else:
        del data[op[1]:]
        if op[1] > len(data):
            data.extend(bytes(op[1] - len(data)))


def image_of(root: Node, rng=None):
    """The durable tree as plain data: a directory is ``{name: child}``, a file ``bytes``.
    With ``rng``: a file also keeps a random prefix of its unsynced changes (module docstring)."""
    if root.is_dir:
        return {name: image_of(child, rng) for name, child in root.durable.items()}
    if rng is None or not root.pending:
        return root.durable
    data = bytearray(root.durable)
    kept = rng.randint(0, len(root.pending))
    for i, op in enumerate(root.pending[:kept]):
        if i == kept - 1 and op[0] == "w" and rng.random() < 0.5:
            op = ("w", op[1], op[2][:rng.randint(0, len(op[2]))])   # torn
        _apply(data, op)
    return bytes(data)


def node_of(img) -> Node:
    if isinstance(img, dict):
        return Node(True, stat.S_IFDIR | 0o755, {k: node_of(v) for k, v in img.items()})
    return Node(False, stat.S_IFREG | 0o644, img)


class PowerCutFS(fuse.Operations):
    """The file system of the module docstring."""

    use_ns = True
    flag_nopath = False
    flag_nullpath_ok = True

    def __init__(self, image_path: str, cut_at: int, torn_seed) -> None:
        self.image_path = image_path
        self.cut_at = cut_at
        self.torn = None if torn_seed is None else random.Random(torn_seed)
        self.ops = 0
        self.cut = False
        img = {}
        if os.path.exists(image_path):
            with open(image_path, "rb") as f:
                img = pickle.load(f)
        self.root = node_of(img)
        self.handles: dict[int, Node] = {}
        self.next_fh = 1

    # -- the power -------------------------------------------------------------------------
    def _mutate(self) -> None:
        """Count one mutating operation; at the cut point, cut the power (module docstring)."""
        if self.cut:
            raise fuse.FuseOSError(errno.EIO)
        self.ops += 1
        if self.ops == self.cut_at:
            self.power_cut()
            raise fuse.FuseOSError(errno.EIO)

    def power_cut(self) -> None:
        if self.cut:
            return
        self.cut = True
        tmp = self.image_path + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(image_of(self.root, self.torn), f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.image_path)

    def _alive(self) -> None:
        if self.cut:
            raise fuse.FuseOSError(errno.EIO)

    # -- names -----------------------------------------------------------------------------
    def _lookup(self, path: str) -> Node:
        node = self.root
        for part in path.strip("/").split("/"):
            if not part:
                continue
            if not node.is_dir or part not in node.entries:
                raise fuse.FuseOSError(errno.ENOENT)
            node = node.entries[part]
        return node

    def _parent(self, path: str) -> tuple[Node, str]:
        head, name = os.path.split(path.rstrip("/"))
        parent = self._lookup(head or "/")
        if not parent.is_dir:
            raise fuse.FuseOSError(errno.ENOTDIR)
        return parent, name

    def _node(self, path, fh) -> Node:
        if fh:
            return self.handles[fh]
        return self._lookup(path)

    def _handle(self, node: Node) -> int:
        fh = self.next_fh
        self.next_fh += 1
        self.handles[fh] = node
        return fh

    # -- reads -----------------------------------------------------------------------------
    def getattr(self, path, fh=None):
        self._alive()
        node = self._node(path, fh)
        size = 4096 if node.is_dir else len(node.data)
        return {"st_mode": node.mode, "st_nlink": 2 if node.is_dir else 1, "st_size": size,
                "st_uid": os.getuid(), "st_gid": os.getgid(), "st_blocks": (size + 511) // 512,
                "st_mtime": node.mtime, "st_ctime": node.mtime, "st_atime": node.mtime}

    def readdir(self, path, fh):
        self._alive()
        node = self._node(path, fh)
        return [".", "..", *node.entries]

    def opendir(self, path):
        self._alive()
        return self._handle(self._lookup(path))

    def releasedir(self, path, fh):
        self.handles.pop(fh, None)
        return 0

    def open(self, path, flags):
        self._alive()
        return self._handle(self._lookup(path))

    def read(self, path, size, offset, fh):
        self._alive()
        return bytes(self._node(path, fh).data[offset:offset + size])

    def release(self, path, fh):
        self.handles.pop(fh, None)
        return 0

    def flush(self, path, fh):
        return 0          # close(2): nothing becomes durable

    def statfs(self, path):
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": 1 << 20, "f_bfree": 1 << 19,
                "f_bavail": 1 << 19, "f_files": 1 << 16, "f_ffree": 1 << 15, "f_namemax": 255}

    def access(self, path, amode):
        self._alive()
        self._lookup(path)
        return 0

    # -- changes ---------------------------------------------------------------------------
    def create(self, path, mode, fi=None):
        self._mutate()
        parent, name = self._parent(path)
        node = Node(False, stat.S_IFREG | (mode & 0o7777))
        parent.entries[name] = node
        parent.mtime = time.time_ns()
        return self._handle(node)

    def mkdir(self, path, mode):
        self._mutate()
        parent, name = self._parent(path)
        if name in parent.entries:
            raise fuse.FuseOSError(errno.EEXIST)
        parent.entries[name] = Node(True, stat.S_IFDIR | (mode & 0o7777))
        parent.mtime = time.time_ns()
        return 0

    def write(self, path, data, offset, fh):
        self._mutate()
        node = self._node(path, fh)
        op = ("w", offset, bytes(data))
        _apply(node.data, op)
        node.pending.append(op)
        node.mtime = time.time_ns()
        return len(data)

    def truncate(self, path, length, fh=None):
        self._mutate()
        node = self._node(path, fh)
        if node.is_dir:
            raise fuse.FuseOSError(errno.EISDIR)
        op = ("t", length)
        _apply(node.data, op)
        node.pending.append(op)
        node.mtime = time.time_ns()
        return 0

    def unlink(self, path):
        self._mutate()
        parent, name = self._parent(path)
        if name not in parent.entries:
            raise fuse.FuseOSError(errno.ENOENT)
        if parent.entries[name].is_dir:
            raise fuse.FuseOSError(errno.EISDIR)
        del parent.entries[name]
        parent.mtime = time.time_ns()
        return 0

    def rmdir(self, path):
        self._mutate()
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if node is None:
            raise fuse.FuseOSError(errno.ENOENT)
        if not node.is_dir:
            raise fuse.FuseOSError(errno.ENOTDIR)
        if node.entries:
            raise fuse.FuseOSError(errno.ENOTEMPTY)
        del parent.entries[name]
        parent.mtime = time.time_ns()
        return 0

    def rename(self, old, new):
        self._mutate()
        src, a = self._parent(old)
        dst, b = self._parent(new)
        node = src.entries.get(a)
        if node is None:
            raise fuse.FuseOSError(errno.ENOENT)
        target = dst.entries.get(b)
        if target is not None and target is not node:
            if target.is_dir and not node.is_dir:
                raise fuse.FuseOSError(errno.EISDIR)
            if node.is_dir and not target.is_dir:
                raise fuse.FuseOSError(errno.ENOTDIR)
            if target.is_dir and target.entries:
                raise fuse.FuseOSError(errno.ENOTEMPTY)
        del src.entries[a]
        dst.entries[b] = node
        src.mtime = dst.mtime = time.time_ns()
        return 0

    def fsync(self, path, datasync, fh):
        self._mutate()
        node = self._node(path, fh)
        node.durable = bytes(node.data)
        node.pending.clear()
        return 0

    def fsyncdir(self, path, datasync, fh):
        self._mutate()
        node = self._node(path, fh)
        node.durable = dict(node.entries)
        return 0

    def chmod(self, path, mode):
        self._alive()
        node = self._lookup(path)
        node.mode = (node.mode & ~0o7777) | (mode & 0o7777)
        return 0

    def chown(self, path, uid, gid):
        self._alive()
        return 0

    def utimens(self, path, times=None):
        self._alive()
        self._lookup(path)
        return 0

    def destroy(self, path):
        self.power_cut()       # unmounting cuts the power (if it was not cut already)


def main(argv: list[str]) -> int:
    mountpoint, image = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    cut_at, torn = 0, None
    rest = argv[2:]
    while rest:
        flag, value, rest = rest[0], rest[1], rest[2:]
        if flag == "--cut-at":
            cut_at = int(value)
        elif flag == "--torn":
            torn = int(value)
        else:
            raise SystemExit(f"unknown option {flag}")
    ops = PowerCutFS(image, cut_at, torn)
    fuse.FUSE(ops, mountpoint, foreground=True, nothreads=True, hard_remove=True, fsname="powercut",
              subtype="powercut")
    ops.power_cut()
    print(f"ops={ops.ops} cut={int(ops.cut_at and ops.ops >= ops.cut_at)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
