"""The one exception hierarchy of kafkasim, named after Kafka's error codes.

Every exception raised on purpose by kafkasim derives from :class:`KafkaSimError`,
so ``except KafkaSimError`` catches everything of ours::

    KafkaSimError                      root; never raised itself
    ├── BrokerResponseError            an error Kafka's protocol has a code for (``errno``)
    │   ├── OffsetOutOfRangeError (1)            ├── InvalidTimestampError (32)
    │   ├── CorruptRecordError (2)               ├── UnsupportedVersionError (35)
    │   ├── UnknownTopicOrPartitionError (3)     ├── TopicAlreadyExistsError (36)
    │   ├── LeaderNotAvailableError (5)          ├── InvalidPartitionsError (37)
    │   ├── NotLeaderOrFollowerError (6)         ├── InvalidReplicationFactorError (38)
    │   ├── RequestTimedOutError (7)             ├── InvalidReplicaAssignmentError (39)
    │   ├── BrokerNotAvailableError (8) *        ├── InvalidConfigurationError (40)
    │   ├── ReplicaNotAvailableError (9)         ├── InvalidRequestError (42)
    │   ├── RecordTooLargeError (10)             ├── OutOfOrderSequenceNumberError (45)
    │   ├── NetworkError (13)                    ├── DuplicateSequenceNumberError (46)
    │   ├── CoordinatorLoadInProgressError (14)  ├── InvalidProducerEpochError (47)
    │   │                                        ├── InvalidTxnStateError (48)
    │   │                                        ├── InvalidProducerIdMappingError (49)
    │   │                                        ├── InvalidTransactionTimeoutError (50)
    │   │                                        ├── ConcurrentTransactionsError (51)
    │   │                                        ├── TransactionCoordinatorFencedError (52)
    │   │                                        ├── TransactionalIdAuthorizationFailedError (53)
    │   │                                        ├── OperationNotAttemptedError (55)
    │   ├── CoordinatorNotAvailableError (15)    ├── KafkaStorageError (56)
    │   │                                        │   └── OldLogFormatError
    │   ├── NotCoordinatorError (16)             ├── UnknownProducerIdError (59)
    │   ├── InvalidTopicError (17)               ├── NonEmptyGroupError (68)
    │   ├── RecordBatchTooLargeError (18)        ├── GroupIdNotFoundError (69)
    │   ├── NotEnoughReplicasError (19)          ├── FetchSessionIdNotFoundError (70)
    │   ├── NotEnoughReplicasAfterAppendError (20) ├── InvalidFetchSessionEpochError (71)
    │   │                                        ├── FencedLeaderEpochError (74)
    │   ├── InvalidRequiredAcksError (21)        ├── UnknownLeaderEpochError (75)
    │   ├── IllegalGenerationError (22)          ├── MemberIdRequiredError (79)
    │   ├── InconsistentGroupProtocolError (23)  ├── GroupMaxSizeReachedError (81)
    │   ├── InvalidGroupIdError (24)             ├── FencedInstanceIdError (82)
    │   ├── UnknownMemberIdError (25)            ├── InvalidRecordError (87)
    │   ├── InvalidSessionTimeoutError (26)      ├── PreferredLeaderNotAvailableError (80)
    │   ├── RebalanceInProgressError (27)        ├── EligibleLeadersNotAvailableError (83)
    │   ├── PolicyViolationError (44)            ├── ElectionNotNeededError (84)
    │   │                                        ├── NoReassignmentInProgressError (85)
    │   │                                        ├── GroupSubscribedToTopicError (86)
    │   │                                        ├── ProducerFencedError (90)
    │   │                                        ├── InvalidUpdateVersionError (95)
    │   │                                        ├── TransactionalIdNotFoundError (105)
    │   │                                        ├── FencedMemberEpochError (110)
    │   │                                        ├── UnreleasedInstanceIdError (111)
    │   │                                        ├── UnsupportedAssignorError (112)
    │   │                                        ├── StaleMemberEpochError (113)
    │   │                                        ├── MismatchedEndpointTypeError (114)
    │   │                                        ├── TransactionAbortableError (120)
    │   │                                        ├── InvalidRecordStateError (121)
    │   │                                        ├── ShareSessionNotFoundError (122)
    │   │                                        ├── InvalidShareSessionEpochError (123)
    │   │                                        ├── InvalidRegularExpressionError (128)
    │   │                                        ├── ShareSessionLimitReachedError (133)
    │   │                                        └── UnknownServerError (-1)
    └── client-side errors (Kafka has them only in its clients, no wire code)
        ├── CommitFailedError          a commit after the member lost its partitions
        ├── NoOffsetForPartitionError  auto_offset_reset=none and no committed offset
        ├── IllegalStateError          an API called in a state that forbids it
        ├── TransactionAbortedError    a record not yet sent when its failed transaction was aborted
        ├── KafkaTimeoutError          a bounded wait ran out
        ├── InvalidArgumentError       a bad argument with no Kafka code (CLI input, options)
        ├── SerializationError         a key or value not bytes and no serializer (also a TypeError)
        ├── RecordDeserializationError a record's value does not decode in its stated format (names the offset)
        └── ClaimFailedError           a lab's run did not show what the lab claims

    * BrokerNotAvailableError is also an IllegalStateError: calling a closed Broker is the
      caller's state error, and code that caught IllegalStateError keeps catching it.

Each class carries ``errno`` (Kafka's code, or ``None``), ``retriable`` and a one-line
``description``; :func:`for_code` maps a code back to its class.  Messages always name
the bad value.  Lower-layer errors (``OSError``, msgpack's) are translated at the
boundary with ``raise ... from exc``.  Pure data; thread-safe.
"""

from __future__ import annotations

__all__ = [
    "KafkaSimError", "BrokerResponseError", "for_code", "error_classes", "KAFKA_ERROR_NAMES", "ClaimFailedError",
    "TransactionalIdAuthorizationFailedError",
    "UnknownServerError", "OffsetOutOfRangeError", "CorruptRecordError",
    "UnknownTopicOrPartitionError", "BrokerNotAvailableError", "RecordTooLargeError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError", "NotCoordinatorError", "InvalidTopicError",
    "RecordBatchTooLargeError", "InvalidRequiredAcksError", "IllegalGenerationError",
    "InconsistentGroupProtocolError", "InvalidGroupIdError", "UnknownMemberIdError",
    "InvalidSessionTimeoutError", "RebalanceInProgressError", "InvalidTimestampError",
    "TopicAlreadyExistsError", "InvalidPartitionsError", "InvalidReplicationFactorError",
    "InvalidReplicaAssignmentError", "InvalidConfigurationError", "InvalidRequestError",
    "OutOfOrderSequenceNumberError", "DuplicateSequenceNumberError",
    "InvalidProducerEpochError", "KafkaStorageError", "OldLogFormatError", "UnknownProducerIdError",
    "NonEmptyGroupError", "GroupIdNotFoundError", "MemberIdRequiredError",
    "GroupMaxSizeReachedError", "FencedInstanceIdError", "InvalidRecordError",
    "CommitFailedError", "NoOffsetForPartitionError", "IllegalStateError", "TransactionAbortedError",
    "KafkaTimeoutError", "InvalidArgumentError", "SerializationError", "RecordDeserializationError",
    "NetworkError", "UnsupportedVersionError",
    "FetchSessionIdNotFoundError", "InvalidFetchSessionEpochError", "LeaderNotAvailableError", "NotLeaderOrFollowerError",
    "RequestTimedOutError", "ReplicaNotAvailableError", "NotEnoughReplicasError",
    "NotEnoughReplicasAfterAppendError", "FencedLeaderEpochError", "UnknownLeaderEpochError",
    "PolicyViolationError", "PreferredLeaderNotAvailableError", "EligibleLeadersNotAvailableError",
    "ElectionNotNeededError", "NoReassignmentInProgressError", "GroupSubscribedToTopicError",
    "MismatchedEndpointTypeError",
    "InvalidTxnStateError", "InvalidProducerIdMappingError", "InvalidTransactionTimeoutError",
    "ConcurrentTransactionsError", "TransactionCoordinatorFencedError", "OperationNotAttemptedError",
    "ProducerFencedError", "TransactionalIdNotFoundError", "TransactionAbortableError",
    "InvalidUpdateVersionError",
    "FencedMemberEpochError", "UnreleasedInstanceIdError", "UnsupportedAssignorError",
    "StaleMemberEpochError", "InvalidRegularExpressionError",
    "InvalidRecordStateError", "ShareSessionNotFoundError", "InvalidShareSessionEpochError",
    "ShareSessionLimitReachedError",
]


class KafkaSimError(Exception):
    """Root of every error kafkasim raises on purpose."""

    errno: int | None = None
    retriable: bool = False
    description: str = "kafkasim error"


class BrokerResponseError(KafkaSimError):
    """An error that Kafka's protocol reports with an error code (``errno``)."""


_BY_CODE: dict[int, type[BrokerResponseError]] = {}


def _code(errno: int, description: str, retriable: bool = False):
    def register(cls: type[BrokerResponseError]) -> type[BrokerResponseError]:
        cls.errno, cls.description, cls.retriable = errno, description, retriable
        if errno in _BY_CODE:
            raise AssertionError(f"error code {errno} registered twice")
        _BY_CODE[errno] = cls
        return cls
    return register


def for_code(errno: int) -> type[BrokerResponseError]:
    """Return the class for Kafka error code ``errno`` (``UnknownServerError`` if unknown)."""
    return _BY_CODE.get(errno, UnknownServerError)


def error_classes() -> list[type[BrokerResponseError]]:
    """Every class that carries a Kafka error code, by code."""
    return [cls for _, cls in sorted(_BY_CODE.items())]


KAFKA_ERROR_NAMES: dict[int, str] = {
    -1: 'UNKNOWN_SERVER_ERROR', 1: 'OFFSET_OUT_OF_RANGE', 2: 'CORRUPT_MESSAGE',
    3: 'UNKNOWN_TOPIC_OR_PARTITION', 5: 'LEADER_NOT_AVAILABLE', 6: 'NOT_LEADER_OR_FOLLOWER',
    7: 'REQUEST_TIMED_OUT', 8: 'BROKER_NOT_AVAILABLE', 9: 'REPLICA_NOT_AVAILABLE', 10: 'MESSAGE_TOO_LARGE',
    13: 'NETWORK_EXCEPTION', 14: 'COORDINATOR_LOAD_IN_PROGRESS', 15: 'COORDINATOR_NOT_AVAILABLE',
    16: 'NOT_COORDINATOR', 17: 'INVALID_TOPIC_EXCEPTION', 18: 'RECORD_LIST_TOO_LARGE',
    19: 'NOT_ENOUGH_REPLICAS', 20: 'NOT_ENOUGH_REPLICAS_AFTER_APPEND', 21: 'INVALID_REQUIRED_ACKS',
    22: 'ILLEGAL_GENERATION', 23: 'INCONSISTENT_GROUP_PROTOCOL', 24: 'INVALID_GROUP_ID',
    25: 'UNKNOWN_MEMBER_ID', 26: 'INVALID_SESSION_TIMEOUT', 27: 'REBALANCE_IN_PROGRESS',
    32: 'INVALID_TIMESTAMP', 35: 'UNSUPPORTED_VERSION', 36: 'TOPIC_ALREADY_EXISTS', 37: 'INVALID_PARTITIONS',
    38: 'INVALID_REPLICATION_FACTOR', 39: 'INVALID_REPLICA_ASSIGNMENT', 40: 'INVALID_CONFIG',
    42: 'INVALID_REQUEST', 44: 'POLICY_VIOLATION', 45: 'OUT_OF_ORDER_SEQUENCE_NUMBER',
    46: 'DUPLICATE_SEQUENCE_NUMBER', 47: 'INVALID_PRODUCER_EPOCH', 48: 'INVALID_TXN_STATE',
    49: 'INVALID_PRODUCER_ID_MAPPING', 50: 'INVALID_TRANSACTION_TIMEOUT', 51: 'CONCURRENT_TRANSACTIONS',
    52: 'TRANSACTION_COORDINATOR_FENCED', 53: 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED',
    55: 'OPERATION_NOT_ATTEMPTED', 56: 'KAFKA_STORAGE_ERROR', 59: 'UNKNOWN_PRODUCER_ID',
    68: 'NON_EMPTY_GROUP', 69: 'GROUP_ID_NOT_FOUND', 70: 'FETCH_SESSION_ID_NOT_FOUND',
    71: 'INVALID_FETCH_SESSION_EPOCH', 74: 'FENCED_LEADER_EPOCH', 75: 'UNKNOWN_LEADER_EPOCH',
    76: 'UNSUPPORTED_COMPRESSION_TYPE', 79: 'MEMBER_ID_REQUIRED', 80: 'PREFERRED_LEADER_NOT_AVAILABLE',
    81: 'GROUP_MAX_SIZE_REACHED', 82: 'FENCED_INSTANCE_ID', 83: 'ELIGIBLE_LEADERS_NOT_AVAILABLE',
    84: 'ELECTION_NOT_NEEDED', 85: 'NO_REASSIGNMENT_IN_PROGRESS', 86: 'GROUP_SUBSCRIBED_TO_TOPIC',
    87: 'INVALID_RECORD', 90: 'PRODUCER_FENCED', 95: 'INVALID_UPDATE_VERSION',
    105: 'TRANSACTIONAL_ID_NOT_FOUND', 110: 'FENCED_MEMBER_EPOCH', 111: 'UNRELEASED_INSTANCE_ID',
    112: 'UNSUPPORTED_ASSIGNOR', 113: 'STALE_MEMBER_EPOCH', 114: 'MISMATCHED_ENDPOINT_TYPE',
    120: 'TRANSACTION_ABORTABLE', 121: 'INVALID_RECORD_STATE', 122: 'SHARE_SESSION_NOT_FOUND',
    123: 'INVALID_SHARE_SESSION_EPOCH', 128: 'INVALID_REGULAR_EXPRESSION', 133: 'SHARE_SESSION_LIMIT_REACHED',
}
"""Kafka's ``Errors`` enum name of every code kafkasim raises (``NOT_LEADER_OR_FOLLOWER``):
what tools and the fault rules (:mod:`kafkasim.faults`) call them."""


@_code(-1, "The server experienced an unexpected error when processing the request.")
class UnknownServerError(BrokerResponseError):
    """Raised for an unexpected internal failure that has no better code."""


@_code(1, "The requested offset is not within the range of offsets maintained by the server.")
class OffsetOutOfRangeError(BrokerResponseError):
    """Raised when a read or seek names an offset below the log start or above the log end."""


@_code(2, "This message has failed its CRC checksum, exceeds the valid size, or is otherwise corrupt.", True)
class CorruptRecordError(BrokerResponseError):
    """Raised when a batch fails its length or CRC check; the message names file and position."""


@_code(3, "This server does not host this topic-partition.", True)
class UnknownTopicOrPartitionError(BrokerResponseError):
    """Raised when a request names a topic or partition that does not exist."""


@_code(5, "There is no leader for this topic-partition as we are in the middle of a leadership election.", True)
class LeaderNotAvailableError(BrokerResponseError):
    """Raised when a partition has no leader (offline: no live ISR member, unclean election off)."""


@_code(6, "For requests intended only for the leader, this error indicates that the broker is not the "
          "current leader. For requests intended for any replica, this error indicates that the broker "
          "is not a replica of the topic partition.", True)
class NotLeaderOrFollowerError(BrokerResponseError):
    """Raised when a produce or fetch reaches a broker that is not the partition's leader (or replica)."""


@_code(7, "The request timed out.", True)
class RequestTimedOutError(BrokerResponseError):
    """Raised when an ``acks=all`` produce waited the request timeout for the ISR to catch up."""


@_code(9, "The replica is not available for the requested topic-partition.", True)
class ReplicaNotAvailableError(BrokerResponseError):
    """Raised when a fetch names a replica that is not hosted or not reachable (stopped, isolated)."""


@_code(19, "Messages are rejected since there are fewer in-sync replicas than required.", True)
class NotEnoughReplicasError(BrokerResponseError):
    """Raised before an ``acks=all`` append when the ISR is smaller than ``min.insync.replicas``."""


@_code(20, "Messages are written to the log, but to fewer in-sync replicas than required.", True)
class NotEnoughReplicasAfterAppendError(BrokerResponseError):
    """Raised after an ``acks=all`` append when the ISR shrank below ``min.insync.replicas`` meanwhile."""


@_code(74, "The leader epoch in the request is older than the epoch on the broker.", True)
class FencedLeaderEpochError(BrokerResponseError):
    """Raised when a request carries a leader epoch older than the partition's current one."""


@_code(75, "The leader epoch in the request is newer than the epoch on the broker.", True)
class UnknownLeaderEpochError(BrokerResponseError):
    """Raised when a request carries a leader epoch newer than the partition's current one."""


@_code(10, "The request included a message larger than the max message size the server will accept.")
class RecordTooLargeError(BrokerResponseError):
    """Raised when a record or batch exceeds ``max.message.bytes`` or ``max_request_size``."""


@_code(14, "The coordinator is loading and hence can't process requests.", True)
class CoordinatorLoadInProgressError(BrokerResponseError):
    """Raised while the group coordinator is still loading its state from the offsets topic."""


@_code(15, "The coordinator is not available.", True)
class CoordinatorNotAvailableError(BrokerResponseError):
    """Raised when no group coordinator is running (e.g. the broker is closed)."""


@_code(16, "This is not the correct coordinator.", True)
class NotCoordinatorError(BrokerResponseError):
    """Raised when a group request reaches a broker that does not coordinate the group."""


@_code(17, "The request attempted to perform an operation on an invalid topic.")
class InvalidTopicError(BrokerResponseError):
    """Raised for a topic name that breaks Kafka's rules (charset, length, '.' or '..')."""


@_code(18, "The request included message batch larger than the configured segment size on the server.")
class RecordBatchTooLargeError(BrokerResponseError):
    """Raised when one batch cannot fit in a segment of ``segment.bytes``."""


@_code(21, "Produce request specified an invalid value for required acks.")
class InvalidRequiredAcksError(BrokerResponseError):
    """Raised when ``acks`` is not 0, 1, -1 or 'all'."""


@_code(22, "Specified group generation id is not valid.")
class IllegalGenerationError(BrokerResponseError):
    """Raised when a group request carries a generation id that is not the group's current one."""


@_code(23, "The group member's supported protocols are incompatible with those of existing members.")
class InconsistentGroupProtocolError(BrokerResponseError):
    """Raised when a joining member shares no assignor with the group."""


@_code(24, "The configured groupId is invalid.")
class InvalidGroupIdError(BrokerResponseError):
    """Raised for an empty or otherwise invalid group id."""


@_code(25, "The coordinator is not aware of this member.")
class UnknownMemberIdError(BrokerResponseError):
    """Raised when a group request names a member id the coordinator does not know."""


@_code(26, "The session timeout is not within the range allowed by the broker.")
class InvalidSessionTimeoutError(BrokerResponseError):
    """Raised when ``session_timeout_ms`` is outside the broker's min/max bounds."""


@_code(27, "The group is rebalancing, so a rejoin is needed.")
class RebalanceInProgressError(BrokerResponseError):
    """Raised when a heartbeat or commit arrives while the group is rebalancing."""


@_code(32, "The timestamp of the message is out of acceptable range.")
class InvalidTimestampError(BrokerResponseError):
    """Raised for a negative or otherwise invalid record timestamp."""


@_code(35, "The version of API is not supported.")
class UnsupportedVersionError(BrokerResponseError):
    """Raised (as an ApiVersions answer) when a request names an API version the server does not serve."""


@_code(36, "Topic with this name already exists.")
class TopicAlreadyExistsError(BrokerResponseError):
    """Raised when creating a topic whose name is taken."""


@_code(37, "Number of partitions is below 1.")
class InvalidPartitionsError(BrokerResponseError):
    """Raised for a partition count below 1, or an add-partitions that does not grow the topic."""


@_code(38, "Replication factor is below 1 or larger than the number of available brokers.")
class InvalidReplicationFactorError(BrokerResponseError):
    """Raised for a replication factor below 1 or above the number of brokers."""


@_code(39, "Replica assignment is invalid.")
class InvalidReplicaAssignmentError(BrokerResponseError):
    """Raised for a manual replica assignment that is inconsistent."""


@_code(40, "Configuration is invalid.")
class InvalidConfigurationError(BrokerResponseError):
    """Raised for an unknown config name or an out-of-range value; names both and the range."""


@_code(42, "This most likely occurs because of a request being malformed.")
class InvalidRequestError(BrokerResponseError):
    """Raised for a request whose fields contradict each other."""


@_code(44, "Request parameters do not satisfy the configured policy.")
class PolicyViolationError(BrokerResponseError):
    """Raised when deleting records of a topic whose ``cleanup.policy`` has no ``delete`` (compact only)."""


@_code(45, "The broker received an out of order sequence number.")
class OutOfOrderSequenceNumberError(BrokerResponseError):
    """Raised when an idempotent producer's batch skips sequence numbers."""


@_code(46, "The broker received a duplicate sequence number.")
class DuplicateSequenceNumberError(BrokerResponseError):
    """Raised (and handled as success) when an idempotent batch was already written."""


@_code(47, "Producer attempted to produce with an old epoch.")
class InvalidProducerEpochError(BrokerResponseError):
    """Raised when a producer id writes with an epoch older than the latest seen."""


@_code(48, "The producer attempted a transactional operation in an invalid state.")
class InvalidTxnStateError(BrokerResponseError):
    """Raised when a transactional request does not fit the transaction's state (e.g. a commit
    after the transaction was aborted, or an EndTxn with nothing begun)."""


@_code(49, "The producer attempted to use a producer id which is not currently assigned to its transactional id.")
class InvalidProducerIdMappingError(BrokerResponseError):
    """Raised when a transactional request names an unknown transactional id, or a producer id
    that is not the one the coordinator assigned to it."""


@_code(50, "The transaction timeout is larger than the maximum value allowed by the broker "
           "(as configured by transaction.max.timeout.ms).")
class InvalidTransactionTimeoutError(BrokerResponseError):
    """Raised by InitProducerId for a ``transaction.timeout.ms`` that is not in (0, transaction.max.timeout.ms]."""


@_code(51, "The producer attempted to update a transaction while another concurrent operation on the "
           "same transaction was ongoing.", True)
class ConcurrentTransactionsError(BrokerResponseError):
    """Raised while the coordinator is still completing a transition of the same transactional
    id (a write pending, or markers being written); the client backs off and retries."""


@_code(52, "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current "
           "coordinator for a given producer.")
class TransactionCoordinatorFencedError(BrokerResponseError):
    """Raised when transaction markers carry a coordinator epoch older than one the partition has seen."""


@_code(53, "Transactional Id authorization failed.")
class TransactionalIdAuthorizationFailedError(BrokerResponseError):
    """A transactional id was refused; kafkasim answers so to every transactional request
    (it serves idempotent producers, not transactions), which makes clients stop at once."""


@_code(55, "The broker did not attempt to execute this operation. This may happen for batched RPCs where "
           "some operations in the batch failed, causing the broker to respond without trying the rest.")
class OperationNotAttemptedError(BrokerResponseError):
    """Raised for the partitions of a batched request that were not tried because others failed
    (AddPartitionsToTxn)."""


@_code(56, "Disk error when trying to access log file on the disk.", True)
class KafkaStorageError(BrokerResponseError):
    """Raised when an ``OSError`` hits a log file (chained to the original error), or a request
    names a replica whose log directory is offline (disk full); retriable, as Kafka's
    ``KafkaStorageException`` (an ``InvalidMetadataException``: the client refreshes metadata)."""


class OldLogFormatError(KafkaStorageError):
    """Raised when a partition directory holds segments written in kafkasim's own record
    format (format version 1: magic 1, zlib CRC-32, msgpack records), which this version no
    longer reads; the message names the directory and ``kafkasim upgrade-data-dir <data_dir>``,
    the one-shot conversion to Kafka's record batch v2 (``kafkasim.storage.upgrade``)."""


@_code(59, "This exception is raised by the broker if it could not locate the producer metadata.")
class UnknownProducerIdError(BrokerResponseError):
    """Raised when an idempotent batch names a producer id with no state on the broker."""


@_code(68, "The group is not empty.")
class NonEmptyGroupError(BrokerResponseError):
    """Raised when deleting a group that still has members."""


@_code(69, "The group id does not exist.")
class GroupIdNotFoundError(BrokerResponseError):
    """Raised when describing or deleting a group that does not exist."""


@_code(70, "The fetch session ID was not found.", True)
class FetchSessionIdNotFoundError(BrokerResponseError):
    """Raised for an incremental fetch naming a fetch session the server does not have (never
    created, closed, or evicted from the session cache)."""


@_code(71, "The fetch session epoch is invalid.", True)
class InvalidFetchSessionEpochError(BrokerResponseError):
    """Raised for an incremental fetch whose session epoch is not the one the session expects next."""


@_code(79, "The group member needs to have a valid member id before actually entering a consumer group.")
class MemberIdRequiredError(BrokerResponseError):
    """Raised on a first JoinGroup without a member id (KIP-394); retry with the id given."""


@_code(81, "The consumer group has reached its max size.")
class GroupMaxSizeReachedError(BrokerResponseError):
    """Raised when a join would exceed ``group.max.size``."""


@_code(82, "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.")
class FencedInstanceIdError(BrokerResponseError):
    """Raised when a second member claims a ``group_instance_id`` already held by another."""


@_code(76, "The requesting client does not support the compression type of given partition.")
class UnsupportedCompressionTypeError(BrokerResponseError):
    """Raised for a zstd batch in a Produce request older than v7 (KIP-110), as Kafka does."""


@_code(87, "This record has failed the validation on broker and hence will be rejected.")
class InvalidRecordError(BrokerResponseError):
    """Raised for a record the broker rejects, e.g. a keyless record on a compacted topic."""


@_code(80, "The preferred leader was not available.", True)
class PreferredLeaderNotAvailableError(BrokerResponseError):
    """Raised by a preferred leader election when the first replica is down or not in the ISR."""


@_code(83, "Eligible topic partition leaders are not available.", True)
class EligibleLeadersNotAvailableError(BrokerResponseError):
    """Raised by an unclean leader election when no replica of the partition is live."""


@_code(84, "Leader election not needed for topic partition.", True)
class ElectionNotNeededError(BrokerResponseError):
    """Raised by a leader election for a partition that already has the leader it would elect."""


@_code(85, "No partition reassignment is in progress.")
class NoReassignmentInProgressError(BrokerResponseError):
    """Raised when cancelling the reassignment of a partition that has none in progress."""


@_code(86, "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.")
class GroupSubscribedToTopicError(BrokerResponseError):
    """Raised when deleting a group's offsets for a topic one of its live members subscribes to."""


@_code(90, "There is a newer producer with the same transactionalId which fences the current one.")
class ProducerFencedError(BrokerResponseError):
    """Raised when a transactional request carries an epoch older than the coordinator's: another
    producer with the same transactional id initialised since (or the transaction timed out)."""


@_code(95, "The given version update is not valid.")
class InvalidUpdateVersionError(BrokerResponseError):
    """Raised when a feature update names an unknown feature or a level outside the supported
    range (UpdateFeatures; ``Broker.update_features``)."""


@_code(105, "The transactionalId could not be found.")
class TransactionalIdNotFoundError(BrokerResponseError):
    """Raised by DescribeTransactions for a transactional id the coordinator does not know (or is expiring)."""


@_code(110, "The member epoch is fenced by the group coordinator. The member must abandon all its "
            "partitions and rejoin.")
class FencedMemberEpochError(BrokerResponseError):
    """Raised by a consumer-group heartbeat (KIP-848) whose member epoch the coordinator does not
    accept: the member must give up its partitions and rejoin with epoch 0."""


@_code(111, "The instance ID is still used by another member in the consumer group. That member must "
            "leave first.")
class UnreleasedInstanceIdError(BrokerResponseError):
    """Raised when a static member joins a consumer group (KIP-848) with a ``group.instance.id``
    whose previous member has not left with epoch -2."""


@_code(112, "The assignor or its version range is not supported by the consumer group.")
class UnsupportedAssignorError(BrokerResponseError):
    """Raised by a consumer-group heartbeat naming a server assignor not in
    ``group.consumer.assignors``."""


@_code(113, "The member epoch is stale. The member must retry after receiving its updated member epoch "
            "via the ConsumerGroupHeartbeat API.")
class StaleMemberEpochError(BrokerResponseError):
    """Raised for an offset commit carrying an older member epoch of a consumer-group member."""


@_code(114, "The request was sent to an endpoint of the wrong type.")
class MismatchedEndpointTypeError(BrokerResponseError):
    """Raised for a DescribeCluster asking a broker listener for the controllers' endpoints."""


@_code(120, "The server encountered an error with the transaction. The client can abort the transaction "
            "to continue using this transactional ID.")
class TransactionAbortableError(BrokerResponseError):
    """Raised when a partition written in a transaction was never added to it (verification);
    the client can abort and go on."""


@_code(121, "The record state is invalid. The acknowledgement of delivery could not be completed.")
class InvalidRecordStateError(BrokerResponseError):
    """Raised for a share-group acknowledgement of a record that is not acquired by that member
    (KIP-932); nothing of that acknowledgement batch changes."""


@_code(122, "The share session was not found.", retriable=True)
class ShareSessionNotFoundError(BrokerResponseError):
    """Raised for a ShareFetch or ShareAcknowledge continuing (epoch > 0) or closing (-1) a share
    session the broker does not hold (KIP-932)."""


@_code(123, "The share session epoch is invalid.", retriable=True)
class InvalidShareSessionEpochError(BrokerResponseError):
    """Raised for a ShareFetch or ShareAcknowledge whose share session epoch is not the next one;
    the broker drops the session (its records are released) and the client opens a new one."""


@_code(128, "The regular expression is not valid.")
class InvalidRegularExpressionError(BrokerResponseError):
    """Raised by a consumer-group heartbeat whose ``subscribed_topic_regex`` does not compile."""


@_code(133, "The limit of share sessions has been reached.")
class ShareSessionLimitReachedError(BrokerResponseError):
    """Raised for a ShareFetch opening a share session when the broker holds
    ``group.share.max.share.sessions`` of them already."""


class CommitFailedError(KafkaSimError):
    """Raised at the consumer when a commit fails because the member was evicted or fenced."""

    description = "Commit cannot be completed since the group has already rebalanced."


class NoOffsetForPartitionError(KafkaSimError):
    """Raised by a consumer with ``auto_offset_reset='none'`` for a partition with no committed offset."""

    description = "Undefined offset with no reset policy for partitions."


class IllegalStateError(KafkaSimError):
    """Raised when an API is called in a state that forbids it (e.g. a closed producer)."""

    description = "Illegal state."


class TransactionAbortedError(KafkaSimError):
    """Raised on the future of a record still unsent when the producer aborts a transaction that
    had already failed (kafka-python's and Java's name, KIP-654); the producer stays usable."""

    description = "Failing batch since transaction was aborted"


class KafkaTimeoutError(KafkaSimError):
    """Raised when a bounded wait (flush, future result) runs out of time."""

    retriable = True
    description = "A request timed out."


class InvalidArgumentError(KafkaSimError, ValueError):
    """Raised for a bad argument that Kafka has no error code for (CLI input, spec files)."""

    description = "Invalid argument."


class SerializationError(KafkaSimError, TypeError):
    """Raised by ``Producer.send`` for a key or value that is not bytes when no serializer is
    configured; also a ``TypeError``, so code written for kafka-python (which raises a bare
    TypeError there) still catches it."""

    description = "A key or value could not be serialized to bytes."


class RecordDeserializationError(KafkaSimError, ValueError):
    """Raised by an audit reading values in a stated format (``--value-format msgpack``) for a
    value that does not decode, or does not fit the asked schema; names topic, partition and
    offset, as Kafka's ``RecordDeserializationException`` carries them."""

    description = "A record's value could not be deserialized."

    def __init__(self, message: str, *, topic: str | None = None, partition: int | None = None,
                 offset: int | None = None) -> None:
        super().__init__(message)
        self.topic, self.partition, self.offset = topic, partition, offset


class ClaimFailedError(KafkaSimError, AssertionError):
    """Raised by a teaching lab whose run does not show its claim (names the claim and the evidence)."""

    description = "A lab's claim did not hold."


@_code(8, "The broker is not available.")
class BrokerNotAvailableError(BrokerResponseError, IllegalStateError):
    """Raised by every call on a :class:`~kafkasim.broker.Broker` after ``close()``; names its data dir."""


@_code(13, "The server disconnected before a response was received.", True)
class NetworkError(BrokerResponseError):
    """Raised by the producer's fault injection: a produce request or its response was lost."""


