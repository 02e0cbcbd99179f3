"""The live view's web server: the page, ``/snapshot.json`` and ``/events`` (server-sent events).

:class:`ViewServer` runs two things over one :class:`~kafkasim.view.snapshot.DataDirWatcher`:

- a poller thread that calls :meth:`DataDirWatcher.poll` every ``interval_s`` seconds and
  publishes the snapshot (as JSON text) when it differs from the last one published, or at
  least every ``heartbeat_s`` seconds (rates decay, the clock moves on);
- a :class:`http.server.ThreadingHTTPServer` (stdlib: one thread per connection is plenty
  for a page a teacher or a test opens a few times; no dependency to install) serving

  ``GET /``               the page (``static/index.html``; ``/app.js``, ``/style.css`` beside it)
  ``GET /snapshot.json``  the latest snapshot
  ``GET /events``         ``text/event-stream``: the latest snapshot at once, then each new one,
                          as ``id: <n>`` / ``event: snapshot`` / ``data: <json>``; a comment
                          line every ``heartbeat_s`` keeps proxies from closing it.

Everything else is 404; only GET and HEAD are served. It binds 127.0.0.1 unless told
otherwise. :meth:`ViewServer.close` (Ctrl-C in ``kafkasim view``) stops the poller, wakes
and ends every event stream and closes the listener; nothing is written anywhere.

Thread-safety: the published snapshot is replaced under a condition variable; handlers only
read it. The watcher belongs to the poller thread alone.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Optional

from kafkasim.errors import KafkaSimError
from kafkasim.view.snapshot import DataDirWatcher

__all__ = ["ViewServer", "STATIC_FILES"]

log = logging.getLogger(__name__)

STATIC_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}


def _static(name: str) -> bytes:
    return resources.files("kafkasim.view").joinpath("static", name).read_bytes()


class _Published:
    """The latest snapshot as JSON text, its sequence number, and a condition to wait on."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.seq = 0
        self.text = "{}"
        self.closed = False

    def publish(self, text: str) -> None:
        with self.cond:
            self.seq += 1
            self.text = text
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


class ViewServer:
    """Serves the live view of one data dir (see the module docstring)."""

    def __init__(self, watcher: DataDirWatcher, host: str = "127.0.0.1", port: int = 0, *,
                 interval_s: float = 0.25, heartbeat_s: float = 2.0) -> None:
        self.watcher = watcher
        self.interval_s = interval_s
        self.heartbeat_s = heartbeat_s
        self._published = _Published()
        self._stop = threading.Event()
        self._first, _ = self._publish_once(force=True)   # the page never sees an empty snapshot
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self._published, heartbeat_s))
        self._httpd.daemon_threads = True
        self._threads: list[threading.Thread] = []

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"

    def _publish_once(self, last: Optional[str] = None, force: bool = False) -> tuple[Optional[str], bool]:
        """Poll; publish when the snapshot differs from ``last`` (or ``force``). Returns
        ``(the snapshot without its clock fields, published?)``."""
        try:
            snap = self.watcher.poll()
        except (KafkaSimError, OSError) as exc:     # keep serving the last snapshot; say why
            log.warning("kafkasim view: reading %s failed: %s", self.watcher.data_dir, exc)
            return last, False
        except Exception:   # a bug must not freeze the page silently: log it, keep the last snapshot
            log.exception("kafkasim view: reading %s failed", self.watcher.data_dir)
            return last, False
        stable = json.dumps({k: v for k, v in snap.items() if k not in ("now_ms", "poll")}, sort_keys=True)
        if force or stable != last:
            self._published.publish(json.dumps(snap))
            return stable, True
        return stable, False

    def _poll_loop(self) -> None:
        last, last_sent = self._first, time.monotonic()
        while not self._stop.wait(self.interval_s):
            force = time.monotonic() - last_sent >= self.heartbeat_s
            last, published = self._publish_once(last, force)
            if published:
                last_sent = time.monotonic()

    def start(self) -> "ViewServer":
        """Start the poller and the listener in background threads; returns self."""
        for target, name in ((self._poll_loop, "view-poller"), (self._httpd.serve_forever, "view-http")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def close(self) -> None:
        """Stop polling, end every event stream, close the listener."""
        self._stop.set()
        self._published.close()
        if self._threads:                 # shutdown() waits for serve_forever: only once it runs
            self._httpd.shutdown()
        self._httpd.server_close()
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> "ViewServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def _handler_for(published: _Published, heartbeat_s: float) -> type:
    class Handler(BaseHTTPRequestHandler):
        server_version = "kafkasim-view"
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args) -> None:   # quiet: stderr is the user's terminal
            log.debug("%s " + fmt, self.address_string(), *args)

        def _send(self, body: bytes, ctype: str, head_only: bool = False, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if not head_only:
                self.wfile.write(body)

        def do_HEAD(self) -> None:
            self.do_GET(head_only=True)

        def do_GET(self, head_only: bool = False) -> None:
            path = self.path.split("?", 1)[0]
            if path in STATIC_FILES:
                name, ctype = STATIC_FILES[path]
                self._send(_static(name), ctype, head_only)
            elif path == "/snapshot.json":
                with published.cond:
                    text = published.text
                self._send(text.encode(), "application/json", head_only)
            elif path == "/events" and not head_only:
                self._events()
            elif path == "/favicon.ico":              # no icon: say so without a 404 in the console
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self._send(b"not found\n", "text/plain; charset=utf-8", head_only, status=404)

        def _events(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            sent = 0
            try:
                self.wfile.write(b"retry: 1000\n\n")
                while True:
                    with published.cond:
                        if published.seq == sent and not published.closed:
                            published.cond.wait(heartbeat_s)
                        if published.closed:
                            return
                        seq, text = published.seq, published.text
                    if seq == sent:
                        self.wfile.write(b": keep-alive\n\n")
                    else:
                        self.wfile.write(f"id: {seq}\nevent: snapshot\ndata: {text}\n\n".encode())
                        sent = seq
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return                              # the page went away

    return Handler
