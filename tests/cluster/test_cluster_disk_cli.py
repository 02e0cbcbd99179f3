"""`kafkasim cluster fill-disk|clear-disk` and `cluster isolate --from`: the broker-level faults
from the command line, kept in cluster.json between commands and shown by `cluster describe`."""

from __future__ import annotations

import json

import pytest

from kafkasim.cli import main


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def d(tmp_path, capsys):
    d = str(tmp_path / "lab")
    assert run(capsys, "cluster", "create", "--brokers", "0:r1,1:r2,2:r3", "--data-dir", d)[0] == 0
    assert run(capsys, "topics", "create", "orders", "--partitions", "3", "--replication-factor", "3",
               "--config", "min.insync.replicas=2", "--data-dir", d)[0] == 0
    return d


def _broker(capsys, d, b) -> dict:
    rc, out, _ = run(capsys, "cluster", "describe", "--json", "--data-dir", d)
    assert rc == 0
    return next(x for x in json.loads(out)["brokers"] if x["id"] == b)


def test_fill_and_clear_disk_between_commands(d, capsys):
    rc, out, _ = run(capsys, "cluster", "fill-disk", "1", "--data-dir", d)
    assert rc == 0 and "full disk" in out
    b = _broker(capsys, d, 1)
    assert (b["disk_full"], b["log_dir_offline"], b["leaders"]) == (True, True, 0)
    rc, out, _ = run(capsys, "cluster", "describe", "--data-dir", d)
    assert "alive, disk full, log dir offline" in out
    rc, _, err = run(capsys, "cluster", "fill-disk", "1", "--data-dir", d)
    assert rc != 0 and "already full" in err
    assert run(capsys, "cluster", "clear-disk", "1", "--data-dir", d)[0] == 0
    assert _broker(capsys, d, 1)["log_dir_offline"]          # until the broker restarts
    run(capsys, "cluster", "stop-broker", "1", "--data-dir", d)
    run(capsys, "cluster", "start-broker", "1", "--data-dir", d)
    b = _broker(capsys, d, 1)
    assert (b["disk_full"], b["log_dir_offline"], b["state"]) == (False, False, "alive")


def test_isolate_from_one_side(d, capsys):
    rc, out, _ = run(capsys, "cluster", "isolate", "2", "--from", "clients", "--data-dir", d)
    assert rc == 0 and "isolated from clients" in out
    b = _broker(capsys, d, 2)
    assert (b["state"], b["isolated_from"]) == ("alive", "clients") and b["leaders"] == 1
    with pytest.raises(SystemExit) as exit_:
        run(capsys, "cluster", "isolate", "2", "--from", "peers", "--data-dir", d)
    assert exit_.value.code != 0 and "'peers'" in capsys.readouterr().err
    assert run(capsys, "cluster", "isolate", "2", "--heal", "--data-dir", d)[0] == 0
    assert _broker(capsys, d, 2)["isolated_from"] is None
