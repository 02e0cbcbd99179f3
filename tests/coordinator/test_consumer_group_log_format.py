"""Consumer group (KIP-848) records of ``__consumer_offsets`` byte for byte: each expected
byte string is written out by hand from Kafka's JSON schemas (group-coordinator/src/main/
resources/common/message/ConsumerGroup*Key.json / *Value.json), not produced by the codec."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, strategies as st

from kafkasim.errors import CorruptRecordError
from kafkasim.protocol import consumer_group_log as cgl

U1 = uuid.UUID(int=1)          # 15 zero bytes then 01
U2 = uuid.UUID(int=2)
B1 = "00" * 15 + "01"
B2 = "00" * 15 + "02"


@pytest.mark.parametrize("key, hexbytes", [
    (cgl.CgKey(3, "g"), "0003 0001 67"),
    (cgl.CgKey(4, "g"), "0004 0001 67"),
    (cgl.CgKey(5, "g", "m"), "0005 0001 67 0001 6d"),
    (cgl.CgKey(6, "gg"), "0006 0002 6767"),
    (cgl.CgKey(7, "g", "m"), "0007 0001 67 0001 6d"),
    (cgl.CgKey(8, "g", "mm"), "0008 0001 67 0002 6d6d"),
])
def test_keys_are_an_int16_type_and_int16_length_strings(key, hexbytes):
    want = bytes.fromhex(hexbytes.replace(" ", ""))
    assert cgl.encode_key(key) == want
    assert cgl.decode_key(want) == key
    assert cgl.is_consumer_group_key(want)


@pytest.mark.parametrize("rtype, value, hexbytes", [
    # version 0 | Epoch int32 | no tagged fields
    (3, cgl.GroupEpoch(5), "0000 00000005 00"),
    (6, cgl.TargetAssignmentEpoch(7), "0000 00000007 00"),
    # version | Topics: 1 entry (uvarint 2) | TopicId | TopicName compact "t" | NumPartitions 4
    # | PartitionMetadata empty (uvarint 1) | entry tags | value tags
    (4, cgl.PartitionMetadata(((U1, "t", 4),)), f"0000 02 {B1} 0274 00000004 01 00 00"),
    # InstanceId null | RackId "r1" | ClientId "c" | ClientHost "/h" | names ["a","b"] | regex null
    # | RebalanceTimeoutMs 300 | ServerAssignor "uniform" | tags (ClassicMemberMetadata null: absent)
    (5, cgl.MemberMetadata(None, "r1", "c", "/h", ("a", "b"), None, 300, "uniform"),
     "0000 00 037231 0263 032f68 03 0261 0262 00 0000012c 08756e69666f726d 00"),
    (5, cgl.MemberMetadata("i", None, "", "", (), "t.*", -1, None),
     "0000 0269 00 01 01 01 04742e2a ffffffff 00 00"),
    # TopicPartitions: 1 entry | TopicId | Partitions [0, 2] | entry tags | value tags
    (7, cgl.TargetAssignmentMember({U1: (0, 2)}), f"0000 02 {B1} 03 00000000 00000002 00 00"),
    (7, cgl.TargetAssignmentMember({}), "0000 01 00"),
    # MemberEpoch 3 | PreviousMemberEpoch 2 | State 1 (UNREVOKED_PARTITIONS) | Assigned {U1: [1]}
    # | PendingRevocation {U2: [0]} | tags
    (8, cgl.CurrentMemberAssignment(3, 2, 1, {U1: (1,)}, {U2: (0,)}),
     f"0000 00000003 00000002 01 02 {B1} 02 00000001 00 02 {B2} 02 00000000 00 00"),
])
def test_values_are_version_0_flexible_structs(rtype, value, hexbytes):
    want = bytes.fromhex(hexbytes.replace(" ", ""))
    assert cgl.encode_value(value) == want
    assert cgl.decode_value(rtype, want) == value


def test_topic_partitions_are_written_in_topic_id_order():
    value = cgl.TargetAssignmentMember({U2: (1,), U1: (3, 0)})
    assert cgl.encode_value(value).hex() == f"000003{B1}03000000000000000300{B2}020000000100" + "00"


def test_unknown_tagged_fields_are_skipped():
    # Epoch 1 then one tagged field: tag 5, size 2, two bytes (a newer writer's field)
    assert cgl.decode_value(3, bytes.fromhex("0000 00000001 01 05 02 abcd".replace(" ", ""))) == cgl.GroupEpoch(1)


@pytest.mark.parametrize("rtype, hexbytes, why", [
    (3, "0001 00000001 00", "unknown value version 1"),
    (3, "0000 000001", "4 bytes needed"),
    (3, "0000 00000001 00 ff", "1 bytes left over"),
    (5, "0000 00 00 00", "null string for the non-nullable ClientId"),
    (7, "0000 05 00", "invalid length 4 for the array TopicPartitions"),
])
def test_bad_values_are_corrupt_record_errors(rtype, hexbytes, why):
    with pytest.raises(CorruptRecordError, match=why):
        cgl.decode_value(rtype, bytes.fromhex(hexbytes.replace(" ", "")))


def test_a_tombstone_is_none_and_a_msgpack_key_is_not_ours():
    assert cgl.decode_value(8, None) is None
    assert not cgl.is_consumer_group_key(bytes.fromhex("92026167"))      # msgpack [2, "g"]
    with pytest.raises(CorruptRecordError, match="key version 2"):
        cgl.decode_key(bytes.fromhex("000200016700"))


def test_dump_log_json_is_kafkas_json_converters():
    assert cgl.key_json(cgl.CgKey(5, "g", "m")) == {"type": "5", "data": {"groupId": "g", "memberId": "m"}}
    assert cgl.value_json(cgl.TargetAssignmentMember({U1: (0, 2)})) == {
        "version": "0", "data": {"topicPartitions": [{"topicId": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": [0, 2]}]}}
    assert cgl.kafka_uuid(uuid.UUID("c3f1a6b2-0d7e-4c85-9a13-7f0b2e4d5a61")) == "w_Gmsg1-TIWaE38LLk1aYQ"


_tps = st.dictionaries(st.uuids(), st.lists(st.integers(0, 2**31 - 1), min_size=1, unique=True).map(
    lambda ps: tuple(sorted(ps))), max_size=4)
_name = st.text(max_size=20)


@given(st.one_of(
    st.builds(cgl.GroupEpoch, st.integers(-2**31, 2**31 - 1)),
    st.builds(cgl.MemberMetadata, st.none() | _name, st.none() | _name, _name, _name,
              st.lists(_name, max_size=4).map(tuple), st.none() | _name, st.integers(-1, 2**31 - 1),
              st.none() | _name,
              st.none() | st.tuples(st.integers(-2**31, 2**31 - 1),
                                    st.lists(st.tuples(_name, st.binary(max_size=40)), max_size=3).map(tuple))),
    st.builds(cgl.CurrentMemberAssignment, st.integers(-2, 2**31 - 1), st.integers(-2, 2**31 - 1),
              st.sampled_from([0, 1, 2, 127]), _tps, _tps),
    st.builds(cgl.TargetAssignmentMember, _tps)))
def test_every_value_round_trips(value):
    rtype = {cgl.GroupEpoch: 3, cgl.MemberMetadata: 5, cgl.CurrentMemberAssignment: 8,
             cgl.TargetAssignmentMember: 7}[type(value)]
    assert cgl.decode_value(rtype, cgl.encode_value(value)) == value


def test_a_classic_members_metadata_is_the_tagged_field_0_as_kafkas_generator_writes_it():
    """Kafka 4's mixed groups: a member that joined with JoinGroup keeps its session timeout and
    protocols in tagged field 0 of its metadata record, a nullable struct: tag, size + 1, a
    presence byte 1, then SessionTimeoutMs and SupportedProtocols [Name, Metadata]."""
    plain = cgl.MemberMetadata(None, None, "c", "/h", ("t",), None, 300_000, None)
    classic = plain._replace(classic_member_metadata=(45_000, (("range", b"\x00\x01ab"),)))
    head = cgl.encode_value(plain)[:-1]          # without the empty tagged-fields count
    body = bytes.fromhex("0000afc8" "02" "0672616e6765" "05" "00016162" "00" "00")
    assert cgl.encode_value(classic) == head + bytes([1, 0, len(body) + 1, 1]) + body
    assert cgl.decode_value(5, cgl.encode_value(classic)) == classic
    assert cgl.value_json(classic)["data"]["classicMemberMetadata"] == {
        "sessionTimeoutMs": 45_000, "supportedProtocols": [{"name": "range", "metadata": "AAFhYg=="}]}
