"""The shared vocabulary: error registry, topic configs, clocks."""

from __future__ import annotations

import pytest

from kafkasim import errors
from kafkasim.clock import MockClock, SystemClock
from kafkasim.config import TOPIC_CONFIGS, LogConfig
from kafkasim.errors import InvalidConfigurationError

# Kafka's org.apache.kafka.common.protocol.Errors codes.
KAFKA_CODES = {
    "OffsetOutOfRangeError": 1, "CorruptRecordError": 2, "UnknownTopicOrPartitionError": 3,
    "BrokerNotAvailableError": 8,
    "RecordTooLargeError": 10, "CoordinatorNotAvailableError": 15, "NotCoordinatorError": 16,
    "InvalidTopicError": 17, "RecordBatchTooLargeError": 18, "InvalidRequiredAcksError": 21,
    "IllegalGenerationError": 22, "InconsistentGroupProtocolError": 23, "InvalidGroupIdError": 24,
    "UnknownMemberIdError": 25, "InvalidSessionTimeoutError": 26, "RebalanceInProgressError": 27,
    "InvalidTimestampError": 32, "TopicAlreadyExistsError": 36, "InvalidPartitionsError": 37,
    "InvalidReplicationFactorError": 38, "InvalidConfigurationError": 40, "InvalidRequestError": 42,
    "OutOfOrderSequenceNumberError": 45, "DuplicateSequenceNumberError": 46,
    "InvalidProducerEpochError": 47, "KafkaStorageError": 56, "UnknownProducerIdError": 59,
    "NonEmptyGroupError": 68, "GroupIdNotFoundError": 69, "MemberIdRequiredError": 79,
    "GroupMaxSizeReachedError": 81, "FencedInstanceIdError": 82, "InvalidRecordError": 87,
    "UnknownServerError": -1,
    # transactions
    "InvalidTxnStateError": 48, "InvalidProducerIdMappingError": 49, "InvalidTransactionTimeoutError": 50,
    "ConcurrentTransactionsError": 51, "TransactionCoordinatorFencedError": 52,
    "TransactionalIdAuthorizationFailedError": 53, "OperationNotAttemptedError": 55,
    "ProducerFencedError": 90, "TransactionalIdNotFoundError": 105, "TransactionAbortableError": 120,
}


@pytest.mark.parametrize("name, code", sorted(KAFKA_CODES.items()))
def test_error_classes_carry_kafkas_codes(name, code):
    cls = getattr(errors, name)
    assert cls.errno == code
    assert errors.for_code(code) is cls
    assert issubclass(cls, errors.KafkaSimError)
    assert cls.__doc__ and cls.description


def test_unknown_code_maps_to_unknown_server_error():
    assert errors.for_code(9999) is errors.UnknownServerError


def test_every_exported_error_is_documented_and_rooted():
    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type):
            assert issubclass(obj, errors.KafkaSimError), name
            assert obj.__doc__, name


def test_defaults_are_kafkas():
    c = LogConfig()
    assert (c.segment_bytes, c.segment_ms, c.retention_ms, c.retention_bytes) == (
        1_073_741_824, 604_800_000, 604_800_000, -1)
    assert (c.index_interval_bytes, c.max_message_bytes, c.delete_retention_ms) == (4096, 1_048_588, 86_400_000)
    assert c.cleanup_policy == "delete" and c.message_timestamp_type == "CreateTime"
    assert c.to_kafka()["segment.bytes"] == 1_073_741_824
    assert set(c.to_kafka()) == set(TOPIC_CONFIGS)


def test_overrides_parse_kafka_strings():
    c = LogConfig.from_overrides({"segment.bytes": "2048", "cleanup.policy": "compact,delete",
                                  "preallocate": "true", "min.cleanable.dirty.ratio": "0.1"})
    assert c.segment_bytes == 2048 and c.compact and c.delete and c.preallocate
    assert c.min_cleanable_dirty_ratio == 0.1


@pytest.mark.parametrize("overrides, fragment", [
    ({"segment.bytes": 13}, "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
    ({"segment.bytes": 2**31}, "Value out of range"),
    ({"preallocate": "yes"}, "either true or false"),
    ({"message.timestamp.type": "Now"}, "CreateTime, LogAppendTime"),
    ({"retention.bytes": 1.5}, "64-bit integer"),
    ({"cleanup.policy": ""}, "Empty list"),
])
def test_bad_values_name_config_and_rule(overrides, fragment):
    with pytest.raises(InvalidConfigurationError) as e:
        LogConfig.from_overrides(overrides)
    assert fragment in str(e.value)


def test_mock_clock_moves_only_when_told():
    c = MockClock(1_000)
    assert c.now_ms() == 1_000
    c.sleep(250)
    assert c.advance(0) == 1_250
    with pytest.raises(ValueError, match="backwards"):
        c.advance(-1)
    with pytest.raises(ValueError, match="backwards"):
        c.set(999)


def test_system_clock_is_monotonic():
    c = SystemClock()
    readings = [c.now_ms() for _ in range(1000)]
    assert readings == sorted(readings)
