"""Where a served cluster's brokers listen: the node list Metadata and FindCoordinator answer.

A :class:`Topology` joins the in-process :class:`~kafkasim.broker.cluster.Cluster` (brokers,
racks, states) with the listener address of each broker (``kafkasim serve`` opens one per
broker, :mod:`kafkasim.server.listeners`). It answers:

- :meth:`live_nodes`: every broker that is up (state ``alive``), with its address and rack —
  Kafka's Metadata lists only registered, unfenced brokers, so a stopped or isolated broker
  drops out of it;
- :meth:`controller_id`: kafkasim has no separate controller quorum, so one live broker
  plays the part: the lowest live broker id when first asked, kept while it stays up (a
  broker coming back does not take the role back); -1 when none is up;
- :meth:`coordinator`: the group coordinator, which is cluster-wide in kafkasim (one group
  state for the whole cluster): the same broker. Kafka instead hashes the group id onto a
  ``__consumer_offsets`` partition and answers that partition's leader, which, like this
  one, moves when its broker fails, not when it returns (docs/differences.md).

A server without a topology (one plain :class:`~kafkasim.broker.Broker`) keeps the
single-node answers of :mod:`kafkasim.server.cluster`.

Invariants: addresses are set once the listeners are bound and never change afterwards
(a stopped broker's listener re-binds the same port); the coordinator is always a live
broker when one is up. Thread-safety: the address map is written before any request is
served and only read afterwards; the coordinator choice is guarded by a lock; the cluster
is thread-safe.
"""

from __future__ import annotations

import threading
from typing import Optional

from kafkasim.server.api import Node

__all__ = ["Topology"]


class Topology:
    """A cluster's brokers and their listener addresses (see the module docstring)."""

    def __init__(self, cluster, advertised_host: Optional[str] = None) -> None:
        self.cluster = cluster
        self.advertised_host = advertised_host
        self.addresses: dict[int, tuple[str, int]] = {}
        self._lock = threading.Lock()
        self._coordinator: Optional[int] = None

    def set_address(self, broker_id: int, host: str, port: int) -> None:
        self.addresses[broker_id] = (self.advertised_host or host, port)

    def node(self, broker_id: int) -> Node:
        host, port = self.addresses[broker_id]
        return Node(broker_id, host, port)

    def up(self, broker_id: int) -> bool:
        """Whether ``broker_id`` is alive (not stopped, not isolated)."""
        return self.cluster.reachable(broker_id)

    def live_nodes(self) -> list[tuple[Node, Optional[str]]]:
        """``(node, rack)`` of every live broker, by id."""
        out = []
        for b, info in sorted(self.cluster.brokers.items()):
            if info.state == "alive" and b in self.addresses:
                out.append((self.node(b), info.rack))
        return out

    def controller_id(self) -> int:
        node = self.coordinator()
        return node.node_id if node is not None else -1

    def coordinator(self) -> Optional[Node]:
        """The cluster-wide group coordinator (and controller): the current one while it is
        up, else the lowest live broker (None: none is up)."""
        live = {n.node_id: n for n, _ in self.live_nodes()}
        with self._lock:
            if self._coordinator not in live:
                self._coordinator = min(live) if live else None
            return live.get(self._coordinator) if self._coordinator is not None else None

    def leader_epochs(self) -> dict[tuple[str, int], int]:
        """Every replicated partition's leader epoch (from the controller's view)."""
        return {(p["topic"], p["partition"]): p["leader_epoch"]
                for p in self.cluster.describe_cluster()["partitions"]}

    def leader(self, topic: str, partition: int) -> int:
        return self.cluster.leader_for(topic, partition)
