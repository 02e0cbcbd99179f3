"""Partitioners: Kafka's default rule, other clients' documented rules, skew fixes, partition_many."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from kafkasim.clock import MockClock
from kafkasim.errors import InvalidArgumentError, InvalidConfigurationError, InvalidPartitionsError
from kafkasim.partitioning.hashing import fnv1a32, murmur2
from kafkasim.partitioning.partitioners import (
    KEY_PURE, PARTITIONERS, CompositeKeyPartitioner, ConsistentPartitioner,
    ConsistentRandomPartitioner, DefaultPartitioner, FnvPartitioner, HotKeyPartitioner,
    IgnoreKeysPartitioner, LegacyRoundRobinPartitioner, Murmur2RandomPartitioner,
    Murmur3Partitioner, RoundRobinPartitioner, make_partitioner, partition_for_key,
    partition_many,
)


def bound(p, seed=0, batch_size=16384, clock=None):
    return p.bind(clock=clock or MockClock(0), rng=random.Random(seed), batch_size=batch_size)


# ------------------------------------------------------------------ murmur2 (Java default)

@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(min_value=1, max_value=10_000))
def test_partition_is_in_range_and_equals_to_positive_hash_mod_n(key, n):
    p = DefaultPartitioner().partition("t", key, n)
    assert 0 <= p < n
    assert p == (murmur2(key) & 0x7FFFFFFF) % n
    assert partition_many([key], n).tolist() == [p]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=24)), max_size=40),
       st.integers(min_value=1, max_value=512), st.sampled_from(KEY_PURE))
def test_partition_many_equals_scalar_path_for_every_key_pure_partitioner(keys, n, name):
    got = partition_many(keys, n, name).tolist()
    assert got == [partition_for_key(k, n, name) for k in keys]
    assert all(-1 <= g < n for g in got)


def test_kafka_default_partition_of_brief_vectors():
    # toPositive(murmur2) % n, computed from Kafka's UtilsTest vectors
    assert partition_many([b"21", b"foobar", b"abc"], 16).tolist() == [
        (-973932308 & 0x7FFFFFFF) % 16, (-790332482 & 0x7FFFFFFF) % 16, 479470107 % 16]


def test_same_key_same_partition_on_every_producer_instance():
    keys = [b"user-%d" % i for i in range(500)]
    a = [bound(DefaultPartitioner(), seed=1).partition("t", k, 12) for k in keys]
    b = [bound(DefaultPartitioner(), seed=2).partition("t", k, 12) for k in keys]
    assert a == b == partition_many(keys, 12).tolist()


def _kafka_murmur2_reference(data: bytes) -> int:
    """Kafka's ``Utils.murmur2(byte[])`` (clients/src/main/java/org/apache/kafka/common/utils/
    Utils.java), transcribed line by line with Java's int arithmetic (mod 2^32, ``>>>`` as an
    unsigned shift), independent of kafkasim's own (vectorised) implementation."""
    mask = 0xFFFFFFFF
    length, m, r = len(data), 0x5BD1E995, 24
    h = (0x9747B28C ^ length) & mask
    for i in range(length // 4):
        i4 = i * 4
        k = data[i4] + (data[i4 + 1] << 8) + (data[i4 + 2] << 16) + (data[i4 + 3] << 24)
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    rest, tail = length % 4, length & ~3
    if rest == 3:                       # the Java switch falls through 3 -> 2 -> 1
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def test_the_murmur2_reference_gives_kafkas_utils_test_vectors():
    # Kafka's UtilsTest.testMurmur2: "21" -> -973932308, "foobar" -> -790332482, ...
    assert [_kafka_murmur2_reference(k) for k in (b"21", b"foobar", b"a-little-bit-long-string",
                                                   b"a-little-bit-longer-string", b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                                                   b"abc")] == \
        [-973932308, -790332482, -985981536, -1486304829, -58897971, 479470107]


def test_distribution_of_200k_merchant_keys_over_64_partitions(capsys):
    keys = [b"merchant_%06d" % i for i in range(200_000)]
    counts = np.bincount(partition_many(keys, 64), minlength=64)
    mx, mn, mean = int(counts.max()), int(counts.min()), counts.mean()
    drift = (mx - mn) / mean
    with capsys.disabled():
        print(f"\nmerchant_000000..merchant_199999 over 64 partitions (murmur2): "
              f"max={mx} (p{counts.argmax()}) min={mn} (p{counts.argmin()}) mean={mean:.0f} "
              f"drift=(max-min)/mean={drift:.4%}")
    # The expected counts, derived here: Kafka's BuiltInPartitioner.partitionForKey is
    # toPositive(murmur2(key)) % numPartitions, with toPositive(n) = n & 0x7fffffff (Utils.java);
    # counted with plain loops over the reference murmur2 above.
    expected = [0] * 64
    for k in keys:
        expected[(_kafka_murmur2_reference(k) & 0x7FFFFFFF) % 64] += 1
    assert counts.tolist() == expected
    # What that derivation gives (also printed above): max 3260 at p8, min 2991 at p58, and
    # drift (3260 - 2991) / (200,000 / 64) = 269 / 3125 = 0.08608.
    assert (mx, int(counts.argmax()), mn, int(counts.argmin())) == (3260, 8, 2991, 58)
    assert (mx - mn) / (200_000 / 64) == drift == 269 / 3125


def test_sticky_stays_until_batch_size_bytes_then_switches():
    p = bound(DefaultPartitioner(), seed=7, batch_size=1000)
    picks = [p.partition("t", None, 8, None, 100) for _ in range(30)]
    # 10 records x 100 bytes fill one sticky "batch"; then a new random partition is drawn
    runs = [picks[i:i + 10] for i in range(0, 30, 10)]
    assert all(len(set(r)) == 1 for r in runs)
    again = bound(DefaultPartitioner(), seed=7, batch_size=1000)
    assert [again.partition("t", None, 8, None, 100) for _ in range(30)] == picks   # seeded
    many = [p.partition("t", None, 8, None, 1000) for _ in range(200)]
    assert len(set(many)) == 8


def test_sticky_is_per_topic_and_keyed_records_ignore_it():
    p = bound(DefaultPartitioner(), seed=3)
    assert p.partition("a", b"abc", 4) == 479470107 % 4
    s1 = {p.partition("a", None, 1000, None, 10) for _ in range(50)}
    assert len(s1) == 1


def test_legacy_round_robin_cycles_null_keys_and_hashes_keys():
    p = bound(LegacyRoundRobinPartitioner(), seed=1)
    picks = [p.partition("t", None, 5) for _ in range(10)]
    assert [(x - picks[0]) % 5 for x in picks] == [i % 5 for i in range(10)]
    assert p.partition("t", b"21", 5) == (-973932308 & 0x7FFFFFFF) % 5


def test_java_round_robin_ignores_keys_and_starts_at_zero():
    p = bound(RoundRobinPartitioner())
    assert [p.partition("t", b"same", 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_ignore_keys_makes_keyed_records_sticky():
    p = bound(IgnoreKeysPartitioner(), seed=5, batch_size=10_000)
    assert len({p.partition("t", b"k%d" % i, 16, None, 10) for i in range(100)}) == 1


# ------------------------------------------------------------------ librdkafka

# Sarama partitioner_test.go TestConsistentCRCHashPartitioner (documented as librdkafka's
# `consistent` rule: unsigned CRC-32 % n), 100 partitions.
CRC_CASES = {b"abc123def456": 57, b"SheetJS": 26, b"9e8c7f4cf45857cfff7645d6": 24,
             b"3900446192ff85a5f67da10c": 75, b"0f4407b7a67d6d27de372198": 50}


@pytest.mark.parametrize("name", ["consistent_random", "consistent"])
def test_librdkafka_crc_partitioners_use_unsigned_crc32_mod_n(name):
    p = bound(make_partitioner(name))
    for key, expected in CRC_CASES.items():
        assert p.partition("t", key, 100) == expected
    assert partition_many(list(CRC_CASES), 100, name).tolist() == list(CRC_CASES.values())


def test_consistent_random_sends_empty_and_null_keys_to_the_sticky_partition():
    clock = MockClock(0)
    p = bound(ConsistentRandomPartitioner(), seed=11, clock=clock)
    first = p.partition("t", None, 50)
    assert p.partition("t", b"", 50) == first           # empty key: random (sticky), not crc32("")=0
    clock.advance(9)
    assert p.partition("t", None, 50) == first           # librdkafka sticky.partitioning.linger.ms=10
    seen = set()
    for _ in range(40):
        clock.advance(10)
        seen.add(p.partition("t", b"", 50))
    assert len(seen) > 1
    assert partition_many([b"", None, b"x"], 50, "consistent_random").tolist()[:2] == [-1, -1]


def test_consistent_maps_empty_key_to_partition_zero():
    p = bound(ConsistentPartitioner())
    assert p.partition("t", b"", 7) == 0
    assert partition_many([b""], 7, "consistent").tolist() == [0]


def test_murmur2_random_is_java_compatible_and_hashes_empty_key():
    p = bound(Murmur2RandomPartitioner())
    for key in [b"kafka", b"21", b"foobar", b"abc"]:
        assert p.partition("t", key, 9) == DefaultPartitioner().partition("t", key, 9)
    assert p.partition("t", b"", 9) == (0x106E08D9 & 0x7FFFFFFF) % 9


# ------------------------------------------------------------------ Sarama

def test_sarama_fnv1a_takes_abs_after_signed_modulo():
    p = bound(FnvPartitioner())
    # "1468509572224" -> fnv1a 0x80000000 = int32 min: Go's -2147483648 % 50 = -48 -> 48
    assert p.partition("t", b"1468509572224", 50) == 48
    # the reference-Java rule (WithAbsFirst) would give (h & 0x7fffffff) % 50 = 0
    assert (fnv1a32(b"1468509572224") & 0x7FFFFFFF) % 50 == 0
    h = fnv1a32(b"kafka")        # 0x0d33c4e1, positive
    assert p.partition("t", b"kafka", 7) == h % 7
    assert p.partition("t", b"", 10) == 0x7EE3623B % 10   # empty key is hashed, not random


def test_sarama_fnv1a_null_key_is_random_per_record():
    p = bound(FnvPartitioner(), seed=3)
    picks = [p.partition("t", None, 10) for _ in range(100)]
    assert all(0 <= x < 10 for x in picks) and len(set(picks)) > 5


def test_murmur3_uses_kafka_sign_rule():
    assert bound(Murmur3Partitioner()).partition("t", b"foo", 10) == (-156908512 & 0x7FFFFFFF) % 10


# ------------------------------------------------------------------ skew fixes and plumbing

def test_composite_key_hashes_key_and_time_bucket():
    p = bound(CompositeKeyPartitioner(bucket_ms=60_000))
    assert p.partition("t", b"m1", 64, 125_000) == (murmur2(b"m1@2") & 0x7FFFFFFF) % 64
    buckets = {p.partition("t", b"hot", 64, ts) for ts in range(0, 60_000 * 50, 60_000)}
    assert len(buckets) > 10          # a hot key moves across partitions over time
    assert p.partition("t", b"hot", 64, 1000) == p.partition("t", b"hot", 64, 59_999)


def test_hot_keys_round_robin_over_dedicated_partitions():
    p = bound(HotKeyPartitioner(hot_keys=[b"whale"], hot_partitions=[6, 7]))
    assert [p.partition("t", b"whale", 8) for _ in range(4)] == [6, 7, 6, 7]
    assert p.partition("t", b"minnow", 8) == (murmur2(b"minnow") & 0x7FFFFFFF) % 8
    q = bound(HotKeyPartitioner(hot_keys=["whale"]))
    assert {q.partition("t", b"whale", 8) for _ in range(4)} == {6, 7}   # last n//4 by default
    with pytest.raises(InvalidArgumentError, match=r"hot_partitions \[9\]"):
        bound(HotKeyPartitioner(hot_keys=[b"w"], hot_partitions=[9])).partition("t", b"w", 8)


def test_kafka_python_style_callable_partitioner():
    p = make_partitioner(lambda key, all_parts, avail: all_parts[-1])
    assert p.partition("t", b"k", 5) == 4


def test_unknown_partitioner_name_is_a_config_error():
    with pytest.raises(InvalidConfigurationError, match="'nope' for configuration partitioner"):
        make_partitioner("nope")


def test_partition_many_rejects_non_key_pure_partitioners_and_bad_counts():
    with pytest.raises(InvalidArgumentError, match="round_robin_all"):
        partition_many([b"a"], 3, "round_robin_all")
    with pytest.raises(InvalidPartitionsError, match="got 0"):
        partition_many([b"a"], 0)


def test_key_pure_list_is_documented_set():
    assert set(KEY_PURE) == {"murmur2", "round_robin", "consistent_random", "consistent",
                             "murmur2_random", "fnv1a", "murmur3"}
    assert set(PARTITIONERS) >= set(KEY_PURE) | {"ignore_keys", "round_robin_all", "composite", "hot_keys"}


def test_partition_many_on_pandas_series_as_an_arrow_udf_would():
    s = pd.Series([b"merchant_000001", None, b"merchant_000002"], dtype=object)
    out = partition_many(s, 64)
    assert out.dtype == np.int32
    assert out.tolist() == [partition_for_key(b"merchant_000001", 64), -1,
                            partition_for_key(b"merchant_000002", 64)]
