"""kafka-python's README and docs/usage.rst snippets (tests/consumer/kafka_python_snippets.py,
verbatim) run against kafkasim with only the imports and the constructions changed.

:func:`port` is the whole change: ``from kafka...`` imports become ``from kafkasim...``, and
each ``KafkaConsumer(...)`` / ``KafkaProducer(...)`` call gets the broker as its first
argument; a consumer also gets ``auto_offset_reset='earliest'`` (the topics are filled
before the snippet runs) and a ``consumer_timeout_ms`` (on the simulated clock) so that a
``for msg in consumer`` loop, which runs forever in kafka-python, ends. The test checks
that every line the port changed is an import or part of such a construction, then runs
the session and checks what it printed and what landed in the log.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import logging
import re
import time
import warnings

import msgpack
import pytest

from kafkasim import Broker
from kafkasim.config import IgnoredConfigWarning

import kafka_python_snippets as S   # test data beside this file

_IMPORT = re.compile(r"^\s*from kafka(\.errors)? import ")
_CALL = re.compile(r"\b(KafkaConsumer|KafkaProducer)\(")
_CONSUMER_EXTRA = {"auto_offset_reset": "'earliest'", "consumer_timeout_ms": "10000"}


def _calls(code: str) -> list[tuple[str, int, int]]:
    """(class, index of '(', index of the matching ')') of each construction."""
    out = []
    for m in _CALL.finditer(code):
        depth, i = 0, m.end() - 1
        while True:
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            if depth == 0:
                break
            i += 1
        out.append((m.group(1), m.end() - 1, i))
    return out


def port(code: str) -> str:
    """The snippet with kafkasim's imports and the broker passed to each construction."""
    for cls, open_, close in reversed(_calls(code)):
        args = code[open_ + 1:close]
        extra = ""
        if cls == "KafkaConsumer":
            extra = "".join(f", {k}={v}" for k, v in _CONSUMER_EXTRA.items() if f"{k}=" not in args)
        head = "broker" + (", " if args.strip() else "")
        code = code[:open_ + 1] + head + args + extra + code[close:]
    code = code.replace("from kafka.errors import KafkaError",
                        "from kafkasim.errors import KafkaSimError as KafkaError")
    return code.replace("from kafka import ", "from kafkasim import ")


def construction_lines(code: str) -> set[int]:
    lines = set()
    for _, open_, close in _calls(code):
        lines.update(range(code.count("\n", 0, open_), code.count("\n", 0, close) + 1))
    return lines


def only_imports_and_constructions_changed(original: str, ported: str) -> list[str]:
    """The original lines the port changed that are neither an import nor a construction."""
    allowed = construction_lines(original)
    bad = []
    matcher = difflib.SequenceMatcher(a=original.splitlines(), b=ported.splitlines())
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag == "equal":
            continue
        for i in range(i1, i2):
            line = original.splitlines()[i]
            if i not in allowed and not _IMPORT.match(line):
                bad.append(line)
    return bad


def run_session(broker, snippets, ns=None) -> str:
    ns = {} if ns is None else ns
    ns.update({"broker": broker, "msgpack": msgpack, "json": json, "log": logging.getLogger("snippets")})
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore", IgnoredConfigWarning)   # bootstrap_servers & co: accepted, ignored
        for code in snippets:
            ported = port(code)
            assert only_imports_and_constructions_changed(code, ported) == []
            exec(compile(ported, "<kafka-python snippet>", "exec"), ns)
    return out.getvalue()


def total(broker, topic) -> int:
    return sum(broker.list_offsets(topic, p, -1)[0] for p in range(broker.partition_count(topic)))


def eventually(check, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.02)
    return check()


@pytest.fixture
def broker(tmp_path, clock):
    yield from _broker(tmp_path, clock)


@pytest.fixture
def real_time_broker(tmp_path):
    """Producer sessions run on the real clock: as kafka-python's I/O thread, the background
    sender delivers what a snippet sent without flushing (e.g. before replacing its producer)."""
    yield from _broker(tmp_path, None)


def _broker(tmp_path, clock):
    b = Broker(tmp_path / "data", clock=clock)
    for topic, n in [("my_favorite_topic", 2), ("foobar", 3), ("msgpackfoo", 1), ("txn_topic", 1),
                     ("fizzbuzz", 1), ("flipflap", 1), ("my-topic", 2), ("awesome-1", 1),
                     ("msgpack-topic", 1), ("json-topic", 1)]:
        b.create_topic(topic, n)
    yield b
    b.close()


def test_the_port_changes_only_imports_and_constructions():
    code = "from kafka import KafkaConsumer\nc = KafkaConsumer('t',\n    group_id='g')\nfor m in c:\n    print(m)\n"
    ported = port(code)
    assert ported == ("from kafkasim import KafkaConsumer\nc = KafkaConsumer(broker, 't',\n    group_id='g', "
                      "auto_offset_reset='earliest', consumer_timeout_ms=10000)\nfor m in c:\n    print(m)\n")
    assert only_imports_and_constructions_changed(code, ported) == []
    assert only_imports_and_constructions_changed(code, ported.replace("print(m)", "print(m.value)")) \
        == ["    print(m)"]


def test_readme_consumer_session(broker, clock):
    for p in range(2):
        broker.append_records("my_favorite_topic", p, [(clock.now_ms(), b"k", f"fav-{p}".encode(),
                                                        (("trace", b"t1"),))])
    broker.append_records("foobar", 2, [(clock.now_ms(), None, b"in-p2", ())])
    broker.append_records("msgpackfoo", 0, [(clock.now_ms(), None, msgpack.packb({"a": 1}), ())])
    broker.append_records("txn_topic", 0, [(clock.now_ms(), None, b"txn", ())])
    printed = run_session(broker, S.README_CONSUMER)
    for value in (b"fav-0", b"fav-1", b"txn"):
        assert repr(value) in printed
    assert printed.count("value=b'fav-0'") == 2           # the group-less and the group snippet
    assert "(('trace', b't1'),)" in printed                # the headers snippet printed them
    assert broker.offset_fetch("my_favorite_group", None)  # the group snippet committed


def test_readme_producer_session(real_time_broker):
    broker = real_time_broker
    printed = run_session(broker, S.README_PRODUCER)
    assert printed == ""
    assert eventually(lambda: total(broker, "foobar") == 100 + 1 + 1 + 1000 + 1)
    assert eventually(lambda: total(broker, "flipflap") == 1 and total(broker, "fizzbuzz") == 1)
    assert broker.fetch("fizzbuzz", 0, 0).records[0].value == b'{"foo": "bar"}'
    assert broker.fetch("flipflap", 0, 0).records[0].key == b"ping"
    records = [r for p in range(3) for r in broker.fetch("foobar", p, 0, 10_000_000).records]
    assert any(r.headers == (("content-encoding", b"base64"),) for r in records)


def test_usage_consumer_session(broker, clock):
    broker.append_records("my-topic", 1, [(clock.now_ms(), b"k1", b"v1", ())])
    printed = run_session(broker, S.USAGE_CONSUMER)
    assert printed == "my-topic:1:0: key=b'k1' value=b'v1'\n"


def test_usage_producer_session(real_time_broker):
    broker = real_time_broker
    first, rest = S.USAGE_PRODUCER
    ns = {}
    printed = run_session(broker, [first], ns)
    assert printed.splitlines() == ["my-topic", str(ns["record_metadata"].partition), "0"]
    assert eventually(lambda: total(broker, "my-topic") == 2)
    assert eventually(lambda: total(broker, "msgpack-topic") == 1 and total(broker, "json-topic") == 1)
    with pytest.raises(TypeError, match="bytes is not JSON serializable"):   # as in kafka-python
        run_session(broker, [rest], ns)
    assert msgpack.unpackb(broker.fetch("msgpack-topic", 0, 0).records[0].value) == {"key": "value"}
