"""storage.files: the one OSError translation and the one atomic write."""

from __future__ import annotations

import os

import pytest

from kafkasim.errors import KafkaStorageError
from kafkasim.storage.files import atomic_write, storage_errors


def test_atomic_write_replaces_whole_file_and_leaves_no_tmp(tmp_path):
    p = tmp_path / "checkpoint"
    atomic_write(p, "1 2\n")
    atomic_write(p, b"3 4\n")
    assert p.read_bytes() == b"3 4\n"
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]


def test_atomic_write_failure_names_path_keeps_old_file_and_cleans_tmp(tmp_path):
    p = tmp_path / "checkpoint"
    p.write_text("old")
    (tmp_path / "checkpoint.tmp").mkdir()          # the .tmp cannot be opened as a file
    with pytest.raises(KafkaStorageError, match=r"cannot write .*checkpoint: "):
        atomic_write(p, "new")
    assert p.read_text() == "old"


def test_storage_errors_translates_and_chains(tmp_path):
    missing = tmp_path / "nope" / "x"
    with pytest.raises(KafkaStorageError, match=r"cannot read .*nope/x: .*No such file") as info:
        with storage_errors("read", missing):
            open(missing).close()
    assert isinstance(info.value.__cause__, FileNotFoundError)
