"""The labs' parts: pictures (written only inside plot_dir, deterministic, complete or
absent) and the hot-partition alert rule as the labs evaluate it (read from the shipped
alerts.yml; pending until the condition has held for ``for:``, reset when it stops)."""

from __future__ import annotations

import os

import pytest

from kafkasim.errors import InvalidArgumentError
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._alert_rule import Scraper, hot_partition_rule, parse_exposition


def _bars():
    return fig.bars(["0", "1", "2"], [5, 1, 12], title="Records per partition",
                    xlabel="partition", ylabel="records", limit=8)


def test_save_writes_a_png_inside_plot_dir_and_the_same_bytes_twice(tmp_path):
    d = tmp_path / "new" / "pics"
    a = fig.save(_bars(), str(d), "skew")
    b = fig.save(_bars(), str(d), "skew-again.png")
    assert os.path.dirname(a) == str(d) and a.endswith("skew.png")
    assert open(a, "rb").read() == open(b, "rb").read()
    assert open(a, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert sorted(os.listdir(d)) == ["skew-again.png", "skew.png"]      # no temp files


@pytest.mark.parametrize("name", ["../escape", "a/b", "", ".hidden", "..png"])
def test_save_refuses_a_name_that_is_not_a_plain_file_name(tmp_path, name):
    with pytest.raises(InvalidArgumentError, match="not a plain file name"):
        fig.save(_bars(), str(tmp_path), name)
    assert not (tmp_path.parent / "escape.png").exists()
    assert os.listdir(tmp_path) == []


def test_pictures_need_a_title_and_matching_data():
    with pytest.raises(InvalidArgumentError, match="title"):
        fig.figure("")
    with pytest.raises(InvalidArgumentError, match="2 labels for 3 values"):
        fig.bars(["a", "b"], [1, 2, 3], title="t", xlabel="x", ylabel="y")
    with pytest.raises(InvalidArgumentError, match="unknown row 'p9'"):
        fig.timeline(["p0"], [("p9", 0, 1, "c0")], title="t")
    with pytest.raises(InvalidArgumentError, match="not 2 x 2"):
        fig.grid([[1, 2]], ["a", "b"], ["x", "y"], title="t", xlabel="x", ylabel="y")


def test_bars_mark_the_bars_over_the_limit_in_the_limit_colour():
    f = _bars()
    colours = [p.get_facecolor() for p in f.axes[0].patches]
    red = colours[2]
    assert colours[0] == colours[1] != red                 # only 12 > 8 is drawn red


def test_the_rule_is_read_from_the_shipped_alerts_yml():
    assert hot_partition_rule() == {"name": "KafkaHotPartition", "window_s": 300,
                                    "threshold": 5.0, "for_s": 120}
    with pytest.raises(InvalidArgumentError, match="no KafkaHotPartition"):
        hot_partition_rule("groups: []")
    with pytest.raises(InvalidArgumentError, match="is not"):
        hot_partition_rule("- alert: KafkaHotPartition\n  expr: up > 1\n")


def _exposition(counts: dict) -> str:
    return "\n".join(f'kafkasim_partition_bytes_in_total{{partition="{p}",topic="t"}} {v}'
                     for p, v in counts.items()) + "\n"


def test_parse_exposition_reads_the_byte_counters_only():
    text = _exposition({0: 10.0, 1: 2.5}) + 'kafkasim_partition_log_end_offset{partition="0",topic="t"} 7.0\n'
    assert parse_exposition(text) == {("t", 0): 10.0, ("t", 1): 2.5}


def _feed(rule, hot_rates):
    """Scrape every 60 s; partition 0 gets ``hot_rates[i]`` bytes/s, six others 1 byte/s."""
    s = Scraper(rule)
    total = {p: 0.0 for p in range(7)}
    ratios = []
    for i, rate in enumerate(hot_rates):
        total[0] += rate * 60
        for p in range(1, 7):
            total[p] += 60
        s.scrape(60 * i, _exposition(total))
        ratios.append(s.evaluate("t"))
    return s, ratios


RULE = {"name": "KafkaHotPartition", "window_s": 300, "threshold": 5.0, "for_s": 120}


def test_the_alert_fires_once_the_condition_held_for_its_duration():
    s, ratios = _feed(RULE, [100] * 6)
    assert ratios[0] is None and all(r > 5 for r in ratios[1:])   # one sample: no rate yet
    assert s.fired_at == {"t": 180}              # pending from 60 s, fires 120 s later


def test_a_short_burst_leaves_the_alert_pending_and_then_resets():
    s, ratios = _feed(RULE, [20, 20] + [1] * 10)
    assert ratios[1] > 5 and ratios[2] < 5       # held at 60 s only
    assert s.fired_at == {}
