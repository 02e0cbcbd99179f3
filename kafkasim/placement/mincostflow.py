"""A small integer min-cost flow (successive shortest paths), the engine of the planners.

``MinCostFlow(n)`` holds a directed graph on nodes ``0..n-1``; ``add_edge(u, v, cap,
cost)`` adds an arc and its residual twin. Nodes may also drain into the implicit sink
through a **convex** charge: ``set_drain(u, charge)`` where ``charge(k)`` is the cost of
the ``k+1``-th unit drained at ``u`` (non-decreasing in ``k``) — one function instead
of one arc per unit, which keeps per-broker balance penalties cheap to scan.

Callers may ``push`` an initial flow along arcs and ``drain`` units at nodes (conserving
flow) as a warm start, then ``augment(s, limit)`` routes more units from ``s`` to the
sink one at a time along cheapest residual paths (queue-based Bellman–Ford, which
accepts negative costs); a path never needs to leave the sink again, as that would close
a cycle, and there is no negative cycle (invariant below). ``recharge(charges)`` then
swaps in new convex charges and cancels the negative cycles through the sink that they
create (un-drain one unit here, drain it there), which is optimal for the new charges.

Invariant the caller must keep: the warm-start flow is a minimum-cost flow for its own
value (its residual graph has no negative cycle). Successive shortest paths then keeps
that invariant, so the result is a minimum-cost flow of the final value.
Deterministic: arcs are scanned in insertion order, ties go to the first node found.
Thread-safety: an instance is mutable; use one per computation.
"""

from __future__ import annotations

from collections import deque
from typing import Callable

__all__ = ["MinCostFlow"]


class MinCostFlow:
    """Arcs in parallel arrays; arc ``e ^ 1`` is the residual twin of arc ``e``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.adj: list[list[int]] = [[] for _ in range(n)]
        self.to: list[int] = []
        self.cap: list[int] = []
        self.cost: list[int] = []
        self.charge: dict[int, Callable[[int], int]] = {}
        self.drained = [0] * n

    def add_edge(self, u: int, v: int, cap: int, cost: int) -> int:
        """Add arc ``u → v``; returns its id (for :meth:`push` and :meth:`flow`)."""
        e = len(self.to)
        self.to += [v, u]
        self.cap += [cap, 0]
        self.cost += [cost, -cost]
        self.adj[u].append(e)
        self.adj[v].append(e + 1)
        return e

    def set_drain(self, u: int, charge: Callable[[int], int]) -> None:
        """Let ``u`` drain into the sink; the ``k+1``-th unit costs ``charge(k)`` (convex)."""
        self.charge[u] = charge

    def push(self, e: int, units: int = 1) -> None:
        """Put ``units`` of flow on arc ``e`` (warm start)."""
        if units > self.cap[e]:
            raise ValueError(f"arc {e}: pushing {units} over a residual capacity of {self.cap[e]}")
        self.cap[e] -= units
        self.cap[e ^ 1] += units

    def drain(self, u: int) -> None:
        """Drain one unit at ``u`` (warm start)."""
        self.drained[u] += 1

    def flow(self, e: int) -> int:
        """Units currently on arc ``e``."""
        return self.cap[e ^ 1]

    def _shortest(self, src: int) -> tuple[list, list[int]]:
        """Cheapest residual distances and incoming arcs from ``src`` (queue Bellman–Ford)."""
        to, cap, cost, adj = self.to, self.cap, self.cost, self.adj
        dist: list = [None] * self.n
        via = [-1] * self.n
        queued = [False] * self.n
        dist[src] = 0
        queue = deque([src])
        while queue:
            u = queue.popleft()
            queued[u] = False
            du = dist[u]
            for e in adj[u]:
                if cap[e] > 0:
                    v = to[e]
                    nd = du + cost[e]
                    if dist[v] is None or nd < dist[v]:
                        dist[v] = nd
                        via[v] = e
                        if not queued[v]:
                            queued[v] = True
                            queue.append(v)
        return dist, via

    def _flip(self, src: int, end: int, via: list[int]) -> None:
        v = end
        while v != src:
            e = via[v]
            self.cap[e] -= 1
            self.cap[e ^ 1] += 1
            v = self.to[e ^ 1]

    def augment(self, s: int, limit: int) -> int:
        """Route up to ``limit`` more units from ``s`` to the sink, cheapest first; returns how many."""
        routed = 0
        while routed < limit:
            dist, via = self._shortest(s)
            best, end = None, -1
            for u, fn in self.charge.items():
                if dist[u] is not None:
                    total = dist[u] + fn(self.drained[u])
                    if best is None or total < best:
                        best, end = total, u
            if end < 0:
                break
            self.drained[end] += 1
            self._flip(s, end, via)
            routed += 1
        return routed

    def recharge(self, charges: dict[int, Callable[[int], int]]) -> int:
        """Switch to new convex ``charges`` and cancel every negative cycle through the sink.

        A cycle un-drains one unit at ``b`` and drains it at ``b2`` along a cheapest residual
        path ``b → b2``. Valid because arc costs are unchanged, so the only negative cycles
        left pass through the sink; when none is left the flow is optimal for the new
        charges. Returns the number of cycles cancelled.
        """
        self.charge = dict(charges)
        cancelled = 0
        while True:
            for b in sorted(self.charge, key=lambda u: -self.drained[u]):
                if self.drained[b] == 0:
                    continue
                dist, via = self._shortest(b)
                refund = -self.charge[b](self.drained[b] - 1)
                best, end = 0, -1
                for u, fn in self.charge.items():
                    if u != b and dist[u] is not None:
                        total = refund + dist[u] + fn(self.drained[u])
                        if total < best:
                            best, end = total, u
                if end >= 0:
                    self.drained[b] -= 1
                    self.drained[end] += 1
                    self._flip(b, end, via)
                    cancelled += 1
                    break
            else:
                return cancelled
