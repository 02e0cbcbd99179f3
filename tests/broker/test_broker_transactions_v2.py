"""KIP-890 transaction version 2 on the in-process broker (broker/txn_api.py): the
``transaction.version`` feature, EndTxn's epoch bump for a TV2 client, and the implicit
AddPartitions of a TV2 produce (``add_partitions_on_append``)."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import (
    InvalidProducerEpochError, InvalidProducerIdMappingError, InvalidTxnStateError, InvalidUpdateVersionError,
    KafkaSimError, KafkaStorageError, OutOfOrderSequenceNumberError,
)
from kafkasim.records import record_batch as rb

T0 = 1_700_000_000_000


def batch(pid, epoch, seq):
    return rb.encode_batch(0, [(0, T0, None, b"v%d" % seq, ())], producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq, attributes=rb.ATTR_TRANSACTIONAL)


@pytest.fixture
def b(tmp_path):
    with Broker(tmp_path / "d", clock=MockClock(T0)) as broker:
        broker.create_topic("t", 1)
        yield broker


def test_transaction_version_is_finalized_at_2_by_default(b):
    assert b.supported_features == {"transaction.version": (0, 2)}
    assert (b.finalized_features, b.finalized_features_epoch) == ({"transaction.version": 2}, 0)
    assert b.transaction_coordinator.transaction_version == 2


def test_update_features_sets_the_level_and_a_level_0_feature_is_not_listed(b):
    b.transaction_coordinator                       # created before: the update reaches it too
    # a downgrade must say so (kafka-features.sh downgrade), as Kafka's controller wants
    with pytest.raises(InvalidUpdateVersionError, match="Can't downgrade"):
        b.update_features({"transaction.version": 1})
    b.update_features({"transaction.version": 1}, upgrade_types={"transaction.version": "safe_downgrade"},
                      validate_only=True)
    assert (b.finalized_features, b.finalized_features_epoch) == ({"transaction.version": 2}, 0)
    b.update_features({"transaction.version": 1}, upgrade_types={"transaction.version": "safe_downgrade"})
    assert (b.finalized_features, b.finalized_features_epoch) == ({"transaction.version": 1}, 1)
    assert b.transaction_coordinator.transaction_version == 1
    b.update_features({"transaction.version": 0}, upgrade_types={"transaction.version": "unsafe_downgrade"})
    assert (b.finalized_features, b.finalized_features_epoch) == ({}, 2)
    b.update_features({"transaction.version": 2})                # an upgrade needs no type
    assert (b.finalized_features, b.finalized_features_epoch) == ({"transaction.version": 2}, 3)
    assert b.transaction_coordinator.transaction_version == 2


@pytest.mark.parametrize("levels, match", [
    ({"transaction.versio": 1}, "transaction.versio"),
    ({"transaction.version": 3}, "version 3 .* only supports versions 0-2"),
    ({"transaction.version": -1}, "version -1"),
    ({"transaction.version": True}, "version True"),
    ({"transaction.version": "2"}, "version '2'"),
])
def test_update_features_refuses_unknown_features_and_levels(b, levels, match):
    with pytest.raises(InvalidUpdateVersionError, match=match):
        b.update_features(levels, upgrade_types={name: "unsafe_downgrade" for name in levels})
    with pytest.raises(InvalidUpdateVersionError, match="upgrade type 'sideways'"):
        b.update_features({"transaction.version": 2}, upgrade_types={"transaction.version": "sideways"})
    assert (b.finalized_features, b.finalized_features_epoch) == ({"transaction.version": 2}, 0)


def test_update_features_wants_a_mapping(b):
    with pytest.raises(KafkaSimError, match="levels"):
        b.update_features([("transaction.version", 1)])


@pytest.mark.parametrize("tv, bump", [(1, 0), (2, 1)])
def test_end_txn_answers_the_next_epoch(b, tv, bump):
    pid, e0 = b.init_transactional_producer_id("tx", 60_000)
    b.add_partitions_to_txn("tx", pid, e0, [("t", 0)])
    b.produce("t", 0, batch(pid, e0, 0))
    assert b.end_txn("tx", pid, e0, commit=True, client_txn_version=tv) == (pid, e0 + bump)
    assert b.describe_transactions(["tx"])[0].producer_epoch == e0 + bump


def test_add_partitions_on_append_starts_the_transaction_and_fences_old_epochs(b):
    pid, e0 = b.init_transactional_producer_id("tx", 60_000)
    with pytest.raises(InvalidTxnStateError):
        b.produce("t", 0, batch(pid, e0, 0))                   # not added: refused
    b.add_partitions_on_append("tx", pid, e0, [("t", 0)])
    b.produce("t", 0, batch(pid, e0, 0))
    d = b.describe_transactions(["tx"])[0]
    assert (d.state, [(tp.topic, tp.partition) for tp in d.topic_partitions]) == ("Ongoing", [("t", 0)])
    assert b.end_txn("tx", pid, e0, commit=True, client_txn_version=2) == (pid, e0 + 1)
    # the epoch before the bump: PRODUCER_FENCED at the coordinator, told as Produce tells it
    with pytest.raises(InvalidProducerEpochError):
        b.add_partitions_on_append("tx", pid, e0, [("t", 0)])
    with pytest.raises(InvalidProducerIdMappingError):
        b.add_partitions_on_append("unknown", pid, e0, [("t", 0)])
    b.add_partitions_on_append("tx", pid, e0 + 1, [("t", 0)])
    b.produce("t", 0, batch(pid, e0 + 1, 0))                   # the new epoch restarts its sequences
    assert b.end_txn("tx", pid, e0 + 1, commit=False, client_txn_version=2) == (pid, e0 + 2)


def test_finalized_levels_survive_a_restart(tmp_path):
    with Broker(tmp_path / "d", clock=MockClock(T0)) as broker:
        broker.update_features({"transaction.version": 1}, upgrade_types={"transaction.version": "safe_downgrade"})
    with Broker(tmp_path / "d", clock=MockClock(T0)) as broker:
        assert (broker.finalized_features, broker.finalized_features_epoch) == ({"transaction.version": 1}, 1)
        assert broker.transaction_coordinator.transaction_version == 1


@pytest.mark.parametrize("text, match", [
    ('{"levels": {"transaction.version": 7}, "epoch": 1}', "level 7"),
    ('{"levels": {"kraft.version": 1}, "epoch": 1}', "kraft.version"),
    ('{"levels": {"transaction.version": 1}, "epoch": -3}', "epoch -3"),
    ('{"levels": {"transaction.version": "1"}, "epoch": 1}', "levels"),
    ('{"levels": {}}', "epoch and levels"),
    ("{not json", "unreadable"),
])
def test_a_bad_features_file_refuses_the_data_dir_naming_it(tmp_path, text, match):
    with Broker(tmp_path / "d", clock=MockClock(T0)):
        pass
    (tmp_path / "d" / "meta" / "features.json").write_text(text)
    with pytest.raises(KafkaStorageError, match=f"features.json.*{match}|{match}.*features.json"):
        Broker(tmp_path / "d", clock=MockClock(T0))


def plain(pid, epoch, seq):
    """An idempotent, non-transactional batch of the same producer id."""
    return rb.encode_batch(0, [(0, T0, None, b"p%d" % seq, ())], producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq)


@pytest.mark.parametrize("restart", [False, True])
def test_a_tv2_marker_raises_the_partitions_producer_epoch(tmp_path, restart):
    """Kafka's appendEndTxnMarker: the marker's higher epoch becomes the producer's, so the
    epoch before the bump is refused at the partition too (also once the table is rebuilt
    from the log after a restart), and the new epoch starts at sequence 0."""
    broker = Broker(tmp_path / "d", clock=MockClock(T0))
    try:
        broker.create_topic("t", 1)
        pid, e0 = broker.init_transactional_producer_id("tx", 60_000)
        broker.add_partitions_on_append("tx", pid, e0, [("t", 0)])
        broker.produce("t", 0, batch(pid, e0, 0))
        assert broker.end_txn("tx", pid, e0, commit=True, client_txn_version=2) == (pid, e0 + 1)
        if restart:
            broker.close()
            broker = Broker(tmp_path / "d", clock=MockClock(T0))
        with pytest.raises(InvalidProducerEpochError):
            broker.produce("t", 0, plain(pid, e0, 1))           # the next sequence, the old epoch
        with pytest.raises(OutOfOrderSequenceNumberError):
            broker.produce("t", 0, plain(pid, e0 + 1, 5))
        broker.produce("t", 0, plain(pid, e0 + 1, 0))
    finally:
        broker.close()


def test_an_admin_marker_with_a_higher_epoch_raises_the_producers_epoch(b):
    """WriteTxnMarkers (kafka-transactions.sh abort) goes through the same marker rule."""
    b.produce("t", 0, plain(77, 3, 0))
    b.write_txn_marker("t", 0, 77, 4, 0)                   # ABORT at epoch 4
    with pytest.raises(InvalidProducerEpochError):
        b.produce("t", 0, plain(77, 3, 1))
    b.produce("t", 0, plain(77, 4, 0))


@pytest.mark.parametrize("impl_name", ["Broker", "Cluster", "RemoteBroker"])
def test_every_implementation_serves_the_feature_calls(impl_name):
    """kafkasim features works on a data dir and against a server alike (broker/protocol.py)."""
    import inspect

    from kafkasim.broker.cluster import Cluster
    from kafkasim.broker.protocol import FeatureAPI
    from kafkasim.server.remote import RemoteBroker
    from tests.broker.test_protocol_conformance import _problems

    impl = {"Broker": Broker, "Cluster": Cluster, "RemoteBroker": RemoteBroker}[impl_name]
    assert _problems(impl, FeatureAPI) == []
    for name in ("supported_features", "finalized_features", "finalized_features_epoch"):
        assert isinstance(inspect.getattr_static(impl, name), property), name
