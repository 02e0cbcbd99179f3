"""``kafkasim view``: serve the live view of a data dir (a running ``kafkasim serve``, or a lab's)."""

from __future__ import annotations

import json
import signal
import threading

from kafkasim.cli.common import add_data_dir, add_json, command, existing_data_dir
from kafkasim.errors import InvalidArgumentError

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "view",
                help="serve a live web view of a data dir on 127.0.0.1: producers, hash(key) mod N "
                     "routing, per-partition counts and rates, the group members and what each owns, "
                     "rebalances and brokers, read-only from the segment files and __consumer_offsets "
                     "(a running 'kafkasim serve' or a lab writes them); prints the URL, Ctrl-C stops it",
                example="kafkasim view --data-dir ./kafkasim-data --port 8080",
                handler=_view)
    add_data_dir(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: only this machine can open the page)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default 0: a free port)")
    p.add_argument("--interval-ms", type=int, default=250, metavar="MS",
                   help="how often the data dir is read (default 250)")
    add_json(p)


def _view(args) -> int:
    from kafkasim.view.server import ViewServer
    from kafkasim.view.snapshot import DataDirWatcher

    if not 0 <= args.port <= 65535:
        raise InvalidArgumentError(f"--port {args.port}: outside 0-65535")
    if args.interval_ms < 10:
        raise InvalidArgumentError(f"--interval-ms {args.interval_ms}: at least 10")
    data_dir = existing_data_dir(args)
    try:
        server = ViewServer(DataDirWatcher(data_dir), args.host, args.port, interval_s=args.interval_ms / 1000)
    except OSError as exc:
        raise InvalidArgumentError(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with server:
        host, port = server.address
        if args.json:
            print(json.dumps({"url": server.url, "host": host, "port": port, "data_dir": data_dir}), flush=True)
        else:
            print(f"kafkasim view: {server.url} (watching {data_dir}; Ctrl-C to stop)", flush=True)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    return 0
