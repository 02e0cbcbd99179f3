"""coordinator: the group coordinator (classic protocol), its offsets store, and assignors.

Modules: ``offsets_format`` (pure codec of ``__consumer_offsets`` records, importable by
spark_jobs), ``group`` (group/member data), ``offsets_store`` (persistence on
storage logs), ``coordinator`` (the state machine; its docstring is the protocol),
``assignors/`` (pure assignment functions). Nothing here imports broker.
"""

from coordinator.coordinator import (
    COMPLETE, NO_GENERATION, NO_MEMBER_ID, PENDING, GroupCoordinator, GroupState, JoinResult,
    SyncResult,
)
from coordinator.offsets_store import OffsetsStore

__all__ = ["GroupCoordinator", "GroupState", "JoinResult", "SyncResult", "OffsetsStore",
           "PENDING", "COMPLETE", "NO_GENERATION", "NO_MEMBER_ID"]
