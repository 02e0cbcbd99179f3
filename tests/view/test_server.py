"""The view's web server: the page, /snapshot.json, /events (SSE), and `kafkasim view` itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from kafkasim.broker import Broker
from kafkasim.view.server import ViewServer
from kafkasim.view.snapshot import DataDirWatcher


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type"), r.read()


def next_event(stream) -> dict:
    """The next ``event: snapshot`` of an SSE stream, decoded."""
    event = data = None
    while True:
        line = stream.readline().decode()
        if line == "":
            raise AssertionError("the event stream ended")
        line = line.rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and data is not None:
            if event == "snapshot":
                return json.loads(data)
            event = data = None


def count(snap, partition):
    (t,) = [t for t in snap["topics"] if t["name"] == "orders"]
    return t["partition_stats"][partition]["records"]


@pytest.fixture
def broker_dir(tmp_path, clock):
    b = Broker(tmp_path / "data", clock=clock)
    b.create_topic("orders", 3)
    yield b, str(tmp_path / "data")
    b.close()


def test_page_snapshot_and_events_follow_the_data_dir(broker_dir, clock):
    broker, d = broker_dir
    with ViewServer(DataDirWatcher(d), interval_s=0.05, heartbeat_s=30) as view:
        assert view.address[0] == "127.0.0.1"
        status, ctype, body = get(view.url)
        assert status == 200 and ctype.startswith("text/html") and b'src="/app.js"' in body
        status, ctype, body = get(view.url + "app.js")
        assert ctype.startswith("text/javascript") and b"EventSource" in body
        snap = json.loads(get(view.url + "snapshot.json")[2])
        assert snap["version"] == 1 and count(snap, 1) == 0
        with urllib.request.urlopen(view.url + "events", timeout=10) as stream:
            assert stream.headers["Content-Type"] == "text/event-stream"
            assert count(next_event(stream), 1) == 0
            broker.append_records("orders", 1, [(clock.now_ms(), b"k", b"v", ())])
            assert count(next_event(stream), 1) == 1     # pushed, not polled by the page
        with pytest.raises(urllib.error.HTTPError) as err:
            get(view.url + "meta/topics")
        assert err.value.code == 404
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(urllib.request.Request(view.url, data=b"x", method="POST"), timeout=10)
        assert err.value.code == 501


def test_close_ends_open_event_streams(broker_dir):
    _, d = broker_dir
    view = ViewServer(DataDirWatcher(d), interval_s=0.05, heartbeat_s=30).start()
    stream = urllib.request.urlopen(view.url + "events", timeout=10)
    next_event(stream)
    started = time.monotonic()
    view.close()
    assert stream.read() == b""                # the stream ends instead of hanging
    assert time.monotonic() - started < 5
    stream.close()


def test_a_view_closed_before_it_started_does_not_hang(broker_dir):
    _, d = broker_dir
    view = ViewServer(DataDirWatcher(d))
    started = time.monotonic()
    view.close()
    assert time.monotonic() - started < 2


def run_view(*args):
    return subprocess.Popen([sys.executable, "-m", "kafkasim", "view", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_kafkasim_view_prints_its_url_serves_and_stops_cleanly(broker_dir, stop):
    _, d = broker_dir
    proc = run_view("--data-dir", d, "--json")
    try:
        info = json.loads(proc.stdout.readline())
        assert info["host"] == "127.0.0.1" and info["url"] == f"http://127.0.0.1:{info['port']}/"
        snap = json.loads(get(info["url"] + "snapshot.json")[2])
        assert snap["data_dir"] == os.path.abspath(d) and [t["name"] for t in snap["topics"]] == ["orders"]
        proc.send_signal(stop)
        assert proc.wait(15) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_kafkasim_view_refuses_a_missing_data_dir_naming_it(tmp_path):
    proc = run_view("--data-dir", str(tmp_path / "typo"))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and "typo" in err and "does not exist" in err and out == ""
    assert not (tmp_path / "typo").exists()


def test_every_file_the_page_needs_ships_as_package_data():
    """The editable install finds static/ anyway; a real install ships only what pyproject names."""
    import fnmatch
    import tomllib

    from kafkasim.view.server import STATIC_FILES

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        globs = tomllib.load(f)["tool"]["setuptools"]["package-data"]["kafkasim.view"]
    for name, _ in STATIC_FILES.values():
        assert any(fnmatch.fnmatch(f"static/{name}", g) for g in globs), name


def test_kafkasim_view_on_a_port_in_use_says_so(broker_dir):
    import socket

    _, d = broker_dir
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = run_view("--data-dir", d, "--port", str(port))
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in err and out == ""
