"""A ShareFetch answer becomes records the way Kafka's ShareCompletedFetch makes them: only the
acquired offsets, each with its delivery count, markers never, and acquired offsets without a
record reported as gaps; acknowledgements become the wire's batches; the share consumer's
configs are Kafka's, with ShareConsumerConfig's refusals."""

from __future__ import annotations

import pytest

from kafkasim.consumer.share_config import parse_share_configs
from kafkasim.consumer.share_consumer import AcknowledgeType, _ack_type, acknowledgement_batches
from kafkasim.consumer.share_fetch import ShareConsumerRecord, acquired_records
from kafkasim.consumer.fetcher import ConsumerRecord, LOG_APPEND_TIME
from kafkasim.errors import InvalidArgumentError, InvalidConfigurationError
from kafkasim.protocol.share_group import AcknowledgementBatch, AcquiredRecords
from kafkasim.records.control import encode_control_batch
from kafkasim.records.record_batch import ATTR_TIMESTAMP_TYPE_LOG_APPEND, encode_batch

T0 = 1_700_000_000_000


def _batch(base, n, *, leader_epoch=3, attributes=0, last_offset_delta=None, skip=()):
    recs = [(d, T0 + d, f"k{base + d}".encode(), f"v{base + d}".encode(), (("h", b"x"),))
            for d in range(n) if d not in skip]
    return encode_batch(base, recs, partition_leader_epoch=leader_epoch, attributes=attributes,
                        last_offset_delta=last_offset_delta)


def test_only_acquired_offsets_come_back_with_their_delivery_counts():
    data = _batch(0, 5) + _batch(5, 5)
    recs, gaps = acquired_records("t", 1, data, [AcquiredRecords(1, 2, 1), AcquiredRecords(6, 7, 3)])
    assert [(r.offset, r.delivery_count) for r in recs] == [(1, 1), (2, 1), (6, 3), (7, 3)]
    assert gaps == []
    r = recs[0]
    assert (r.topic, r.partition, r.key, r.value, r.headers) == ("t", 1, b"k1", b"v1", (("h", b"x"),))
    assert r.timestamp == T0 + 1 and r.leader_epoch == 3
    assert r.serialized_key_size == 2 and r.serialized_value_size == 2 and r.serialized_header_size == 2
    # ConsumerRecord's fields, in its order, then delivery_count
    assert ShareConsumerRecord._fields == ConsumerRecord._fields + ("delivery_count",)


def test_an_acquired_offset_with_no_record_is_a_gap():
    # a compacted batch: offsets 10..14, 11 and 13 removed; 15 lies past every batch
    data = _batch(10, 5, skip=(1, 3), last_offset_delta=4)
    recs, gaps = acquired_records("t", 0, data, [AcquiredRecords(10, 15, 1)])
    assert [r.offset for r in recs] == [10, 12, 14]
    assert gaps == [11, 13, 15]


def test_a_transaction_marker_is_never_returned_and_its_offset_is_a_gap():
    data = _batch(0, 2) + encode_control_batch(7, 0, True, 0, T0, base_offset=2) + _batch(3, 1)
    recs, gaps = acquired_records("t", 0, data, [AcquiredRecords(0, 3, 1)])
    assert [r.offset for r in recs] == [0, 1, 3]
    assert gaps == [2]


def test_deserializers_and_log_append_time():
    data = _batch(0, 2, attributes=ATTR_TIMESTAMP_TYPE_LOG_APPEND)
    recs, _ = acquired_records("t", 0, data, [AcquiredRecords(0, 1, 1)],
                               key_deserializer=bytes.decode, value_deserializer=lambda v: v.upper())
    assert [(r.key, r.value, r.timestamp_type) for r in recs] == [("k0", b"V0", LOG_APPEND_TIME),
                                                                  ("k1", b"V1", LOG_APPEND_TIME)]


def test_nothing_acquired_decodes_nothing():
    assert acquired_records("t", 0, _batch(0, 3), []) == ([], [])
    assert acquired_records("t", 0, b"", [AcquiredRecords(4, 5, 2)]) == ([], [4, 5])


def test_acknowledgements_become_runs_of_one_type():
    got = acknowledgement_batches({3: 1, 4: 1, 5: 2, 9: 1, 10: 3, 11: 3})
    assert got == [AcknowledgementBatch(3, 4, (1,)), AcknowledgementBatch(5, 5, (2,)),
                   AcknowledgementBatch(9, 9, (1,)), AcknowledgementBatch(10, 11, (3,))]
    assert acknowledgement_batches({}) == []


@pytest.mark.parametrize("given,want", [(AcknowledgeType.RELEASE, 2), (3, 3), ("accept", 1), ("REJECT", 3)])
def test_acknowledge_types(given, want):
    assert _ack_type(given) == want


@pytest.mark.parametrize("bad", [0, 4, "GAP", True, None, 1.0])
def test_a_bad_acknowledge_type_is_named(bad):
    with pytest.raises(InvalidArgumentError, match="type must be an AcknowledgeType"):
        _ack_type(bad)


def test_share_configs_take_kafkas_names_and_refuse_what_a_share_group_cannot_use():
    cfg = parse_share_configs({"group.id": "g", "share.acknowledgement.mode": "EXPLICIT", "max_poll_records": 7})
    assert (cfg["share_acknowledgement_mode"], cfg["max_poll_records"]) == ("explicit", 7)
    assert parse_share_configs({"group_id": "g"})["share_acknowledgement_mode"] == "implicit"
    with pytest.raises(InvalidConfigurationError,
                       match=r"^auto.offset.reset, session.timeout.ms cannot be set when using a share group.$"):
        parse_share_configs({"group_id": "g", "session_timeout_ms": 1000, "auto.offset.reset": "earliest"})
    with pytest.raises(InvalidConfigurationError, match="share.acknowledgement.mode"):
        parse_share_configs({"group_id": "g", "share.acknowledgement.mode": "auto"})
    with pytest.raises(InvalidConfigurationError, match="did you mean 'max.poll.records'"):
        parse_share_configs({"group_id": "g", "max.pol.records": 1})
    with pytest.raises(InvalidConfigurationError, match="group.id"):
        parse_share_configs({})
