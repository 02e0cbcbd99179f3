"""``kafkasim audit all``: ordering, skew and lag from one scan equal the three jobs run alone."""

from __future__ import annotations

import json

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.spark_jobs import audit_all, lag, ordering, skew
from kafkasim.spark_jobs.common import EXIT_VIOLATIONS, shuffle_partitions_for
from kafkasim.types import OffsetAndMetadata, TopicPartition
from . import logs

pytestmark = pytest.mark.spark


def _strip(rep: dict) -> dict:
    return {k: v for k, v in rep.items() if k not in ("chart",)}


@pytest.mark.slow
def test_audit_all_gives_the_three_reports_of_the_jobs_run_alone(spark, tmp_path, capsys):
    d = str(tmp_path / "data")
    facts = logs.write_grown_with_librdkafka(d)
    with Broker(d, clock=MockClock(logs.START_MS + 10_000)) as b:
        c = Consumer(b, group_id="billing", clock=MockClock(logs.START_MS + 10_000), enable_auto_commit=False)
        c.commit({TopicPartition(logs.TOPIC, 0): OffsetAndMetadata(2)})
        c.close()
    out, plots = tmp_path / "all.json", tmp_path / "plots"
    rc = audit_all.main(["--data-dir", d, "--json", str(out), "--plot-dir", str(plots)], spark=spark)
    text = capsys.readouterr().out
    rep = json.loads(out.read_text())
    assert rc == EXIT_VIOLATIONS and rep["verdict"] == "failed"
    assert "audit all: ordering failed, skew" in text
    alone = {}
    for name, job, extra in (("ordering", ordering, []), ("skew", skew, []), ("lag", lag, [])):
        path = tmp_path / f"{name}.json"
        job.main(["--data-dir", d, "--json", str(path)] + extra, spark=spark)
        alone[name] = json.loads(path.read_text())
    capsys.readouterr()
    for name in ("ordering", "skew"):
        assert _strip(rep[name]) == alone[name], name
    assert {k: v for k, v in rep["lag"].items() if k != "history"} == \
        {k: v for k, v in alone["lag"].items() if k != "history"}
    assert rep["ordering"]["violations"]["key_in_multiple_partitions"] == facts["moved_keys"]
    assert [(r["group"], r["partition"]) for r in rep["lag"]["no_commit"]] == \
        [("billing", p) for p in range(1, 6)]                     # uncommitted partitions listed
    assert (plots / "skew.png").read_bytes()[:4] == b"\x89PNG" and (plots / "lag.png").exists()
    assert {"checking inputs", "starting Spark", "reading", "auditing", "ordering", "skew", "lag"} == \
        set(rep["timings_s"])


def test_a_small_input_gets_the_small_session_settings_and_a_large_one_does_not():
    from kafkasim.spark_jobs.common import LOCAL_SCAN_BYTES, SMALL_INPUT_CONF, session_conf_for
    assert session_conf_for(LOCAL_SCAN_BYTES, 2) == SMALL_INPUT_CONF
    assert SMALL_INPUT_CONF["spark.sql.shuffle.partitions"] == "1"
    assert session_conf_for(1 << 30, 2) == {"spark.sql.shuffle.partitions": "8"}


def test_shuffle_partitions_follow_the_input_size():
    assert shuffle_partitions_for(1 << 20, 2) == 2                 # small log: one per core
    assert shuffle_partitions_for(1 << 30, 2) == 8                 # 1 GiB: one per 128 MiB
    assert shuffle_partitions_for(1 << 40, 2) == 200               # capped at Spark's default


class _Tty:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


def test_progress_names_each_phase_on_a_terminal_and_prints_nothing_elsewhere():
    from kafkasim.spark_jobs.progress import Progress
    for tty in (True, False):
        stream = _Tty(tty)
        progress = Progress(stream)
        with progress.phase("reading", "1 topic(s)"):
            pass
        with progress.phase("skew"):
            pass
        assert [name for name, _ in progress.timings] == ["reading", "skew"]
        if tty:
            import re
            shown = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", stream.text)   # rich's colours and cursor moves
            assert "✓ reading: 1 topic(s)" in shown and "✓ skew" in shown
        else:
            assert stream.text == ""
