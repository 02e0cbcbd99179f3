"""The wire protocol, request by request: every served version of every API answers,
ApiVersions states exactly what is served, and bad frames close only their connection."""

from __future__ import annotations

import socket
import struct

import pytest

from kafkasim.records import record_batch as rb
from kafkasim.server.dispatch import APIS
from tests.server import raw
from tests.server.conftest import start_server

SERVED = [(a.key, v) for a in sorted(APIS.values(), key=lambda a: a.key)
          for v in range(a.min_version, a.max_version + 1)]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = start_server(tmp_path_factory.mktemp("protocol") / "data", "--max-request-bytes", "1048576")
    with raw.connect(s.host, s.port) as sock:   # topic "t" (1 partition) for the data APIs, not empty
        raw.call(sock, 3, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
        raw.call(sock, 0, 9, minimal_request(0, 9))   # whatever order (or -k subset) the tests run in
    yield s
    s.stop()


BATCH = rb.encode_batch(0, [(0, 1_700_000_000_000, b"k", b"v", (("h", b"1"),))])


def minimal_request(key: int, version: int) -> dict:
    """A small valid request body (newest field names; codec.build fits it to the version)."""
    return {
        0: {"acks": 1, "timeout": 5000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": BATCH}]}]},
        1: {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "session_epoch": -1,
            "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
        2: {"replica_id": -1, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -2}]}]},
        3: {"topics": [{"name": "t"}], "allow_auto_topic_creation": False},
        8: {"group_id": "standalone", "generation_id_or_member_epoch": -1, "member_id": "",
            "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_metadata": "m"}]}]},
        9: {"group_id": "standalone", "topics": [{"name": "t", "partition_indexes": [0]}]},
        10: {"key": "g", "key_type": 0, "coordinator_keys": ["g"]},
        11: {"group_id": "", "session_timeout": 10_000, "rebalance_timeout": 10_000, "member_id": "",
             "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]},
        12: {"group_id": "nogroup", "generation_id": 1, "member_id": "x"},
        13: {"group_id": "nogroup", "member_id": "x", "members": [{"member_id": "x"}]},
        14: {"group_id": "nogroup", "generation_id": 1, "member_id": "x"},
        15: {"groups": ["standalone"]},
        16: {},
        18: {"client_software_name": "raw", "client_software_version": "1"},
        19: {"topics": [{"name": f"created-v{version}", "num_partitions": 2, "replication_factor": 1}],
             "timeout": 5000},
        20: {"topic_names": ["nosuchtopic"], "topics": [{"name": "nosuchtopic"}], "timeout": 5000},
        21: {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout": 5000},
        22: {"transactional_id": None, "transaction_timeout": 5000},
        23: {"replica_id": -1, "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        32: {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}]},
        35: {"topics": [{"topic": "t", "partitions": [0]}]},
        37: {"topics": [{"name": "t", "count": 1}], "timeout": 5000, "validate_only": True},
        42: {"groups_names": ["nosuchgroup"]},
        43: {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0]}], "timeout": 5000},
        44: {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "3600000"}]}], "validate_only": True},
        45: {"timeout": 5000, "allow_replication_factor_change": True, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "replicas": [0]}]}]},
        46: {"timeout": 5000, "topics": None},
        47: {"group_id": "nosuchgroup", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
        57: {"timeout": 5000, "validate_only": True, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": 2, "upgrade_type": 1, "allow_downgrade": False}]},
        60: {"include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": True},
        # the transaction APIs for an id never initialised: Kafka's errors for it
        24: {"v3_and_below_transactional_id": "nosuchtx", "v3_and_below_producer_id": 1,
             "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": "t", "partitions": [0]}]},
        25: {"transactional_id": "nosuchtx", "producer_id": 1, "producer_epoch": 0, "group_id": "g"},
        26: {"transactional_id": "nosuchtx", "producer_id": 1, "producer_epoch": 0, "committed": True},
        28: {"transactional_id": "nosuchtx", "group_id": "g", "producer_id": 1, "producer_epoch": 0,
             "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
                 {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                               "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
        65: {"transactional_ids": []},
        61: {"topics": [{"name": "t", "partition_indexes": [0]}]},
        27: {"markers": [{"producer_id": 77, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
                          "topics": [{"name": "t", "partition_indexes": [9]}]}]},
        66: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
        # v8+: a list of groups (v9: with the member's id and epoch, none here: accepted)
        **({9: {"groups": [{"group_id": "standalone", "member_id": None, "member_epoch": -1,
                            "topics": [{"name": "t", "partition_indexes": [0]}]}]}} if key == 9 and version >= 8
           else {}),
        68: {"group_id": "cg", "member_id": f"member-v{version}", "member_epoch": 0, "rebalance_timeout": 30_000,
             "subscribed_topic_names": ["t"], "topic_partitions": []},
        69: {"group_ids": ["nosuchgroup"], "include_authorized_operations": False},
        # share groups (KIP-932): a member joins; the rest for a group or share session that does not exist
        76: {"group_id": "sg", "member_id": f"share-member-v{version}", "member_epoch": 0, "rack_id": None,
             "subscribed_topic_names": ["t"]},
        77: {"group_ids": ["nosuchgroup"], "include_authorized_operations": False},
        78: {"group_id": "sg", "member_id": "nosession", "share_session_epoch": 3, "max_wait": 0, "min_bytes": 1,
             "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10, "topics": [], "forgotten_topics_data": []},
        79: {"group_id": "sg", "member_id": "nosession", "share_session_epoch": 3, "topics": []},
        90: {"groups": [{"group_id": "nosuchgroup", "topics": None}]},
        91: {"group_id": f"reset-v{version}", "topics": [
            {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
        92: {"group_id": "nosuchgroup", "topics": [{"topic_name": "t"}]},
    }[key]


EXPECTED_CODE = {11: 24, 12: 25, 13: 25, 14: 25, 20: 3, 37: 37, 42: 69, 43: 84, 47: 69, 69: 69,
                 24: 49, 25: 49, 26: 49, 28: 48, 27: 3,
                 77: 69, 78: 122, 79: 122, 90: 69, 92: 69}   # errors a minimal request must get (91 creates the group, as Kafka)


def _codes(obj) -> list[int]:
    """Every error_code in a response, depth first."""
    import dataclasses

    out = []
    if dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.name in ("error_code", "partition_error_code"):
                out.append(int(value))
            else:
                out.extend(_codes(value))
    elif isinstance(obj, tuple):
        for x in obj:
            out.extend(_codes(x))
    return out


@pytest.mark.parametrize("key,version", SERVED, ids=[f"{APIS[k].name}-v{v}" for k, v in SERVED])
def test_every_served_version_answers(served, key, version):
    with raw.connect(served.host, served.port) as sock:
        if key == 9:   # the offset it reads back: committed here, not left to an earlier case
            raw.call(sock, 8, 8, minimal_request(8, 8))
        response = raw.call(sock, key, version, minimal_request(key, version), correlation_id=version + 7)
    codes = _codes(response)
    if (key, version) == (28, 5):   # TV2: the unknown id's coordinator answers the implicit add
        assert codes == [49], (codes, response)
    elif key in EXPECTED_CODE:
        assert EXPECTED_CODE[key] in codes, (codes, response)
    else:
        assert set(codes) <= {0}, response
    if key == 1:   # what was produced comes back, as Kafka v2 batches
        records = response.responses[0].partitions[0].records
        header, recs = raw.batches(records)[0]
        assert (recs[0].key, recs[0].value) == (b"k", b"v")
        assert header.partition_leader_epoch == 0            # the one broker's epoch, as stamped
    if key == 3 and version >= 7:                            # Metadata's leader epoch: the real one
        assert response.topics[0].partitions[0].leader_epoch == 0
    if key == 23:                                            # epoch 0 is current: the log end offset
        (p,) = response.topics[0].partitions
        assert p.leader_epoch == 0 and p.end_offset >= 1
    if key == 9:
        topics = response.groups[0].topics if version >= 8 else response.topics
        assert topics[0].partitions[0].committed_offset == 1
    if key == 35:   # one log dir, the data dir, with partition t-0's size (the batch produced above)
        (result,) = response.results
        assert result.log_dir == str(served.data_dir) or result.log_dir.endswith("data")
        assert result.topics[0].partitions[0].partition_size > 0


def test_api_versions_advertises_exactly_the_dispatch_table(served):
    with raw.connect(served.host, served.port) as sock:
        response = raw.call(sock, 18, 3, minimal_request(18, 3))
    got = {(k.api_key, k.min_version, k.max_version) for k in response.api_keys}
    assert got == {(a.key, a.min_version, a.max_version) for a in APIS.values()}


def test_unsupported_api_versions_version_gets_v0_answer_with_versions(served):
    """A client newer than us sends ApiVersions v99: Kafka answers v0 UNSUPPORTED_VERSION + the list."""
    frame = bytearray(raw.request_frame(18, 3, 5, minimal_request(18, 3)))
    struct.pack_into(">h", frame, 6, 99)
    with raw.connect(served.host, served.port) as sock:
        sock.sendall(frame)
        corr, response = raw.read_response(sock, 18, 0)
    assert corr == 5 and int(response.error_code) == 35
    assert {k.api_key for k in response.api_keys} == set(APIS)


def _closed(sock: socket.socket, timeout: float = 5) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("frame", [
    struct.pack(">i", 104_857_601),                         # over Kafka's default limit
    struct.pack(">i", 1_048_577),                           # over this server's --max-request-bytes
    struct.pack(">i", -1),                                  # negative size
    struct.pack(">i", 3) + b"abc",                          # shorter than a header
    struct.pack(">ihhi", 8, 999, 0, 1),                     # unknown API key
    struct.pack(">ihhi", 8, 0, 99, 1),                      # unserved Produce version
    raw.request_frame(3, 12, 1, {"topics": None})[:-3],     # size says more: never completed
], ids=["over-100MiB", "over-limit", "negative", "tiny", "unknown-key", "bad-version", "truncated"])
def test_bad_frames_close_the_connection_and_nothing_else(served, frame):
    with raw.connect(served.host, served.port) as sock:
        sock.sendall(frame)
        if frame.endswith(b"abc") or len(frame) > 8 and struct.unpack(">i", frame[:4])[0] == len(frame) - 4:
            assert _closed(sock)
        elif struct.unpack(">i", frame[:4])[0] > 1_048_576 or struct.unpack(">i", frame[:4])[0] < 0:
            assert _closed(sock)            # refused from the size alone, before any body
        else:
            sock.shutdown(socket.SHUT_WR)   # truncated: the server sees EOF mid-frame
            assert _closed(sock)
    with raw.connect(served.host, served.port) as sock:   # the server is still serving
        assert raw.call(sock, 18, 3, minimal_request(18, 3)).error_code == 0


def test_malformed_body_closes_the_connection(served):
    frame = bytearray(raw.request_frame(3, 12, 1, {"topics": [{"name": "t"}]}))
    frame[-6:] = b"\xff" * 6   # garbage where the topics array and tags were
    with raw.connect(served.host, served.port) as sock:
        sock.sendall(frame)
        assert _closed(sock)


def test_trailing_bytes_after_the_body_are_ignored_as_kafka_does(served):
    """Kafka reads the fields the schema defines and ignores what follows (librdkafka >= 2.12
    sends 3 such bytes with Metadata v9+): the request is answered, the connection stays."""
    for key, version, body in ((18, 3, minimal_request(18, 3)), (3, 12, {"topics": None})):
        frame = raw.request_frame(key, version, 7, body) + b"\x00\x01\x00"
        frame = struct.pack(">i", len(frame) - 4) + frame[4:]
        with raw.connect(served.host, served.port) as sock:
            sock.sendall(frame)
            corr, _ = raw.read_response(sock, key, version)
            assert corr == 7
            assert raw.call(sock, 18, 3, minimal_request(18, 3)).error_code == 0   # still open


def test_server_binds_loopback_by_default(tmp_path):
    import asyncio
    import inspect

    from kafkasim.broker import Broker
    from kafkasim.cli.serve import DEFAULT_LISTEN, parse_listen
    from kafkasim.server.server import KafkaServer

    assert parse_listen(DEFAULT_LISTEN) == ("127.0.0.1", 9092)
    assert inspect.signature(KafkaServer).parameters["host"].default == "127.0.0.1"

    async def main(broker):
        server = KafkaServer(broker, port=0)
        host, _ = await server.start()
        await server.close()
        return host

    with Broker(tmp_path / "d") as broker:
        assert asyncio.run(main(broker)) == "127.0.0.1"


def test_serve_help_has_an_example():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "kafkasim", "serve", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "Example:" in out and "--listen" in out


@pytest.mark.parametrize("version", [1, 12])
def test_forged_array_length_is_refused_before_kio_allocates(version):
    """kio's native reader sizes arrays from the wire; a forged count must never reach it."""
    from kafkasim.server import codec

    good = raw.request_frame(3, version, 1, {"topics": [{"name": "t"}]})[4:]
    header_len = 2 + 2 + 4 + 2 + len("raw-test") + (1 if version >= 9 else 0)
    forged = bytearray(good[:header_len])
    forged += struct.pack(">i", 0x7FFFFFFF) if version < 9 else b"\xff\xff\xff\xff\x07"
    forged += good[header_len + (4 if version < 9 else 1):]
    with pytest.raises(codec.MalformedRequest, match="cannot fit"):
        codec.decode_request(bytes(forged), 3, version)
    codec.decode_request(good, 3, version)   # the unforged frame parses


def test_forged_assignment_bytes_are_refused_not_read():
    """The leader's assignment is untrusted bytes too: a forged count is an error, not an abort."""
    from kafkasim.errors import InvalidRequestError
    from kafkasim.protocol.consumer_protocol import decode_assignment, encode_assignment
    from kafkasim.types import TopicPartition

    good = encode_assignment([TopicPartition("t", 1), TopicPartition("t", 0), TopicPartition("u", 2)])
    assert decode_assignment(good) == [TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 2)]
    forged = good[:2] + struct.pack(">i", 0x7FFFFFFF) + good[6:]
    with pytest.raises(InvalidRequestError, match="cannot fit"):
        decode_assignment(forged)
    with pytest.raises(InvalidRequestError):
        decode_assignment(b"\x00")


def test_retried_idempotent_batch_is_written_once(served):
    """The producer id, epoch and sequence cross the edge: a retry returns the first offset."""
    with raw.connect(served.host, served.port) as sock:
        init = raw.call(sock, 22, 4, {"transactional_id": None, "transaction_timeout": 5000})
        pid, epoch = init.producer_id, init.producer_epoch
        raw.call(sock, 3, 12, {"topics": [{"name": "idem-raw"}], "allow_auto_topic_creation": True})
        batch = rb.encode_batch(0, [(0, 1000, b"k", b"once", ()), (1, 1001, b"k", b"twice?", ())],
                                producer_id=pid, producer_epoch=epoch, base_sequence=0)
        request = {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": "idem-raw", "partition_data": [{"index": 0, "records": batch}]}]}
        first = raw.call(sock, 0, 9, request).responses[0].partition_responses[0]
        again = raw.call(sock, 0, 9, request).responses[0].partition_responses[0]
        assert (int(first.error_code), first.base_offset) == (0, 0)
        assert (int(again.error_code), again.base_offset) == (0, 0)
        skipped = rb.encode_batch(0, [(0, 1002, b"k", b"gap", ())], producer_id=pid,
                                  producer_epoch=epoch, base_sequence=5)
        request["topic_data"][0]["partition_data"][0]["records"] = skipped
        gap = raw.call(sock, 0, 9, request).responses[0].partition_responses[0]
        assert int(gap.error_code) == 45            # OUT_OF_ORDER_SEQUENCE_NUMBER
        end = raw.call(sock, 2, 6, {"replica_id": -1, "topics": [
            {"name": "idem-raw", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        assert end.topics[0].partitions[0].offset == 2


def test_subscription_bytes_round_trip_and_read_what_real_clients_send():
    from kafkasim.errors import InvalidRequestError
    from kafkasim.protocol.consumer_protocol import decode_subscription, encode_subscription

    meta = {"topics": ["b", "a"], "user_data": None, "owned_partitions": [["a", 1], ["a", 0]],
            "generation_id": 4, "rack_id": "r1"}
    assert decode_subscription(encode_subscription(meta)) == {
        "topics": ["a", "b"], "user_data": None, "owned_partitions": [["a", 0], ["a", 1]],
        "generation_id": 4, "rack_id": "r1"}
    # a v0 subscription as older clients send it: version, [topics], user data (null)
    theirs = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    assert decode_subscription(theirs)["topics"] == ["t"]
    with pytest.raises(InvalidRequestError):
        decode_subscription(b"\x00\x00\x7f\xff\xff\xff")
