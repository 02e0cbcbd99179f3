"""The server's refusal log: every refused request at WARNING, rate-limited per client/API/reason."""

from __future__ import annotations

import logging

from kafkasim.server.api import RefusalLog
from kafkasim.server.codec import peek_client_id


def test_refusals_are_logged_once_per_interval_with_the_count_held_back(caplog):
    now = [0.0]
    refusals = RefusalLog(interval_s=10, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="kafkasim.server"):
        for _ in range(5):
            refusals.refused("app-1", "FindCoordinator", "no transactions")
        refusals.refused("app-2", "FindCoordinator", "no transactions")
        now[0] = 11.0
        refusals.refused("app-1", "FindCoordinator", "no transactions")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "refused FindCoordinator from client 'app-1': no transactions",
        "refused FindCoordinator from client 'app-2': no transactions",
        "refused FindCoordinator from client 'app-1': no transactions (and 4 more like it)",
    ]
    assert refusals.total == 7


def test_the_refusal_table_is_bounded():
    refusals = RefusalLog(max_keys=3)
    for i in range(10):
        refusals.refused(f"c{i}", "Metadata", "x")
    assert len(refusals._last) == 3


def test_peek_client_id_reads_the_header_or_gives_none():
    frame = b"\x00\x03\x00\x0c\x00\x00\x00\x07" + b"\x00\x05hello" + b"rest"
    assert peek_client_id(frame) == "hello"
    assert peek_client_id(frame[:12]) is None                  # truncated string
    assert peek_client_id(b"\x00\x03\x00\x0c\x00\x00\x00\x07\xff\xff") is None   # null
    assert peek_client_id(b"\x00") is None
