"""Kafka-shaped answers to faulted requests (kafkasim.server.fault_answers), for every served
API and version: the answer encodes for that version and carries the error code where
Kafka's ``getErrorResponse`` puts it (top level, or every item the request names)."""

from __future__ import annotations

import dataclasses
import datetime

import pytest
from kio.serial._introspect import EntityField, EntityTupleField, classify_field

from kafkasim.server import codec, fault_answers
from kafkasim.server.dispatch import APIS

CODE = 7     # REQUEST_TIMED_OUT


def one_of_each(cls) -> dict:
    """A request of ``cls`` whose every array holds one element (strings "x", numbers 0)."""
    out = {}
    for f in dataclasses.fields(cls):
        shape = classify_field(f)
        kafka_type = f.metadata.get("kafka_type")
        if isinstance(shape, EntityTupleField):
            out[f.name] = [one_of_each(shape.type_)]
        elif isinstance(shape, EntityField):
            out[f.name] = one_of_each(shape.type_)
        elif shape.is_array:
            out[f.name] = ["x"] if kafka_type == "string" else [0]
        elif kafka_type == "string":
            out[f.name] = "x"
    return out


def error_codes(entity) -> list[int]:
    """Every error code in a decoded response, at any depth."""
    found = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.metadata.get("kafka_type") == "error_code":
            found.append(int(value))
        elif isinstance(value, tuple):
            for v in value:
                if dataclasses.is_dataclass(v):
                    found.extend(error_codes(v))
        elif dataclasses.is_dataclass(value) and not isinstance(value, (datetime.datetime, datetime.timedelta)):
            found.extend(error_codes(value))
    return found


LOST = {("DescribeLogDirs", v) for v in range(3)}
"""Where Kafka's answer has no place for the error either (no top-level code before v3)."""


@pytest.mark.parametrize("api", sorted(APIS.values(), key=lambda a: a.key), ids=lambda a: a.name)
def test_every_served_version_answers_a_whole_request_error_where_kafka_puts_it(api):
    for version in range(api.min_version, api.max_version + 1):
        cls = codec.request_class(api.key, version)
        request = codec.Request(api.key, version, 1, "c", codec.build(cls, one_of_each(cls)))
        answer = fault_answers.error_answer(api.key, api.name, request, CODE)
        frame = codec.encode_result(api.key, version, 5, answer)
        corr, body = codec.decode_response(api.key, version, frame[4:])
        codes = error_codes(body)
        assert corr == 5
        if (api.name, version) in LOST:
            continue
        assert CODE in codes, (api.name, version, body)
        assert set(codes) <= {CODE, 0}, (api.name, version, body)


def test_partitions_named_in_request_order_and_none_for_apis_without_partitions():
    cls = codec.request_class(0, 9)
    body = codec.build(cls, {"acks": -1, "timeout": 1000, "topic_data": [
        {"name": "b", "partition_data": [{"index": 2, "records": b""}, {"index": 0, "records": b""}]},
        {"name": "a", "partition_data": [{"index": 1, "records": b""}]}]})
    assert fault_answers.request_partitions(0, "Produce", codec.Request(0, 9, 1, "c", body)) == [
        ("b", 2), ("b", 0), ("a", 1)]
    meta = codec.build(codec.request_class(3, 12), {"topics": [{"name": "a"}]})
    assert fault_answers.request_partitions(3, "Metadata", codec.Request(3, 12, 1, "c", meta)) == []
    fetch_cls = codec.request_class(1, 12)
    fetch = codec.build(fetch_cls, {"topics": [{"topic": "t", "partitions": [{"partition": 3}]}]})
    assert fault_answers.request_partitions(1, "Fetch", codec.Request(1, 12, 1, "c", fetch)) == [("t", 3)]


@pytest.mark.parametrize("api", sorted(APIS.values(), key=lambda a: a.key), ids=lambda a: a.name)
def test_partition_errors_encode_for_every_api_that_names_partitions(api):
    """When every partition a request names fails, the answer is built without the handler:
    each partition's row carries its code and the answer encodes for every served version."""
    for version in range(api.min_version, api.max_version + 1):
        cls = codec.request_class(api.key, version)
        request = codec.Request(api.key, version, 1, "c", codec.build(cls, one_of_each(cls)))
        named = fault_answers.request_partitions(api.key, api.name, request)
        if not named:
            continue
        errors = {tp: CODE for tp in named}
        if api.name != "Fetch":
            assert fault_answers.without(api.key, api.name, request, errors) is None
        answer = fault_answers.partition_errors_answer(api.key, api.name, request, errors)
        _, body = codec.decode_response(api.key, version, codec.encode_result(api.key, version, 5, answer)[4:])
        codes = error_codes(body)
        assert codes.count(CODE) == len(named) and set(codes) <= {CODE, 0}, (api.name, version, body)
