"""kafkasim/server/produce_frames.py against kio, the reference codec: every served Produce
version, both directions, byte for byte; and hostile frames (the reader refuses exactly what
the kio path refuses, with MalformedRequest, and nothing else ever escapes)."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.server import codec, produce_frames
from kafkasim.server.apis_data import produce as produce_handler

VERSIONS = range(3, 13)
names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
records = st.one_of(st.none(), st.binary(max_size=80))


@st.composite
def requests(draw):
    version = draw(st.sampled_from(VERSIONS))
    body = {
        "transactional_id": draw(st.one_of(st.none(), names)),
        "acks": draw(st.sampled_from([-1, 0, 1, 2])),
        "timeout": draw(st.integers(0, 2**31 - 1)),
        "topic_data": draw(st.lists(st.fixed_dictionaries({
            "name": names,
            "partition_data": st.lists(st.fixed_dictionaries({
                "index": st.integers(-2**31, 2**31 - 1), "records": records}), max_size=3)}), max_size=3)),
    }
    client_id = draw(st.one_of(st.none(), names))
    frame = codec.encode_request(0, version, draw(st.integers(-2**31, 2**31 - 1)), client_id,
                                 codec.build(codec.request_class(0, version), body))
    return version, frame[4:]


def _as_plain(body) -> tuple:
    return (body.transactional_id, body.acks, codec.ms(body.timeout),
            [(t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
             for t in body.topic_data])


def _both(frame, version):
    """(kio's outcome, ours): a Request, or the MalformedRequest type."""
    try:
        ref = codec.decode_request_with_kio(frame, 0, version)
    except codec.MalformedRequest:
        ref = codec.MalformedRequest
    try:
        cid, client, body, trailing = produce_frames.decode(frame, version, codec.MalformedRequest)
        ours = codec.Request(0, version, cid, client, body, trailing)
    except codec.MalformedRequest:
        ours = codec.MalformedRequest
    return ref, ours


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_requests_decode_as_kio_decodes_them(case):
    version, frame = case
    ref, ours = _both(frame, version)
    assert ref is not codec.MalformedRequest
    assert (ours.correlation_id, ours.client_id, ours.trailing) == (ref.correlation_id, ref.client_id, ref.trailing)
    assert _as_plain(ours.body) == _as_plain(ref.body)
    assert isinstance(ours.body.timeout, datetime.timedelta)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(requests(), st.data())
def test_a_damaged_frame_is_refused_exactly_when_kio_refuses_it(case, data):
    version, frame = case
    how = data.draw(st.sampled_from(["truncate", "flip", "extend"]))
    if how == "truncate":
        frame = frame[:data.draw(st.integers(0, len(frame)))]
    elif how == "flip":
        i = data.draw(st.integers(0, len(frame) - 1))
        frame = frame[:i] + bytes([data.draw(st.integers(0, 255))]) + frame[i + 1:]
    else:
        frame = frame + data.draw(st.binary(min_size=1, max_size=8))
    ref, ours = _both(frame, version)
    if ours is codec.MalformedRequest:
        assert ref is codec.MalformedRequest
        return
    if ref is codec.MalformedRequest:
        # kio's bounds walk also refuses a nullable length below -1, which Kafka's generated
        # readers take as null (test below); anything else kio refuses, so do we
        assert b"\xff" in frame
        return
    assert (ours.correlation_id, ours.client_id, ours.trailing) == (ref.correlation_id, ref.client_id, ref.trailing)
    assert _as_plain(ours.body) == _as_plain(ref.body)


@pytest.mark.parametrize("length", [b"\xff\x00", b"\x80\x00"])
def test_a_nullable_length_below_minus_one_reads_as_null_as_in_kafka(length):
    """Kafka's generated readers (RequestHeaderData, ProduceRequestData v3-8): a negative length of
    a nullable string or bytes field is null; of a non-nullable one, an error."""
    head = b"\x00\x00\x00\x03\x00\x00\x00\x07"
    tail = b"\x00\x01\x00\x00\x00\x10\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00"
    cid, client, body, trailing = produce_frames.decode(head + length + length + tail + b"\xff\xff\xff\xf0", 3,
                                                        codec.MalformedRequest)
    assert (cid, client, body.transactional_id, trailing) == (7, None, None, 0)
    assert body.topic_data[0].partition_data[0].records is None
    with pytest.raises(codec.MalformedRequest, match="null string"):
        produce_frames.decode(head + length + length + b"\x00\x01\x00\x00\x00\x10\x00\x00\x00\x01" + length,
                              3, codec.MalformedRequest)


@given(st.sampled_from(VERSIONS), st.binary(max_size=64))
def test_random_bytes_never_raise_anything_but_malformed_request(version, frame):
    try:
        produce_frames.decode(frame, version, codec.MalformedRequest)
    except codec.MalformedRequest:
        pass


rows = st.fixed_dictionaries({
    "index": st.integers(-2**31, 2**31 - 1), "error_code": st.sampled_from([0, 1, 3, 6, 10, 47, 87]),
    "base_offset": st.integers(-1, 2**62), "log_append_time": st.sampled_from([-1, 0, 1_700_000_000_000]),
    "log_start_offset": st.integers(-1, 2**40), "error_message": st.one_of(st.none(), names)},
    optional={"record_errors": st.lists(st.fixed_dictionaries({
        "batch_index": st.integers(0, 100), "batch_index_error_message": st.one_of(st.none(), names)}), max_size=2)})


@settings(max_examples=300)
@given(st.sampled_from(VERSIONS), st.integers(-2**31, 2**31 - 1),
       st.lists(st.fixed_dictionaries({"name": names, "partition_responses": st.lists(rows, max_size=3)}), max_size=3),
       st.integers(0, 10_000))
def test_responses_are_the_bytes_kio_writes(version, correlation_id, responses, throttle):
    result = {"responses": responses, "throttle_time": throttle}
    ref = codec.encode_response(0, version, correlation_id, codec.build(codec.response_class(0, version), result))
    assert produce_frames.encode_response(version, correlation_id, result) == ref


def test_the_server_uses_this_module_for_produce():
    """The dispatch, not only the module: codec's entry points route Produce here."""
    frame = codec.encode_request(0, 9, 5, "c", codec.build(codec.request_class(0, 9), {
        "transactional_id": None, "acks": 1, "timeout": 100,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"xyz"}]}]}))[4:]
    req = codec.decode_request(frame, 0, 9)
    assert isinstance(req.body, produce_frames.ProduceBody)
    assert isinstance(req.body.topic_data[0].partition_data[0].records, memoryview)
    out = codec.encode_result(0, 9, 5, {"responses": []})
    assert out == produce_frames.encode_response(9, 5, {"responses": []})
    assert produce_handler is not None


@pytest.mark.parametrize("version", [3, 9, 12])
def test_a_header_only_frame_is_malformed(version):
    with pytest.raises(codec.MalformedRequest, match="ProduceRequest"):
        codec.decode_request(b"\x00\x00\x00" + bytes([version]) + b"\x00\x00\x00\x01", 0, version)
