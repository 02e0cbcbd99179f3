"""dump_segment / verify_data_dir and the `kafkasim dump-log` / `verify-log` commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kafkasim.cli import main
from kafkasim.clock import MockClock
from kafkasim.config import LogConfig
from kafkasim.errors import InvalidArgumentError
from kafkasim.storage import layout
from kafkasim.storage.inspection import dump_segment, verify_data_dir
from kafkasim.storage.log import Log

from storage_helpers import T0

CFG = LogConfig.from_overrides({"segment.bytes": 1500, "index.interval.bytes": 200})


@pytest.fixture
def data_dir(tmp_path):
    d = tmp_path / "data"
    for topic, parts in (("orders", 2), ("audit", 1)):
        for p in range(parts):
            log = Log(str(d / f"{topic}-{p}"), CFG, MockClock(T0))
            for i in range(40):
                log.append([(T0 + i, b"k%d" % i, b"value-%d" % i, (("src", b"test"),))],
                           producer_id=7, producer_epoch=1, base_sequence=i)
            log.close()
    (d / "meta").mkdir()
    return d


def first_segment(data_dir) -> str:
    return layout.list_segments(str(data_dir / "orders-0"))[0][1]


def test_dump_segment_batches_and_records(data_dir):
    entries = list(dump_segment(first_segment(data_dir), records=True))
    assert entries and all(e["crc_valid"] for e in entries)
    e = entries[0]
    assert (e["position"], e["base_offset"], e["last_offset"], e["count"]) == (0, 0, 0, 1)
    assert (e["producer_id"], e["producer_epoch"], e["base_sequence"], e["last_sequence"]) == (7, 1, 0, 0)
    assert e["timestamp_type"] == "CreateTime" and e["max_timestamp"] == T0
    assert e["records"] == [{"offset": 0, "timestamp": T0, "key": "k0", "value": "value-0", "key_size": 2,
                             "value_size": 7, "sequence": 0, "headers": [["src", "test"]]}]
    positions = [x["position"] for x in entries]
    assert positions == sorted(positions) and positions[1] == entries[0]["size"]


def test_dump_index_files(data_dir):
    seg = first_segment(data_dir)
    idx = list(dump_segment(seg[:-4] + ".index"))
    batches = {e["position"]: e["base_offset"] for e in dump_segment(seg)}
    assert idx and all(batches[e["position"]] == e["offset"] for e in idx)
    tidx = list(dump_segment(seg[:-4] + ".timeindex"))
    assert tidx and [e["timestamp"] for e in tidx] == sorted(e["timestamp"] for e in tidx)


def test_verify_clean_data_dir(data_dir):
    stats = {}
    assert verify_data_dir(str(data_dir), stats) == []
    assert stats == {"partitions": 3, "segments": stats["segments"], "batches": 120, "records": 120}
    with pytest.raises(InvalidArgumentError, match="nope"):
        verify_data_dir(str(data_dir / "nope"))


def test_verify_names_file_and_position_of_a_bad_crc(data_dir):
    seg = first_segment(data_dir)
    entries = list(dump_segment(seg))
    victim = entries[2]
    with open(seg, "r+b") as f:
        f.seek(victim["position"] + 70)
        b = f.read(1)
        f.seek(victim["position"] + 70)
        f.write(bytes([b[0] ^ 0x10]))
    problems = verify_data_dir(str(data_dir))
    assert len(problems) == 1
    assert problems[0].path == seg and problems[0].position == victim["position"]
    assert "CRC" in problems[0].message
    dumped = list(dump_segment(seg))
    assert dumped[-1]["position"] == victim["position"] and not dumped[-1]["crc_valid"]


def test_verify_finds_bad_index_entries(data_dir):
    seg = first_segment(data_dir)
    idx = seg[:-4] + ".index"
    with open(idx, "r+b") as f:
        f.seek(4)  # the first entry's position
        f.write((12345).to_bytes(4, "big"))
    problems = verify_data_dir(str(data_dir))
    assert [p.path for p in problems] == [idx]
    assert "points at position 12345" in problems[0].message


def test_cli_dump_log_and_verify_log(data_dir, capsys, monkeypatch):
    seg = first_segment(data_dir)
    assert main(["dump-log", seg, "--records"]) == 0
    out = capsys.readouterr().out
    assert f"Dumping {seg}" in out
    assert "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 7" in out
    assert "| offset: 0 CreateTime: %d keySize: 2 valueSize: 7 sequence: 0 headerKeys: [src] key: k0 payload: value-0" % T0 in out
    assert main(["dump-log", seg, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["base_offset"] == 0

    assert main(["verify-log", "--data-dir", str(data_dir)]) == 0
    assert "OK: 3 partitions" in capsys.readouterr().out
    monkeypatch.setenv("KAFKASIM_DATA_DIR", str(data_dir))
    assert main(["verify-log", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True

    with open(seg, "r+b") as f:
        f.seek(40)    # the first batch's max_timestamp: inside the CRC
        f.write(b"\xff\xff")
    assert main(["verify-log", "--data-dir", str(data_dir)]) == 1
    out, err = capsys.readouterr()
    assert "CORRUPT" in out and seg in out and "corruption found" in err
    assert main(["dump-log", seg]) == 1
    assert main(["dump-log", str(data_dir / "missing.log")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_cli_as_a_subprocess(data_dir):
    exe = os.path.join(os.path.dirname(sys.executable), "kafkasim")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "kafkasim.cli"]
    r = subprocess.run(cmd + ["verify-log", "--data-dir", str(data_dir), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["records"] == 120
    r = subprocess.run(cmd + ["dump-log", "--help"], capture_output=True, text=True)
    assert "Example:" in r.stdout
