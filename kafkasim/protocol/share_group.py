"""Share groups' (KIP-932) request and answer shapes, shared by the broker and the clients.

Plain data, no I/O and no broker imports, so that the coordinator (``kafkasim.coordinator``),
the broker API (:mod:`kafkasim.broker.share_group_api`), the in-process share consumer and the
wire front end all speak the same types. Safe from any thread (frozen where shared).

- Acknowledge types (Kafka's ``AcknowledgeType`` plus the wire's GAP):
  :data:`ACKNOWLEDGE_GAP` 0 (an offset with no record), :data:`ACKNOWLEDGE_ACCEPT` 1,
  :data:`ACKNOWLEDGE_RELEASE` 2, :data:`ACKNOWLEDGE_REJECT` 3.
- Record states (Kafka's ``RecordState`` ids): :data:`AVAILABLE` 0, :data:`ACQUIRED` 1,
  :data:`ACKNOWLEDGED` 2, :data:`ARCHIVED` 4. Only 0, 2 and 4 are persisted.
- :class:`AcknowledgementBatch` is the wire's ``AcknowledgementBatch``: ``first_offset`` ..
  ``last_offset`` inclusive, with one acknowledge type for the whole range or one per offset.
- :class:`AcquiredRecords` is the wire's ``AcquiredRecords``: a range the member now holds,
  delivered ``delivery_count`` times (this delivery included).

Example::

    AcknowledgementBatch(10, 14, (ACKNOWLEDGE_ACCEPT,))             # accept 10..14
    AcknowledgementBatch(10, 12, (ACKNOWLEDGE_ACCEPT, ACKNOWLEDGE_GAP, ACKNOWLEDGE_RELEASE))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = [
    "ACKNOWLEDGE_GAP", "ACKNOWLEDGE_ACCEPT", "ACKNOWLEDGE_RELEASE", "ACKNOWLEDGE_REJECT", "ACKNOWLEDGE_TYPES",
    "AVAILABLE", "ACQUIRED", "ACKNOWLEDGED", "ARCHIVED", "RECORD_STATE_NAMES", "SHARE",
    "AcknowledgementBatch", "AcquiredRecords", "ShareFetchPartition", "ShareHeartbeatResult",
]

ACKNOWLEDGE_GAP, ACKNOWLEDGE_ACCEPT, ACKNOWLEDGE_RELEASE, ACKNOWLEDGE_REJECT = 0, 1, 2, 3
ACKNOWLEDGE_TYPES = {ACKNOWLEDGE_GAP: "GAP", ACKNOWLEDGE_ACCEPT: "ACCEPT", ACKNOWLEDGE_RELEASE: "RELEASE",
                     ACKNOWLEDGE_REJECT: "REJECT"}
"""Acknowledge type id -> Kafka's name."""

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
RECORD_STATE_NAMES = {AVAILABLE: "AVAILABLE", ACQUIRED: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED",
                      ARCHIVED: "ARCHIVED"}
"""Record state id -> Kafka's ``RecordState`` name."""

SHARE = "share"
"""Kafka's ``Group.GroupType.SHARE`` and the protocol type ListGroups shows for a share group."""


@dataclass(frozen=True)
class AcknowledgementBatch:
    """The wire's AcknowledgementBatch: offsets ``first_offset``..``last_offset`` (inclusive)
    acknowledged with ``acknowledge_types`` (one for the range, or one per offset)."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]

    def type_at(self, offset: int) -> int:
        """The acknowledge type of ``offset`` (which lies in this batch)."""
        if len(self.acknowledge_types) == 1:
            return self.acknowledge_types[0]
        return self.acknowledge_types[offset - self.first_offset]


@dataclass(frozen=True)
class AcquiredRecords:
    """The wire's AcquiredRecords: ``first_offset``..``last_offset`` acquired by the member,
    each delivered ``delivery_count`` times so far."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass
class ShareFetchPartition:
    """One partition of a ShareFetch answer. ``error`` is the partition's fetch error (None =
    ok), ``acknowledge_error`` the outcome of its acknowledgements (None = ok); ``records`` the
    whole stored v2 batches that hold the acquired offsets, as stored (b"" if none)."""

    error: Optional[Any] = None
    acknowledge_error: Optional[Any] = None
    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)
    high_watermark: int = -1
    log_start_offset: int = -1


@dataclass
class ShareHeartbeatResult:
    """A ShareGroupHeartbeat answer. ``assignment`` is topic name -> partitions, or None when
    unchanged since the member's last answer."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Optional[dict[str, list[int]]] = None
