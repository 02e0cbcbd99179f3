"""``kafka-consumer-groups`` over the broker API: describe, reset offsets, delete.

Rows carry Kafka's columns (``GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
CONSUMER-ID HOST CLIENT-ID``, ``--members``, ``--state``), with ``None`` where Kafka
prints ``-``. Behaviour follows Kafka's ``ConsumerGroupCommand`` and
``GroupOffsetsResetter``:

- describing a group that does not exist (or is Dead) raises ``GroupIdNotFoundError``
  ("Consumer group 'g' does not exist.");
- offsets can only be reset while the group is inactive (Empty, Dead or unknown);
  otherwise ``NonEmptyGroupError`` with Kafka's sentence ("Assignments can only be reset if the group 'g' is inactive, but
  the current state is Stable.");
- a reset is a plan (``dry run``, the default) unless ``execute=True``; requested
  offsets outside ``[log start, log end]`` are clamped to it, as Kafka does;
  ``--shift-by`` needs a committed offset; ``--to-datetime`` falls back to the log end
  for a partition with no record at or after the time.

Pure functions of the broker's answers; thread-safe as the broker is.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Iterable, Optional, Sequence

from kafkasim.errors import GroupIdNotFoundError, InvalidArgumentError, NonEmptyGroupError, \
    UnknownTopicOrPartitionError
from kafkasim.types import OffsetAndMetadata, TopicPartition

__all__ = ["describe", "members", "state", "reset_offsets", "delete", "parse_datetime", "partitions_to_reset", "reset_target",
           "RESET_SCENARIOS", "INACTIVE_STATES"]

INACTIVE_STATES = ("Empty", "Dead")
RESET_SCENARIOS = ("to_earliest", "to_latest", "to_offset", "shift_by", "to_datetime", "to_current")
EARLIEST, LATEST = -2, -1


def _existing(broker, group: str) -> dict:
    desc = broker.describe_group(group)
    if desc["state"] == "Dead":
        raise GroupIdNotFoundError(f"Consumer group '{group}' does not exist.")
    return desc


def _host(member: dict) -> Optional[str]:
    return member.get("client_host")


def describe(broker, group: str) -> dict:
    """``--describe`` (offsets): ``{"group", "state", "rows": [...]}``; rows of assigned
    partitions first (members with most partitions first), then committed-only ones."""
    desc = _existing(broker, group)
    rows = []
    seen = set()
    committed = {(r["topic"], r["partition"]): r for r in desc["partitions"]}
    for m in sorted((m for m in desc["members"] if m["assignment"]), key=lambda m: -len(m["assignment"])):
        for t, p in sorted(tuple(tp) for tp in m["assignment"]):
            r = committed.get((t, p), {})
            seen.add((t, p))
            rows.append(_offset_row(broker, group, t, p, r.get("committed"), m["member_id"], _host(m),
                                    m["client_id"]))
    for (t, p), r in sorted(committed.items()):
        if (t, p) not in seen and r["committed"] is not None:
            rows.append(_offset_row(broker, group, t, p, r["committed"], None, None, None))
    return {"group": group, "state": desc["state"], "rows": rows}


def _offset_row(broker, group, topic, partition, current, consumer_id, host, client_id) -> dict:
    try:
        leo = broker.list_offsets(topic, partition, LATEST)[0]
    except UnknownTopicOrPartitionError:
        leo = None
    lag = None if current is None or leo is None else leo - current
    return {"group": group, "topic": topic, "partition": partition, "current_offset": current,
            "log_end_offset": leo, "lag": lag, "consumer_id": consumer_id, "host": host,
            "client_id": client_id}


def members(broker, group: str) -> dict:
    """``--describe --members``: one row per member with its partitions; for a consumer group
    (KIP-848) also what ``--verbose`` shows: ``current_epoch`` (the member epoch), ``target_epoch``
    (the group's target assignment epoch), ``target_assignment`` and ``upgraded`` (False for a
    classic-protocol member of a mixed group; all None for a classic group)."""
    desc = _existing(broker, group)
    consumer = desc.get("type") == "consumer"
    rows = [{"group": group, "consumer_id": m["member_id"], "group_instance_id": m["group_instance_id"],
             "host": _host(m), "client_id": m["client_id"], "partitions": len(m["assignment"]),
             "assignment": _assignment_text(m["assignment"]),
             "current_epoch": m.get("member_epoch") if consumer else None,
             "target_epoch": desc.get("assignment_epoch") if consumer else None,
             "target_assignment": _assignment_text(m.get("target_assignment") or ()) if consumer else None,
             # KIP-1099's UPGRADED: in a consumer group, whether the member speaks the consumer protocol
             "upgraded": m.get("member_type") == "consumer" if consumer else None}
            for m in desc["members"]]
    return {"group": group, "state": desc["state"], "type": desc.get("type", "classic"), "rows": rows}


def _assignment_text(tps) -> Optional[str]:
    by_topic: dict = {}
    for t, p in (tuple(tp) for tp in tps):
        by_topic.setdefault(t, []).append(p)
    return ";".join(sorted(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in by_topic.items())) or None


def state(broker, group: str) -> dict:
    """``--describe --state``: coordinator, assignment strategy, state, member count; for a
    consumer group (KIP-848) also ``group_epoch`` and ``target_assignment_epoch`` (``--verbose``)."""
    desc = _existing(broker, group)
    broker_id = getattr(broker, "broker_id", 0)
    consumer = desc.get("type") == "consumer"
    return {"group": group, "coordinator": f"({broker_id})", "coordinator_id": broker_id,
            "assignment_strategy": desc.get("protocol") or None, "state": desc["state"],
            "type": desc.get("type", "classic"),
            "group_epoch": desc.get("group_epoch") if consumer else None,
            "target_assignment_epoch": desc.get("assignment_epoch") if consumer else None,
            "members": len(desc["members"])}


def parse_datetime(text: str) -> int:
    """Kafka's ``--to-datetime`` format ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone
    (``Z``, ``+01:00``; none = UTC) → epoch ms; an error names the bad value."""
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?)(Z|[+-]\d{2}:?\d{2})?", text.strip())
    if not m:
        raise InvalidArgumentError(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm]")
    base, zone = m.groups()
    fmt = "%Y-%m-%dT%H:%M:%S.%f" if "." in base else "%Y-%m-%dT%H:%M:%S"
    try:
        dt = _dt.datetime.strptime(base, fmt)
    except ValueError as exc:
        raise InvalidArgumentError(f"--to-datetime {text!r}: {exc}") from None
    if zone in (None, "Z"):
        tz = _dt.timezone.utc
    else:
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        tz = _dt.timezone(sign * _dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    return int(dt.replace(tzinfo=tz).timestamp() * 1000)


def partitions_to_reset(broker, topics: Sequence[str], all_topics: bool, committed: dict) -> list[TopicPartition]:
    """The partitions a reset covers (Kafka's ``GroupOffsetsResetter.parseTopicPartitionsToReset``):
    ``--all-topics``: those of ``committed``; else each ``topic`` (every partition) or
    ``topic:0,2``; a partition that does not exist is an UnknownTopicOrPartitionError naming it."""
    if all_topics:
        return sorted(committed)
    if not topics:
        raise InvalidArgumentError("One of the reset scopes should be defined: --all-topics, --topic.")
    out: list[TopicPartition] = []
    for arg in topics:
        if ":" in arg:
            topic, _, parts = arg.partition(":")
            if not topic or not parts or ":" in parts:
                raise InvalidArgumentError(f"Invalid topic arg '{arg}', expected topic name and partitions")
            for p in parts.split(","):
                try:
                    out.append(TopicPartition(topic, int(p)))
                except ValueError:
                    raise InvalidArgumentError(f"Invalid partition '{p}' specified in topic arg '{arg}'") from None
        else:
            out.extend(TopicPartition(arg, p) for p in range(broker.partition_count(arg)))
    missing = []
    for tp in out:
        try:
            n = broker.partition_count(tp.topic)
        except UnknownTopicOrPartitionError:
            n = 0
        if not 0 <= tp.partition < n:
            missing.append(f"{tp.topic}-{tp.partition}")
    if missing:
        raise UnknownTopicOrPartitionError(f'The partitions "{",".join(missing)}" do not exist')
    return sorted(set(out))


def reset_target(broker, tp: TopicPartition, scenario: str, value, current) -> int:
    """The offset ``tp`` is reset to under ``scenario`` (kafka-consumer-groups.sh's and
    kafka-share-groups.sh's ``--to-*`` / ``--shift-by``), from the log's bounds and ``current``
    (the group's committed offset or share-partition start offset per partition, where it has
    one): clamped into the log as Kafka's ``checkOffsetsRange``; ``to_datetime`` past the last
    record is the log end."""
    start = broker.list_offsets(tp.topic, tp.partition, EARLIEST)[0]
    end = broker.list_offsets(tp.topic, tp.partition, LATEST)[0]
    if scenario == "to_earliest":
        return start
    if scenario == "to_latest":
        return end
    if scenario == "to_current":
        return current.get(tp, end)
    if scenario == "to_datetime":
        found = broker.list_offsets(tp.topic, tp.partition, int(value))[0]
        return end if found < 0 else found
    if scenario == "shift_by":
        if tp not in current:
            raise InvalidArgumentError(f"Cannot shift offset for partition {tp.topic}-{tp.partition} "
                                       f"since there is no current committed offset")
        return min(max(current[tp] + int(value), start), end)
    return min(max(int(value), start), end)


def reset_offsets(broker, group: str, *, scenario: str, value=None, topics: Sequence[str] = (),
                  all_topics: bool = False, execute: bool = False) -> dict:
    """Plan (and with ``execute``, commit) new offsets for ``group``; see the module docstring.

    ``scenario`` is one of :data:`RESET_SCENARIOS`; ``value`` is the offset
    (``to_offset``), the shift (``shift_by``) or the epoch ms (``to_datetime``).
    Returns ``{"group", "executed", "rows": [{"group", "topic", "partition", "new_offset"}]}``.
    """
    if scenario not in RESET_SCENARIOS:
        raise InvalidArgumentError(f"reset scenario {scenario!r}: must be one of {', '.join(RESET_SCENARIOS)}")
    desc = broker.describe_group(group)
    if desc["state"] not in INACTIVE_STATES:
        raise NonEmptyGroupError(f"Assignments can only be reset if the group '{group}' is inactive, "
                                 f"but the current state is {desc['state']}.")
    committed = {TopicPartition(r["topic"], r["partition"]): r["committed"]
                 for r in desc["partitions"] if r["committed"] is not None}
    plan = {tp: reset_target(broker, tp, scenario, value, committed)
            for tp in partitions_to_reset(broker, topics, all_topics, committed)}
    if execute and plan:
        broker.offset_commit(group, "", -1, {tp: OffsetAndMetadata(o) for tp, o in plan.items()})
    return {"group": group, "executed": bool(execute),
            "rows": [{"group": group, "topic": tp.topic, "partition": tp.partition, "new_offset": o}
                     for tp, o in sorted(plan.items())]}


def delete(broker, groups: Iterable[str]) -> dict:
    """``--delete``: ``{"deleted": [ids], "failed": {id: "ErrorName: message"}}``."""
    deleted, failed = [], {}
    for g in groups:
        try:
            broker.delete_group(g)
            deleted.append(g)
        except (GroupIdNotFoundError, NonEmptyGroupError) as exc:
            failed[g] = f"{type(exc).__name__}: {exc}"
    return {"deleted": deleted, "failed": failed}
