"""Injected faults for the live view: the recent fault events and the brokers' fault states.

Two sources, both files (the view reads files only):

- ``<data_dir>/.server-faults.json``: the last fault events of a running ``kafkasim serve``
  (written by ``kafkasim/server/fault_events.py``, which documents the format: per event
  ``time_ms``, ``rule_id``, ``broker``, ``api``, ``client_id``, ``action`` (``error``,
  ``latency``, ``drop-before``, ``drop-after``, ``throttle``), ``partitions``, ``error_code``,
  ``error_name``, ``latency_ms``). :func:`read_fault_events` keeps those of the last
  ``window_ms`` on the view's clock (``time_ms`` is wall time in ``kafkasim serve``), so an old
  file left by a crashed server draws nothing. :func:`fold_fault_events` groups them by what the
  page flashes: an event naming partitions flashes each of them; an event naming none (a rule
  with no topic or partition: the whole request) flashes its broker's box.
- ``meta/cluster.json``'s broker fields (``kafkasim/broker/controller.py``): ``isolated_from``,
  ``disk_full``, ``log_dir_offline``, ``delay_ms``; :func:`broker_fault_state` turns one
  broker's into the snapshot's fields (a broker whose ``state`` is ``isolated`` is isolated
  from ``both``: clients, peers and the controller).

Each flash target carries short labels, in this order: an error by Kafka's name with its
count (``NOT_LEADER_OR_FOLLOWER ×3``), the largest added latency (``+300 ms``, ``×n`` for
several), ``drop before``/``drop after`` and ``throttled``, each with ``×n`` when more than one.

Example::

    events = [{"time_ms": 1000, "broker": 0, "api": "Produce", "action": "error",
               "partitions": [{"topic": "t", "partition": 0}], "error_code": 6,
               "error_name": "NOT_LEADER_OR_FOLLOWER", ...}] * 3
    fold_fault_events(events)["partitions"]
    -> [{"topic": "t", "partition": 0, "count": 3, "last_ms": 1000, "apis": ["Produce"],
         "brokers": [0], "labels": ["NOT_LEADER_OR_FOLLOWER ×3"]}]

Pure functions over plain data (and one file read); thread-safe.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

__all__ = ["FAULTS_FILE", "FAULT_WINDOW_MS", "MAX_FAULT_EVENTS", "read_fault_events", "fold_fault_events",
           "broker_fault_state"]

FAULTS_FILE = ".server-faults.json"   # written by `kafkasim serve` (kafkasim/server/fault_events.py)
FAULT_WINDOW_MS = 5000
"""How long an injected fault stays in the snapshot (and its label on the page)."""
MAX_FAULT_EVENTS = 50
"""The snapshot's ``faults.events`` list keeps at most this many (newest first)."""
_ACTIONS = ("error", "latency", "drop-before", "drop-after", "throttle")


def _times(n: int) -> str:
    return f" ×{n}" if n > 1 else ""


def read_fault_events(data_dir: str, now_ms: int, window_ms: int, problems: list[str]) -> list[dict[str, Any]]:
    """The fault events of ``<data_dir>/.server-faults.json`` at most ``window_ms`` old on
    ``now_ms``, oldest first; [] when there is no file. A file that does not read as the format
    is named in ``problems`` (the server writes it whole, by rename: it is never half-written)."""
    path = os.path.join(data_dir, FAULTS_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        out = []
        for e in raw["events"]:
            if int(e["time_ms"]) < now_ms - window_ms:
                continue
            if e["action"] not in _ACTIONS:
                raise ValueError(f"action {e['action']!r}")
            out.append({"time_ms": int(e["time_ms"]), "rule_id": e.get("rule_id"),
                        "broker": None if e.get("broker") is None else int(e["broker"]),
                        "api": str(e["api"]), "client_id": e.get("client_id"), "action": e["action"],
                        "partitions": [{"topic": str(p["topic"]), "partition": int(p["partition"])}
                                       for p in e.get("partitions") or []],
                        "error_code": e.get("error_code"), "error_name": e.get("error_name"),
                        "latency_ms": int(e.get("latency_ms") or 0)})
        return out
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        problems.append(f"unreadable fault events {path}: {exc}")
        return []


def _labels(events: list[dict]) -> list[str]:
    """What the events did, shortest first by kind (module docstring)."""
    errors: dict[str, int] = {}
    latencies: list[int] = []
    counts = {"drop-before": 0, "drop-after": 0, "throttle": 0}
    for e in events:
        if e["action"] == "error":
            name = e["error_name"] or f"error {e['error_code']}"
            errors[name] = errors.get(name, 0) + 1
        elif e["action"] == "latency":
            latencies.append(e["latency_ms"])
        else:
            counts[e["action"]] += 1
    out = [f"{name}{_times(n)}" for name, n in errors.items()]
    if latencies:
        out.append(f"+{max(latencies)} ms{_times(len(latencies))}")
    for action, word in (("drop-before", "drop before"), ("drop-after", "drop after"), ("throttle", "throttled")):
        if counts[action]:
            out.append(f"{word}{_times(counts[action])}")
    return out


def _target(events: list[dict]) -> dict[str, Any]:
    return {"count": len(events), "last_ms": max(e["time_ms"] for e in events),
            "apis": sorted({e["api"] for e in events}),
            "brokers": sorted({e["broker"] for e in events if e["broker"] is not None}),
            "labels": _labels(events)}


def fold_fault_events(events: list[dict], window_ms: int = FAULT_WINDOW_MS) -> dict[str, Any]:
    """The snapshot's ``faults``: per partition named (``partitions``), per broker for the
    events naming none (``brokers``), and the events themselves newest first (``events``, at
    most :data:`MAX_FAULT_EVENTS`)."""
    by_partition: dict[tuple[str, int], list[dict]] = {}
    by_broker: dict[Optional[int], list[dict]] = {}
    for e in events:
        for p in e["partitions"]:
            by_partition.setdefault((p["topic"], p["partition"]), []).append(e)
        if not e["partitions"]:
            by_broker.setdefault(e["broker"], []).append(e)
    partitions = [{"topic": t, "partition": p, **_target(es)} for (t, p), es in sorted(by_partition.items())]
    brokers = []
    for b, es in sorted(by_broker.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        entry = _target(es)
        del entry["brokers"]
        brokers.append({"broker": b, **entry})
    return {"window_ms": window_ms, "partitions": partitions, "brokers": brokers,
            "events": list(reversed(events[-MAX_FAULT_EVENTS:]))}


def broker_fault_state(raw: Optional[dict]) -> dict[str, Any]:
    """One broker's fault fields for the snapshot from its ``meta/cluster.json`` entry (None:
    a one-broker data dir, which has none): ``isolated_from`` (None, ``clients``,
    ``followers`` or ``both``), ``disk_full``, ``log_dir_offline`` and ``slow_ms`` (the follower
    fetch delay of ``slow``, 0 when not slowed)."""
    if raw is None:
        return {"isolated_from": None, "disk_full": False, "log_dir_offline": False, "slow_ms": 0}
    isolated = "both" if raw.get("state") == "isolated" else raw.get("isolated_from")
    return {"isolated_from": None if isolated is None else str(isolated),
            "disk_full": bool(raw.get("disk_full")), "log_dir_offline": bool(raw.get("log_dir_offline")),
            "slow_ms": int(raw.get("delay_ms") or 0)}
