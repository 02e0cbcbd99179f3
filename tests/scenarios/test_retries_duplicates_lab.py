"""Lab retries-and-duplicates: a real confluent-kafka producer through ``kafkasim serve`` with
seeded fault rules (drops after append, NOT_LEADER_OR_FOLLOWER with 5 in flight).

The lab's counts are checked independently: the lab's data dir is reopened with a new Broker
after the run and every topic's ``kafkasim.seq`` headers are recounted here; the Spark
ordering audit (``kafkasim audit ordering``) over the same data dir names the same duplicates
and inversions. The claim check: a run without faults, and one with drops only (duplicates,
no reordering), must raise ClaimFailedError. The lab runs on real
time, so it is not in the same-seed determinism test of ``test_scenarios.py``; its claim is
what must hold run after run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import ClaimFailedError, InvalidArgumentError
from kafkasim.scenarios import SCENARIOS, lab_text, list_scenarios, resolve, run_scenario
from kafkasim.scenarios.retries_duplicates import CASES, CLAIM
from kafkasim.types import PRODUCER_HEADER, SEQUENCE_HEADER

pytest.importorskip("confluent_kafka")

RECORDS = 300
NAME = "retries-and-duplicates"


def _run(tmp_path, tag: str, plots: bool = False, **params):
    lines: list[str] = []
    result = run_scenario(NAME, str(tmp_path / f"data-{tag}"), seed=42, echo=lines.append,
                          plot_dir=str(tmp_path / f"plots-{tag}") if plots else None,
                          **{"records": RECORDS, **params})
    return result, lines


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("retries-dups")
    result, lines = _run(tmp, "a", plots=True)
    return result, lines, str(tmp / "data-a")


def _stored(data_dir: str, topic: str) -> list[tuple[str, int]]:
    """``(producer header, send number)`` of every record of ``topic`` partition 0, in offset
    order, read by a new broker over the lab's data dir."""
    with Broker(data_dir, clock=MockClock(0)) as b:
        assert b.partition_count(topic) == 1
        out, offset = [], 0
        while (res := b.fetch(topic, 0, offset)).records:
            out.extend((dict(r.headers)[PRODUCER_HEADER].decode(), int(dict(r.headers)[SEQUENCE_HEADER]))
                       for r in res.records)
            offset = res.records[-1].offset + 1
    return out


def _late(seqs: list[int]) -> int:
    """First copies stored after some record with a higher send number."""
    return sum(1 for i, s in enumerate(seqs) if s not in seqs[:i] and any(t > s for t in seqs[:i]))


# ---------------------------------------------------------------- registry and text

def test_registered_as_lab_15_right_after_retry_reorder():
    assert resolve("retries_duplicates") == NAME and NAME in SCENARIOS
    numbers = {r["name"]: r["number"] for r in list_scenarios()}
    assert (numbers["retry-reorder"], numbers[NAME], numbers["consumer-crash"], numbers["exactly-once"]) == (
        14, 15, 16, 17)
    assert list(SCENARIOS).index(NAME) == list(SCENARIOS).index("retry-reorder") + 1
    text = lab_text(NAME)
    for needle in ("What you will see", "Why", "confluent-kafka", "drop=\"after\"", "KIP-98",
                   "Real time is involved", CLAIM):
        assert needle in text


# ---------------------------------------------------------------- the run, recounted

def test_drops_duplicate_errors_reorder_and_idempotence_stores_each_record_once_in_order(lab):
    result, lines, data_dir = lab
    assert result["claim"] == CLAIM and set(result["cases"]) == {topic for topic, *_ in CASES}
    for topic, _label, idempotent, _kinds in CASES:
        stored = _stored(data_dir, topic)
        seqs = [s for _, s in stored]
        got = result["cases"][topic]
        assert {p for p, _ in stored} == {topic}                    # the case's own producer wrote them
        assert set(seqs) == set(range(RECORDS))                     # nothing lost
        assert got["failed"] == 0 and got["acknowledged"] == RECORDS
        assert got["sequences_in_log"] == seqs and got["records_in_log"] == len(seqs)
        assert got["duplicates"] == sum(n - 1 for n in Counter(seqs).values())
        assert got["out_of_order"] == _late(seqs)
        if idempotent:
            assert seqs == list(range(RECORDS))                     # once each, in send order
            assert got["dropped_after_append"] > 0 and got["errors_injected"] > 0
    drops, errors = result["cases"]["payments-drops"], result["cases"]["payments-errors"]
    assert drops["dropped_after_append"] > 0 and drops["duplicates"] > 0 and drops["out_of_order"] == 0
    assert errors["errors_injected"] > 0 and errors["out_of_order"] > 0 and errors["duplicates"] == 0
    # the text names the counts it found and says they depend on timing
    text = "\n".join(lines)
    assert f"{drops['duplicates']} records are in the log twice" in text
    assert f"{errors['out_of_order']} records landed after a later one" in text
    assert "vary a little between runs" in text
    [png] = result["pictures"]
    assert os.path.basename(png) == "retries-and-duplicates.png" and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    json.dumps(result)                                               # JSON-able


def test_without_faults_nothing_is_duplicated_or_reordered_and_the_claim_fails(tmp_path):
    lines: list[str] = []
    with pytest.raises(ClaimFailedError) as info:
        run_scenario(NAME, str(tmp_path / "none"), seed=42, echo=lines.append, records=RECORDS,
                     drop_probability=0.0, error_probability=0.0)
    msg = str(info.value)
    assert CLAIM in msg and "0 duplicates (0 drops)" in msg and "0 out of order (0 errors" in msg
    assert "No fault hit not idempotent, drops: drop_probability 0.0 and it is 0" in "\n".join(lines)


def test_drops_alone_duplicate_but_reorder_nothing_so_the_claim_fails(tmp_path):
    with pytest.raises(ClaimFailedError) as info:
        _run(tmp_path, "drops", error_probability=0.0)
    msg = str(info.value)
    dups = int(re.search(r"not idempotent with drops: (\d+) duplicates", msg).group(1))
    assert dups > 0 and "0 out of order (0 errors" in msg, msg


@pytest.mark.parametrize("param, value, needle", [
    ("max_in_flight", 6, "max_in_flight 6"),
    ("drop_probability", 1.5, "drop_probability 1.5"),
    ("error", "NOT_AN_ERROR", "NOT_AN_ERROR"),
    ("batch_records", 0, "batch_records 0"),
])
def test_bad_params_are_refused_naming_them_before_anything_is_served(tmp_path, param, value, needle):
    with pytest.raises(InvalidArgumentError, match=re.escape(needle)):
        _run(tmp_path, "bad", **{param: value})
    assert not os.path.exists(tmp_path / "data-bad")


# ---------------------------------------------------------------- the Spark audit agrees

@pytest.mark.slow
@pytest.mark.spark
def test_the_ordering_audit_over_the_labs_data_dir_finds_the_same_duplicates_and_inversions(lab):
    result, _lines, data_dir = lab
    done = subprocess.run([sys.executable, "-m", "kafkasim", "audit", "ordering", "--data-dir", data_dir,
                           "--max-details", "100000", "--json", "-"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 3, done.stderr[-3000:]                  # violations found
    report = json.loads(done.stdout[done.stdout.index("{"):done.stdout.rindex("}") + 1])
    found = Counter((d["topic"], d["kind"]) for d in report["details"])
    assert not report["details_truncated"]
    for topic, *_ in CASES:
        got = result["cases"][topic]
        assert (found[(topic, "duplicate")], found[(topic, "sequence_inversion")],
                found[(topic, "sequence_gap")]) == (got["duplicates"], got["out_of_order"], 0), topic
    assert report["records"] == sum(c["records_in_log"] for c in result["cases"].values())
