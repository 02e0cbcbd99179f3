"""The warm Spark Connect session ids an audit attaches to (``spark_jobs.session_pool``):
one process per slot, a lock the kernel drops with the process, a new id for a damaged file
or a session the server closed, and no slot for a data dir that is not a local folder."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from kafkasim.spark_jobs import session_pool


def test_each_slot_is_one_holders_and_frees_on_release(tmp_path):
    taken = [session_pool.take(str(tmp_path), "127.0.0.1", 15002) for _ in range(session_pool.SLOTS)]
    assert all(taken) and len({s.path for s in taken}) == session_pool.SLOTS
    assert len({s.session_id for s in taken}) == session_pool.SLOTS
    for s in taken:
        assert uuid.UUID(s.session_id).version == 4
    assert session_pool.take(str(tmp_path), "127.0.0.1", 15002) is None       # all busy: a session of its own
    other = session_pool.take(str(tmp_path), "127.0.0.1", 15003)                # another server: its own slots
    assert other is not None and os.path.dirname(other.path) != os.path.dirname(taken[0].path)
    first, sid = taken[0].path, taken[0].session_id
    taken[0].release()
    again = session_pool.take(str(tmp_path), "127.0.0.1", 15002)
    assert again.path == first and again.session_id == sid                      # the same warm session


def test_a_process_that_ends_frees_its_slot_and_the_id_stays(tmp_path):
    code = ("import sys; from kafkasim.spark_jobs import session_pool as p; "
            "s = p.take(sys.argv[1], '127.0.0.1', 15002); print(s.session_id)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    s = session_pool.take(str(tmp_path), "127.0.0.1", 15002)
    assert s.session_id == out.stdout.strip()      # the killed or ended process's lock is gone with it


def test_renew_and_a_damaged_file_give_a_new_id(tmp_path):
    s = session_pool.take(str(tmp_path), "127.0.0.1", 15002)
    old = s.session_id
    assert s.renew() != old and open(s.path).read() == s.session_id
    s.release()
    with open(s.path, "w") as f:
        f.write("not-a-uuid")
    t = session_pool.take(str(tmp_path), "127.0.0.1", 15002)
    assert t.path == s.path and uuid.UUID(t.session_id).version == 4
    assert open(t.path).read() == t.session_id


def test_no_slot_for_a_uri_or_a_missing_or_read_only_data_dir(tmp_path):
    assert session_pool.take("s3a://bucket/data", "127.0.0.1", 15002) is None
    assert session_pool.take(str(tmp_path / "missing"), "127.0.0.1", 15002) is None
    assert session_pool.take(None, "127.0.0.1", 15002) is None
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    try:
        if os.access(ro, os.W_OK):          # root writes anyway: nothing to check here
            return
        assert session_pool.take(str(ro), "127.0.0.1", 15002) is None
    finally:
        os.chmod(ro, 0o755)
