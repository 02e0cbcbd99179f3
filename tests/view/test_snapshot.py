"""The live view's snapshot: what DataDirWatcher reads from a data dir the real Broker,
Producer and Consumer wrote (in-process, on a MockClock), and what it must never do."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from kafkasim.broker import Broker
from kafkasim.consumer import Consumer
from kafkasim.errors import InvalidArgumentError
from kafkasim.partitioning.base import murmur2_partition
from kafkasim.producer import Producer
from kafkasim.records import record_batch as rb
from kafkasim.view.snapshot import DataDirWatcher


def partitions(snap, topic="orders"):
    t = next(t for t in snap["topics"] if t["name"] == topic)
    return {p["partition"]: p for p in t["partition_stats"]}


def tree_state(root):
    """Every file under ``root`` with its size and mtime: what a read-only reader must not change."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            st = os.stat(os.path.join(d, f))
            out[os.path.join(d, f)] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture
def data(tmp_path, clock):
    b = Broker(tmp_path / "data", clock=clock)
    b.create_topic("orders", 4)
    yield b, str(tmp_path / "data")
    b.close()


def produce(broker, n, client_id="shop", prefix="k", **kw):
    p = Producer(broker, client_id=client_id, stamp_headers=True, **kw)
    metas = [p.send("orders", key=f"{prefix}{i}".encode(), value=b"v") for i in range(n)]
    p.flush()
    return [m.get() for m in metas]


def test_counts_offsets_routing_and_producers_match_what_the_broker_wrote(data, clock):
    broker, d = data
    metas = produce(broker, 60)
    snap = DataDirWatcher(d, clock=clock).poll()
    parts = partitions(snap)
    for p in range(4):
        leo = broker.list_offsets("orders", p, -1)[0]
        assert parts[p]["log_end_offset"] == leo
        assert parts[p]["records"] == sum(1 for m in metas if m.partition == p)
    assert [t["name"] for t in snap["topics"]] == ["orders"]      # __consumer_offsets is not a topic shown
    for r in snap["recent"]:
        assert r["hash_partition"] == murmur2_partition(r["key"].encode(), 4) == r["partition"]
        assert r["producer"] == "shop"
    (shop,) = snap["producers"]
    assert shop["client_id"] == "shop" and shop["records"] == 60
    assert shop["by_partition"] == {f"orders-{p}": parts[p]["records"] for p in range(4) if parts[p]["records"]}
    assert snap["brokers"] == [{"id": 0, "rack": None, "log_dir": os.path.abspath(d), "state": "not running",
                                "isolated_from": None, "disk_full": False, "log_dir_offline": False, "slow_ms": 0,
                                "serving": False, "listener": None, "port_open": False,
                                "replicas": [{"topic": "orders", "partition": p, "role": "leader"} for p in range(4)]}]
    assert snap["problems"] == []


def test_a_record_routed_against_the_hash_shows_the_log_partition_not_the_hash(data, clock):
    broker, d = data
    key = b"merchant-7"
    elsewhere = (murmur2_partition(key, 4) + 1) % 4
    p = Producer(broker, client_id="manual")
    p.send("orders", key=key, value=b"v", partition=elsewhere).get()
    (r,) = DataDirWatcher(d, clock=clock).poll()["recent"]
    assert (r["partition"], r["hash_partition"]) == (elsewhere, murmur2_partition(key, 4))
    assert r["producer"] != "manual"          # not stamped: identified by producer id, or not at all


def test_new_records_are_counted_once_and_rates_follow_the_clock(data, clock):
    broker, d = data
    w = DataDirWatcher(d, clock=clock, rate_window_ms=10_000)
    produce(broker, 20)
    first = partitions(w.poll())
    assert sum(p["records"] for p in first.values()) == 20
    assert all(p["rate"] == 0 for p in first.values())       # one sample: no rate yet
    clock.advance(4_000)
    metas = produce(broker, 40, prefix="later")
    second = partitions(w.poll())
    assert sum(p["records"] for p in second.values()) == 60
    for p in range(4):
        added = sum(1 for m in metas if m.partition == p)
        assert second[p]["records"] == first[p]["records"] + added
        assert second[p]["rate"] == pytest.approx(added / 4.0)
    clock.advance(20_000)                 # nothing new for longer than the window: the rate falls to 0
    w.poll()
    clock.advance(1_000)
    assert all(p["rate"] == 0 for p in partitions(w.poll()).values())


def test_segments_rolled_and_deleted_are_followed(tmp_path, clock):
    d = str(tmp_path / "data")
    with Broker(d, clock=clock) as broker:
        broker.create_topic("orders", 1, configs={"segment.bytes": 1024})
        w = DataDirWatcher(d, clock=clock)
        for i in range(30):
            broker.append_records("orders", 0, [(clock.now_ms(), b"k%d" % i, b"x" * 100, ())])
        snap = partitions(w.poll())[0]
        assert snap["segments"] > 1 and snap["records"] == 30 and snap["log_end_offset"] == 30
        broker.alter_topic_configs("orders", {"retention.bytes": "1024"})
        broker.run_log_maintenance()
        after = partitions(w.poll())[0]
        start = broker.list_offsets("orders", 0, -2)[0]
        assert start > 0 and after["log_start_offset"] == start
        assert after["records"] == 30 - start and after["log_end_offset"] == 30


def test_a_torn_tail_is_not_counted_and_a_corrupt_batch_is_reported_without_writing(tmp_path, clock):
    d = str(tmp_path / "data")
    with Broker(d, clock=clock) as broker:
        broker.create_topic("orders", 1)
        broker.append_records("orders", 0, [(clock.now_ms(), b"k", b"v", ())] * 3)
    seg = os.path.join(d, "orders-0", "00000000000000000000.log")
    batch = rb.encode_batch(3, [(0, clock.now_ms(), b"k", b"v", ())])
    w = DataDirWatcher(d, clock=clock)
    assert partitions(w.poll())[0]["records"] == 3
    with open(seg, "ab") as f:                # a writer in the middle of a batch
        f.write(batch[:30])
    before = tree_state(d)
    snap = w.poll()
    assert partitions(snap)[0]["records"] == 3 and snap["problems"] == []
    with open(seg, "ab") as f:                # ... finishes it
        f.write(batch[30:])
    assert partitions(w.poll())[0]["log_end_offset"] == 4
    bad = bytearray(rb.encode_batch(4, [(0, clock.now_ms(), b"k", b"v", ())]))
    bad[-1] ^= 0xFF                           # whole, but its CRC does not match
    with open(seg, "ab") as f:
        f.write(bytes(bad))
    snap = w.poll()
    assert partitions(snap)[0]["records"] == 4
    assert len(snap["problems"]) == 1 and "CRC mismatch" in snap["problems"][0] and seg in snap["problems"][0]
    assert {k: v for k, v in tree_state(d).items() if k != seg} == {k: v for k, v in before.items() if k != seg}


def test_groups_members_ownership_and_rebalances_come_from_consumer_offsets(data, clock):
    broker, d = data
    produce(broker, 8)
    w = DataDirWatcher(d, clock=clock)
    a = Consumer(broker, "orders", group_id="g", client_id="a")
    for _ in range(40):
        clock.advance(100)
        a.poll()
    (g1,) = w.poll()["groups"]
    assert g1["state"] == "Stable" and [m["client_id"] for m in g1["members"]] == ["a"]
    assert g1["members"][0]["assignment"] == [["orders", p] for p in range(4)]
    color_a = g1["members"][0]["color"]
    b = Consumer(broker, "orders", group_id="g", client_id="b")
    for _ in range(80):
        clock.advance(100)
        a.poll()
        b.poll()
    a.commit()
    snap = w.poll()
    (g2,) = snap["groups"]
    owners = {tp[1]: m["client_id"] for m in g2["members"] for tp in m["assignment"]}
    truth = broker.describe_group("g")
    assert g2["generation"] == truth["generation"] == g1["generation"] + 1
    assert owners == {tp.partition: m["client_id"] for m in truth["members"] for tp in m["assignment"]}
    assert set(owners.values()) == {"a", "b"}
    colors = {m["client_id"]: m["color"] for m in g2["members"]}
    assert colors["a"] == color_a != colors["b"]       # a keeps its colour; b gets another
    latest = snap["rebalances"][0]
    assert latest["generation"] == g2["generation"] and [x.split(" ")[0] for x in latest["joined"]] == ["b"]
    assert {m["partition"] for m in latest["moved"]} == {p for p, c in owners.items() if c == "b"}
    committed = {c["partition"]: c for c in g2["committed"]}
    for p, owner in owners.items():
        if owner == "a":
            assert committed[p]["lag"] == 0


def test_a_cluster_data_dir_shows_racks_states_leaders_and_the_leaders_log(data, clock):
    broker, d = data
    produce(broker, 12)
    older = broker.list_offsets("orders", 0, -1)[0]
    shutil.copytree(os.path.join(d, "orders-0"), os.path.join(d, "broker-0", "orders-0"))
    produce(broker, 40, prefix="more")
    newer = broker.list_offsets("orders", 0, -1)[0]
    assert newer > older
    shutil.copytree(os.path.join(d, "orders-0"), os.path.join(d, "broker-1", "orders-0"))
    cluster = {"version": 1, "seed": 0, "placements": 1, "lost_records": [],
               "brokers": [{"id": 0, "rack": "r1", "state": "alive", "delay_ms": 0},
                           {"id": 1, "rack": "r2", "state": "stopped", "delay_ms": 0}],
               "partitions": {"orders": [{"replicas": [0, 1], "leader": 0, "isr": [0], "leader_epoch": 2}]
                              + [{"replicas": [1, 0], "leader": -1, "isr": [], "leader_epoch": 1}] * 3}}
    with open(os.path.join(d, "meta", "cluster.json"), "w") as f:
        json.dump(cluster, f)
    w = DataDirWatcher(d, clock=clock)
    snap = w.poll()
    assert [(b["id"], b["rack"], b["state"]) for b in snap["brokers"]] == [(0, "r1", "alive"), (1, "r2", "stopped")]
    p0, p1 = partitions(snap)[0], partitions(snap)[1]
    assert (p0["replicas"], p0["leader"], p0["isr"], p0["held_by"]) == ([0, 1], 0, [0], [0, 1])
    assert p0["log_end_offset"] == older          # the leader's log, not the longer copy
    assert (p1["leader"], p1["held_by"], p1["records"]) == (-1, [], 0)   # offline, held by no broker dir
    assert snap["cluster_events"] == []
    cluster["brokers"][0]["state"] = "stopped"          # broker 0 fails; broker 1 is back and leads
    cluster["brokers"][1]["state"] = "alive"
    cluster["partitions"]["orders"][0].update(leader=1, isr=[1])
    with open(os.path.join(d, "meta", "cluster.json"), "w") as f:
        json.dump(cluster, f)
    clock.advance(500)
    snap = w.poll()
    assert partitions(snap)[0]["log_end_offset"] == newer      # now the new leader's log
    assert sorted((e["kind"], e.get("broker", e.get("partition")), e["from"], e["to"])
                  for e in snap["cluster_events"]) == [
        ("broker", 0, "alive", "stopped"), ("broker", 1, "stopped", "alive"), ("leader", 0, 0, 1)]
    assert {e["at_ms"] for e in snap["cluster_events"]} == {clock.now_ms()}


def test_a_one_broker_data_dir_has_broker_0_leading_everything(data, clock):
    broker, d = data
    snap = DataDirWatcher(d, clock=clock).poll()
    assert all((p["replicas"], p["leader"], p["isr"], p["held_by"]) == ([0], 0, [0], [0])
               for p in partitions(snap).values())


def test_a_missing_data_dir_is_an_error_naming_it(tmp_path):
    with pytest.raises(InvalidArgumentError, match="nowhere"):
        DataDirWatcher(str(tmp_path / "nowhere"))


def test_a_large_backlog_is_read_in_bounded_polls_and_catches_up_in_order(tmp_path, clock):
    d = str(tmp_path / "data")
    with Broker(d, clock=clock) as broker:
        broker.create_topic("orders", 1, configs={"segment.bytes": 2048})
        for i in range(40):
            broker.append_records("orders", 0, [(clock.now_ms() + i, b"k%d" % i, b"x" * 100, ())])
        w = DataDirWatcher(d, clock=clock, budget=600, recent=100)
        snap = w.poll()
        first = partitions(snap)[0]["records"]
        assert snap["behind"] and 0 < first < 40
        polls = 1
        while snap["behind"]:
            snap = w.poll()
            polls += 1
            assert polls < 40
        assert partitions(snap)[0]["records"] == 40 and partitions(snap)[0]["log_end_offset"] == 40
        assert [r["offset"] for r in snap["recent"]] == list(range(39, -1, -1))   # each once, in order


# -- issue 21: the cluster, a rerun, the active topic and group, simulated times, routing --------------

def run_group(broker, clock, topic, group, client, polls=40):
    c = Consumer(broker, topic, group_id=group, client_id=client)
    for _ in range(polls):
        clock.advance(100)
        c.poll()
    c.commit()
    return c


def test_a_cluster_keeps_consumer_offsets_at_its_root_and_the_view_finds_the_group(tmp_path, clock):
    from kafkasim.broker.cluster import Cluster

    d = str(tmp_path / "cluster")
    with Cluster(d, [(0, "r1"), (1, "r2"), (2, "r3")], clock=clock) as cluster:
        cluster.create_topic("orders", 3, replication_factor=3)
        Producer(cluster, client_id="shop", stamp_headers=True).send("orders", key=b"k", value=b"v").get()
        run_group(cluster, clock, "orders", "ledger", "c1")
        assert any(name.startswith("__consumer_offsets-") for name in os.listdir(d))   # at the root
        snap = DataDirWatcher(d, clock=clock).poll()
    (g,) = snap["groups"]
    assert g["group_id"] == "ledger" and [m["client_id"] for m in g["members"]] == ["c1"]
    assert sorted(tuple(tp) for tp in g["members"][0]["assignment"]) == [("orders", p) for p in range(3)]
    assert [t["name"] for t in snap["topics"]] == ["orders"]
    assert snap["active"] == {"topic": "orders", "group": "ledger"}
    assert [(b["id"], b["rack"]) for b in snap["brokers"]] == [(0, "r1"), (1, "r2"), (2, "r3")]
    for b in snap["brokers"]:              # rf 3: every broker holds every partition, one role each
        assert sorted(r["partition"] for r in b["replicas"]) == [0, 1, 2]
        assert {r["role"] for r in b["replicas"]} <= {"leader", "follower"}
    leaders = {p["partition"]: p["leader"] for p in snap["topics"][0]["partition_stats"]}
    assert leaders == {r["partition"]: b["id"] for b in snap["brokers"] for r in b["replicas"] if r["role"] == "leader"}


def test_a_rerun_in_a_wiped_dir_is_not_mixed_with_the_previous_run(tmp_path, clock):
    from kafkasim.scenarios._common import fresh_dir

    d = fresh_dir(str(tmp_path / "lab"))

    def one_run(clients):
        with Broker(d, clock=clock) as broker:
            broker.create_topic("orders", 4)
            produce(broker, 8)
            consumers = []
            for c in clients:
                consumers.append(Consumer(broker, "orders", group_id="g", client_id=c))
                for _ in range(60):
                    clock.advance(100)
                    for x in consumers:
                        x.poll()

    one_run(["a", "b"])
    w = DataDirWatcher(d, clock=clock)
    first = w.poll()
    assert [r["generation"] for r in first["rebalances"]] == [2, 1]
    fresh_dir(d)                              # what the lab does when it runs again
    w.poll()
    one_run(["a"])
    snap = w.poll()
    assert [(r["generation"], r["joined"][0].split(" ")[0]) for r in snap["rebalances"]] == [(1, "a")]
    assert sum(p["records"] for p in partitions(snap).values()) == 8
    assert sum(p["records"] for p in snap["producers"]) == 8 and len(snap["recent"]) == 8


def test_the_page_opens_on_the_topic_and_group_written_most_recently(data, clock):
    broker, d = data
    broker.create_topic("zzz", 2)
    w = DataDirWatcher(d, clock=clock)
    Producer(broker, client_id="p").send("zzz", key=b"k", value=b"v").get()
    run_group(broker, clock, "zzz", "z-readers", "z1")
    clock.advance(1000)
    produce(broker, 4)                               # orders: written last
    run_group(broker, clock, "orders", "a-readers", "a1")
    assert w.poll()["active"] == {"topic": "orders", "group": "a-readers"}
    clock.advance(1000)
    Producer(broker, client_id="p").send("zzz", key=b"k2", value=b"v").get()
    snap = w.poll()
    assert snap["active"] == {"topic": "zzz", "group": "z-readers"}    # not the alphabetically first
    assert [r["topic"] for r in snap["recent"]][0] == "zzz"


def test_simulated_times_are_said_to_be_simulated(tmp_path, data, clock):
    from kafkasim.clock import SystemClock
    from kafkasim.scenarios._common import MARKER

    broker, d = data
    produce(broker, 2)
    assert DataDirWatcher(d, clock=clock).poll()["clock"]["simulated"] is False   # the data's own clock
    assert DataDirWatcher(d, clock=SystemClock()).poll()["clock"]["simulated"] is True   # 2023 vs now
    from kafkasim.view.snapshot import LAB_MARKER
    assert LAB_MARKER == MARKER
    open(os.path.join(d, MARKER), "w").close()
    snap = DataDirWatcher(d, clock=clock).poll()
    assert snap["clock"]["simulated"] is True and "lab" in snap["clock"]["why"]


def test_partitions_picked_by_hand_without_a_producer_are_not_a_mismatch(data, clock):
    broker, d = data
    for p in range(4):                               # consumer-scaling's way: key k<p> into partition p
        broker.append_records("orders", p, [(clock.now_ms(), f"k{p}".encode(), b"v", ())])
    key = b"merchant-7"
    from kafkasim.view.snapshot import _partitioners

    elsewhere = next(p for p in range(4) if p not in _partitioners(key, 4))
    Producer(broker, client_id="manual", stamp_headers=True).send("orders", key=key, value=b"v",
                                                                 partition=elsewhere).get()
    produce(broker, 4, client_id="shop", prefix="shop-")
    recent = DataDirWatcher(d, clock=clock).poll()["recent"]
    by_key = {r["key"]: r for r in recent}
    for p in range(4):
        r = by_key[f"k{p}"]
        assert r["mismatch"] is False and r["routed_by"].startswith("unknown producer")
    assert by_key["merchant-7"]["mismatch"] is True
    assert all(r["mismatch"] is False and r["routed_by"] == "murmur2 (Kafka's default)"
               for r in recent if r["producer"] == "shop")


def test_broker_boxes_follow_a_stop_a_restart_and_a_reassignment(tmp_path, clock):
    from kafkasim.broker.cluster import Cluster
    from kafkasim.types import TopicPartition

    d = str(tmp_path / "cluster")
    with Cluster(d, [(0, "r1"), (1, "r2")], clock=clock) as cluster:
        cluster.create_topic("orders", 2, replication_factor=2)
        w = DataDirWatcher(d, clock=clock)

        def roles():
            snap = w.poll()
            return {b["id"]: {r["partition"]: r["role"] for r in b["replicas"]} for b in snap["brokers"]}, snap

        before, _ = roles()
        assert sorted(before) == [0, 1] and all(len(v) == 2 for v in before.values())
        cluster.stop_broker(1)
        after, snap = roles()
        assert set(after[1].values()) == {"offline"} and set(after[0].values()) == {"leader"}
        assert [b["state"] for b in snap["brokers"]] == ["alive", "stopped"]
        cluster.start_broker(1)
        back, _ = roles()
        assert set(back[1].values()) <= {"follower", "out-of-sync", "leader"} and "offline" not in back[1].values()
        cluster.add_broker(2, "r3")
        added, snap = roles()
        assert added[2] == {} and [b["rack"] for b in snap["brokers"]] == ["r1", "r2", "r3"]
        cluster.reassign({TopicPartition("orders", 0): [2, 0]})
        moved, _ = roles()
        assert 0 in moved[2] and 0 not in moved[1]            # the new broker holds the moved replica


# -- transactions -------------------------------------------------------------------------------

def open_txn(broker, partitions=(0, 2), tid="tx", per_partition=2):
    """A transactional producer with records sent (flushed) to ``partitions`` of orders, not committed."""
    p = Producer(broker, transactional_id=tid)
    p.init_transactions()
    p.begin_transaction()
    for part in partitions:
        for i in range(per_partition):
            p.send("orders", key=b"t%d" % i, value=b"v", partition=part)
    p.flush()
    return p


def test_the_lso_is_below_the_high_watermark_while_a_transaction_is_open_and_equal_after_commit(data, clock):
    broker, d = data
    produce(broker, 12)                               # committed-by-default data before the transaction
    ends = {p: broker.list_offsets("orders", p, -1)[0] for p in range(4)}
    w = DataDirWatcher(d, clock=clock)
    txn = open_txn(broker, partitions=(0, 2))
    parts = partitions(w.poll())
    for p in range(4):
        assert parts[p]["high_watermark"] == parts[p]["log_end_offset"] == broker.list_offsets("orders", p, -1)[0]
        assert parts[p]["last_stable_offset"] == broker.last_stable_offset("orders", p)
    for p in (0, 2):
        assert parts[p]["last_stable_offset"] == ends[p] < parts[p]["high_watermark"] == ends[p] + 2
    for p in (1, 3):
        assert parts[p]["last_stable_offset"] == parts[p]["high_watermark"] == ends[p]
    txn.commit_transaction()
    parts = partitions(w.poll())
    for p in range(4):
        assert parts[p]["last_stable_offset"] == parts[p]["high_watermark"] == broker.last_stable_offset("orders", p)
    assert parts[0]["high_watermark"] == ends[0] + 3            # two records and the COMMIT marker
    assert parts[0]["records"] == sum(1 for _ in range(ends[0])) + 2   # the marker is not a record


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_an_open_transaction_is_listed_with_its_transactional_id_and_partitions_until_it_ends(data, clock, commit):
    broker, d = data
    produce(broker, 5)
    before = {p: broker.list_offsets("orders", p, -1)[0] for p in range(4)}
    w = DataDirWatcher(d, clock=clock)
    assert w.poll()["transactions"] == []
    start = clock.now_ms()
    txn = open_txn(broker, partitions=(1, 3), tid="payments-tx")
    clock.advance(7_000)
    untouched = tree_state(d)
    snap = w.poll()
    assert tree_state(d) == untouched                  # reading __transaction_state wrote nothing
    (t,) = snap["transactions"]
    (listed,) = broker.list_transactions().transactions
    assert (t["transactional_id"], t["producer_id"], t["state"]) == (
        "payments-tx", listed.producer_id, "Ongoing")
    assert [(x["topic"], x["partition"], x["first_offset"]) for x in t["partitions"]] == [
        ("orders", 1, before[1]), ("orders", 3, before[3])]
    assert t["started_ms"] == start and t["open_ms"] == 7_000 and t["timeout_ms"] == 60_000
    assert [x["name"] for x in snap["topics"]] == ["orders"]           # __transaction_state is not drawn
    assert snap["active"]["topic"] == "orders"
    if commit:
        txn.commit_transaction()
    else:
        txn.abort_transaction()
    snap = w.poll()
    assert snap["transactions"] == []
    assert [(r["offset"], r["txn"]) for r in snap["recent"] if r["key"].startswith("t")] == [
        (o, "committed" if commit else "aborted") for p in (3, 1) for o in (before[p] + 1, before[p])]


def test_markers_are_not_recent_records_and_aborted_records_are_marked(data, clock):
    broker, d = data
    w = DataDirWatcher(d, clock=clock)
    txn = open_txn(broker, partitions=(0,), tid="gone", per_partition=2)
    assert [(r["offset"], r["txn"]) for r in w.poll()["recent"]] == [(1, "open"), (0, "open")]
    txn.abort_transaction()
    txn.begin_transaction()
    txn.send("orders", key=b"kept", value=b"v", partition=0)
    txn.commit_transaction()
    produce(broker, 1, prefix="plain")
    rows = {(r["partition"], r["offset"]): r for r in w.poll()["recent"]}
    assert (0, 2) not in rows and (0, 4) not in rows      # the ABORT and COMMIT markers' offsets
    assert [rows[(0, o)]["txn"] for o in (0, 1, 3)] == ["aborted", "aborted", "committed"]
    assert [r["txn"] for k, r in rows.items() if r["key"].startswith("plain")] == [None]
    fetched = broker.fetch_batches("orders", 0, 0, isolation_level=0).batches
    assert sum(1 for h, _ in fetched if h.attributes & rb.ATTR_CONTROL) == 2
    p0 = partitions(w.poll())[0]
    assert p0["records"] == p0["log_end_offset"] - 2          # each marker takes an offset, holds no record


def test_a_cluster_keeps_transaction_state_at_its_root_and_the_view_names_the_open_transaction(tmp_path, clock):
    from kafkasim.broker.cluster import Cluster

    d = str(tmp_path / "cluster")
    with Cluster(d, [(0, "r1"), (1, "r2"), (2, "r3")], clock=clock) as cluster:
        cluster.create_topic("orders", 3, replication_factor=3)
        txn = Producer(cluster, transactional_id="ctx")
        txn.init_transactions()
        txn.begin_transaction()
        txn.send("orders", b"a", partition=1)
        txn.flush()
        assert any(name.startswith("__transaction_state-") for name in os.listdir(d))   # at the root
        w = DataDirWatcher(d, clock=clock)
        snap = w.poll()
        (t,) = snap["transactions"]
        assert (t["transactional_id"], t["state"]) == ("ctx", "Ongoing")
        assert [(x["topic"], x["partition"], x["first_offset"]) for x in t["partitions"]] == [("orders", 1, 0)]
        p1 = partitions(snap)[1]
        assert p1["last_stable_offset"] == cluster.last_stable_offset("orders", 1) == 0 < p1["high_watermark"]
        txn.commit_transaction()
        snap = w.poll()
        assert snap["transactions"] == []
        # the COMMIT marker (offset 1) is on the ISR when the commit returns (acks=all, as Kafka's
        # WriteTxnMarkers): the high watermark, and with it the LSO, are past it
        assert partitions(snap)[1]["last_stable_offset"] == cluster.last_stable_offset("orders", 1) == 2
    assert [x["name"] for x in snap["topics"]] == ["orders"]


def test_a_control_batch_whose_key_does_not_decode_is_a_problem_not_a_crash(tmp_path, clock):
    d = str(tmp_path / "data")
    with Broker(d, clock=clock) as broker:
        broker.create_topic("orders", 1)
        broker.append_records("orders", 0, [(clock.now_ms(), b"k", b"v", ())])
    seg = os.path.join(d, "orders-0", "00000000000000000000.log")
    with open(seg, "ab") as f:        # a control batch (0x30) whose one record's key is 1 byte, not 4
        f.write(rb.encode_batch(1, [(0, clock.now_ms(), b"\x00", b"\x00" * 6, ())], producer_id=9,
                                producer_epoch=0, attributes=rb.ATTR_TRANSACTIONAL | rb.ATTR_CONTROL))
    snap = DataDirWatcher(d, clock=clock).poll()
    assert partitions(snap)[0]["log_end_offset"] == 2 and partitions(snap)[0]["records"] == 1
    (problem,) = snap["problems"]
    assert "control batch at offset 1" in problem and "at least 4 bytes" in problem
    assert os.path.dirname(seg) in problem
