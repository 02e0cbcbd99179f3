"""Hash functions: byte-exact with Kafka's Utils.murmur2 and the other clients' test vectors."""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from kafkasim.partitioning.hashing import (
    crc32, crc32_many, fnv1a32, fnv1a32_many, murmur2, murmur2_many, murmur3, murmur3_many,
    to_positive,
)

# Kafka: clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java#testMurmur2
KAFKA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    bytes([ord("a"), ord("b"), ord("c")]): 479470107,
}

_UNALIGNED = b"PreAmbleWillBeRemoved,ThePrePartThatIs"
# librdkafka src/rdmurmur2.c unittest_murmur2: "java_murmur2_results" (as int32 bit patterns)
LIBRDKAFKA_MURMUR2 = {
    b"kafka": 0xD067CF64, b"giberish123456789": 0x8F552B0C,
    b"1234": 0x9FC97B14, b"234": 0xE7C009CA, b"34": 0x873930DA, b"4": 0x5A4B5CA1,
    _UNALIGNED: 0x78424F1C, _UNALIGNED[1:]: 0x4A62B377, _UNALIGNED[2:]: 0xE0E4E09E,
    _UNALIGNED[3:]: 0x62B8B43F, b"": 0x106E08D9,
}
# librdkafka src/rdfnv1a.c unittest_fnv1a: Go hash/fnv results after librdkafka's abs(int32)
LIBRDKAFKA_FNV1A_ABS = {
    b"kafka": 0xD33C4E1, b"giberish123456789": 0x77A58295,
    b"1234": 0x23BDD03, b"234": 0x2DEA3CD2, b"34": 0x740FA83E, b"4": 0x310CA263,
    _UNALIGNED: 0x65CBD69C, _UNALIGNED[1:]: 0x6E49C79A, _UNALIGNED[2:]: 0x69EED356,
    _UNALIGNED[3:]: 0x6ABCC023, b"": 0x7EE3623B,
}


def _int32(u: int) -> int:
    return u - (1 << 32) if u & 0x80000000 else u


@pytest.mark.parametrize("key,expected", list(KAFKA_MURMUR2.items()))
def test_murmur2_matches_kafka_utils_test(key, expected):
    assert murmur2(key) == expected


def test_murmur2_brief_vectors_as_signed_ints():
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"abc") == 479470107


@pytest.mark.parametrize("key,expected", list(LIBRDKAFKA_MURMUR2.items()))
def test_murmur2_matches_librdkafka_java_results(key, expected):
    assert murmur2(key) == _int32(expected)


@pytest.mark.parametrize("key,expected", list(LIBRDKAFKA_FNV1A_ABS.items()))
def test_fnv1a_matches_go_hash_fnv_results(key, expected):
    assert abs(_int32(fnv1a32(key))) == expected


def test_fnv1a_sarama_min_int32_key():
    # Sarama partitioner_test.go: "1468509572224" hashes to 2147483648 (int32 min)
    assert fnv1a32(b"1468509572224") == 0x80000000


def test_crc32_is_ieee_check_value():
    assert crc32(b"123456789") == 0xCBF43926


def test_murmur3_is_mmh3_x86_32_seed_0():
    assert murmur3(b"foo") == -156908512
    assert murmur3(b"") == 0


def test_to_positive_clears_sign_bit_not_abs():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF


def test_vectorised_matches_all_vectors_at_once():
    keys = list(KAFKA_MURMUR2) + list(LIBRDKAFKA_MURMUR2)
    assert murmur2_many(keys).tolist() == [murmur2(k) for k in keys]
    keys = list(LIBRDKAFKA_FNV1A_ABS)
    got = np.abs(fnv1a32_many(keys).view(np.int32).astype(np.int64)).tolist()
    assert got == list(LIBRDKAFKA_FNV1A_ABS.values())


def test_vectorised_accepts_pandas_and_arrow_and_nulls_hash_as_empty():
    keys = [b"a", None, b"abcd", b"", b"abcdefg"]
    expected = [murmur2(k or b"") for k in keys]
    assert murmur2_many(keys).tolist() == expected
    assert murmur2_many(pd.Series(keys, dtype=object)).tolist() == expected
    assert murmur2_many(pa.array(keys, type=pa.binary())).tolist() == expected
    chunked = pa.chunked_array([pa.array(keys[:2], pa.binary()), pa.array(keys[2:], pa.binary())])
    assert murmur2_many(chunked).tolist() == expected
    sliced = pa.array(keys, type=pa.binary()).slice(2)
    assert murmur2_many(sliced).tolist() == expected[2:]
    assert murmur2_many([]).tolist() == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=30))
def test_vectorised_hashes_equal_scalar_ones(keys):
    assert murmur2_many(keys).tolist() == [murmur2(k) for k in keys]
    assert fnv1a32_many(keys).tolist() == [fnv1a32(k) for k in keys]
    assert crc32_many(keys).tolist() == [zlib.crc32(k) for k in keys]
    assert murmur3_many(keys).tolist() == [murmur3(k) for k in keys]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_32_bit_int(key):
    h = murmur2(key)
    assert -(2**31) <= h < 2**31
