"""``kafkasim serve``: a broker process that real Kafka clients talk to over the wire protocol."""

from __future__ import annotations

import json
import logging
import os
import sys

from kafkasim.cli.common import add_data_dir, add_json, command, data_dir_of, positive_int
from kafkasim.errors import InvalidArgumentError

__all__ = ["register", "parse_listen"]

DEFAULT_LISTEN = "127.0.0.1:9092"
DEFAULT_METRICS_PORT = 9308          # kafkasim.server.metrics.DEFAULT_METRICS_PORT (not imported: cheap --help)


def register(sub) -> None:
    p = command(sub, "serve",
                help="serve the data dir to real Kafka clients (kafka-python, aiokafka, "
                     "confluent-kafka) over Kafka's wire protocol, in the foreground; "
                     "Ctrl-C or SIGTERM stops it cleanly. Creates the data dir if missing, "
                     "as a Kafka broker creates its log dir",
                example="kafkasim serve --data-dir ./kafkasim-data --listen 127.0.0.1:9092\n"
                        "  kafkasim serve --data-dir ./tv1 --feature transaction.version=1\n"
                        "  kafkasim serve --data-dir ./lab --brokers 0:r1,1:r2,2:r3 --listen 127.0.0.1:9092\n"
                        "  kafkasim serve --data-dir ./lab --control-port 9309   # then: curl http://127.0.0.1:9309/faults",
                handler=_serve)
    add_data_dir(p)
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                   help=f"address to listen on (default {DEFAULT_LISTEN}; port 0 picks a free one). "
                        "Binds loopback unless told otherwise")
    p.add_argument("--brokers", default=None, metavar="ID[:RACK],...",
                   help="serve a cluster of these brokers (created in the data dir if it holds none), one "
                        "listener each on consecutive ports from --listen's (all free ports with port 0). "
                        "A data dir made by 'kafkasim cluster create' is served as its cluster without it")
    p.add_argument("--replica-selector-class", default=None, metavar="CLASS",
                   choices=["RackAwareReplicaSelector", "org.apache.kafka.common.replica.RackAwareReplicaSelector"],
                   help="replica.selector.class of a served cluster: RackAwareReplicaSelector lets a consumer "
                        "with client.rack fetch from a replica in its rack (KIP-392); default: leader only")
    p.add_argument("--no-auto-create-topics", action="store_true",
                   help="answer Metadata for a missing topic with UNKNOWN_TOPIC_OR_PARTITION instead "
                        "of creating it (auto.create.topics.enable=false)")
    p.add_argument("--num-partitions", type=positive_int, default=1,
                   help="partitions of auto-created topics (num.partitions, default 1)")
    p.add_argument("--max-incremental-fetch-session-cache-slots", type=int, default=1000, metavar="N",
                   help="fetch sessions (KIP-227) each broker keeps for incremental fetches "
                        "(max.incremental.fetch.session.cache.slots, default 1000; 0: none, every "
                        "fetch is answered in full)")
    p.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                   help="a broker config by its server.properties name, as kafka-server-start.sh's "
                        "--override (repeatable), e.g. leader.imbalance.check.interval.seconds=5")
    p.add_argument("--feature", action="append", default=[], metavar="NAME=LEVEL",
                   help="a finalized feature level, as kafka-storage.sh format --feature (repeatable): "
                        "transaction.version=2 (the default, as a new Kafka 4.0 cluster: clients that read "
                        "it use KIP-890's transactions), 1 or 0 (clients keep the original protocol)")
    p.add_argument("--max-request-bytes", type=positive_int, default=104_857_600,
                   help="largest request accepted (socket.request.max.bytes, default 104857600)")
    p.add_argument("--metrics-port", type=int, default=None, metavar="P",
                   help="also serve Prometheus metrics at http://127.0.0.1:P/metrics (off by default; "
                        f"{DEFAULT_METRICS_PORT} is the customary port, 0 picks a free one); see docs/server.md")
    p.add_argument("--control-port", type=int, default=None, metavar="P",
                   help="also serve the fault control endpoint (JSON over HTTP: GET/POST/DELETE /faults, its OpenAPI "
                        "document at /openapi.json) at http://127.0.0.1:P (off by default; 0 picks a free one); "
                        "'kafkasim fault' reaches the server through the data dir without it; see docs/server.md")
    p.add_argument("--control-host", default="127.0.0.1", metavar="HOST",
                   help="address the fault control endpoint binds (default 127.0.0.1); one that is not loopback "
                        "is refused unless --allow-remote-control is given")
    p.add_argument("--allow-remote-control", action="store_true",
                   help="let --control-host be a non-loopback address: anyone who reaches it can script faults")
    p.add_argument("--log-level", default="WARNING",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log level on stderr")
    add_json(p)


def parse_listen(text: str) -> tuple[str, int]:
    """``"127.0.0.1:9092"`` → ``("127.0.0.1", 9092)``; ``"[::1]:9092"`` for IPv6."""
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise InvalidArgumentError(f"--listen {text!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        number = int(port)
    except ValueError:
        raise InvalidArgumentError(f"--listen {text!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise InvalidArgumentError(f"--listen {text!r}: port {number} is outside 0-65535")
    return host, number


def _overrides(pairs: list[str]) -> dict[str, str]:
    """``["name=value", ...]`` → ``{name: value}`` (the broker validates names and values)."""
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise InvalidArgumentError(f"--override {pair!r}: expected NAME=VALUE, "
                                       "e.g. leader.imbalance.check.interval.seconds=5")
        out[name.strip()] = value.strip()
    return out


def _features(pairs: list[str]) -> dict[str, int]:
    """``["transaction.version=1", ...]`` → ``{"transaction.version": 1}`` (names and levels
    checked against what the broker supports)."""
    from kafkasim.broker.metadata import SUPPORTED_FEATURES

    out = {}
    for pair in pairs:
        name, sep, level = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InvalidArgumentError(f"--feature {pair!r}: expected NAME=LEVEL, e.g. transaction.version=2")
        if name not in SUPPORTED_FEATURES:
            raise InvalidArgumentError(f"--feature {pair!r}: unknown feature {name!r} (supported: "
                                       f"{', '.join(sorted(SUPPORTED_FEATURES))})")
        lo, hi = SUPPORTED_FEATURES[name]
        try:
            number = int(level.strip())
        except ValueError:
            raise InvalidArgumentError(f"--feature {pair!r}: level {level.strip()!r} is not a number") from None
        if not lo <= number <= hi:
            raise InvalidArgumentError(f"--feature {pair!r}: level {number} is outside {lo}-{hi}")
        out[name] = number
    return out


def _broker_configs(args) -> dict:
    """``--override`` configs, with the two dedicated flags as the configs they name
    (``auto.create.topics.enable``, ``num.partitions``), which --override may not contradict."""
    configs = _overrides(args.override)
    flags = {"num.partitions": str(args.num_partitions)}
    if args.no_auto_create_topics:
        flags["auto.create.topics.enable"] = "false"
    for name, value in flags.items():
        if name in configs and configs[name].lower() != value:
            raise InvalidArgumentError(f"--override {name}={configs[name]} contradicts "
                                       f"{'--num-partitions' if name == 'num.partitions' else '--no-auto-create-topics'}")
        configs[name] = value
    return configs


def _serve(args) -> int:
    from kafkasim.server.api import ServerOptions
    from kafkasim.server.runner import serve

    host, port = parse_listen(args.listen)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = ServerOptions(replica_selector="rack" if args.replica_selector_class else None,
                            fetch_session_cache_slots=args.max_incremental_fetch_session_cache_slots)
    if options.fetch_session_cache_slots < 0:
        raise InvalidArgumentError(f"--max-incremental-fetch-session-cache-slots "
                                   f"{options.fetch_session_cache_slots}: must be >= 0")
    data_dir = data_dir_of(args)
    created = not os.path.exists(data_dir)      # a Kafka broker creates its log dir too: say so

    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        raise InvalidArgumentError(f"--metrics-port {args.metrics_port}: outside 0-65535")
    if args.control_port is not None and not 0 <= args.control_port <= 65535:
        raise InvalidArgumentError(f"--control-port {args.control_port}: outside 0-65535")
    if args.control_port is None and (args.control_host != "127.0.0.1" or args.allow_remote_control):
        raise InvalidArgumentError("--control-host / --allow-remote-control go with --control-port")
    if args.control_port is not None:
        from kafkasim.server.fault_http import is_loopback
        if not is_loopback(args.control_host) and not args.allow_remote_control:
            raise InvalidArgumentError(f"--control-host {args.control_host}: not a loopback address; whoever "
                                       "reaches the fault control endpoint can break this server's answers: add "
                                       "--allow-remote-control to bind it anyway")

    features = _features(args.feature)
    brokers = None
    if args.brokers is not None:
        from kafkasim.broker.cluster import parse_brokers
        brokers = parse_brokers(args.brokers)

    def ready(bound_host: str, bound_port: int, metrics_port) -> None:
        if created:
            print(f"kafkasim serve: created a new empty data dir {os.path.abspath(data_dir)} "
                  f"(check --data-dir / $KAFKASIM_DATA_DIR if you meant an existing one)",
                  file=sys.stderr, flush=True)
        from kafkasim.server.address import read_address
        announced = read_address(data_dir) or {}
        listeners = announced.get("brokers")
        control_url = announced.get("control_url")
        if args.json:
            info = {"host": bound_host, "port": bound_port, "data_dir": data_dir}
            if metrics_port is not None:
                info["metrics_port"] = metrics_port
            if control_url is not None:
                info["control_url"] = control_url
            if listeners is not None:
                info["brokers"] = listeners
            print(json.dumps(info), flush=True)
        else:
            metrics = (f"; metrics at http://127.0.0.1:{metrics_port}/metrics"
                       if metrics_port is not None else "")
            metrics += f"; fault control at {control_url}/faults" if control_url is not None else ""
            where = (", ".join(f"broker {b['id']} on {b['host']}:{b['port']}" for b in listeners)
                     if listeners else f"{bound_host}:{bound_port}")
            print(f"kafkasim serve: listening on {where} "
                  f"(data dir {data_dir}{metrics}; Ctrl-C to stop)", flush=True)

    serve(data_dir, host, port, options=options, max_request_bytes=args.max_request_bytes,
          on_ready=ready, metrics_port=args.metrics_port, brokers=brokers,
          broker_configs=_broker_configs(args), features=features, control_port=args.control_port,
          control_host=args.control_host, allow_remote_control=args.allow_remote_control)
    return 0
