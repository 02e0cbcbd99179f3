"""Lab exactly-once (consume-transform-produce across a crash, per delivery guarantee) and
the transactional last step of lab retry-reorder.

The lab's verdicts are checked twice: through its result, and independently, by reopening
the lab's data dir with a new Broker after the run and recounting the payments and the
totals topics here (the ``kafkasim-input`` header of each output record names the payment it
counts). Determinism: the same seed gives the same text, JSON and PNG bytes. The claim
check: a run whose transactional output is read ``read_uncommitted`` (the crashed
instance's aborted totals leak to the reader) must raise ClaimFailedError.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasim.broker import Broker
from kafkasim.cli import main
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.errors import ClaimFailedError, InvalidArgumentError
from kafkasim.scenarios import SCENARIOS, lab_text, list_scenarios, resolve, run_scenario
from kafkasim.scenarios.exactly_once import CLAIM, INPUT_HEADER, audit_output, input_ref
from kafkasim.types import TopicPartition

SMALL = {"records": 300, "crash_after": 130, "max_poll_records": 40}


def _run(tmp_path, tag="a", plots=True, **params):
    lines: list[str] = []
    result = run_scenario("exactly-once", str(tmp_path / f"data-{tag}"), seed=42, echo=lines.append,
                          plot_dir=str(tmp_path / f"plots-{tag}") if plots else None, **{**SMALL, **params})
    return result, lines


def _read(data_dir, topic, isolation_level):
    """Every record of ``topic`` in the lab's data dir, read by a new broker and consumer."""
    with Broker(data_dir, clock=MockClock(0)) as b:
        n = b.partition_count(topic)
        c = Consumer(b, auto_offset_reset="earliest", isolation_level=isolation_level,
                     value_deserializer=msgpack.loads)
        c.assign([TopicPartition(topic, p) for p in range(n)])
        out = []
        while got := c.poll(max_records=10_000):
            out.extend(r for rs in got.values() for r in rs)
        c.close()
    return sorted(out, key=lambda r: (r.partition, r.offset))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eo")
    result, lines = _run(tmp)
    return result, lines, str(tmp / "data-a")


def _recount(data_dir):
    payments = _read(data_dir, "payments", "read_uncommitted")
    sums = Counter()
    for r in payments:
        sums[r.key] += r.value["amount"]
    return {f"{r.partition}:{r.offset}" for r in payments}, sums


def _totals(data_dir, guarantee, isolation_level):
    recs = _read(data_dir, f"totals-{guarantee}", isolation_level)
    refs = Counter(dict(r.headers)[INPUT_HEADER].decode("ascii") for r in recs)
    last = {}
    for r in recs:                                    # keyed by account: one partition per account
        last[r.key] = r.value["total"]
    return refs, last


# ---------------------------------------------------------------- registry and text

def test_exactly_once_is_registered_as_lab_17_after_consumer_crash():
    assert resolve("exactly_once") == "exactly-once" and "exactly-once" in SCENARIOS
    rows = {r["name"]: r for r in list_scenarios()}
    assert rows["exactly-once"]["number"] == 17 == max(r["number"] for r in rows.values() if r["number"] < 18)
    assert list(SCENARIOS).index("exactly-once") == list(SCENARIOS).index("consumer-crash") + 1
    text = lab_text("exactly-once")
    for needle in ("What you will see", "Why", "kafkasim-input", "read_committed", "KIP-98", CLAIM):
        assert needle in text


def test_bad_params_are_refused_naming_them(tmp_path):
    with pytest.raises(InvalidArgumentError, match="downstream_isolation 'dirty'"):
        run_scenario("exactly-once", str(tmp_path / "x"), downstream_isolation="dirty")
    with pytest.raises(InvalidArgumentError, match="crash_after 600"):
        run_scenario("exactly-once", str(tmp_path / "x"), crash_after=600)


# ---------------------------------------------------------------- the audit, by example

def test_audit_output_counts_recounted_copies_rewritten_copies_and_missing_inputs():
    inputs = {b"0:0": (b"a", 5), b"0:1": (b"a", 7), b"1:0": (b"b", 1)}
    doc = audit_output(inputs, [(b"a", 5, b"0:0"), (b"a", 12, b"0:1"), (b"a", 19, b"0:1"), (b"b", 1, b"1:0")])
    assert (doc["recounted_copies"], doc["rewritten_copies"], doc["excess"], doc["wrong"]) == (1, 0, 7, {"a": 7})
    assert not doc["exact"]
    retried = audit_output(inputs, [(b"a", 5, b"0:0"), (b"a", 5, b"0:0"), (b"a", 12, b"0:1"), (b"b", 1, b"1:0")])
    assert (retried["rewritten_copies"], retried["recounted_copies"], retried["wrong_totals"]) == (1, 0, 0)
    assert not retried["exact"]                      # the totals are right, but a payment is in twice
    gap = audit_output(inputs, [(b"a", 12, b"0:1"), (b"b", 1, b"1:0")])
    assert gap["missing"] == 1 and gap["wrong_totals"] == 0 and not gap["exact"]
    assert audit_output(inputs, [(b"a", 5, b"0:0"), (b"a", 12, b"0:1"), (b"b", 1, b"1:0")])["exact"]
    assert input_ref(2, 17) == b"2:17"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 500)), min_size=1, max_size=40), st.data())
def test_audit_output_finds_exactly_the_copies_and_gaps_made(payments, data):
    """A correct running-total stream is exact; copying records in place (same total) makes
    rewritten copies only, and dropping some makes them missing, whatever the payments."""
    inputs = {input_ref(0, i): (b"a%d" % k, amount) for i, (k, amount) in enumerate(payments)}
    running: Counter = Counter()
    stream = []
    for ref, (account, amount) in inputs.items():
        running[account] += amount
        stream.append((account, running[account], ref))
    assert audit_output(inputs, stream)["exact"]
    copied = data.draw(st.sets(st.integers(0, len(stream) - 1)))
    with_copies = [c for i, rec in enumerate(stream) for c in ([rec, rec] if i in copied else [rec])]
    doc = audit_output(inputs, with_copies)
    assert (doc["rewritten_copies"], doc["recounted_copies"], doc["duplicated_inputs"]) == (len(copied), 0, len(copied))
    assert doc["wrong_totals"] == 0 and doc["exact"] == (not copied)
    dropped = data.draw(st.sets(st.integers(0, len(stream) - 1)))
    assert audit_output(inputs, [rec for i, rec in enumerate(stream) if i not in dropped])["missing"] == len(dropped)


# ---------------------------------------------------------------- the verdicts

def test_at_least_once_and_idempotent_count_the_reprocessed_payments_twice(lab):
    result, lines, data_dir = lab
    alo, idem = result["at_least_once"], result["idempotent"]
    # the crash falls inside the 4th poll of 40: 10 payments since the last commit
    assert alo["reprocessed"] == idem["reprocessed"] == 130 - 3 * 40
    for doc in (alo, idem):
        assert doc["recounted_copies"] == doc["reprocessed"] and doc["excess"] > 0 and doc["missing"] == 0
    assert alo["lost_responses"] > 0 and alo["rewritten_copies"] > 0
    assert alo["duplicate_batches_detected_by_broker"] == 0
    assert idem["rewritten_copies"] == 0 and idem["duplicate_batches_detected_by_broker"] > 0
    assert idem["restart_wait_ms"] == 10_000            # the dead member's session timeout
    inputs, sums = _recount(data_dir)
    for guarantee, doc in (("at-least-once", alo), ("idempotent", idem)):
        refs, last = _totals(data_dir, guarantee, "read_uncommitted")
        assert set(refs) == inputs                        # nothing lost
        twice = {ref for ref, n in refs.items() if n > 1}
        assert len(twice) == doc["duplicated_inputs"] > 0
        excess = sum(last[k] - sums[k] for k in sums)
        assert excess == doc["excess"] > 0
    prose = "\n".join(lines)
    assert "[" not in prose and "{" not in prose.replace('"<input partition>:<input offset>"', "")


def test_transactions_give_exact_totals_and_hide_the_aborted_ones(lab):
    result, _, data_dir = lab
    txn = result["transactional"]
    assert txn["exact"] and txn["downstream_isolation"] == "read_committed"
    assert txn["reprocessed"] == 10 and txn["invisible_records"] == 10
    assert txn["lost_responses"] > 0 and txn["duplicate_batches_detected_by_broker"] > 0
    assert txn["transactions"] == [{"transactional_id": "totals-job", "state": "CompleteCommit"}]
    assert txn["zombie_commit"] == "ProducerFencedError"
    inputs, sums = _recount(data_dir)
    refs, last = _totals(data_dir, "transactional", "read_committed")
    assert refs == Counter({ref: 1 for ref in inputs})  # every payment exactly once
    assert last == dict(sums)
    dirty, _ = _totals(data_dir, "transactional", "read_uncommitted")
    assert sum(dirty.values()) == len(inputs) + 10      # the crashed instance's aborted totals are in the log
    assert result["input_header"] == INPUT_HEADER == "kafkasim-input"


def test_a_reader_that_does_not_read_committed_sees_the_leak_and_the_claim_fails(tmp_path):
    with pytest.raises(ClaimFailedError, match="transactional \\(read with read_uncommitted\\): 10 counted twice"):
        _run(tmp_path, plots=False, downstream_isolation="read_uncommitted")


def test_a_restart_that_fences_nothing_lets_the_zombie_commit_and_the_claim_fails(tmp_path):
    """A new transactional id on restart fences nothing: the crashed instance (a zombie) wakes up,
    its commit goes through, and the payments it counted before the crash are in the committed
    output twice (the last totals are right here: its records lie before the restarted job's)."""
    lines: list[str] = []
    with pytest.raises(ClaimFailedError, match=r"transactional \(read with read_committed\): 10 counted twice, "
                                               r"0 missing, [0-9]+ wrong totals, the zombie's late commit: committed"):
        run_scenario("exactly-once", str(tmp_path / "d"), echo=lines.append, **SMALL, same_transactional_id=False)
    assert any("Nobody fenced the crashed instance" in line for line in lines)
    with Broker(str(tmp_path / "d"), clock=MockClock(0)) as b:
        states = {d.transactional_id: d.state for d in b.describe_transactions(["totals-job-0", "totals-job-1"])}
    assert states == {"totals-job-0": "CompleteCommit", "totals-job-1": "CompleteCommit"}


@pytest.mark.slow          # two full runs with pictures: about 3 s each on a quiet machine
def test_same_seed_gives_the_same_text_json_and_picture(tmp_path):
    first, text1 = _run(tmp_path, "a")
    second, text2 = _run(tmp_path, "b")
    assert text1 == text2 and text1
    strip = lambda r: json.dumps({**r, "pictures": [os.path.basename(p) for p in r["pictures"]]}, sort_keys=True)
    assert strip(first) == strip(second)
    assert [os.path.basename(p) for p in first["pictures"]] == ["exactly-once.png"]
    with open(first["pictures"][0], "rb") as fa, open(second["pictures"][0], "rb") as fb:
        data = fa.read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000 and data == fb.read()


def test_cli_runs_the_lab_with_json(tmp_path, capsys):
    assert main(["scenario", "run", "exactly-once", "--data-dir", str(tmp_path / "d"), "--json",
                 "--param", "records=200", "--param", "crash_after=90"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["claim"] == CLAIM and doc["transactional"]["exact"]


# ---------------------------------------------------------------- retry-reorder's last step

def test_retry_reorder_transactional_step_keeps_order_without_duplicates(tmp_path):
    lines: list[str] = []
    r = run_scenario("retry-reorder", str(tmp_path / "rr"), echo=lines.append, records=200, txn_records=30)
    txn = r["transactional"]
    assert txn["injected_faults"] > 0 and txn["duplicate_batches_detected_by_broker"] > 0
    assert txn["sequences_in_log"] == list(range(200)) and txn["in_order"] and txn["lost"] == 0
    assert txn["transactions"] == 7
    assert txn["log_end_offset"] == 200 + 7              # a COMMIT marker per transaction
    with Broker(str(tmp_path / "rr"), clock=MockClock(0)) as b:
        desc = b.describe_transactions(["payments-tx"])
    assert [d.state for d in desc] == ["CompleteCommit"]
    assert any("7 transactions" in line and "COMMIT marker" in line for line in lines)
