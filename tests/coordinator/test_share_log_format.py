"""Byte layouts of the share groups' records: ShareSnapshot/ShareUpdate in __share_group_state
and the ShareGroup* records in __consumer_offsets, from Kafka's JSON schemas."""

from __future__ import annotations

import uuid

import pytest

from kafkasim.errors import CorruptRecordError
from kafkasim.protocol import share_group_log as sgl
from kafkasim.protocol import share_state_log as ssl

TID = uuid.UUID(int=1)


def test_share_snapshot_key_and_value_bytes():
    assert ssl.encode_key(ssl.ShareKey(0, "g", TID, 3)).hex() == "0000" + "000167" + "00" * 15 + "01" + "00000003"
    value = ssl.ShareSnapshot(1, 0, 0, 10, ((10, 12, 2, 1),))
    assert ssl.encode_value(value).hex() == (
        "0000" + "0001" + "00000000" + "00000000" + "000000000000000a"      # version, epochs, start offset
        + "02" + "000000000000000a" + "000000000000000c" + "02" + "0001" + "00"   # one batch + its tags
        + "00")                                                              # the value's tags
    assert ssl.decode_value(0, ssl.encode_value(value)) == value


def test_share_update_round_trip_and_key_type():
    key = ssl.ShareKey(1, "group", TID, 0)
    assert ssl.decode_key(ssl.encode_key(key)) == key and ssl.encode_key(key)[:2] == b"\x00\x01"
    value = ssl.ShareUpdate(7, 3, -1, ((5, 5, 4, 2), (6, 9, 0, 1)))
    assert ssl.decode_value(1, ssl.encode_value(value)) == value
    assert ssl.decode_value(1, None) is None


@pytest.mark.parametrize("data", [b"\x00", b"\x00\x01\x00", b"\x00\x00" + b"\x00" * 30])
def test_bad_share_state_bytes_are_corrupt_records(data):
    with pytest.raises(CorruptRecordError):
        ssl.decode_value(0, data)


def test_state_partition_is_a_java_string_hash_of_the_coordinator_key():
    # "g:AAAAAAAAAAAAAAAAAAAAAQ:0" -> Utils.abs(hashCode) % 50
    text = "g:AAAAAAAAAAAAAAAAAAAAAQ:0"
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) % (1 << 32)
    h = h - (1 << 32) if h >= 1 << 31 else h
    assert ssl.partition_for("g", TID, 0, 50) == abs(h) % 50


def test_share_group_record_bytes():
    assert sgl.encode_key(sgl.ShareGroupKey(11, "g")).hex() == "000b000167"
    assert sgl.encode_value(sgl.ShareGroupEpoch(5)).hex() == "00000000000500"
    assert sgl.encode_key(sgl.ShareGroupKey(10, "g", "m")).hex() == "000a000167" + "00016d"
    member = sgl.ShareMemberMetadata(None, "c", "h", ("t",))
    assert sgl.encode_value(member).hex() == "0000" + "00" + "0263" + "0268" + "02" + "0274" + "00"
    cur = sgl.ShareCurrentMemberAssignment(3, 2, 0, {TID: (0, 2)})
    assert sgl.encode_value(cur).hex() == ("0000" + "00000003" + "00000002" + "00" + "02" + TID.hex + "03"
                                           + "00000000" + "00000002" + "00" + "00")


@pytest.mark.parametrize("kind,value", [
    (12, sgl.ShareTargetAssignmentEpoch(4)),
    (13, sgl.ShareTargetAssignmentMember({TID: (1,)})),
    (15, sgl.ShareStatePartitionMetadata(((TID, "t", (0, 1)),), ((uuid.UUID(int=2), "old"),))),
])
def test_share_group_values_round_trip(kind, value):
    assert sgl.decode_value(kind, sgl.encode_value(value)) == value


def test_share_group_keys_are_told_apart_from_consumer_group_keys():
    assert sgl.is_share_group_key(b"\x00\x0f\x00\x01g") and not sgl.is_share_group_key(b"\x00\x03\x00\x01g")
