"""The share-groups lab (KIP-932): a consumer group idles past one consumer per partition,
a share group scales, per-key order breaks, and a poison record is archived at the limit.

Runs on a real broker in tmp_path with in-process ``Consumer`` and ``ShareConsumer``
instances stepped on one MockClock; the output topics are read back with a real consumer.
"""

from __future__ import annotations

import os

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import ClaimFailedError, InvalidArgumentError
from kafkasim.scenarios import SCENARIOS, lab_text, list_scenarios, resolve, run_scenario
from kafkasim.scenarios.share_groups import CLAIM, input_order_inversions
from kafkasim.types import DELIVERY_COUNT_HEADER, INPUT_HEADER

NAME = "share-groups"
SMALL = {"records_per_partition": 150}


def _run(path, **params):
    lines = []
    result = run_scenario(NAME, str(path / "data"), echo=lines.append, plot_dir=str(path / "pics"),
                          **{**SMALL, **params})
    return result, lines


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("share-lab")
    result, lines = _run(base)
    return base, result, lines


def _by(result):
    return {(r["mode"], r["consumers"]): r for r in result["runs"]}


def test_a_consumer_group_idles_past_one_consumer_per_partition_and_stays_flat(lab):
    _, result, _ = lab
    by = _by(result)
    six, twelve = by["group", 6], by["group", 12]
    assert twelve["idle"] == [f"c{i:02d}" for i in range(6, 12)]
    assert all(twelve["processed_per_member"][c] == 0 for c in twelve["idle"])
    assert sorted(p for ps in twelve["assignment"].values() for p in ps) == list(range(6))
    assert six["throughput_per_s"] == twelve["throughput_per_s"] == pytest.approx(600, rel=0.02)


def test_a_share_group_scales_about_twice_from_6_to_12_with_nobody_idle(lab):
    _, result, _ = lab
    by = _by(result)
    six, twelve = by["share", 6], by["share", 12]
    assert not six["idle"] and not twelve["idle"]
    # every partition has at least one member; some have several (a partition is shared)
    held = [p for ps in twelve["assignment"].values() for p in ps]
    assert set(held) == set(range(6)) and len(held) > 6
    assert 1.8 <= twelve["throughput_per_s"] / six["throughput_per_s"] <= 2.1
    assert result["share_speedup"] == pytest.approx(twelve["throughput_per_s"] / six["throughput_per_s"], abs=1e-3)
    assert twelve["throughput_per_s"] > 1.8 * by["group", 12]["throughput_per_s"]


def _outputs(data_dir, topic):
    """The output topic read back from disk: ``[(partition, key, input partition, input offset,
    delivery count or None)]`` in offset order per partition."""
    out = []
    with Broker(data_dir, clock=MockClock(0)) as b:
        for p in range(6):
            batch = b.fetch(topic, p, 0, max_bytes=50_000_000)
            for rec in batch.records:
                h = dict(rec.headers)
                ip, io = (int(x) for x in h[INPUT_HEADER].decode().split(":"))
                dc = int(h[DELIVERY_COUNT_HEADER]) if DELIVERY_COUNT_HEADER in h else None
                out.append((p, rec.key, ip, io, dc))
    return out


def test_per_key_order_breaks_only_in_the_share_group_and_the_outputs_name_their_input(lab):
    base, result, lines = lab
    data_dir = str(base / "data")
    for r in result["runs"]:
        outs = _outputs(data_dir, r["output_topic"])
        assert len(outs) == r["jobs_done"] == 6 * 150 - 1          # every job but the poison, once
        assert len({(ip, io) for _, _, ip, io, _ in outs}) == len(outs)
        assert input_order_inversions([o[:4] for o in outs]) == r["inversions"]
        if r["mode"] == "group":
            assert r["inversions"] == 0 and all(dc is None for *_, dc in outs)
        else:
            assert all(dc == 1 for *_, dc in outs)                  # nothing but the poison was redelivered
    assert _by(result)["share", 12]["inversions"] > 0
    assert any("kafkasim audit ordering" in line and "results-share-12" in line for line in lines)


def test_input_order_inversions_count_first_outputs_below_an_earlier_input_offset():
    outs = [(0, b"a", 0, 0), (0, b"a", 0, 2), (0, b"a", 0, 1), (0, b"a", 0, 0),   # 1 inversion; 0 again: a re-run
            (0, b"b", 0, 5), (0, b"b", 1, 0),                                        # another input partition
            (1, b"a", 0, 1)]                                                         # another output partition
    assert input_order_inversions(outs) == 1


def test_the_poison_record_is_archived_at_the_delivery_count_limit_without_blocking(lab):
    _, result, lines = lab
    for r in result["runs"]:
        if r["mode"] != "share":
            continue
        p = r["poison"]
        assert [d["delivery_count"] for d in p["deliveries"]] == [1, 2, 3, 4, 5]
        assert p["later_jobs_done"] == p["later_jobs"] == 150 - 20 - 1
        assert r["spso"] == {q: 150 for q in range(6)}                # SPSO moved past it everywhere
        assert r["delivery_counts"] == {1: 6 * 150 - 1, 5: 1}
    assert any("delivered 5 times" in line and "archived" in line for line in lines)


def test_reject_archives_the_poison_at_its_first_delivery(tmp_path):
    result, _ = _run(tmp_path, poison_ack="reject")
    for r in result["runs"]:
        if r["mode"] == "share":
            assert [d["delivery_count"] for d in r["poison"]["deliveries"]] == [1]
            assert r["delivery_counts"] == {1: 6 * 150}
            assert r["spso"] == {q: 150 for q in range(6)}


def test_the_same_seed_gives_the_same_text_result_and_pictures(lab, tmp_path):
    base, first, lines1 = lab
    second, lines2 = _run(tmp_path)
    strip = lambda r: {k: v for k, v in r.items() if k != "pictures"}     # noqa: E731
    assert strip(first) == strip(second)
    assert [line.replace(str(tmp_path), str(base)) for line in lines2] == lines1
    names = sorted(os.path.basename(p) for p in second["pictures"])
    assert names == ["share-groups-deliveries.png", "share-groups-throughput.png"]
    for a, b in zip(sorted(first["pictures"]), sorted(second["pictures"])):
        assert open(a, "rb").read() == open(b, "rb").read()


def test_fewer_consumers_than_partitions_breaks_the_claim(tmp_path):
    with pytest.raises(ClaimFailedError, match="claim did not hold.*consumer group throughput"):
        _run(tmp_path, sizes=[3, 6], records_per_partition=60)


def test_bad_params_name_the_value(tmp_path):
    with pytest.raises(InvalidArgumentError, match="poison_ack 'drop'"):
        _run(tmp_path, poison_ack="drop")
    with pytest.raises(InvalidArgumentError, match="sizes \\[12, 6\\]"):
        _run(tmp_path, sizes=[12, 6])
    with pytest.raises(InvalidArgumentError, match="poison at partition 0 offset 500"):
        _run(tmp_path, poison_offset=500)


def test_registered_as_lab_18_with_its_text():
    assert resolve("share_groups") == NAME and NAME in SCENARIOS
    numbers = {r["name"]: r["number"] for r in list_scenarios()}
    assert numbers[NAME] == 18 == max(numbers.values())
    text = lab_text(NAME)
    for needle in ("What you will see", "Why", "KIP-932", "group.share.delivery.count.limit",
                   "kafkasim-delivery-count", "kafkasim audit ordering", CLAIM):
        assert needle in text
