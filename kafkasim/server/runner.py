"""Run a :class:`~kafkasim.server.server.KafkaServer` in the foreground until told to stop.

:func:`serve` opens the broker over ``data_dir`` (which takes the data dir's lock),
starts the server, writes the address file, reports the address through ``on_ready``,
and then waits for SIGINT/SIGTERM (or ``stop``). Shutdown is always, in this order:
stop accepting and drop connections → remove the address file → flush and close the
broker (releasing the lock). Nothing is left half-written: the address file is written
to a temporary name, fsynced and renamed into place.

The address file ``<data_dir>/.server.json`` is ``{"host", "port", "pid", "started_ms"}``
(plus ``"metrics_port"`` and ``"control_url"`` when those are served);
it exists exactly while a server is serving that data dir, so other tools can find it.
Beside it, ``.fetch-positions.json`` holds each client's last fetch offsets for the live
view (:mod:`kafkasim.server.positions`), and ``.server-faults.json`` the recent injected
faults (:mod:`kafkasim.server.fault_events`), removed with it.

A data dir holding a cluster (``meta/cluster.json``, made by ``kafkasim cluster create``),
or any data dir when ``brokers`` is given (creating the cluster), is served as a cluster:
one listener per broker (:mod:`kafkasim.server.listeners`) over one in-process
:class:`~kafkasim.broker.cluster.Cluster`, and the address file also lists
``"brokers": [{"id", "host", "port", "rack"}]`` ("host"/"port" are the first broker's).

Fault rules (:mod:`kafkasim.faults`; the server's ``faults``) are reachable from other
processes two ways: the data dir's control directory (:mod:`kafkasim.server.control`, read
every :data:`CONTROL_TICK_S`; ``kafkasim fault``), and, with ``control_port``, the HTTP
control endpoint (:mod:`kafkasim.server.fault_http`), loopback only unless
``allow_remote_control``.

Thread-safety: :func:`serve` runs its own event loop in the calling thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any, Callable, Mapping, Optional

from kafkasim.clock import SystemClock
from kafkasim.errors import InvalidArgumentError
from kafkasim.server.address import ADDRESS_FILE, read_address, remove_address, write_address
from kafkasim.faults import Faults
from kafkasim.server.api import ServerOptions
from kafkasim.server.control import has_requests, remove_control_dir, serve_requests
from kafkasim.server.fault_events import FaultEventsFile
from kafkasim.server.fault_http import FaultHttpServer, check_control_address
from kafkasim.server.positions import FetchPositions
from kafkasim.server.server import DEFAULT_MAX_REQUEST_BYTES, KafkaServer

__all__ = ["serve", "ADDRESS_FILE", "read_address", "write_address", "remove_address", "CRASH_POINT_ENV"]

log = logging.getLogger("kafkasim.server")

TXN_TICK_S = 1.0
"""How often a served single broker runs its transaction coordinator's due tasks (Kafka's
scheduler: aborting transactions past ``transaction.timeout.ms`` is checked every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` by the coordinator's own
clock; a served cluster runs them in ``Cluster.tick()``)."""

CONTROL_TICK_S = 0.1
"""How often a served single broker runs the control directory's pending requests (a served
cluster runs them on its listeners' tick, as often)."""

CRASH_POINT_ENV = "KAFKASIM_CRASH_POINT"
CRASH_EXIT_CODE = 70
"""The exit code of a process ended at its crash point (EX_SOFTWARE)."""


def serve(data_dir: str, host: str = "127.0.0.1", port: int = 9092, *,
          options: Optional[ServerOptions] = None,
          max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
          on_ready: Optional[Callable[[str, int, Optional[int]], None]] = None,
          stop: Optional[asyncio.Event] = None, metrics_port: Optional[int] = None,
          brokers=None, broker_configs: Optional[Mapping[str, Any]] = None,
          features: Optional[Mapping[str, int]] = None, faults: Optional[Faults] = None,
          control_port: Optional[int] = None, control_host: str = "127.0.0.1",
          allow_remote_control: bool = False) -> None:
    """Serve ``data_dir`` on ``host:port`` until SIGINT/SIGTERM; see the module docstring.

    ``metrics_port``: also serve Prometheus ``/metrics`` on ``127.0.0.1:metrics_port`` (0: a
    free port; :mod:`kafkasim.server.metrics`). ``on_ready(host, port, metrics_port)`` is
    called once both listen (``metrics_port`` None when metrics are off).

    ``brokers``: ``[(id, rack), ...]`` or ``"0:r1,1:r2"`` — serve a cluster of these brokers
    (created when the data dir holds none). Without it, a data dir holding a cluster is
    served as that cluster, any other as one broker.

    ``broker_configs``: broker configs by their server.properties names (what
    ``kafka-server-start.sh --override name=value`` sets), e.g. a short
    ``leader.imbalance.check.interval.seconds``; checked before anything is opened.

    ``faults``: the fault rules to apply (:class:`kafkasim.faults.Faults`, e.g. one made with a
    seed, kept by the caller to add and remove rules while it serves; every listener of a
    cluster shares it); None: an empty set of its own. Faults are counted in /metrics and the
    recent ones written to ``.server-faults.json`` (:mod:`kafkasim.server.fault_events`).

    ``features``: finalized feature levels (``{"transaction.version": 1}``, what
    ``kafka-storage.sh format --feature`` sets; ``Broker.update_features``).

    ``control_port``: also serve the fault control endpoint on ``control_host:control_port``
    (0: a free port; the address file's ``control_url``); a ``control_host`` that is not a
    loopback address is refused unless ``allow_remote_control``."""
    from kafkasim.broker import Broker

    crash_hook = _crash_hook(os.environ.get(CRASH_POINT_ENV))      # checked before anything opens
    control = None
    if control_port is not None:       # checked before anything opens; bound once the server listens
        control = dict(host=control_host, port=control_port, allow_remote=allow_remote_control)
        check_control_address(control_host, control_port, allow_remote_control)

    is_cluster = os.path.exists(os.path.join(data_dir, "meta", "cluster.json"))
    if brokers is not None and not is_cluster and os.path.isdir(data_dir) and os.listdir(data_dir):
        raise InvalidArgumentError(f"{data_dir} is not empty and holds no cluster: a cluster starts in a new "
                                   "data dir (serve this one without --brokers)")
    if brokers is not None or is_cluster:
        from kafkasim.broker.cluster import Cluster

        broker = Cluster(data_dir, brokers, clock=SystemClock(), broker_configs=broker_configs)
    else:
        broker = Broker(data_dir, clock=SystemClock(), broker_configs=broker_configs)
    broker.crash_hook = crash_hook
    if features:
        try:
            # the levels a new data dir is formatted with, up or down from what it has (no
            # write, and no new epoch, when they are already those)
            changed = {name: level for name, level in features.items()
                       if broker.finalized_features.get(name, 0) != level}
            if changed:
                broker.update_features(changed, upgrade_types={name: "unsafe_downgrade" for name in changed})
        except BaseException:
            broker.close()
            raise
    metrics = None
    positions = FetchPositions(broker.data_dir)      # the live view's member positions
    fault_log = FaultEventsFile(broker.data_dir)     # the live view's recent faults
    try:
        if metrics_port is not None:
            from kafkasim.server.metrics import ServerMetrics

            metrics = ServerMetrics(broker)
            try:
                metrics.start(metrics_port)
            except OSError as exc:
                raise InvalidArgumentError(
                    f"cannot serve metrics on 127.0.0.1:{metrics_port}: {exc.strerror or exc}") from exc
        asyncio.run(_main(broker, data_dir, host, port, options, max_request_bytes, on_ready, stop, metrics,
                          positions, faults, fault_log, control))
    finally:
        remove_address(broker.data_dir)
        positions.remove()
        fault_log.remove()
        try:
            if metrics is not None:
                metrics.close()
            broker.flush()
        finally:
            broker.close()


async def _main(broker, data_dir, host, port, options, max_request_bytes, on_ready, stop, metrics,
                positions=None, faults=None, fault_log=None, control=None) -> None:
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            pass
    from kafkasim.broker.cluster import Cluster

    if isinstance(broker, Cluster):     # one listener per broker
        await _main_cluster(broker, host, port, options, max_request_bytes, on_ready, stop, metrics, positions,
                            faults, fault_log, control)
        return
    server = KafkaServer(broker, host, port, options=options, max_request_bytes=max_request_bytes,
                         metrics=metrics, positions=positions, faults=faults, fault_log=fault_log)
    try:
        bound_host, bound_port = await server.start()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    ticker = asyncio.create_task(_tick_transactions(broker, server, stop))
    controller = asyncio.create_task(_serve_control(broker.data_dir, server.faults, stop))
    http = None
    try:
        http = _start_control(control, server.faults)
        metrics_port = metrics.port if metrics is not None else None
        write_address(broker.data_dir, bound_host, bound_port, metrics_port=metrics_port,
                      control_url=http.url if http is not None else None)
        if on_ready is not None:
            on_ready(bound_host, bound_port, metrics_port)
        await stop.wait()
    finally:
        for task in (ticker, controller):
            task.cancel()
        await asyncio.gather(ticker, controller, return_exceptions=True)
        if http is not None:
            http.close()
        await server.close()
        remove_control_dir(broker.data_dir)


def _start_control(control: Optional[dict], faults, brokers=None) -> Optional[FaultHttpServer]:
    """The fault control endpoint over ``faults``, listening (None when not asked for);
    InvalidArgumentError naming the address when it cannot bind."""
    if control is None:
        return None
    http = FaultHttpServer(faults, brokers=brokers, **control)
    try:
        http.start()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot serve the fault control endpoint on {control['host']}:"
                                   f"{control['port']}: {exc.strerror or exc}") from exc
    return http


async def _serve_control(data_dir: str, faults, stop: asyncio.Event) -> None:
    """Until ``stop``: the control directory's pending requests (``kafkasim fault``) every
    :data:`CONTROL_TICK_S`, on the executor (they touch files) when there are any."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        try:
            if has_requests(data_dir):
                await loop.run_in_executor(None, serve_requests, data_dir, None, faults)
        except OSError:
            log.exception("reading control requests failed")
        try:
            await asyncio.wait_for(stop.wait(), CONTROL_TICK_S)
            return
        except asyncio.TimeoutError:
            pass


async def _tick_transactions(broker, server: KafkaServer, stop: asyncio.Event) -> None:
    """Until ``stop``: ``broker.tick_transactions()`` on the executor, at once and then every
    :data:`TXN_TICK_S` (the first run loads the coordinator, so transactions a crash left
    prepared get their markers without waiting for a client); when it aborted, expired or
    completed something, wake the read_committed long polls (markers move the last stable
    offset). Then ``broker.tick_consumer_groups()`` (consumer group session and rebalance
    timeouts) and ``broker.tick_share_groups()`` (share group sessions, acquisition locks). A
    served cluster runs them in ``Cluster.tick()``."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        try:
            if await loop.run_in_executor(None, broker.tick_transactions):
                server.wake_fetches()
        except Exception:
            log.exception("transaction coordinator tick failed")
        try:
            # consumer groups (KIP-848): fence members past their session or rebalance timeout
            await loop.run_in_executor(None, broker.tick_consumer_groups)
        except Exception:
            log.exception("consumer group coordinator tick failed")
        try:
            # share groups (KIP-932): fence members past their session, expire acquisition locks;
            # released records may serve a waiting ShareFetch
            if await loop.run_in_executor(None, broker.tick_share_groups):
                server.wake_fetches()
        except Exception:
            log.exception("share group coordinator tick failed")
        try:
            await asyncio.wait_for(stop.wait(), TXN_TICK_S)
            return
        except asyncio.TimeoutError:
            pass


def _crash_hook(point: Optional[str]) -> Optional[Callable[[str], None]]:
    """The broker's ``crash_hook`` for ``KAFKASIM_CRASH_POINT`` (read once, at start; a test
    hook, see :data:`kafkasim.broker.txn_api.CRASH_POINTS`): it ends the process with
    :data:`CRASH_EXIT_CODE`, no shutdown and no flush, when the broker reaches that point.
    None when the variable is unset or empty."""
    if not point:
        return None
    from kafkasim.broker.txn_api import CRASH_POINTS

    if point not in CRASH_POINTS:
        raise InvalidArgumentError(f"{CRASH_POINT_ENV}={point!r}: not a crash point (one of "
                                   f"{', '.join(CRASH_POINTS)})")

    def crash(reached: str) -> None:
        if reached == point:
            os.write(2, f"kafkasim: crash point {point} reached: exiting\n".encode())
            os._exit(CRASH_EXIT_CODE)

    return crash


async def _main_cluster(cluster, host, port, options, max_request_bytes, on_ready, stop, metrics,
                        positions=None, faults=None, fault_log=None, control=None) -> None:
    from kafkasim.server.listeners import ClusterListeners

    listeners = ClusterListeners(cluster, host, port, data_dir=cluster.data_dir, options=options,
                                 max_request_bytes=max_request_bytes, metrics=metrics, positions=positions,
                                 faults=faults, fault_log=fault_log)
    addresses = await listeners.start()
    http = None
    try:
        http = _start_control(control, listeners.faults, brokers=list(cluster.brokers))
        metrics_port = metrics.port if metrics is not None else None
        first = addresses[0]
        write_address(cluster.data_dir, first["host"], first["port"], metrics_port=metrics_port,
                      brokers=addresses, control_url=http.url if http is not None else None)
        if on_ready is not None:
            on_ready(first["host"], first["port"], metrics_port)
        await listeners.run(stop)
    finally:
        if http is not None:
            http.close()
        await listeners.close()
        remove_control_dir(cluster.data_dir)
