"""Where a served cluster's brokers listen: the node list Metadata and FindCoordinator answer.

A :class:`Topology` joins the in-process :class:`~kafkasim.broker.cluster.Cluster` (brokers,
racks, states) with the listener address of each broker (``kafkasim serve`` opens one per
broker, :mod:`kafkasim.server.listeners`). It answers:

- :meth:`live_nodes`: every broker that is up (state ``alive``), with its address and rack —
  Kafka's Metadata lists only registered, unfenced brokers, so a stopped or isolated broker
  drops out of it;
- :meth:`controller_id`: the lowest live broker id (kafkasim has no separate controller
  quorum; -1 when none is up);
- :meth:`coordinator`: the group coordinator, which is cluster-wide in kafkasim (one group
  state for the whole cluster): the lowest live broker. Kafka instead hashes the group id
  onto a ``__consumer_offsets`` partition and answers that partition's leader
  (docs/differences.md).

A server without a topology (one plain :class:`~kafkasim.broker.Broker`) keeps the
single-node answers of :mod:`kafkasim.server.cluster`.

Invariants: addresses are set once the listeners are bound and never change afterwards
(a stopped broker's listener re-binds the same port). Thread-safety: the address map is
written before any request is served and only read afterwards; the cluster is thread-safe.
"""

from __future__ import annotations

from typing import Optional

from kafkasim.server.api import Node

__all__ = ["Topology"]


class Topology:
    """A cluster's brokers and their listener addresses (see the module docstring)."""

    def __init__(self, cluster, advertised_host: Optional[str] = None) -> None:
        self.cluster = cluster
        self.advertised_host = advertised_host
        self.addresses: dict[int, tuple[str, int]] = {}

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
        live = self.live_nodes()
        return live[0][0].node_id if live else -1

    def coordinator(self) -> Optional[Node]:
        """The cluster-wide group coordinator: the lowest live broker (None: none is up)."""
        live = self.live_nodes()
        return live[0][0] if live else None

    def leader_epochs(self) -> dict[tuple[str, int], int]:
        """Every replicated partition's leader epoch (from the controller's view)."""
        return {(p["topic"], p["partition"]): p["leader_epoch"]
                for p in self.cluster.describe_cluster()["partitions"]}

    def leader(self, topic: str, partition: int) -> int:
        return self.cluster.leader_for(topic, partition)
