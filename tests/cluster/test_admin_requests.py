"""DeleteRecords, ElectLeaders and the partition reassignment APIs on a 3-broker cluster
(the library methods the served cluster answers with)."""

from __future__ import annotations

from kafkasim.broker.cluster import Cluster
from kafkasim.errors import (
    ElectionNotNeededError, EligibleLeadersNotAvailableError, InvalidReplicaAssignmentError,
    InvalidReplicationFactorError, NoReassignmentInProgressError, PreferredLeaderNotAvailableError,
)
from kafkasim.types import TopicPartition

from tests.cluster.conftest import RACKS3

T0 = TopicPartition("t", 0)


def _records(c, n, clock):
    c.append_records("t", 0, [(clock.now_ms(), b"k%d" % i, b"v", ()) for i in range(n)])


def test_delete_records_moves_every_live_replica_and_a_stopped_one_when_it_returns(cluster, clock, tmp_path):
    cluster.create_topic("t", 1, 3)
    _records(cluster, 10, clock)
    part = cluster._partitions[T0]
    down = [b for b in part.replicas if b != part.leader][0]
    cluster.stop_broker(down)
    assert cluster.delete_records("t", 0, 6) == 6
    assert {b: r.log.log_start_offset for b, r in part.hosted.items() if b != down} == {
        b: 6 for b in part.hosted if b != down}
    assert part.hosted[down].log.log_start_offset == 0
    cluster.start_broker(down)                            # it learns the log start when it fetches
    cluster.tick()
    assert part.hosted[down].log.log_start_offset == 6
    cluster.close()
    with Cluster(tmp_path / "data", clock=clock) as again:   # persisted on every replica
        assert {r.log.log_start_offset for r in again._partitions[T0].hosted.values()} == {6}


def test_preferred_election_moves_leadership_back_and_says_why_it_cannot(cluster):
    cluster.create_topic("t", 1, 3)
    preferred = cluster.assignment()[T0][0]
    cluster.stop_broker(preferred)
    assert cluster.leader_for("t", 0) != preferred
    assert isinstance(cluster.elect("preferred", [T0])[T0], PreferredLeaderNotAvailableError)
    cluster.start_broker(preferred)
    cluster.tick()
    assert cluster.elect("preferred", [T0]) == {T0: None}
    assert cluster.leader_for("t", 0) == preferred
    assert isinstance(cluster.elect("preferred", [T0])[T0], ElectionNotNeededError)


def test_unclean_election_elects_a_live_out_of_sync_replica_whatever_the_topic_config(cluster, clock):
    cluster.create_topic("t", 1, 2)                       # unclean.leader.election.enable=false
    _records(cluster, 3, clock)
    replicas = cluster.assignment()[T0]
    leader, follower = replicas[0], replicas[1]
    cluster.stop_broker(follower)                          # leaves the ISR
    _records(cluster, 2, clock)                            # only the leader has these
    cluster.stop_broker(leader)                            # offline: no live ISR member
    assert cluster.leader_for("t", 0) == -1
    cluster.start_broker(follower)
    assert cluster.leader_for("t", 0) == -1                # a clean election is not possible
    assert cluster.elect("unclean", [T0]) == {T0: None}
    assert cluster.leader_for("t", 0) == follower
    assert [r["offset"] for r in cluster.lost_records] == [3, 4]   # what only the old leader had
    assert isinstance(cluster.elect("unclean", [T0])[T0], ElectionNotNeededError)


def test_unclean_election_with_no_live_replica(cluster):
    cluster.create_topic("t", 1, 1)
    (only,) = cluster.assignment()[T0]
    cluster.stop_broker(only)
    assert isinstance(cluster.elect("unclean", [T0])[T0], EligibleLeadersNotAvailableError)


def test_alter_partition_reassignments_moves_replicas_and_answers_kafkas_errors(cluster, clock):
    cluster.create_topic("t", 1, 2)
    _records(cluster, 5, clock)
    current = cluster.assignment()[T0]
    spare = next(b for b, _ in RACKS3 if b not in current)
    assert cluster.alter_partition_reassignments({T0: [spare, current[0]]}) == {T0: None}
    assert cluster.assignment()[T0] == [spare, current[0]]
    assert cluster.list_partition_reassignments() == {}    # completed within the call
    assert isinstance(cluster.alter_partition_reassignments({T0: None})[T0], NoReassignmentInProgressError)
    assert isinstance(cluster.alter_partition_reassignments({T0: [0, 9]})[T0], InvalidReplicaAssignmentError)
    assert isinstance(cluster.alter_partition_reassignments({T0: [0, 0]})[T0], InvalidReplicaAssignmentError)
    refused = cluster.alter_partition_reassignments({T0: [0, 1, 2]}, allow_replication_factor_change=False)
    assert isinstance(refused[T0], InvalidReplicationFactorError)
    assert cluster.assignment()[T0] == [spare, current[0]]  # nothing half-done
