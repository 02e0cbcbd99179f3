"""A small integer min-cost flow (successive shortest paths), the engine of the planners.

``MinCostFlow(n)`` holds a directed graph on nodes ``0..n-1``; ``add_edge(u, v, cap,
cost)`` adds an arc and its residual twin. Callers may ``push`` an initial flow along
arcs (conserving flow at every inner node) as a warm start, then ``augment(s, t)``
routes more units along cheapest residual paths (queue-based Bellman–Ford, which
accepts negative costs) until no path is left or ``limit`` units were routed.

Invariant the caller must keep: the warm-start flow is a minimum-cost flow for its own
value (its residual graph has no negative cycle). Successive shortest paths then keeps
that invariant, so the result is a minimum-cost flow of the final value.
Deterministic: arcs are scanned in insertion order. Thread-safety: an instance is
mutable; use one per computation.
"""

from __future__ import annotations

from collections import deque

__all__ = ["MinCostFlow"]


class MinCostFlow:
    """Arcs in parallel arrays; arc ``e ^ 1`` is the residual twin of arc ``e``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.adj: list[list[int]] = [[] for _ in range(n)]
        self.to: list[int] = []
        self.cap: list[int] = []
        self.cost: list[int] = []

    def add_edge(self, u: int, v: int, cap: int, cost: int) -> int:
        """Add arc ``u → v``; returns its id (for :meth:`push` and :meth:`flow`)."""
        e = len(self.to)
        self.to += [v, u]
        self.cap += [cap, 0]
        self.cost += [cost, -cost]
        self.adj[u].append(e)
        self.adj[v].append(e + 1)
        return e

    def push(self, e: int, units: int = 1) -> None:
        """Put ``units`` of flow on arc ``e`` (warm start)."""
        if units > self.cap[e]:
            raise ValueError(f"arc {e}: pushing {units} over a residual capacity of {self.cap[e]}")
        self.cap[e] -= units
        self.cap[e ^ 1] += units

    def flow(self, e: int) -> int:
        """Units currently on arc ``e``."""
        return self.cap[e ^ 1]

    def augment(self, s: int, t: int, limit: int) -> int:
        """Route up to ``limit`` more units from ``s`` to ``t``, cheapest path first; returns how many."""
        routed = 0
        to, cap, cost, adj = self.to, self.cap, self.cost, self.adj
        while routed < limit:
            dist = [None] * self.n
            via = [-1] * self.n
            queued = [False] * self.n
            dist[s] = 0
            queue = deque([s])
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
            if dist[t] is None:
                break
            units, v = limit - routed, t
            while v != s:
                e = via[v]
                units = min(units, cap[e])
                v = to[e ^ 1]
            v = t
            while v != s:
                e = via[v]
                cap[e] -= units
                cap[e ^ 1] += units
                v = to[e ^ 1]
            routed += units
        return routed
