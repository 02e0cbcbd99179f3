"""``kafkasim serve`` with a fault rule the benchmark switches on and off, for ``bench_serve``.

Run as ``python -m benchmarks.fault_rule_server DATA_DIR``: serves DATA_DIR on 127.0.0.1 (a
free port, 4 partitions per new topic) through :func:`kafkasim.server.runner.serve` with a
:class:`kafkasim.faults.Faults` of its own, prints ``{"host", "port"}`` once it listens, then
reads commands from stdin, one a line, and answers each with ``ok``:

- ``rule``: install one rule that matches nothing the benchmark sends (Produce from client
  id ``no-such-client``, which never connects), so every Produce runs the hooks' matching
  path and is otherwise untouched;
- ``clear``: remove every rule (the idle path: one attribute read per request).

It stops on SIGTERM, or when stdin closes.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading

from kafkasim.faults import Faults
from kafkasim.server.runner import serve

NO_OP_RULE = {"api": "Produce", "client_id": "no-such-client", "error": "NOT_LEADER_OR_FOLLOWER"}


def main(argv: list[str]) -> None:
    data_dir, partitions = argv[0], int(argv[1]) if len(argv) > 1 else 4
    faults = Faults(seed=0)
    stop = asyncio.Event()
    loop_box: list = []

    def on_ready(host, port, _metrics_port):
        loop_box.append(asyncio.get_running_loop())
        print(json.dumps({"host": host, "port": port}), flush=True)
        threading.Thread(target=commands, daemon=True).start()

    def commands():
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "rule":
                faults.add(**NO_OP_RULE)
            elif cmd == "clear":
                faults.clear()
            else:
                print(f"unknown command {cmd!r}", flush=True)
                continue
            print("ok", flush=True)
        loop_box[0].call_soon_threadsafe(stop.set)

    serve(data_dir, "127.0.0.1", 0, on_ready=on_ready, stop=stop, faults=faults,
          broker_configs={"num.partitions": str(partitions)})


if __name__ == "__main__":
    main(sys.argv[1:])
