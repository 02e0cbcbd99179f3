"""KIP-890 transaction version 2 over the wire, with raw requests against ``kafkasim serve``.

No Python client here negotiates TV2 (confluent-kafka/librdkafka, kafka-python and aiokafka
send EndTxn ≤ v3 and Produce ≤ v9 and never read ``transaction.version``), so these tests
speak the versions a Kafka 4 Java client uses once ApiVersions finalizes
``transaction.version`` at 2:

- ApiVersions advertises the feature (supported 0–2, finalized 2 by default; 1 with
  ``--feature transaction.version=1``) and the TV2 request versions;
- InitProducerId → Produce v12 without AddPartitionsToTxn → EndTxn v5 bumps the epoch (the
  answer carries it, and the markers are written with it) → the next transaction on the new
  epoch → the old epoch is fenced (Produce: INVALID_PRODUCER_EPOCH, EndTxn: PRODUCER_FENCED);
- TxnOffsetCommit v5 without AddOffsetsToTxn commits the group's offsets with the transaction;
- a TV1 client on the same server keeps its epoch across EndTxn v3 and still needs
  AddPartitionsToTxn (Produce v11 without it: TRANSACTION_ABORTABLE; v10: INVALID_TXN_STATE).
"""

from __future__ import annotations

import pytest

from kafkasim.errors import (
    InvalidProducerEpochError, InvalidTxnStateError, ProducerFencedError, TransactionAbortableError,
)
from kafkasim.records import framing
from kafkasim.records import record_batch as rb
from tests.server import raw

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000
TOPIC = "tv2"


def _batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    return rb.encode_batch(0, [(i, T0 + i, None, v, ()) for i, v in enumerate(values)], producer_id=pid,
                           producer_epoch=epoch, base_sequence=seq, attributes=rb.ATTR_TRANSACTIONAL)


def _create_topic(sock) -> None:
    r = raw.call(sock, 19, 5, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                                           "assignments": [], "configs": []}], "timeout": 10_000,
                               "validate_only": False})
    assert int(r.topics[0].error_code) == 0


def _init(sock, tid: str, version: int = 5):
    r = raw.call(sock, 22, version, {"transactional_id": tid, "transaction_timeout": 60_000,
                                     "producer_id": -1, "producer_epoch": -1})
    assert int(r.error_code) == 0
    return int(r.producer_id), int(r.producer_epoch)


def _produce(sock, version: int, tid: str, records: bytes) -> int:
    r = raw.call(sock, 0, version, {"transactional_id": tid, "acks": -1, "timeout": 10_000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}]})
    return int(r.responses[0].partition_responses[0].error_code)


def _end(sock, version: int, tid: str, pid: int, epoch: int, commit: bool):
    return raw.call(sock, 26, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                        "committed": commit})


def _describe(sock, tid: str):
    d = raw.call(sock, 65, 0, {"transactional_ids": [tid]}).transaction_states[0]
    return d.transaction_state, int(d.producer_epoch), [(t.topic, list(t.partitions)) for t in d.topics]


def _fetch(sock, isolation: int):
    r = raw.call(sock, 1, 12, {"max_wait": 0, "min_bytes": 0, "isolation_level": isolation, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": []})
    return r.responses[0].partitions[0]


def _values(partition) -> list:
    """The data values and markers of a fetched partition: ``("COMMIT"/"ABORT", epoch)`` for a
    control batch, the record values otherwise; aborted transactions' records dropped as a
    read_committed consumer drops them."""
    pending = sorted((int(a.first_offset), int(a.producer_id)) for a in (partition.aborted_transactions or ()))
    active: set = set()                      # producers inside an aborted transaction (Kafka's consumer)
    out = []
    for h, records in raw.batches(partition.records):
        while pending and pending[0][0] <= h.base_offset:
            active.add(pending.pop(0)[1])
        if h.attributes & framing.ATTR_CONTROL:
            kind = "COMMIT" if records[0].key[:4] == b"\x00\x00\x00\x01" else "ABORT"
            out.append((kind, h.producer_epoch))
            if kind == "ABORT":
                active.discard(h.producer_id)
        elif h.producer_id not in active:
            out += [r.value for r in records]
    return out


def test_api_versions_advertises_transaction_version_2_and_the_tv2_request_versions(server):
    with raw.connect(server.host, server.port) as sock:
        v4 = raw.call(sock, 18, 4, {"client_software_name": "raw", "client_software_version": "1"})
        v3 = raw.call(sock, 18, 3, {"client_software_name": "raw", "client_software_version": "1"})
    assert [(f.name, int(f.min_version), int(f.max_version)) for f in v4.supported_features] == [
        ("transaction.version", 0, 2)]
    # Kafka's schema: v0-v3 answers leave out features whose range starts at 0
    assert list(v3.supported_features) == []
    for answer in (v3, v4):
        assert [(f.name, int(f.min_version_level), int(f.max_version_level))
                for f in answer.finalized_features] == [("transaction.version", 2, 2)]
        assert int(answer.finalized_features_epoch) >= 0      # a Java client ignores features at -1
    served = {int(k.api_key): int(k.max_version) for k in v4.api_keys}
    assert {key: served[key] for key in (0, 22, 25, 26, 28)} == {0: 12, 22: 5, 25: 4, 26: 5, 28: 5}
    assert served[24] == 3                # AddPartitionsToTxn v4+ is broker to broker


def test_feature_option_finalizes_transaction_version_1(tmp_path, serve_process):
    served = serve_process(tmp_path / "tv1", "--feature", "transaction.version=1")
    with raw.connect(served.host, served.port) as sock:
        r = raw.call(sock, 18, 4, {"client_software_name": "raw", "client_software_version": "1"})
    assert [(f.name, int(f.max_version_level)) for f in r.finalized_features] == [("transaction.version", 1)]


def test_tv2_produce_adds_its_partition_and_end_txn_v5_bumps_the_epoch(server):
    tid = "tv2-tx"
    with raw.connect(server.host, server.port) as sock:
        _create_topic(sock)
        pid, e0 = _init(sock, tid)
        # 1. Produce v12 with no AddPartitionsToTxn: the partition joins the transaction
        assert _produce(sock, 12, tid, _batch(pid, e0, 0, [b"c0", b"c1"])) == 0
        assert _describe(sock, tid) == ("Ongoing", e0, [(TOPIC, [0])])
        # 2. EndTxn v5 commits and answers the next epoch; the COMMIT marker carries it
        r = _end(sock, 5, tid, pid, e0, True)
        assert (int(r.error_code), int(r.producer_id), int(r.producer_epoch)) == (0, pid, e0 + 1)
        assert _describe(sock, tid) == ("CompleteCommit", e0 + 1, [])
        # 3. the next transaction runs on the new epoch (sequences restart at 0), and aborts
        assert _produce(sock, 12, tid, _batch(pid, e0 + 1, 0, [b"a0"])) == 0
        r = _end(sock, 5, tid, pid, e0 + 1, False)
        assert (int(r.error_code), int(r.producer_id), int(r.producer_epoch)) == (0, pid, e0 + 2)
        # 4. the epochs before are fenced: a zombie's produce and its EndTxn
        assert _produce(sock, 12, tid, _batch(pid, e0 + 1, 1, [b"zombie"])) == InvalidProducerEpochError.errno
        assert _produce(sock, 12, tid, _batch(pid, e0, 2, [b"zombie"])) == InvalidProducerEpochError.errno
        r = _end(sock, 5, tid, pid, e0, True)
        assert (int(r.error_code), int(r.producer_id), int(r.producer_epoch)) == (ProducerFencedError.errno, -1, -1)
        # 5. read_committed reads the committed records; every marker has its bumped epoch
        assert _values(_fetch(sock, 1)) == [b"c0", b"c1", ("COMMIT", e0 + 1), ("ABORT", e0 + 2)]
        assert _values(_fetch(sock, 0)) == [b"c0", b"c1", ("COMMIT", e0 + 1), b"a0", ("ABORT", e0 + 2)]


def test_tv2_end_txn_retry_after_a_lost_answer_gets_the_same_epoch(server):
    """An EndTxn v5 retried with the old epoch (its answer was lost) is recognised as the
    retry (epoch + 1 is current) and answered again, without a second bump."""
    tid = "tv2-retry"
    with raw.connect(server.host, server.port) as sock:
        _create_topic(sock)
        pid, e0 = _init(sock, tid)
        assert _produce(sock, 12, tid, _batch(pid, e0, 0, [b"x"])) == 0
        first = _end(sock, 5, tid, pid, e0, True)
        retry = _end(sock, 5, tid, pid, e0, True)
        assert [(int(r.error_code), int(r.producer_epoch)) for r in (first, retry)] == [(0, e0 + 1), (0, e0 + 1)]
        assert _describe(sock, tid) == ("CompleteCommit", e0 + 1, [])


def test_tv2_txn_offset_commit_adds_the_offsets_partition_itself(server):
    tid, group = "tv2-offsets", "tv2-group"
    with raw.connect(server.host, server.port) as sock:
        _create_topic(sock)
        pid, e0 = _init(sock, tid)

        def commit_offset(version, epoch, offset):
            r = raw.call(sock, 28, version, {
                "transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
                "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                           "committed_leader_epoch": -1,
                                                           "committed_metadata": ""}]}]})
            return int(r.topics[0].partitions[0].error_code)

        def fetched():
            r = raw.call(sock, 9, 7, {"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0]}],
                                      "require_stable": False})
            return int(r.topics[0].partitions[0].committed_offset)

        # TV1's TxnOffsetCommit v4 needs AddOffsetsToTxn first
        assert commit_offset(4, e0, 3) == InvalidTxnStateError.errno
        assert commit_offset(5, e0, 7) == 0
        state, _, partitions = _describe(sock, tid)
        assert state == "Ongoing" and [t for t, _ in partitions] == ["__consumer_offsets"]
        assert fetched() == -1                                      # not before the commit
        r = _end(sock, 5, tid, pid, e0, True)
        assert (int(r.error_code), int(r.producer_epoch)) == (0, e0 + 1)
        assert fetched() == 7
        assert commit_offset(5, e0, 9) == InvalidProducerEpochError.errno   # the old epoch is fenced


def test_tv1_clients_keep_their_epoch_and_add_partitions_themselves(server):
    """On the same TV2 server a TV1 client (EndTxn v3, Produce v11) works as before: the
    epoch stays, and a partition it did not add is refused, with the error its version knows."""
    tid = "tv1-tx"
    with raw.connect(server.host, server.port) as sock:
        _create_topic(sock)
        pid, e0 = _init(sock, tid, version=4)
        # a partition not added: TRANSACTION_ABORTABLE from v11, INVALID_TXN_STATE before
        assert _produce(sock, 11, tid, _batch(pid, e0, 0, [b"no-add"])) == TransactionAbortableError.errno
        assert _produce(sock, 10, tid, _batch(pid, e0, 0, [b"no-add"])) == InvalidTxnStateError.errno
        r = raw.call(sock, 24, 3, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                                   "v3_and_below_producer_epoch": e0,
                                   "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]})
        assert int(r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code) == 0
        assert _produce(sock, 11, tid, _batch(pid, e0, 0, [b"v1"])) == 0
        assert int(_end(sock, 3, tid, pid, e0, True).error_code) == 0
        assert _describe(sock, tid) == ("CompleteCommit", e0, [])
        assert _values(_fetch(sock, 1)) == [b"v1", ("COMMIT", e0)]


def _finalized(sock):
    r = raw.call(sock, 18, 4, {"client_software_name": "raw", "client_software_version": "1"})
    return [(f.name, int(f.max_version_level)) for f in r.finalized_features], int(r.finalized_features_epoch)


def _update(sock, version: int, updates: list, validate_only: bool = False):
    r = raw.call(sock, 57, version, {"timeout": 60_000, "validate_only": validate_only, "feature_updates": [
        {"feature": f, "max_version_level": level, "upgrade_type": kind, "allow_downgrade": kind != 1}
        for f, level, kind in updates]})
    return int(r.error_code), [(x.feature, int(x.error_code)) for x in getattr(r, "results", ())]


def test_update_features_changes_the_finalized_level_all_or_none(server):
    """kafka-features.sh's UpdateFeatures: a downgrade must be asked as one, an unknown feature
    or level fails the whole request, validate_only changes nothing, and what ApiVersions
    finalizes follows (with a higher epoch)."""
    with raw.connect(server.host, server.port) as sock:
        assert _finalized(sock) == ([("transaction.version", 2)], 0)
        assert _update(sock, 1, [("transaction.version", 1, 1)]) == (95, [])          # UPGRADE cannot lower
        assert _update(sock, 1, [("transaction.version", 3, 1)]) == (95, [])          # outside 0-2
        assert _update(sock, 1, [("transaction.version", 1, 2), ("group.version", 1, 1)]) == (95, [])
        assert _update(sock, 1, [("transaction.version", 1, 2)], validate_only=True) == (
            0, [("transaction.version", 0)])
        assert _finalized(sock) == ([("transaction.version", 2)], 0)
        assert _update(sock, 1, [("transaction.version", 1, 2)]) == (0, [("transaction.version", 0)])
        assert _finalized(sock) == ([("transaction.version", 1)], 1)
        assert _update(sock, 2, [("transaction.version", 0, 3)]) == (0, [])           # v2: no results
        assert _finalized(sock) == ([], 2)                                             # level 0: not listed
        assert _update(sock, 0, [("transaction.version", 2, 1)]) == (0, [("transaction.version", 0)])
        assert _update(sock, 1, [("transaction.version", 2, 1), ("transaction.version", 1, 2)])[0] == 42
        assert _finalized(sock) == ([("transaction.version", 2)], 3)


def test_kafka_python_describe_features_reads_transaction_version(tmp_path, serve_process):
    """kafka-python's admin ``describe_features`` (ApiVersions v3+) shows what a TV2-aware
    client reads: transaction.version supported 0-2 and finalized as the server was told."""
    from kafka.admin import KafkaAdminClient
    for level in (2, 1):
        served = serve_process(tmp_path / f"tv{level}", "--feature", f"transaction.version={level}")
        admin = KafkaAdminClient(bootstrap_servers=f"{served.host}:{served.port}")
        try:
            features = admin.describe_features()
        finally:
            admin.close()
        # epoch 0: a new data dir's defaults (level 2); 1: --feature changed the level
        assert features == {"transaction.version": {"supported": (0, 2), "finalized": (level, level),
                                                    "finalized_epoch": 0 if level == 2 else 1}}


def test_kafka_python_update_features_downgrades_and_upgrades_transaction_version(server):
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        assert admin.update_features({"transaction.version": ("SAFE_DOWNGRADE", 1)}) == {"transaction.version": "OK"}
        assert admin.describe_features()["transaction.version"]["finalized"] == (1, 1)
        assert admin.update_features({"transaction.version": 2}) == {"transaction.version": "OK"}
        assert admin.describe_features()["transaction.version"]["finalized"] == (2, 2)
    finally:
        admin.close()


def test_tv2_produce_on_a_served_cluster_adds_the_partition_only_at_its_leader(tmp_path, serve_process):
    """On a served cluster the implicit add happens where Kafka's does, at the partition's
    leader: a Produce v12 sent to another broker is NOT_LEADER_OR_FOLLOWER and adds nothing."""
    from kafkasim.server.address import read_address
    served = serve_process(tmp_path / "cluster", "--brokers", "0,1,2")
    listeners = {b["id"]: (b["host"], b["port"]) for b in read_address(served.data_dir)["brokers"]}
    tid = "tv2-cluster"
    with raw.connect(served.host, served.port) as sock:
        r = raw.call(sock, 19, 5, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 3,
                                               "assignments": [], "configs": []}], "timeout": 10_000})
        assert int(r.topics[0].error_code) == 0
        meta = raw.call(sock, 3, 12, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False})
        leader = int(meta.topics[0].partitions[0].leader_id)
        coordinator = raw.call(sock, 10, 4, {"key_type": 1, "coordinator_keys": [tid]}).coordinators[0]
    follower = next(b for b in sorted(listeners) if b != leader)
    with raw.connect(coordinator.host, coordinator.port) as coord:
        pid, e0 = _init(coord, tid)
        with raw.connect(*listeners[follower]) as sock:
            assert _produce(sock, 12, tid, _batch(pid, e0, 0, [b"x"])) == 6         # NOT_LEADER_OR_FOLLOWER
        # (Describe would answer start time -1, which kio's reader refuses: ListTransactions)
        listed = raw.call(coord, 66, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1})
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [(tid, "Empty")]
        with raw.connect(*listeners[leader]) as sock:
            assert _produce(sock, 12, tid, _batch(pid, e0, 0, [b"x"])) == 0
        assert _describe(coord, tid) == ("Ongoing", e0, [(TOPIC, [0])])
        r = _end(coord, 5, tid, pid, e0, True)
        assert (int(r.error_code), int(r.producer_epoch)) == (0, e0 + 1)


@pytest.mark.parametrize("value, message", [
    ("transaction.version=3", "level 3 is outside 0-2"),
    ("transaction.versio=1", "unknown feature 'transaction.versio'"),
    ("transaction.version=two", "level 'two' is not a number"),
    ("transaction.version", "expected NAME=LEVEL"),
])
def test_serve_refuses_a_bad_feature_naming_it(tmp_path, value, message):
    import subprocess
    import sys
    data = tmp_path / "never"
    done = subprocess.run([sys.executable, "-m", "kafkasim", "serve", "--data-dir", str(data), "--listen",
                           "127.0.0.1:0", "--feature", value], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and message in done.stderr and value in done.stderr
    assert not data.exists()


def test_features_cli_goes_through_a_running_server(server):
    """``kafkasim features`` on the data dir a server holds talks to it (ApiVersions v4,
    UpdateFeatures): what it changes is what clients are told."""
    import subprocess
    import sys

    def cli(*argv):
        return subprocess.run([sys.executable, "-m", "kafkasim", "features", *argv, "--data-dir", server.data_dir],
                              capture_output=True, text=True, timeout=60)
    done = cli("describe")
    assert (done.returncode, done.stdout) == (0, "Feature: transaction.version\tSupportedMinVersion: 0\t"
                                                 "SupportedMaxVersion: 2\tFinalizedVersionLevel: 2\tEpoch: 0\n")
    done = cli("upgrade", "--feature", "transaction.version=1")
    assert done.returncode == 1 and done.stdout.startswith("Could not upgrade transaction.version to 1. Invalid "
                                                           "update version 1 for feature transaction.version.")
    assert done.stderr.endswith("1 out of 1 operation(s) failed.\n")
    done = cli("downgrade", "--feature", "transaction.version=1")
    assert (done.returncode, done.stdout) == (0, "transaction.version was downgraded to 1.\n")
    with raw.connect(server.host, server.port) as sock:
        assert _finalized(sock) == ([("transaction.version", 1)], 1)
