"""A raw Kafka wire client for tests: build request frames with kio, read responses."""

from __future__ import annotations

import io
import socket
import struct

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer

from kafkasim.server import codec


def request_frame(api_key: int, version: int, correlation_id: int, body: dict,
                  client_id: str = "raw-test") -> bytes:
    """``int32 size`` + header + body of ``api_key`` v``version`` built from a dict."""
    cls = codec.request_class(api_key, version)
    header_cls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(request_api_key=api_key, request_api_version=version,
                                              correlation_id=correlation_id, client_id=client_id))
    entity_writer(cls)(buf, codec.build(cls, body))
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def read_response(sock: socket.socket, api_key: int, version: int):
    """``(correlation_id, response entity)`` of the next response on ``sock``."""
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    frame = recv_exactly(sock, size)
    cls = codec.response_class(api_key, version)
    flexible = cls.__flexible__ and api_key != codec.API_VERSIONS_KEY
    header_cls = ResponseHeaderV1 if flexible else ResponseHeaderV0
    header, n = entity_reader(header_cls)(frame, 0)
    body, m = entity_reader(cls)(frame, n)
    assert n + m == size, f"{size - n - m} bytes left over in the response"
    return header.correlation_id, body


def call(sock: socket.socket, api_key: int, version: int, body: dict, correlation_id: int = 1):
    sock.sendall(request_frame(api_key, version, correlation_id, body))
    corr, response = read_response(sock, api_key, version)
    assert corr == correlation_id
    return response


def connect(host: str, port: int, timeout: float = 10) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def batches(records) -> list:
    """``[(header, [Record, ...])]`` of the Kafka v2 batches in a Fetch response's records,
    read by kafkasim's one reader of the format (kafkasim.records)."""
    from kafkasim.records import framing, record_batch

    return [(h, list(record_batch.iter_records(records, pos, h))) for pos, h in framing.iter_batches(records)]
