"""``kafka-share-groups`` over the broker API: list, describe, reset and delete share groups.

Rows carry the columns of Kafka 4.2's ``ShareGroupCommand``, with ``None`` where Kafka prints
``-``:

- ``--describe [--offsets]``: ``GROUP TOPIC PARTITION START-OFFSET LAG`` (``--verbose``:
  ``LEADER-EPOCH`` before START-OFFSET), one row per partition the group has state for,
  sorted by topic then partition; a partition not initialised yet has no start offset
  (``-``); a group without any: "Share group 'g' has no offset information.";
- ``--members``: ``GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT`` (``--verbose``:
  ``MEMBER-EPOCH`` before ASSIGNMENT), members sorted by id, the assignment as
  ``topic:0,1;other:2``;
- ``--state``: ``GROUP COORDINATOR (ID) STATE #MEMBERS`` (``--verbose``: ``GROUP-EPOCH
  ASSIGNMENT-EPOCH`` before #MEMBERS);
- ``--list [--state]``: ``GROUP STATE``.

Behaviour follows Kafka's ``ShareGroupCommand``: describing a group that is not a share group
(or does not exist) raises ``GroupIdNotFoundError`` ("Share group 'g' does not exist.");
offsets can be reset only while the group is Empty (or does not exist yet), else
``NonEmptyGroupError`` ("Share group 'g' is not empty."); a reset is a plan unless
``execute=True`` (Kafka's ``GroupOffsetsResetter``: ``--to-offset`` clamped to the log,
``--to-datetime`` falling back to the log end); deleting a group checks first that it is an
Empty share group (Kafka's pre-checks: "Group 'g' is not a share group.", "Share group 'g' is
not EMPTY.").

Pure functions of the broker's answers; thread-safe as the broker is.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from kafkasim.admin.groups import partitions_to_reset, reset_target
from kafkasim.errors import GroupIdNotFoundError, InvalidArgumentError, NonEmptyGroupError, UnsupportedVersionError
from kafkasim.types import TopicPartition

__all__ = ["list_groups", "describe", "members", "state", "reset_offsets", "delete", "delete_offsets",
           "SHARE_GROUP_STATES", "RESET_SCENARIOS"]

SHARE_GROUP_STATES = ("Empty", "Stable", "Dead", "Unknown")
"""Kafka's ``GroupState.groupStatesForType(SHARE)`` names (``--list --state`` filters on them)."""
RESET_SCENARIOS = ("to_earliest", "to_latest", "to_offset", "to_datetime", "to_current")


_ADMIN_METHODS = ("list_share_groups", "share_group_describe", "describe_share_group_offsets",
                  "alter_share_group_offsets", "delete_share_group_offsets", "delete_share_group")


def _check(broker) -> None:
    """UnsupportedVersionError naming the broker when it has no share group admin API (a server
    client that does not speak the share APIs yet)."""
    missing = [n for n in _ADMIN_METHODS if not callable(getattr(broker, n, None))]
    if missing:
        raise UnsupportedVersionError(f"{type(broker).__name__} does not serve share groups "
                                      f"(no {', '.join(missing)})")


def _state_of(d: dict) -> str:
    return d.get("group_state") or d.get("state") or "Unknown"


def _description(broker, group: str) -> dict:
    """ShareGroupDescribe of ``group``; GroupIdNotFoundError when it is not a share group."""
    _check(broker)
    (d,) = broker.share_group_describe([group])
    if d.get("error") is not None or _state_of(d) == "Dead":
        raise GroupIdNotFoundError(f"Share group '{group}' does not exist.")
    return d


def _partitions_of(assignment) -> list[TopicPartition]:
    """A member's assignment (``{topic: [partitions]}``, or ``[(topic id, topic, [partitions])]``
    as ConsumerGroupDescribe's) as sorted TopicPartitions."""
    if not assignment:
        return []
    if isinstance(assignment, dict):
        return sorted(TopicPartition(t, p) for t, ps in assignment.items() for p in ps)
    out = []
    for item in assignment:
        if isinstance(item, TopicPartition) or len(item) == 2:
            out.append(TopicPartition(item[0], item[1]))
        else:
            out.extend(TopicPartition(item[1], p) for p in item[2])
    return sorted(out)


def assignment_text(tps: Iterable[TopicPartition]) -> str:
    """Kafka's ``getAssignmentString``: ``orders:0,1;refunds:2`` (topics and partitions sorted)."""
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return ";".join(sorted(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in by_topic.items()))


def list_groups(broker, states: Optional[Iterable[str]] = None) -> list[dict]:
    """``--list``: ``[{"group", "state"}]`` sorted by id; ``states`` (Kafka's names, any case)
    keeps only groups in those states; an unknown state name is an InvalidArgumentError
    ("Invalid state list 'x'. Valid states are: ...")."""
    _check(broker)
    wanted = None
    if states is not None:
        by_lower = {s.lower(): s for s in SHARE_GROUP_STATES}
        given = [s.strip() for s in states if s.strip()]
        if any(s.lower() not in by_lower for s in given):
            raise InvalidArgumentError(f"Invalid state list '{','.join(given)}'. Valid states are: "
                                       + ", ".join(SHARE_GROUP_STATES))
        wanted = {by_lower[s.lower()] for s in given} or None
    rows = [{"group": g["group_id"], "state": g.get("group_state") or g.get("state") or "Unknown"}
            for g in broker.list_share_groups()]
    if wanted is not None:
        rows = [r for r in rows if r["state"] in wanted]
    return sorted(rows, key=lambda r: r["group"])


def describe(broker, group: str) -> dict:
    """``--describe`` (``--offsets``): ``{"group", "state", "rows": [{"group", "topic",
    "partition", "start_offset", "leader_epoch", "lag"}]}``; see the module docstring."""
    d = _description(broker, group)
    offsets = broker.describe_share_group_offsets(group)
    rows = []
    for tp in sorted(offsets):
        info = offsets[tp] or {}
        start = info.get("start_offset", -1)
        known = start is not None and start >= 0
        rows.append({"group": group, "topic": tp.topic, "partition": tp.partition,
                     "start_offset": start if known else None,
                     "leader_epoch": info.get("leader_epoch") if known and info.get("leader_epoch", -1) >= 0 else None,
                     "lag": info.get("lag") if known and info.get("lag", -1) is not None
                     and info.get("lag", -1) >= 0 else None})
    return {"group": group, "state": _state_of(d), "rows": rows}


def members(broker, group: str) -> dict:
    """``--members``: ``{"group", "state", "rows": [{"group", "consumer_id", "host",
    "client_id", "partitions", "member_epoch", "assignment"}]}``, members sorted by id."""
    d = _description(broker, group)
    rows = []
    for m in sorted(d.get("members", ()), key=lambda m: m["member_id"]):
        tps = _partitions_of(m.get("assignment"))
        rows.append({"group": group, "consumer_id": m["member_id"], "host": m.get("client_host") or "",
                     "client_id": m.get("client_id") or "", "partitions": len(tps),
                     "member_epoch": m.get("member_epoch"), "assignment": assignment_text(tps)})
    return {"group": group, "state": _state_of(d), "rows": rows}


def state(broker, group: str) -> dict:
    """``--state``: ``{"group", "coordinator", "coordinator_id", "state", "group_epoch",
    "assignment_epoch", "members"}``."""
    d = _description(broker, group)
    broker_id = getattr(broker, "broker_id", 0)
    return {"group": group, "coordinator": f"({broker_id})", "coordinator_id": broker_id, "state": _state_of(d),
            "group_epoch": d.get("group_epoch"), "assignment_epoch": d.get("assignment_epoch"),
            "members": len(d.get("members", ()))}


def reset_offsets(broker, group: str, *, scenario: str, value=None, topics: Sequence[str] = (),
                  all_topics: bool = False, execute: bool = False) -> dict:
    """Plan (and with ``execute``, apply with ``alter_share_group_offsets``) new start offsets
    for ``group``; see the module docstring. ``scenario``: one of :data:`RESET_SCENARIOS`;
    ``value``: the offset (``to_offset``) or the epoch ms (``to_datetime``). Returns
    ``{"group", "executed", "rows": [{"group", "topic", "partition", "new_offset"}]}``."""
    _check(broker)
    if scenario not in RESET_SCENARIOS:
        raise InvalidArgumentError(f"reset scenario {scenario!r}: must be one of {', '.join(RESET_SCENARIOS)}")
    (d,) = broker.share_group_describe([group])
    exists = d.get("error") is None
    if exists and _state_of(d) not in ("Empty", "Dead"):
        raise NonEmptyGroupError(f"Share group '{group}' is not empty.")
    current = {}
    if exists:
        current = {tp: info.get("start_offset", -1)
                   for tp, info in broker.describe_share_group_offsets(group).items()}
    started = {tp: o for tp, o in current.items() if o is not None and o >= 0}   # -1: not initialised
    plan = {tp: reset_target(broker, tp, scenario, value, started)
            for tp in partitions_to_reset(broker, topics, all_topics, current)}
    if execute and plan:
        errors = broker.alter_share_group_offsets(group, plan)
        failed = [f"{tp.topic}-{tp.partition}: {e}" for tp, e in sorted((errors or {}).items()) if e is not None]
        if failed:
            raise next(e for e in errors.values() if e is not None).__class__(
                f"Could not reset the offsets of share group '{group}': " + "; ".join(failed))
    return {"group": group, "executed": bool(execute),
            "rows": [{"group": group, "topic": tp.topic, "partition": tp.partition, "new_offset": o}
                     for tp, o in sorted(plan.items())]}


def delete(broker, groups: Iterable[str]) -> dict:
    """``--delete``: ``{"deleted": [ids], "failed": {id: "ErrorName: message"}}`` after Kafka's
    pre-checks (a share group, and Empty)."""
    _check(broker)
    listed = {g["group_id"]: g.get("group_state") or g.get("state") for g in broker.list_share_groups()}
    deleted, failed = [], {}
    for g in dict.fromkeys(groups):
        if g not in listed:
            failed[g] = f"GroupIdNotFoundError: Group '{g}' is not a share group."
            continue
        if listed[g] != "Empty":
            failed[g] = f"NonEmptyGroupError: Share group '{g}' is not EMPTY."
            continue
        try:
            broker.delete_share_group(g)
            deleted.append(g)
        except (GroupIdNotFoundError, NonEmptyGroupError) as exc:
            failed[g] = f"{type(exc).__name__}: {exc}"
    return {"deleted": deleted, "failed": failed}


def delete_offsets(broker, group: str, topics: Sequence[str]) -> dict:
    """``--delete-offsets``: ``{"group", "rows": [{"topic", "status"}]}`` (Kafka's ``TOPIC
    STATUS`` table: ``Successful`` or ``Error: <message>``), sorted by topic. A group that is
    not a share group raises GroupIdNotFoundError; a non-empty one NonEmptyGroupError."""
    _check(broker)
    if not topics:
        raise InvalidArgumentError("Option [delete-offsets] takes the following options: [topic], [group]")
    (d,) = broker.share_group_describe([group])
    if d.get("error") is not None:
        raise GroupIdNotFoundError(f"Share group '{group}' does not exist.")
    if _state_of(d) != "Empty":
        raise NonEmptyGroupError(f"Share group '{group}' is not empty.")
    result = broker.delete_share_group_offsets(group, list(dict.fromkeys(topics)))
    return {"group": group,
            "rows": [{"topic": t, "status": "Successful" if e is None else f"Error: {e}"}
                     for t, e in sorted(result.items())]}
