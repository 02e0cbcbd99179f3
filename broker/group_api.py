"""The broker's group API: thin delegations to the group coordinator.

:class:`GroupApi` is one of the parts of :class:`kafkasim.broker.broker.Broker` (state and
lookups in :class:`~kafkasim.broker.core.BrokerCore`). The coordinator
(:mod:`kafkasim.coordinator`) sits below the broker: the broker builds it on first use and
hands it the logs of the internal topic ``__consumer_offsets``. Each method is a thin
delegation; see :mod:`kafkasim.coordinator.coordinator` for the protocol and
docs/consumer-groups.md for the user view. The broker adds only what needs its topics:
an OffsetCommit names existing partitions, and a group description carries each
partition's log end offset and lag. Uses :meth:`~kafkasim.broker.admin.TopicAdmin.create_topic`
and :meth:`~kafkasim.broker.data.DataPlane.log` of the broker's other parts.

On a closed broker every group call raises
:class:`~kafkasim.errors.CoordinatorNotAvailableError` (the coordinator went with it).
Arguments are checked before the coordinator is asked: a group id that is not a string is
an :class:`~kafkasim.errors.InvalidGroupIdError` (Kafka's code, as the coordinator gives for
an empty one), a member id, generation, offsets or partitions of the wrong type an
InvalidArgumentError naming it (:mod:`kafkasim.arguments`).

Thread-safety: the coordinator is created once under the broker's lock; the coordinator
serialises its own calls.
"""

from __future__ import annotations

from typing import Optional

from collections.abc import Iterable

from kafkasim.arguments import bad_arg, check_arg, check_commit_offsets, check_topic_partition
from kafkasim.errors import (
    CoordinatorNotAvailableError, GroupIdNotFoundError, GroupSubscribedToTopicError, InvalidGroupIdError,
    UnknownTopicOrPartitionError,
)
from kafkasim.types import TopicPartition

from kafkasim.broker.core import BrokerCore

__all__ = ["GroupApi"]


class GroupApi(BrokerCore):
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit/Fetch, group admin (see module doc)."""

    @property
    def group_coordinator(self):
        """The group coordinator, created on first use: creates ``__consumer_offsets`` (50
        partitions, compacted, 100 MiB segments, as Kafka) if missing, then replays it."""
        coord = self.__dict__.get("_group_coordinator")
        if coord is not None:
            return coord
        from kafkasim.coordinator.coordinator import GroupCoordinator
        from kafkasim.protocol.offsets import (
            OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS, OFFSETS_TOPIC_PARTITIONS)
        from kafkasim.coordinator.offsets_store import OffsetsStore
        with self._lock:
            self._check_group_api()
            coord = self.__dict__.get("_group_coordinator")
            if coord is None:
                if OFFSETS_TOPIC not in self._topics:
                    self.create_topic(OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS, 1, OFFSETS_TOPIC_CONFIGS)
                n = self._topics[OFFSETS_TOPIC].partitions
                logs = [self.log(OFFSETS_TOPIC, p) for p in range(n)]
                coord = GroupCoordinator(OffsetsStore(logs), self.clock)
                self._group_coordinator = coord
        return coord

    def _check_group_api(self) -> None:
        if self._closed:
            raise CoordinatorNotAvailableError(f"broker over {self.data_dir} is closed")

    def _group_call(self, name: str, *args, **kwargs):
        self._check_group_api()
        return getattr(self.group_coordinator, name)(*args, **kwargs)

    @staticmethod
    def _check_member(group_id, member_id=None, generation_id=None) -> None:
        if not isinstance(group_id, str):
            raise InvalidGroupIdError(f"invalid group id {group_id!r:.80}: a group id is a str")
        if member_id is not None and not isinstance(member_id, str):
            check_arg("member_id", member_id, "str", what="a str")
        if generation_id is not None:
            check_arg("generation_id", generation_id, "int")

    def join_group(self, group_id: str, member_id: str = "", **kwargs):
        """JoinGroup: returns ``JoinResult`` (status pending/complete); see GroupCoordinator.
        For the id of a consumer group (KIP-848) with members, the member joins that group
        (Kafka 4's mixed groups: answered at once, no leader;
        :mod:`kafkasim.broker.consumer_group_api`)."""
        self._check_member(group_id, member_id)
        self._check_group_api()
        if self.is_share_group(group_id):
            raise GroupIdNotFoundError(f"Group {group_id} is not a classic group.")
        joined = self.classic_join_consumer_group(group_id, member_id, **kwargs)
        if joined is not None:
            return joined
        return self._group_call("join_group", group_id, member_id, **kwargs)

    def sync_group(self, group_id: str, member_id: str, generation_id: int,
                   assignments: Optional[dict] = None, **kwargs):
        """SyncGroup: the leader sends ``assignments``; every member gets a ``SyncResult``
        (in a consumer group, the broker's assignment: the leader's is not asked for)."""
        self._check_member(group_id, member_id, generation_id)
        self._check_group_api()
        synced = self.classic_sync_consumer_group(group_id, member_id, generation_id, **kwargs)
        if synced is not None:
            return synced
        return self._group_call("sync_group", group_id, member_id, generation_id, assignments, **kwargs)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, **kwargs) -> None:
        self._check_member(group_id, member_id, generation_id)
        self._check_group_api()
        if self.classic_heartbeat_consumer_group(group_id, member_id, generation_id, **kwargs):
            return None
        return self._group_call("heartbeat", group_id, member_id, generation_id, **kwargs)

    def leave_group(self, group_id: str, member_id: str = "", **kwargs) -> None:
        self._check_member(group_id, member_id)
        self._check_group_api()
        if self.classic_leave_consumer_group(group_id, member_id, **kwargs):
            return None
        return self._group_call("leave_group", group_id, member_id, **kwargs)

    def offset_commit(self, group_id: str, member_id: str, generation_id: int, offsets: dict,
                      *, api_version: Optional[int] = None, **kwargs) -> None:
        """OffsetCommit; every partition must exist (UnknownTopicOrPartitionError, as Kafka).
        ``offsets`` is ``{TopicPartition: OffsetAndMetadata | int}``; anything else is an
        InvalidArgumentError naming the bad entry (kafkasim.arguments.check_commit_offsets).
        For a consumer group (KIP-848) ``generation_id`` is the member epoch, checked as Kafka's
        ``ConsumerGroup.validateOffsetCommit`` (``api_version``: the OffsetCommit version over
        the wire, None in-process)."""
        self._check_member(group_id, member_id, generation_id)
        offsets = check_commit_offsets(offsets)
        for tp in offsets:
            self._partition(tp.topic, tp.partition)
        self._check_group_api()
        if self.validate_consumer_offset_commit(group_id, member_id, generation_id, api_version):
            # checked: stored as every group's offsets are (a commit without a generation)
            return self._group_call("offset_commit", group_id, "", -1, offsets)
        return self._group_call("offset_commit", group_id, member_id, generation_id, offsets, **kwargs)

    def offset_fetch(self, group_id: str, partitions=None, *, member_id: Optional[str] = None,
                     member_epoch: int = -1) -> dict:
        """OffsetFetch; ``member_id``/``member_epoch`` (OffsetFetch v9) are checked against a
        consumer group's member (UnknownMemberIdError, StaleMemberEpochError)."""
        self._check_member(group_id)
        self._check_group_api()
        self.validate_consumer_offset_fetch(group_id, member_id, member_epoch)
        if partitions is not None:
            if isinstance(partitions, (str, bytes, dict)) or not isinstance(partitions, Iterable):
                raise bad_arg("partitions", partitions, "an iterable of TopicPartition or None")
            partitions = [check_topic_partition(tp) for tp in partitions]
        return self._group_call("offset_fetch", group_id, partitions)

    def list_groups(self) -> list[dict]:
        """Every group: ``{"group_id", "protocol_type", "state", "type"}`` (``type``: classic,
        consumer or share, as ListGroups v5), sorted by id."""
        classic = [dict(g, type="classic") for g in self._group_call("list_groups")
                   if not self.is_consumer_group(g["group_id"])]
        return sorted(classic + self.list_consumer_groups() + self.list_share_groups(), key=lambda g: g["group_id"])

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups: an Empty group and its committed offsets (a consumer group too:
        NonEmptyGroupError while it has members, as Kafka's ``validateDeleteGroup``)."""
        self._check_member(group_id)
        if self.is_share_group(group_id):
            return self.delete_share_group(group_id)
        if self.is_consumer_group(group_id):
            self.delete_consumer_group(group_id)
            if not self._group_call("describe_group", group_id)["offsets"]:
                return None
        return self._group_call("delete_group", group_id)

    def delete_offsets(self, group_id: str, partitions) -> dict:
        """OffsetDelete: ``{partition: None or its error}`` for the group's committed offsets of
        ``partitions`` (GroupCoordinator.delete_offsets); a partition that does not exist gets
        UnknownTopicOrPartitionError and is not passed on (Kafka's ``KafkaApis`` checks the
        metadata first); GroupIdNotFoundError / NonEmptyGroupError for the whole request."""
        self._check_member(group_id)
        if isinstance(partitions, (str, bytes, dict)) or not isinstance(partitions, Iterable):
            raise bad_arg("partitions", partitions, "an iterable of TopicPartition")
        wanted = [check_topic_partition(tp) for tp in partitions]
        out: dict = {}
        known = []
        for tp in wanted:
            try:
                self._partition(tp.topic, tp.partition)
                known.append(tp)
            except UnknownTopicOrPartitionError as exc:
                out[tp] = exc
        if self.is_consumer_group(group_id):
            # a consumer group (KIP-848): the topics its members subscribe to keep their offsets
            subscribed = self.consumer_group_subscribed_topics(group_id)
            for tp in known:
                if tp.topic in subscribed:
                    out[tp] = GroupSubscribedToTopicError(
                        f"group {group_id!r} is subscribed to topic {tp.topic!r}: "
                        f"cannot delete the offset of {tp.topic}-{tp.partition}")
            known = [tp for tp in known if tp not in out]
            out.update(dict.fromkeys(known))
            if known and self._group_call("describe_group", group_id)["offsets"]:
                out.update(self._group_call("delete_offsets", group_id, known))
            return {tp: out[tp] for tp in wanted}
        out.update(self._group_call("delete_offsets", group_id, known))
        return {tp: out[tp] for tp in wanted}

    def describe_group(self, group_id: str) -> dict:
        """The coordinator's description plus, per partition with a committed offset or an
        owner, ``committed``, ``log_end_offset`` and ``lag`` (records)."""
        self._check_member(group_id)
        if self.is_share_group(group_id):
            desc = self._describe_share_group_as_classic(group_id)
            rows = []
            for tp, row in sorted(self.describe_share_group_offsets(group_id).items()):
                try:
                    leo = self._partition(tp.topic, tp.partition).log.log_end_offset
                except UnknownTopicOrPartitionError:
                    leo = None
                rows.append({"topic": tp.topic, "partition": tp.partition, "committed": None,
                             "start_offset": row["start_offset"], "log_end_offset": leo, "member_id": None,
                             "lag": row["lag"]})
            desc["partitions"] = rows
            return desc
        desc = self._group_call("describe_group", group_id)
        if self.is_consumer_group(group_id):
            desc = self._describe_consumer_group_as_classic(group_id, desc["offsets"])
        owners = {tuple(tp): m["member_id"] for m in desc["members"] for tp in m["assignment"]}
        rows = []
        for tp in sorted(set(desc["offsets"]) | {TopicPartition(*tp) for tp in owners}):
            om = desc["offsets"].get(tp)
            try:
                leo = self._partition(tp.topic, tp.partition).log.log_end_offset
            except UnknownTopicOrPartitionError:
                leo = None
            # a negative committed offset (a sentinel an admin tool committed) is "no offset",
            # as Kafka's admin client and kafka-consumer-groups show it
            committed = None if om is None or om.offset < 0 else om.offset
            rows.append({"topic": tp.topic, "partition": tp.partition, "committed": committed,
                         "log_end_offset": leo, "member_id": owners.get(tuple(tp)),
                         "lag": None if committed is None or leo is None else max(0, leo - committed)})
        desc["partitions"] = rows
        return desc

    def describe_groups(self, group_ids) -> list[dict]:
        if isinstance(group_ids, (str, bytes)) or not isinstance(group_ids, Iterable):
            raise bad_arg("group_ids", group_ids, "an iterable of group ids")
        return [self.describe_group(g) for g in group_ids]
