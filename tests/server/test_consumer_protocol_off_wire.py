"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) answer errors as Kafka's broker
does, in raw frames against ``kafkasim serve``.

With ``group.coordinator.rebalance.protocols=classic`` Kafka still advertises both APIs in
ApiVersions (``ApiVersionsResponse.filterApis`` leaves out only the telemetry APIs) and its
``KafkaApis`` gate answers UNSUPPORTED_VERSION through ``getErrorResponse``: the error code
alone, every other field at its schema default (Kafka's own
``ConsumerGroupHeartbeatRequestTest.testConsumerGroupHeartbeatIsInaccessibleWhenDisabledByStaticConfig``
expects exactly ``new ConsumerGroupHeartbeatResponseData().setErrorCode(UNSUPPORTED_VERSION)``).
A coordinator error keeps its message, and its member epoch is the default 0 too.
"""

from __future__ import annotations

from kafkasim.errors import GroupIdNotFoundError, UnsupportedVersionError

from tests.server import raw

HEARTBEAT = {"group_id": "g", "member_id": "m1", "member_epoch": 0, "instance_id": None, "rack_id": None,
             "rebalance_timeout": 30_000, "subscribed_topic_names": ["events"], "subscribed_topic_regex": None,
             "server_assignor": None, "topic_partitions": []}


def test_with_the_consumer_protocol_off_both_apis_are_advertised_and_answer_the_code_alone(tmp_path, serve_process):
    served = serve_process(tmp_path / "data", "--override", "group.coordinator.rebalance.protocols=classic")
    with raw.connect(served.host, served.port) as sock:
        versions = raw.call(sock, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys
                if k.api_key in (68, 69)} == {68: (0, 1), 69: (0, 1)}
        for version in (0, 1):
            r = raw.call(sock, 68, version, HEARTBEAT, correlation_id=2 + version)
            assert (r.error_code, r.error_message, r.member_id, r.member_epoch,
                    r.heartbeat_interval.total_seconds(), r.assignment) == (
                UnsupportedVersionError.errno, None, None, 0, 0, None)
        d = raw.call(sock, 69, 1, {"group_ids": ["g", "h"], "include_authorized_operations": False}, correlation_id=4)
        assert [(g.group_id, g.error_code, g.error_message, g.group_epoch, g.assignment_epoch, list(g.members))
                for g in d.groups] == [(gid, UnsupportedVersionError.errno, None, 0, 0, []) for gid in ("g", "h")]


def test_a_coordinator_error_keeps_its_message_and_the_default_member_epoch(server):
    with raw.connect(server.host, server.port) as sock:
        r = raw.call(sock, 68, 1, dict(HEARTBEAT, member_id="nobody", member_epoch=3))
        assert (r.error_code, r.error_message) == (GroupIdNotFoundError.errno, "Consumer group g not found.")
        assert (r.member_id, r.member_epoch) == (None, 0)
        d = raw.call(sock, 69, 1, {"group_ids": ["missing"], "include_authorized_operations": False},
                     correlation_id=2)
        [g] = d.groups
        assert (g.error_code, g.error_message) == (GroupIdNotFoundError.errno, "Group missing not found.")
        assert (g.group_epoch, g.assignment_epoch) == (0, 0)
