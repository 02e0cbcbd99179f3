"""Where each consumer fetches from, for the live view: ``<data_dir>/.fetch-positions.json``.

A consumer's *position* (the offset of the next record it will read) is not in any log:
Kafka's ``kafka-consumer-groups --describe`` shows the committed offset, and so does
kafkasim's. The live view (:mod:`kafkasim.view`) also shows each member's position; for a
served group the closest thing a broker sees is the offset of each Fetch, so ``kafkasim
serve`` records, per ``(client id, client host, topic, partition)``, the last fetch offset
and when it was asked, and writes them here at most once per ``interval_s`` (one second)
while fetches come in. The view reads the file (it may not import the server) and matches
an entry to the member with that client id and host that owns the partition.

Content: ``{"pid", "written_ms", "fetches": [{"client_id", "client_host", "topic",
"partition", "offset", "at_ms"}]}``; entries not refreshed for ``keep_s`` (5 minutes) are
dropped. Written to a temporary name and renamed (a reader sees a whole file); not fsynced:
it is a hint that is rewritten every second, not state. ``kafkasim serve`` removes it on a
clean shutdown, with the address file.

Thread-safety: event-loop thread only (the Fetch handler calls :meth:`fetched` there).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Optional

from kafkasim.server.side_files import remove_side_file, write_side_file

__all__ = ["POSITIONS_FILE", "FetchPositions"]


POSITIONS_FILE = ".fetch-positions.json"


class FetchPositions:
    """The last fetch offset per client and partition, written to the data dir (see module docstring)."""

    def __init__(self, data_dir: str, *, interval_s: float = 1.0, keep_s: float = 300.0) -> None:
        self.path = os.path.join(data_dir, POSITIONS_FILE)
        self.interval_s = interval_s
        self.keep_ms = int(keep_s * 1000)
        self._last: dict[tuple[Optional[str], Optional[str], str, int], tuple[int, int]] = {}
        self._pending: Optional[asyncio.TimerHandle] = None

    def fetched(self, client_id: Optional[str], client_host: Optional[str], wanted) -> None:
        """One Fetch: ``wanted`` is ``[(topic, [(partition, fetch offset, ...), ...]), ...]``."""
        now = int(time.time() * 1000)
        for topic, partitions in wanted:
            for partition, offset, *_ in partitions:
                self._last[(client_id, client_host, topic, partition)] = (offset, now)
        if self._pending is None:
            self._pending = asyncio.get_running_loop().call_later(self.interval_s, self.flush)

    def flush(self) -> None:
        """Write the file now (atomic rename); a failure is logged, never raised to a client."""
        self._pending = None
        now = int(time.time() * 1000)
        self._last = {k: v for k, v in self._last.items() if now - v[1] <= self.keep_ms}
        rows = [{"client_id": c, "client_host": h, "topic": t, "partition": p, "offset": off, "at_ms": at}
                for (c, h, t, p), (off, at) in sorted(self._last.items(), key=lambda kv: repr(kv[0]))]
        write_side_file(self.path, {"pid": os.getpid(), "written_ms": now, "fetches": rows})

    def remove(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        remove_side_file(self.path)
