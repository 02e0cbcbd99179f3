"""``kafkasim spark start|stop|status`` and ``kafkasim spark cluster start|stop|status``: a warm Spark for the audits.

``spark start`` runs a Spark Connect server for a data dir (``kafkasim.spark_jobs.connect``);
every ``kafkasim audit`` on that data dir then uses it instead of starting a JVM.
``spark cluster start`` runs Spark's standalone Master and Workers on 127.0.0.1
(``kafkasim.spark_jobs.standalone``) for ``kafkasim audit ... --master spark://...`` or
``kafkasim spark start --master spark://...``. Thin commands over those modules; text or
``--json`` output.
"""

from __future__ import annotations

from kafkasim.cli.common import add_data_dir, add_json, command, emit, existing_data_dir, positive_int

__all__ = ["register"]


def register(sub) -> None:
    p = command(sub, "spark", help="Run a warm Spark for the audits: a Spark Connect server, or a standalone cluster.",
                example="kafkasim spark start --data-dir ./kafkasim-data",
                handler=lambda args: p.print_help() or 2)
    cmds = p.add_subparsers(dest="spark_command", metavar="COMMAND")

    s = command(cmds, "start", help="Start a Spark Connect server on 127.0.0.1 for this data dir; "
                                    "every 'kafkasim audit' on the data dir then runs on it (no JVM start).",
                example="kafkasim spark start --data-dir ./kafkasim-data --port 15002", handler=_start)
    add_data_dir(s)
    s.add_argument("--port", type=positive_int, default=15002,
                   help="gRPC port (spark.connect.grpc.binding.port; default 15002)")
    s.add_argument("--master", default="local[*]",
                   help="the server's Spark master (default local[*]; e.g. spark://127.0.0.1:7077 from "
                        "'kafkasim spark cluster start')")
    s.add_argument("--driver-memory", default="1g", help="the server JVM's heap (default 1g)")
    s.add_argument("--spark-ui", action="store_true", help="start Spark's web UI on 127.0.0.1 (off by default)")
    s.add_argument("--ui-port", type=positive_int, default=4040, help="the web UI's port with --spark-ui (default 4040)")
    s.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for it to listen (default 120)")
    s.add_argument("--warm-up", type=int, default=2, metavar="N",
                   help="run 'audit all' on the data dir N times before returning, so the first real audit is "
                        "a warm one (default 2; 0 = none)")
    add_json(s)

    t = command(cmds, "stop", help="Stop this data dir's Spark Connect server and every process it started.",
                example="kafkasim spark stop --data-dir ./kafkasim-data", handler=_stop)
    add_data_dir(t)
    add_json(t)

    u = command(cmds, "status", help="Show this data dir's Spark Connect server and standalone cluster.",
                example="kafkasim spark status --data-dir ./kafkasim-data --json", handler=_status)
    add_data_dir(u)
    add_json(u)

    c = command(cmds, "cluster", help="Run Spark's standalone Master and Workers on 127.0.0.1.",
                example="kafkasim spark cluster start --workers 2 --data-dir ./kafkasim-data",
                handler=lambda args: c.print_help() or 2)
    ccmds = c.add_subparsers(dest="cluster_command", metavar="COMMAND")
    cs = command(ccmds, "start", help="Start a standalone Master and N Workers on 127.0.0.1 (work dirs and logs "
                                      "under DATA_DIR/spark); audit on it with --master spark://127.0.0.1:PORT.",
                 example="kafkasim spark cluster start --workers 2 --data-dir ./kafkasim-data", handler=_cluster_start)
    add_data_dir(cs)
    cs.add_argument("--workers", type=positive_int, default=2, help="Workers to start (default 2)")
    cs.add_argument("--cores", type=positive_int, default=1, help="cores each Worker offers (default 1)")
    cs.add_argument("--memory", default="1g", help="memory each Worker offers (default 1g)")
    cs.add_argument("--port", type=positive_int, default=7077, help="the Master's port (default 7077, Spark's)")
    cs.add_argument("--webui-port", type=positive_int, default=8080,
                    help="the Master's web UI port, with its JSON at /json (default 8080, Spark's)")
    cs.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the Workers (default 120)")
    add_json(cs)
    ct = command(ccmds, "stop", help="Stop this data dir's standalone Workers (and their executors) and Master.",
                 example="kafkasim spark cluster stop --data-dir ./kafkasim-data", handler=_cluster_stop)
    add_data_dir(ct)
    add_json(ct)
    cu = command(ccmds, "status", help="Show this data dir's standalone Master and Workers.",
                 example="kafkasim spark cluster status --data-dir ./kafkasim-data", handler=_status)
    add_data_dir(cu)
    add_json(cu)


def _start(args) -> int:
    from kafkasim.errors import InvalidArgumentError
    from kafkasim.cli import warm_client
    from kafkasim.spark_jobs import connect
    from kafkasim.spark_jobs.warmup import warm_up

    if args.warm_up < 0:
        raise InvalidArgumentError(f"--warm-up must be >= 0 runs, got {args.warm_up}")
    data_dir = existing_data_dir(args)
    state = connect.start(data_dir, port=args.port, master=args.master, ui=args.spark_ui,
                          ui_port=args.ui_port, driver_memory=args.driver_memory, timeout=args.timeout)
    try:
        state = connect.record_client(data_dir, warm_client.launch(data_dir))   # audits run in forks of it
        state["warm_up_s"] = warm_up(data_dir, state["url"], args.warm_up)
    except BaseException:       # a server that cannot run an audit is no use: do not leave it behind
        connect.stop(data_dir)
        raise
    emit(args, state, lambda s: f"kafkasim spark: Spark Connect server at {s['url']} on {s['master']} "
                                f"(pid {s['server']['pid']}, log {s['server']['log']}); "
                                f"'kafkasim audit ... --data-dir {s['data_dir']}' now runs on it")
    return 0


def _stop(args) -> int:
    from kafkasim.spark_jobs import connect

    out = connect.stop(existing_data_dir(args))
    emit(args, out, lambda o: f"kafkasim spark: stopped the Spark Connect server (pid {o['pid']})" if o["stopped"]
         else "kafkasim spark: no Spark Connect server was running for this data dir")
    return 0


def _status(args) -> int:
    from kafkasim.spark_jobs import connect, standalone

    data_dir = existing_data_dir(args)
    out = {"connect": connect.status(data_dir), "cluster": standalone.status(data_dir)}
    emit(args, out, _status_text)
    return 0


def _status_text(out: dict) -> str:
    c, k = out["connect"], out["cluster"]
    lines = [f"Spark Connect: running at {c['url']} on {c['master']} (pid {c['server']['pid']})" if c["running"]
             else "Spark Connect: not running" + (" (recorded server is gone)" if c.get("url") else "")]
    if c["running"]:
        lines.append(f"warm client: running (pid {c['client']['pid']}); audits of this data dir run in forks of it"
                     if c.get("client_running") else "warm client: not running; audits start their own Python")
    lines.append(f"standalone cluster: running at {k['master_url']}, {k['alive_workers']} worker(s) alive "
                 f"(UI {k['webui']})" if k["running"] else "standalone cluster: not running")
    return "\n".join(lines)


def _cluster_start(args) -> int:
    from kafkasim.spark_jobs import standalone

    state = standalone.start(existing_data_dir(args), workers=args.workers, cores=args.cores, memory=args.memory,
                             port=args.port, webui_port=args.webui_port, timeout=args.timeout)
    emit(args, state, lambda s: f"kafkasim spark cluster: Master {s['master_url']} with {s['alive_workers']} "
                                f"Worker(s) (UI {s['webui']}); audit on it with "
                                f"'kafkasim audit all --master {s['master_url']} --data-dir {s['data_dir']}'")
    return 0


def _cluster_stop(args) -> int:
    from kafkasim.spark_jobs import standalone

    out = standalone.stop(existing_data_dir(args))
    emit(args, out, lambda o: f"kafkasim spark cluster: stopped (pids {', '.join(map(str, o['pids']))})"
         if o["stopped"] else "kafkasim spark cluster: no standalone cluster was running for this data dir")
    return 0
