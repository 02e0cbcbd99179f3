"""The hot-partition alert of ``kafkasim/server/alerts.yml``, evaluated on simulated scrapes.

``kafkasim serve --metrics-port`` exports ``kafkasim_partition_bytes_in_total`` per
partition (:class:`kafkasim.server.metrics.ServerMetrics`), and alerts.yml's
``KafkaHotPartition`` rule fires when, for ``for:`` long, some partition's
``rate(...[window])`` is more than ``threshold`` times its topic's average rate. A lab
runs on a MockClock with no Prometheus, so this module plays Prometheus deterministically:

1. :func:`hot_partition_rule` reads the window, the threshold and the ``for:`` duration
   from the shipped alerts.yml (so the lab follows the rule if the rule changes);
2. :class:`Scraper` takes the server's own exposition text (``ServerMetrics.exposition()``,
   what a scrape returns) at simulated scrape times and keeps the byte counters;
3. :meth:`Scraper.evaluate` computes, at every scrape, each topic's max partition rate over
   its average rate (rates as the counter's rise over the samples inside the window, per
   second), and the alert's state: pending while the condition holds, firing once it has
   held for ``for:``.

Simplifications (docs/differences.md): the rate is the slope between the first and last
sample in the window (Prometheus also extrapolates to the window's edges; the ratio of
two rates over the same samples is the same either way), and rules are evaluated at each
scrape. Pure computation over the samples given; not thread-safe (one lab, one thread).
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Optional

from kafkasim.errors import InvalidArgumentError

__all__ = ["hot_partition_rule", "Scraper", "parse_exposition"]

_SAMPLE = re.compile(r'^kafkasim_partition_bytes_in_total\{([^}]*)\}\s+([0-9.e+]+)\s*$')
_LABEL = re.compile(r'(\w+)="([^"]*)"')
_UNITS = {"s": 1, "m": 60, "h": 3600}


def _seconds(text: str) -> int:
    return int(text[:-1]) * _UNITS[text[-1]]


def hot_partition_rule(text: Optional[str] = None) -> dict:
    """``{"name", "window_s", "threshold", "for_s"}`` of KafkaHotPartition in alerts.yml."""
    if text is None:
        text = resources.files("kafkasim.server").joinpath("alerts.yml").read_text()
    block = text.split("- alert: KafkaHotPartition", 1)
    if len(block) != 2:
        raise InvalidArgumentError("alerts.yml has no KafkaHotPartition rule")
    rule = block[1].split("- alert:", 1)[0]
    window = re.search(r"rate\(kafkasim_partition_bytes_in_total\[(\d+[smh])\]\)", rule)
    threshold = re.search(r"\)\)\s*>\s*([0-9.]+)", rule)
    hold = re.search(r"\bfor:\s*(\d+[smh])", rule)
    if not (window and threshold and hold):
        raise InvalidArgumentError(
            "alerts.yml's KafkaHotPartition rule is not 'rate(bytes_in[W]) / avg by (topic) "
            "(rate(...)) > T' with a for: duration")
    return {"name": "KafkaHotPartition", "window_s": _seconds(window.group(1)),
            "threshold": float(threshold.group(1)), "for_s": _seconds(hold.group(1))}


def parse_exposition(text: str) -> dict[tuple[str, int], float]:
    """``{(topic, partition): bytes}`` from the Prometheus text of one scrape."""
    out = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m:
            labels = dict(_LABEL.findall(m.group(1)))
            out[(labels["topic"], int(labels["partition"]))] = float(m.group(2))
    return out


class Scraper:
    """Scrapes at simulated times and evaluates the rule per topic (see the module docstring)."""

    def __init__(self, rule: dict) -> None:
        self.rule = rule
        self.samples: list[tuple[float, dict[tuple[str, int], float]]] = []
        self._since: dict[str, Optional[float]] = {}
        self.fired_at: dict[str, float] = {}

    def scrape(self, t_s: float, exposition: str) -> None:
        """Record the scrape taken at ``t_s`` seconds (``ServerMetrics.exposition()`` text)."""
        self.samples.append((t_s, parse_exposition(exposition)))

    def evaluate(self, topic: str) -> Optional[float]:
        """At the latest scrape: ``topic``'s max rate / average rate (None: no rate yet);
        updates the alert's pending/firing state for ``topic``."""
        t_now, now = self.samples[-1]
        window = [(t, s) for t, s in self.samples if t > t_now - self.rule["window_s"]]
        (t0, first) = window[0]
        if t_now <= t0:
            return None
        rates = [(now.get(k, 0.0) - first.get(k, 0.0)) / (t_now - t0)
                 for k in sorted(now) if k[0] == topic]
        avg = sum(rates) / len(rates) if rates else 0.0
        ratio = max(rates) / avg if avg > 0 else None
        holds = ratio is not None and ratio > self.rule["threshold"]
        if not holds:
            self._since[topic] = None
        elif self._since.get(topic) is None:
            self._since[topic] = t_now                       # pending from now
        since = self._since.get(topic)
        if since is not None and t_now - since >= self.rule["for_s"] and topic not in self.fired_at:
            self.fired_at[topic] = t_now
        return ratio
