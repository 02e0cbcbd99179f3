"""Protocol fuzz: thousands of mutated and truncated frames against ``kafkasim serve``.

Seeds are valid requests of every served API version (tests/server/test_protocol.py's
minimal requests). Each case mutates one (flips bytes, overwrites the header, splices
random bytes, truncates, appends trailing bytes, lies about the size) with a seeded RNG, sends it on a loopback
connection and reads whatever comes back for a short while. The count and the time are
both bounded. Afterwards the server must still be up, a real client must still work,
and ``kafkasim verify-log`` must pass on the data dir.
"""

from __future__ import annotations

import random
import socket
import struct
import subprocess
import sys
import time

import pytest

from tests.server import raw
from tests.server.test_protocol import SERVED, minimal_request

pytestmark = pytest.mark.slow

SEED = 20261123
CASES = 5000
TIME_BUDGET_S = 60
READ_TIMEOUT_S = 0.05
# requests that change topics are left out of the seeds: their mutations would be valid
# requests that create or delete topics, which is not what this test is about
NO_SEED = {19, 20, 37}


def _seeds() -> list[bytes]:
    return [raw.request_frame(k, v, 1000 + i, minimal_request(k, v))[4:]
            for i, (k, v) in enumerate(SERVED) if k not in NO_SEED]


def _mutate(rng: random.Random, body: bytes) -> bytes:
    buf = bytearray(body)
    kind = rng.randrange(8)
    if kind == 0:                                    # flip a few bytes anywhere
        for _ in range(rng.randint(1, 6)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
    elif kind == 1:                                  # truncate the body
        del buf[rng.randrange(len(buf)):]
    elif kind == 2:                                  # splice random bytes in
        at = rng.randrange(len(buf) + 1)
        buf[at:at] = rng.randbytes(rng.randint(1, 32))
    elif kind == 3:                                  # another API key or version in the header
        struct.pack_into(">hh", buf, 0, rng.choice([rng.randrange(-5, 80), 3, 18]), rng.randrange(-2, 20))
    elif kind == 4:                                  # mutate only past the header (bodies)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(min(8, len(buf) - 1), len(buf))
            buf[at] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
    elif kind == 5:                                  # pure garbage
        buf = bytearray(rng.randbytes(rng.randint(0, 64)))
    elif kind == 7:                                  # trailing bytes after a valid body (ignored, as Kafka)
        buf += rng.randbytes(rng.randint(1, 16))
    else:                                            # a length field inside set huge or negative
        if len(buf) > 12:
            at = rng.randrange(8, len(buf) - 3)
            struct.pack_into(">i", buf, at, rng.choice([-2, -1, 0x7FFFFFFF, 0x10000]))
    return bytes(buf)


def _frame(rng: random.Random, body: bytes) -> bytes:
    size = len(body)
    if rng.random() < 0.05:                          # the size lies
        size = rng.choice([size + rng.randint(1, 100), max(0, size - rng.randint(1, 8)), -7])
    return struct.pack(">i", size) + body


TRAILING_CASES = 50
HELD = {1, 11, 14}    # Fetch, JoinGroup, SyncGroup may be held: not answered at once


def _trailing_frames_answered(server, rng: random.Random) -> int:
    """Valid requests with 1-16 random bytes after the body: each one is answered (Kafka
    ignores bytes past the schema's fields), on a connection that stays open."""
    answered = 0
    seeds = [s for s in _seeds() if struct.unpack_from(">h", s, 0)[0] not in HELD | {0}]
    with raw.connect(server.host, server.port) as sock:
        for _ in range(TRAILING_CASES):
            body = rng.choice(seeds) + rng.randbytes(rng.randint(1, 16))
            sock.sendall(struct.pack(">i", len(body)) + body)
            (size,) = struct.unpack(">i", raw.recv_exactly(sock, 4))
            raw.recv_exactly(sock, size)
            answered += 1
    return answered


def test_fuzzed_frames_never_take_the_server_down(server):
    rng = random.Random(SEED)
    seeds = _seeds()
    sock = None
    sent = closed = answered = 0
    start = time.monotonic()
    try:
        while sent < CASES and time.monotonic() - start < TIME_BUDGET_S:
            if sock is None:
                sock = raw.connect(server.host, server.port)
                sock.settimeout(READ_TIMEOUT_S)
            frame = _frame(rng, _mutate(rng, rng.choice(seeds)))
            try:
                sock.sendall(frame)
                sent += 1
                data = sock.recv(65536)
                if data:
                    answered += 1
                else:
                    closed += 1
                    sock.close()
                    sock = None
            except socket.timeout:
                # no answer yet (a held request, acks=0, or a size that lies): start afresh
                sock.close()
                sock = None
            except OSError:
                closed += 1
                sock.close()
                sock = None
    finally:
        if sock is not None:
            sock.close()
    assert sent >= 1000, f"only {sent} frames in {TIME_BUDGET_S}s"
    assert closed > 0 and answered > 0       # both paths were exercised
    trailing = _trailing_frames_answered(server, rng)
    assert trailing == TRAILING_CASES, f"only {trailing} of {TRAILING_CASES} frames with trailing bytes answered"
    assert server.proc.poll() is None, "the server died"

    # a real client still works
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=server.bootstrap)
    md = producer.send("after-fuzz", key=b"k", value=b"still here").get(15)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, auto_offset_reset="earliest")
    tp = TopicPartition("after-fuzz", md.partition)
    consumer.assign([tp])
    deadline = time.monotonic() + 15
    got = []
    while not got and time.monotonic() < deadline:
        got = consumer.poll(timeout_ms=500).get(tp, [])
    consumer.close()
    assert [r.value for r in got] == [b"still here"]

    assert server.stop() == 0
    check = subprocess.run([sys.executable, "-m", "kafkasim", "verify-log", "--data-dir", server.data_dir],
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
