"""The offsets-topic codec: Kafka's group → partition rule and lossless round trips."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, strategies as st

from kafkasim.protocol.offsets import (
    GroupKey, OffsetKey, OffsetValue, decode_group_value, decode_key, decode_offset_value,
    decode_record, encode_group_key, encode_group_value, encode_offset_key, encode_offset_value,
    java_string_hash, partition_for_group,
)
from kafkasim.errors import CorruptRecordError


@pytest.mark.parametrize("s, expected", [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),                     # Java: "hello".hashCode()
    ("polygenelubricants", -2147483648),     # the classic Integer.MIN_VALUE string
    ("\U0001F600", 1772899),                 # surrogate pair: 0xD83D * 31 + 0xDE00
])
def test_java_string_hash_matches_java(s, expected):
    assert java_string_hash(s) == expected


def test_partition_for_group_uses_kafka_utils_abs():
    # Utils.abs(Integer.MIN_VALUE) == 0 (Math.abs would stay negative)
    assert partition_for_group("polygenelubricants") == 0
    assert partition_for_group("hello") == 99162322 % 50
    # a negative hash: abs, then modulo
    h = java_string_hash("my-consumer-group-7")
    assert partition_for_group("my-consumer-group-7") == abs(h) % 50
    assert partition_for_group("x", 1) == 0


@given(st.text(max_size=40))
def test_partition_for_group_in_range(group):
    assert 0 <= partition_for_group(group) < 50


@given(st.text(max_size=20), st.text(max_size=20), st.integers(0, 2**31 - 1),
       st.integers(0, 2**62), st.text(max_size=10), st.integers(-1, 2**31 - 1))
def test_offset_record_round_trip(group, topic, partition, offset, metadata, epoch):
    key = encode_offset_key(group, topic, partition)
    value = encode_offset_value(offset, metadata, 1234, epoch)
    assert decode_record(key, value) == (OffsetKey(group, topic, partition),
                                         OffsetValue(offset, metadata, 1234, epoch))
    assert decode_record(key, None) == (OffsetKey(group, topic, partition), None)


def test_offset_format_is_the_documented_msgpack():
    assert msgpack.unpackb(encode_offset_key("g", "t", 3)) == [1, "g", "t", 3]
    assert msgpack.unpackb(encode_offset_value(42, "m", 99, 5)) == {
        "offset": 42, "metadata": "m", "commit_timestamp": 99, "leader_epoch": 5}
    assert msgpack.unpackb(encode_group_key("g")) == [2, "g"]


def test_group_record_round_trip():
    value = {"protocol_type": "consumer", "generation": 3, "protocol": "range", "leader": "m1",
             "state_timestamp": 7, "members": [{"member_id": "m1", "group_instance_id": None,
                                                "client_id": "c", "session_timeout_ms": 45000,
                                                "rebalance_timeout_ms": 300000,
                                                "subscription": ["t"], "assignment": [["t", 0]]}]}
    assert decode_key(encode_group_key("g")) == GroupKey("g")
    assert decode_group_value(encode_group_value(value)) == value
    with pytest.raises(ValueError, match="members"):
        encode_group_value({"generation": 1})


@pytest.mark.parametrize("garbage", [b"\xc1", msgpack.packb([9, "g"]), msgpack.packb("x")])
def test_unknown_keys_are_corrupt(garbage):
    with pytest.raises(CorruptRecordError):
        decode_key(garbage)


def test_bad_values_are_corrupt():
    with pytest.raises(CorruptRecordError):
        decode_offset_value(msgpack.packb({"metadata": ""}))
    with pytest.raises(CorruptRecordError):
        decode_group_value(msgpack.packb([1, 2]))
