"""One listener per broker of an in-process cluster, and the real-time loop that drives it.

:class:`ClusterListeners` opens a :class:`~kafkasim.server.server.KafkaServer` per broker
of a :class:`~kafkasim.broker.cluster.Cluster`, in broker-id order, on ``host`` and
``port + i`` (every one on a free port when ``port`` is 0), all over the one cluster and
one :class:`~kafkasim.server.topology.Topology`. Every ``interval`` seconds of real time
:meth:`step`:

1. runs ``Cluster.tick()`` (due follower fetches of slowed brokers, the ISR check,
   maintenance) — replication ticks on real time in serve: every step while a broker is
   slowed, else every :data:`CLUSTER_TICK_S` (healthy followers copy at once on produce);
2. runs the pending control requests (``kafkasim cluster stop-broker`` and friends, and
   ``kafkasim fault``'s calls on :attr:`ClusterListeners.faults`, against the running
   server, :mod:`kafkasim.server.control`);
3. makes each listener follow its broker: a stopped or isolated broker's listener (isolated
   from everything, or from clients only: ``Cluster.serves_clients``) closes
   its socket and drops its connections (clients see a refused connection and fail over
   through a metadata refresh); one that comes back listens again on the same port.

A one-broker cluster is the same with one listener. Invariants: after :meth:`start` and
after every :meth:`step`, a listener accepts connections iff its broker was alive when the
step read the states. Thread-safety: event-loop thread only; every cluster call runs on the
default executor (an acks=all produce may hold the cluster's locks for a while, and the
loop must not wait on them).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Optional

from kafkasim.errors import InvalidArgumentError
from kafkasim.faults import Faults
from kafkasim.server.api import ServerOptions, Waker
from kafkasim.server.control import serve_requests
from kafkasim.server.dispatch import APIS
from kafkasim.server.server import DEFAULT_MAX_REQUEST_BYTES, KafkaServer
from kafkasim.server.topology import Topology

__all__ = ["ClusterListeners", "TICK_INTERVAL_S"]

log = logging.getLogger("kafkasim.server")

TICK_INTERVAL_S = 0.1
CLUSTER_TICK_S = 1.0
"""How often ``Cluster.tick()`` runs while no broker is slowed (each tick rewrites
``meta/cluster.json``); with a slowed broker it runs every step, so its fetches are on time."""


class ClusterListeners:
    """The listeners of a served cluster (see the module docstring)."""

    def __init__(self, cluster, host: str, port: int, *, data_dir: str,
                 options: Optional[ServerOptions] = None,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, metrics=None,
                 interval: float = TICK_INTERVAL_S, positions=None, faults: Optional[Faults] = None,
                 fault_log=None) -> None:
        self.cluster = cluster
        if faults is None:
            controls = getattr(cluster, "faults", None)
            faults = Faults(getattr(cluster, "clock", None), seed=getattr(controls, "seed", 0),
                            known_apis=(a.name for a in APIS.values()), brokers=cluster.brokers)
            if controls is not None:    # the cluster's rules are these: cluster.faults.add acts on real clients
                controls.use(faults)
        self.faults = faults
        """The fault rules every listener applies (one set: a rule names its broker)."""
        self.host, self.port = host, port
        self.data_dir = data_dir
        self.interval = interval
        self.topology = Topology(cluster)
        self._wakers = (Waker(), Waker())
        self._next_tick = 0.0
        self.servers: dict[int, KafkaServer] = {
            b: KafkaServer(cluster, host, 0 if port == 0 else port + i, options=options,
                           max_request_bytes=max_request_bytes, metrics=metrics, broker_id=b,
                           topology=self.topology, wakers=self._wakers, positions=positions,
                           faults=self.faults, fault_log=fault_log)
            for i, b in enumerate(sorted(cluster.brokers))}

    def addresses(self) -> list[dict]:
        """``[{"id", "host", "port", "rack"}]`` in broker order (for the address file)."""
        racks = {b: info.rack for b, info in self.cluster.brokers.items()}
        return [{"id": b, "host": s.host, "port": s.port, "rack": racks.get(b)}
                for b, s in self.servers.items()]

    async def start(self) -> list[dict]:
        """Bind every listener (InvalidArgumentError naming the address that failed), then
        close those of brokers that are down; returns :meth:`addresses`."""
        for b, server in self.servers.items():
            try:
                host, port = await server.start()
            except OSError as exc:
                await self.close()
                raise InvalidArgumentError(f"cannot listen on {server.host}:{server.port} for broker {b}: "
                                           f"{exc.strerror or exc}") from exc
            self.topology.set_address(b, host, port)
        await self._follow_states(await asyncio.get_running_loop().run_in_executor(None, self._states))
        return self.addresses()

    async def run(self, stop: asyncio.Event) -> None:
        """:meth:`step` every ``interval`` seconds until ``stop`` is set."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self.interval)
            except asyncio.TimeoutError:
                pass
            if not stop.is_set():
                await self.step()

    async def step(self) -> None:
        loop = asyncio.get_running_loop()
        handled, up, slowed = await loop.run_in_executor(None, self._tick_and_control, loop.time())
        changed = await self._follow_states(up)
        if handled or changed or slowed:      # high watermarks may have moved: wake long polls
            self._wakers[0].notify()

    def _tick_and_control(self, now: float) -> tuple[int, dict[int, bool], bool]:
        """On the executor (the cluster's locks may be held for a while by an acks=all
        produce): tick when due, run the control requests; returns ``(requests run,
        broker → alive, any broker slowed)``."""
        slowed = any(info.delay_ms for info in self.cluster.brokers.values())
        try:
            if slowed or now >= self._next_tick:
                self._next_tick = now + CLUSTER_TICK_S
                self.cluster.tick()
        except Exception:
            log.exception("cluster tick failed")
        try:
            handled = serve_requests(self.data_dir, self.cluster, self.faults)
        except OSError:
            log.exception("reading control requests failed")
            handled = 0
        return handled, self._states(), slowed

    def _states(self) -> dict[int, bool]:
        return {b: self.cluster.serves_clients(b) for b in self.servers}

    async def _follow_states(self, states: dict[int, bool]) -> bool:
        changed = False
        for b, server in self.servers.items():
            up = states[b]
            if up and not server.listening:
                try:
                    await server.resume()
                except OSError as exc:
                    log.error("broker %d: cannot listen again on %s:%d: %s", b, server.host, server.port, exc)
                    continue
                changed = True
            elif not up and server.listening:
                await server.pause()
                changed = True
        return changed

    async def close(self) -> None:
        for server in self.servers.values():
            await server.close()
