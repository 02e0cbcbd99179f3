"""A data dir with a file the broker did not write: refused on open with a kafkasim error naming
it, never opened as a segment that fails later (copied from the hardening issue's bad-input
spec, case "a stray segment file past the offset range")."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.errors import KafkaSimError

T0 = 1_700_000_000_000


def test_a_stray_segment_file_past_the_offset_range_is_refused_on_open(tmp_path):
    d = tmp_path / "data"
    with Broker(d) as b:
        b.create_topic("t", 1)
        b.append_records("t", 0, [(T0, None, b"x", ())])
    stray = d / "t-0" / ("9" * 20 + ".log")
    stray.write_bytes(b"")
    with pytest.raises(KafkaSimError) as e:
        with Broker(d) as b:
            b.append_records("t", 0, [(T0, None, b"y", ())])
    assert "9" * 20 in str(e.value)
