"""A small Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (stdlib only).

Chromium reads commands from its fd 3 and writes answers and events to its fd 4, each a JSON
message ended by a NUL byte; no WebSocket and no extra package are needed. One page is
opened and attached in flat mode, so every page command carries its ``sessionId``.

``Chromium.start(profile_dir)`` launches Debian's ``chromium`` headless with the flags a
test machine wants (no sandbox, GPU, QUIC, first-run, background networking, component
updates or sync); ``close()`` ends it (``Browser.close``, then SIGKILL after 10 s).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
from typing import Any, Optional

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--remote-debugging-pipe"]


def chromium_path() -> Optional[str]:
    """``/usr/bin/chromium`` (Debian's package), or whatever ``chromium`` is on PATH; None if missing."""
    return shutil.which("chromium") or (os.path.exists("/usr/bin/chromium") and "/usr/bin/chromium") or None


class CDPError(RuntimeError):
    """A DevTools command answered with an error, or the browser went away."""


class Chromium:
    def __init__(self, proc: subprocess.Popen, to_browser: int, from_browser: int) -> None:
        self.proc = proc
        self._out = to_browser
        self._in = from_browser
        self._next = 0
        self._answers: dict[int, dict] = {}
        self._cond = threading.Condition()
        self._dead = False
        self.console: list[str] = []
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self.session: Optional[str] = None

    @classmethod
    def start(cls, profile_dir: str, width: int = 1280, height: int = 1000) -> "Chromium":
        exe = chromium_path()
        if exe is None:
            raise CDPError("chromium is not installed")
        cmd_r, cmd_w = os.pipe()       # test -> browser (its fd 3)
        evt_r, evt_w = os.pipe()       # browser -> test (its fd 4)
        hi_r, hi_w = os.dup(cmd_r) + 100, os.dup(evt_w) + 100
        os.dup2(cmd_r, hi_r)
        os.dup2(evt_w, hi_w)

        def child_fds() -> None:
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile_dir}", f"--window-size={width},{height}",
                                 "about:blank"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, close_fds=False, preexec_fn=child_fds)
        for fd in (cmd_r, evt_w, hi_r, hi_w):
            os.close(fd)
        browser = cls(proc, cmd_w, evt_r)
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        browser.session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        browser.page("Page.enable")
        browser.page("Runtime.enable")
        browser.page("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                     mobile=False)
        return browser

    # -- the wire ---------------------------------------------------------------------------------
    def _read_loop(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._in, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._dead = True
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._answers[msg["id"]] = msg
                        self._cond.notify_all()
                elif msg.get("method") == "Runtime.consoleAPICalled":
                    args = msg["params"].get("args", [])
                    self.console.append(" ".join(str(a.get("value", a.get("description"))) for a in args))
                elif msg.get("method") == "Runtime.exceptionThrown":
                    self.console.append("exception: " + json.dumps(msg["params"].get("exceptionDetails"))[:500])

    def call(self, method: str, session: Optional[str] = None, timeout: float = 30, **params: Any) -> dict:
        with self._cond:
            self._next += 1
            mid = self._next
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        with self._cond:
            if not self._cond.wait_for(lambda: mid in self._answers or self._dead, timeout):
                raise CDPError(f"{method}: no answer within {timeout}s")
            if mid not in self._answers:
                raise CDPError(f"{method}: the browser went away")
            answer = self._answers.pop(mid)
        if "error" in answer:
            raise CDPError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def page(self, method: str, **params: Any) -> dict:
        return self.call(method, session=self.session, **params)

    # -- what a test does -------------------------------------------------------------------------
    def navigate(self, url: str) -> None:
        self.page("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise CDPError(f"evaluate {expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: str) -> bytes:
        data = base64.b64decode(self.page("Page.captureScreenshot", format="png")["data"])
        with open(path, "wb") as f:
            f.write(data)
        return data

    def close(self) -> None:
        try:
            if self.proc.poll() is None and not self._dead:
                self.call("Browser.close", timeout=10)
        except (CDPError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        for fd in (self._out, self._in):
            try:
                os.close(fd)
            except OSError:
                pass
