"""The broker's consumer group API (KIP-848): ConsumerGroupHeartbeat and ConsumerGroupDescribe.

:class:`ConsumerGroupApi` is one of the parts of :class:`kafkasim.broker.broker.Broker`. It
owns a :class:`~kafkasim.coordinator.consumer_heartbeat.ConsumerGroupCoordinator`, built on
first use with

- the broker's clock;
- the ``group.consumer.*`` broker configs (:data:`kafkasim.config.BROKER_CONFIGS`, Kafka's
  names and defaults) and the server assignors ``group.consumer.assignors`` names;
- the broker's topics as its metadata image (name, topic id, partition count). The image is
  compared with the broker's topics before every heartbeat and tick and replaced
  (``update_topics``) when a topic was created, deleted or grew, as Kafka's
  ``onNewMetadataImage``.

Its timers (session and rebalance timeouts) run from :meth:`ConsumerGroupApi.tick_consumer_groups`,
which ``Broker.tick()`` calls and ``kafkasim serve`` runs on real time.

**A group id is one type** (Kafka's ``GroupMetadataManager``): the classic coordinator
(:mod:`kafkasim.broker.group_api`) and this one share the id space, and a group moves between
them as Kafka 4's does:

- **Online upgrade.** A consumer-protocol member joining (epoch 0) a classic group with
  members takes the group over with its members in it (each keeps its last assignment and
  speaks the classic protocol on), when ``group.consumer.migration.policy`` is ``upgrade`` or
  ``bidirectional`` (the default) and the group's protocol type is ``consumer``; otherwise
  GROUP_ID_NOT_FOUND "Group <id> is not a consumer group". An EMPTY classic group is replaced
  (its committed offsets stay).
- **Mixed groups.** A JoinGroup, SyncGroup, Heartbeat or LeaveGroup for a consumer group with
  members is answered by it (``classic_*_consumer_group``): the join at once with the member
  epoch as generation and no leader, the sync with the broker's assignment. A JoinGroup for an
  EMPTY consumer group deletes it and starts a classic group.
- **Online downgrade.** When the last consumer-protocol member leaves or is fenced and only
  classic members remain, the group goes back to the classic coordinator (``downgrade`` or
  ``bidirectional``), which starts a rebalance.
- Committed offsets of a consumer group live where every group's offsets live (the classic
  coordinator's offsets store over ``__consumer_offsets``): an OffsetCommit is checked here
  (Kafka's ``ConsumerGroup.validateOffsetCommit``) and then stored as a simple commit.

When ``group.coordinator.rebalance.protocols`` leaves out ``consumer`` every call here raises
UNSUPPORTED_VERSION (Kafka still advertises the APIs and answers them so: KafkaApis' gate).

Thread-safety: one lock (``_consumer_groups_lock``) serialises every call into the
coordinator, which is not thread-safe itself.
"""

from __future__ import annotations

import threading
import uuid
from typing import Iterable, Optional

from kafkasim.arguments import bad_arg
from kafkasim.assignors.server import server_assignors
from kafkasim.coordinator.consumer_group import ConsumerGroup, ConsumerGroupMember, TopicMetadata
from kafkasim.coordinator.consumer_heartbeat import ConsumerGroupCoordinator, Fenced
from kafkasim.coordinator.group import ClassicMember
from kafkasim.coordinator.offsets_store import OffsetsStore
from kafkasim.coordinator.consumer_group_records import changes, group_records, groups_from_records
from kafkasim.coordinator.consumer_group_config import CONSUMER_GROUP_CONFIGS, ConsumerGroupConfig
from kafkasim.errors import (
    CoordinatorNotAvailableError, GroupIdNotFoundError, IllegalGenerationError, InvalidGroupIdError,
    InvalidSessionTimeoutError, StaleMemberEpochError, UnknownMemberIdError, UnsupportedVersionError,
)
from kafkasim.protocol.offsets import OFFSETS_TOPIC
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from kafkasim.protocol.consumer_protocol import assignment_version, encode_assignment, subscription_bytes
from kafkasim.protocol.group import COMPLETE, NO_MEMBER_ID, JoinResult, SyncResult
from kafkasim.types import TopicPartition

from kafkasim.broker.core import BrokerCore

__all__ = ["ConsumerGroupApi", "CONSUMER", "CLASSIC"]

CONSUMER = "consumer"
"""Kafka's ``Group.GroupType.CONSUMER`` as ListGroups v5 names it."""
CLASSIC = "classic"
"""Kafka's ``Group.GroupType.CLASSIC`` as ListGroups v5 names it."""


class ConsumerGroupApi(BrokerCore):
    """ConsumerGroupHeartbeat, ConsumerGroupDescribe, and the consumer group checks of
    OffsetCommit/OffsetFetch (see the module docstring)."""

    # -- the coordinator -------------------------------------------------------------------

    @property
    def consumer_group_coordinator(self) -> ConsumerGroupCoordinator:
        """The KIP-848 coordinator, created on first use (see the module docstring)."""
        coord = self.__dict__.get("_consumer_group_coordinator")
        if coord is not None:
            return coord
        self._check_consumer_groups()
        with self._lock:
            self._check_consumer_groups()
            coord = self.__dict__.get("_consumer_group_coordinator")
            if coord is None:
                configs = {n: self.broker_config[n] for n in CONSUMER_GROUP_CONFIGS}
                assignors = server_assignors(configs["group.consumer.assignors"])
                configs["group.consumer.assignors"] = ",".join(a.name for a in assignors)
                coord = ConsumerGroupCoordinator(assignors, self.clock, configs=configs,
                                                 topics=self._consumer_topics_image())
                self._consumer_groups_lock = threading.Lock()
                self._consumer_group_clients: dict[tuple[str, str], tuple[str, str]] = {}
                self._consumer_topics_seen = self._topics_key()
                loaded = groups_from_records(self._replayed_consumer_group_records())
                coord.load_groups(group for group, _ in loaded.values())
                for gid, (_, clients) in loaded.items():
                    for mid, client in clients.items():
                        self._consumer_group_clients[(gid, mid)] = client
                self._consumer_group_coordinator = coord
        return coord

    def _replayed_consumer_group_records(self) -> dict:
        """The consumer group records in ``__consumer_offsets`` (latest per key): from the classic
        coordinator's replay when it has run, else from a replay of their own; none when the topic
        does not exist yet. Creates neither the topic nor the classic coordinator (whose member-id
        RNG is seeded when it is created), so a tick changes nothing of the classic groups."""
        classic = self.__dict__.get("_group_coordinator")
        if classic is not None:
            return classic.consumer_group_records
        if OFFSETS_TOPIC not in self._topics:
            return {}
        logs = [self.log(OFFSETS_TOPIC, p) for p in range(self._topics[OFFSETS_TOPIC].partitions)]
        return OffsetsStore(logs).load().consumer_group_records

    def _check_consumer_group_configs(self) -> None:
        """The ``group.consumer.*`` broker configs' cross-checks and assignor names (Kafka's
        messages): InvalidConfigurationError when the broker is opened, as Kafka fails at start."""
        configs = {n: self.broker_config[n] for n in CONSUMER_GROUP_CONFIGS}
        names = ",".join(a.name for a in server_assignors(configs["group.consumer.assignors"]))
        ConsumerGroupConfig.from_configs(dict(configs, **{"group.consumer.assignors": names}))

    def _check_consumer_groups(self) -> None:
        if self._closed:
            raise CoordinatorNotAvailableError(f"broker over {self.data_dir} is closed")
        if CONSUMER not in self.broker_config["group.coordinator.rebalance.protocols"].split(","):
            raise UnsupportedVersionError(
                "The consumer group protocol is not enabled (group.coordinator.rebalance.protocols="
                f"{self.broker_config['group.coordinator.rebalance.protocols']})")

    def _topics_key(self) -> tuple:
        with self._lock:
            return tuple(sorted((m.name, m.topic_id, m.partitions) for m in self._topics.values()))

    def _consumer_topics_image(self) -> list[TopicMetadata]:
        with self._lock:
            return [TopicMetadata(uuid.UUID(hex=m.topic_id), m.name, m.partitions)
                    for m in sorted(self._topics.values(), key=lambda m: m.name)]

    def _refresh_consumer_topics(self, coord: ConsumerGroupCoordinator) -> None:
        """Give the coordinator the broker's topics when they changed (caller holds the lock)."""
        key = self._topics_key()
        if key != self._consumer_topics_seen:
            coord.update_topics(self._consumer_topics_image())
            self._consumer_topics_seen = key

    def _has_offsets_topic(self) -> bool:
        with self._lock:
            return OFFSETS_TOPIC in self._topics

    def _consumer_protocol_enabled(self) -> bool:
        return CONSUMER in self.broker_config["group.coordinator.rebalance.protocols"].split(",")

    def _consumer_group_if_any(self, group_id: str) -> Optional[ConsumerGroup]:
        """The consumer group ``group_id`` if there is one (the coordinator is created, replaying
        ``__consumer_offsets``, only when that topic exists)."""
        coord = self.__dict__.get("_consumer_group_coordinator")
        if coord is None and not self._closed and self._has_offsets_topic() and self._consumer_protocol_enabled():
            coord = self.consumer_group_coordinator
        if coord is None:
            return None
        with self._consumer_groups_lock:
            return coord.find_group(group_id)

    # -- the API ---------------------------------------------------------------------------

    def consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest, *, client_id: str = "",
                                 client_host: str = "") -> ConsumerGroupHeartbeatResponse:
        """One ConsumerGroupHeartbeat (:meth:`ConsumerGroupCoordinator.heartbeat`); raises Kafka's
        errors. ``client_id``/``client_host`` are what ConsumerGroupDescribe shows for the member."""
        if not isinstance(request, ConsumerGroupHeartbeatRequest):
            raise bad_arg("request", request, "a ConsumerGroupHeartbeatRequest")
        if not isinstance(request.group_id, str):
            raise InvalidGroupIdError(f"invalid group id {request.group_id!r:.80}: a group id is a str")
        coord = self.consumer_group_coordinator
        self._check_consumer_groups()
        if coord.find_group(request.group_id) is None and self.is_share_group(request.group_id):
            raise GroupIdNotFoundError(f"Group {request.group_id} is not a consumer group")
        classic = self._classic_group_members(request.group_id)
        with self._consumer_groups_lock:
            self._refresh_consumer_topics(coord)
            before = self._group_records(coord, request.group_id)
            if classic and coord.find_group(request.group_id) is None:
                self._maybe_upgrade(coord, request, classic)
            response = coord.heartbeat(request)
            key = (request.group_id, response.member_id)
            if response.member_epoch < 0:
                self._consumer_group_clients.pop(key, None)
            else:
                self._consumer_group_clients[key] = (client_id or "", client_host or "")
            self._persist_group(coord, request.group_id, before)
            self._hand_back_downgraded(coord)
            return response

    # -- mixed groups: online upgrade and downgrade, classic members ------------------------

    def _classic_group_members(self, group_id: str) -> int:
        """How many members the classic group ``group_id`` has (0: none, or no classic group)."""
        classic = self.__dict__.get("_group_coordinator")
        if classic is None:
            return 0
        return len(classic.describe_group(group_id)["members"])

    def _maybe_upgrade(self, coord: ConsumerGroupCoordinator, request: ConsumerGroupHeartbeatRequest,
                       members: int) -> None:
        """A consumer-protocol member joins classic group ``group_id`` with members: the group
        becomes a consumer group with them in it when ``group.consumer.migration.policy``
        allows (Kafka's ``validateOnlineUpgrade``); otherwise GROUP_ID_NOT_FOUND, as Kafka."""
        gid = request.group_id
        classic = self.group_coordinator
        desc = classic.describe_group(gid)
        if request.member_epoch != 0 or not coord.can_upgrade(desc.get("protocol_type"), members):
            raise GroupIdNotFoundError(f"Group {gid} is not a consumer group")
        released = classic.release_for_upgrade(gid)
        if released is None:
            return
        _, generation, protocol, classic_members = released
        try:
            coord.upgrade(gid, generation, protocol, classic_members)
        except GroupIdNotFoundError:
            classic.adopt_downgraded(gid, generation, classic_members)   # it stays classic, rebalancing
            raise
        for m in classic_members:
            self._consumer_group_clients[(gid, m.member_id)] = (m.client_id, m.client_host)

    def _hand_back_downgraded(self, coord: ConsumerGroupCoordinator) -> None:
        """Give the groups whose last consumer-protocol member left back to the classic
        coordinator (their records were tombstoned by the caller's persist)."""
        for gid, generation, members in coord.take_downgraded():
            members = [ClassicMember(m.member_id, m.instance_id,
                                     *self._consumer_group_clients.pop((gid, m.member_id), ("", "")),
                                     m.session_timeout_ms, m.rebalance_timeout_ms, m.protocols, m.assignment)
                       for m in members]
            self.group_coordinator.adopt_downgraded(gid, generation, members)

    def classic_join_consumer_group(self, group_id: str, member_id: str, *, protocols, protocol_type: str = "consumer",
                                    session_timeout_ms: int = 45_000, rebalance_timeout_ms: int = 300_000,
                                    group_instance_id: Optional[str] = None, client_id: str = "",
                                    client_host: Optional[str] = None) -> Optional[JoinResult]:
        """A JoinGroup for ``group_id`` when it is a consumer group with members (Kafka 4's mixed
        groups: the member joins it, answered at once; no leader). None when it is not one (the
        classic coordinator answers); an empty consumer group is deleted first, as Kafka's
        ``maybeDeleteEmptyConsumerGroup``."""
        group = self._consumer_group_if_any(group_id)
        if group is None:
            return None
        if not group.members:
            self.delete_consumer_group(group_id)
            return None
        classic = self.group_coordinator
        if not classic.min_session_timeout_ms <= session_timeout_ms <= classic.max_session_timeout_ms:
            raise InvalidSessionTimeoutError(
                f"session_timeout_ms {session_timeout_ms} is outside the broker's range "
                f"[{classic.min_session_timeout_ms}, {classic.max_session_timeout_ms}]")
        coord = self.consumer_group_coordinator
        new_id = member_id == NO_MEMBER_ID
        if new_id:
            member_id = classic.new_member_id(client_id)
        wire_protocols = [(str(n), subscription_bytes(protocol_type, meta)) for n, meta in protocols]
        with self._consumer_groups_lock:
            self._refresh_consumer_topics(coord)
            before = self._group_records(coord, group_id)
            answer = coord.classic_join(group_id, member_id, new_member_id=new_id, instance_id=group_instance_id,
                                        protocol_type=protocol_type, protocols=wire_protocols,
                                        session_timeout_ms=session_timeout_ms,
                                        rebalance_timeout_ms=rebalance_timeout_ms)
            self._consumer_group_clients[(group_id, answer.member_id)] = (client_id or "", client_host or "")
            self._persist_group(coord, group_id, before)
        return JoinResult(COMPLETE, answer.member_id, answer.generation_id, answer.protocol_name, "", ())

    def classic_sync_consumer_group(self, group_id: str, member_id: str, generation_id: int, *,
                                    group_instance_id: Optional[str] = None) -> Optional[SyncResult]:
        """A SyncGroup for consumer group ``group_id``: the member's assigned partitions, as
        ``ConsumerProtocolAssignment`` bytes of its subscription's version too; None when
        ``group_id`` is not a consumer group."""
        if self._consumer_group_if_any(group_id) is None:
            return None
        coord = self.consumer_group_coordinator
        with self._consumer_groups_lock:
            partitions = coord.classic_sync(group_id, member_id, generation_id, instance_id=group_instance_id)
            member = coord.group(group_id).members.get(member_id) or coord.group(group_id).static_member(
                group_instance_id)
            meta = member.classic_member_metadata
        tps = tuple(TopicPartition(t, p) for t, p in partitions)
        return SyncResult(COMPLETE, tps, meta.protocol_name, generation_id,
                          encode_assignment(tps, assignment_version(meta.supported_protocols[0][1])))

    def classic_heartbeat_consumer_group(self, group_id: str, member_id: str, generation_id: int, *,
                                         group_instance_id: Optional[str] = None) -> bool:
        """A Heartbeat for consumer group ``group_id`` (REBALANCE_IN_PROGRESS: rejoin); False when
        ``group_id`` is not a consumer group."""
        if self._consumer_group_if_any(group_id) is None:
            return False
        coord = self.consumer_group_coordinator
        with self._consumer_groups_lock:
            coord.classic_heartbeat(group_id, member_id, generation_id, instance_id=group_instance_id)
        return True

    def classic_leave_consumer_group(self, group_id: str, member_id: str, *,
                                     group_instance_id: Optional[str] = None) -> bool:
        """A LeaveGroup member for consumer group ``group_id``; False when it is not one."""
        if self._consumer_group_if_any(group_id) is None:
            return False
        coord = self.consumer_group_coordinator
        with self._consumer_groups_lock:
            before = self._group_records(coord, group_id)
            left = coord.classic_leave(group_id, member_id, instance_id=group_instance_id)
            self._consumer_group_clients.pop((group_id, left), None)
            self._persist_group(coord, group_id, before)
        return True

    def _group_records(self, coord: ConsumerGroupCoordinator, group_id: str) -> dict:
        """The records that hold ``group_id`` now (caller holds ``_consumer_groups_lock``)."""
        caches = self.__dict__.setdefault("_consumer_group_record_caches", {})
        group = coord.find_group(group_id)
        if group is None:
            caches.pop(group_id, None)
            return {}
        return group_records(group, lambda mid: self._consumer_group_clients.get((group_id, mid), ("", "")),
                             caches.setdefault(group_id, {}))

    def _persist_group(self, coord: ConsumerGroupCoordinator, group_id: str, before: dict) -> None:
        """Append what changed in ``group_id`` since ``before`` to ``__consumer_offsets`` (Kafka's
        records, one batch) before the caller answers, as Kafka's coordinator does."""
        records = changes(before, self._group_records(coord, group_id))
        if records:
            self.group_coordinator.store_consumer_group_records(group_id, records)

    def consumer_group_describe(self, group_ids: Iterable[str]) -> list[dict]:
        """ConsumerGroupDescribe: per group id, its description (Kafka's ``asDescribedGroup``)
        or ``{"group_id", "error": GroupIdNotFoundError}`` when there is no consumer group by
        that id. Each member's ``assignment``/``target_assignment`` is
        ``[(topic id, topic name, [partitions])]``."""
        if isinstance(group_ids, (str, bytes)) or not isinstance(group_ids, Iterable):
            raise bad_arg("group_ids", group_ids, "an iterable of group ids")
        coord = self.consumer_group_coordinator
        self._check_consumer_groups()
        out = []
        with self._consumer_groups_lock:
            self._refresh_consumer_topics(coord)
            names = {t.topic_id: t.name for t in coord.topics.values()}
            for gid in group_ids:
                group = coord.find_group(gid)
                if group is None:
                    out.append({"group_id": gid, "error": GroupIdNotFoundError(f"Group {gid} not found.")})
                    continue
                assignor = group.preferred_server_assignor() or coord.assignor_names[0]
                out.append({
                    "group_id": gid, "error": None, "state": group.state.value, "group_epoch": group.group_epoch,
                    "assignment_epoch": group.assignment_epoch, "assignor_name": assignor,
                    "members": [self._describe_member(gid, m, group, names)
                                for _, m in sorted(group.members.items())]})
        return out

    def _describe_member(self, group_id: str, m: ConsumerGroupMember, group: ConsumerGroup,
                         names: dict) -> dict:
        client_id, client_host = self._consumer_group_clients.get((group_id, m.member_id), ("", ""))

        def rows(assignment) -> list[tuple[uuid.UUID, str, list[int]]]:
            return [(t, names.get(t, ""), sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0]))
                    if t in names]
        return {"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": client_id, "client_host": client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "member_type": "classic" if m.uses_classic_protocol else CONSUMER,
                "assignment": rows(m.assigned_partitions),
                "target_assignment": rows(group.target_assignment_of(m.member_id, m.instance_id))}

    def list_consumer_groups(self) -> list[dict]:
        """The consumer groups as ListGroups shows them: ``{"group_id", "protocol_type":
        "consumer", "state", "type": "consumer"}``, sorted by id."""
        coord = self.__dict__.get("_consumer_group_coordinator")
        if coord is None and not self._closed and self._has_offsets_topic() and self._consumer_protocol_enabled():
            coord = self.consumer_group_coordinator     # replays the groups a restart left
        if coord is None:
            return []
        with self._consumer_groups_lock:
            return [{"group_id": gid, "protocol_type": CONSUMER, "state": coord.find_group(gid).state.value,
                     "type": CONSUMER} for gid in coord.groups()]

    def _describe_consumer_group_as_classic(self, group_id: str, offsets: dict) -> dict:
        """A consumer group in the shape of ``Broker.describe_group`` (``type`` "consumer",
        ``generation`` and ``group_epoch`` the group epoch, ``assignment_epoch`` the target's,
        ``protocol`` the assignor; each member's ``member_epoch`` and ``target_assignment``), for
        the CLI and lag views."""
        desc = self.consumer_group_describe([group_id])[0]
        if desc["error"] is not None:
            raise desc["error"]
        return {"group_id": group_id, "type": CONSUMER, "state": desc["state"], "protocol_type": CONSUMER,
                "protocol": desc["assignor_name"], "generation": desc["group_epoch"], "leader": None,
                "group_epoch": desc["group_epoch"], "assignment_epoch": desc["assignment_epoch"],
                "members": [{"member_id": m["member_id"], "group_instance_id": m["instance_id"],
                             "client_id": m["client_id"], "client_host": m["client_host"],
                             "member_epoch": m["member_epoch"], "member_type": m["member_type"],
                             "assignment": [TopicPartition(name, p) for _, name, ps in m["assignment"] for p in ps],
                             "target_assignment": [TopicPartition(name, p) for _, name, ps in m["target_assignment"]
                                                   for p in ps],
                             "assignment_bytes": None, "metadata": None}
                            for m in desc["members"]],
                "offsets": offsets}

    def tick_consumer_groups(self) -> list[Fenced]:
        """Fence the consumer group members whose session or rebalance timeout ran out by the
        broker's clock; returns who was fenced (empty before the first consumer group call)."""
        coord = self.__dict__.get("_consumer_group_coordinator")
        if coord is None and not self._closed and self._has_offsets_topic() and self._consumer_protocol_enabled():
            coord = self.consumer_group_coordinator     # re-arms the sessions of replayed groups
        if coord is None or self._closed:
            return []
        with self._consumer_groups_lock:
            self._refresh_consumer_topics(coord)
            due = coord.next_deadline_ms()
            if due is None or due > self.clock.now_ms():
                return []            # nobody to fence: no records to compare
            before = {gid: self._group_records(coord, gid) for gid in coord.groups()}
            fenced = coord.tick()
            for f in fenced:
                self._consumer_group_clients.pop((f.group_id, f.member_id), None)
            for gid in sorted({f.group_id for f in fenced}):
                self._persist_group(coord, gid, before[gid])
            self._hand_back_downgraded(coord)
            return fenced

    # -- the one id space --------------------------------------------------------------------

    def delete_consumer_group(self, group_id: str) -> None:
        """Delete the Empty consumer group ``group_id`` (its offsets are the caller's)."""
        coord = self.consumer_group_coordinator
        with self._consumer_groups_lock:
            before = self._group_records(coord, group_id)
            coord.delete_group(group_id)
            self._persist_group(coord, group_id, before)

    def consumer_group_subscribed_topics(self, group_id: str) -> frozenset[str]:
        """The topics the members of consumer group ``group_id`` subscribe to (names and regex
        matches; Kafka's ``isSubscribedToTopic``); empty when there is no such group."""
        group = self._consumer_group_if_any(group_id)
        if group is None:
            return frozenset()
        with self._consumer_groups_lock:
            return frozenset(group.subscribed_topic_names())

    def is_consumer_group(self, group_id: str) -> bool:
        """Whether ``group_id`` names a consumer group (KIP-848) on this broker."""
        return self._consumer_group_if_any(group_id) is not None

    def validate_consumer_offset_commit(self, group_id: str, member_id: str, member_epoch: int,
                                        api_version: Optional[int] = None) -> bool:
        """Kafka's ``ConsumerGroup.validateOffsetCommit`` when ``group_id`` is a consumer group:
        returns False when it is not one (the classic rules apply), True when the commit may go
        on; raises UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION (OffsetCommit below v9 from a member),
        STALE_MEMBER_EPOCH."""
        group = self._consumer_group_if_any(group_id)
        if group is None:
            return False
        with self._consumer_groups_lock:
            if member_epoch < 0 and not group.members:
                return True
            member = group.members.get(member_id)
            if member is None:
                raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
            if api_version is not None and api_version < 9 and not member.uses_classic_protocol:
                raise UnsupportedVersionError("OffsetCommit version 9 or above must be used by members using the "
                                              "modern group protocol")
            _check_member_epoch(member_epoch, member.member_epoch, member.uses_classic_protocol)
        return True

    def validate_consumer_offset_fetch(self, group_id: str, member_id: Optional[str], member_epoch: int) -> None:
        """Kafka's ``ConsumerGroup.validateOffsetFetch`` when ``group_id`` is a consumer group and
        the request names a member (OffsetFetch v9): UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH."""
        if member_id is None and member_epoch < 0:
            return
        group = self._consumer_group_if_any(group_id)
        if group is None:
            return
        with self._consumer_groups_lock:
            member = group.members.get(member_id)
            if member is None:
                raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
            _check_member_epoch(member_epoch, member.member_epoch, member.uses_classic_protocol)


def _check_member_epoch(received: int, expected: int, classic: bool = False) -> None:
    """Kafka's ``ConsumerGroup.validateMemberEpoch``: a classic member's generation mismatch is
    ILLEGAL_GENERATION, a consumer-protocol member's STALE_MEMBER_EPOCH."""
    if received != expected:
        if classic:
            raise IllegalGenerationError(
                f"The received generation id {received} does not match the expected member epoch {expected}.")
        raise StaleMemberEpochError(
            f"The received member epoch {received} does not match the expected member epoch {expected}.")
