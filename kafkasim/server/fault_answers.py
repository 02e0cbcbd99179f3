"""What an injected fault does to one request's answer: Kafka-shaped error responses, the
partitions a request names, and partition errors merged into a handler's answer.

The server (:meth:`kafkasim.server.server.KafkaServer.handle_frame`) asks the fault rules
(:mod:`kafkasim.faults`) once per request and uses this module to act on the decision:

- :func:`request_partitions`: the ``(topic, partition)`` pairs a request names (Produce,
  Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, OffsetCommit, TxnOffsetCommit,
  OffsetFetch up to v7, OffsetDelete, AddPartitionsToTxn up to v3, DescribeProducers,
  ElectLeaders, AlterPartitionReassignments), in request order; none for the other APIs
  (ListPartitionReassignments names partitions, but its answer has no per-partition error).
  No served version carries topic ids in place of names (Fetch is served up to v12; v13
  brought ids), so names are read as sent.
- :func:`error_answer`: the answer to a request failed as a whole with one error code, as
  Kafka's ``AbstractRequest.getErrorResponse`` builds it: the top-level ``error_code`` where
  the response has one, and every item the request names (topic, partition, group,
  resource, coordinator key) mirrored into the response with the code and Kafka's "no value"
  fields (-1 offsets and high watermark, empty records, null aborted transactions). Example:
  a Produce of ``t``-0 and ``t``-1 failed with NOT_LEADER_OR_FOLLOWER answers
  ``{"responses": [{"name": "t", "partition_responses": [{"index": 0, "error_code": 6,
  "base_offset": -1, "log_append_time": -1, "log_start_offset": -1}, {"index": 1, ...}]}]}``;
  a Fetch (v7-v12) also carries the code at the top and keeps the request's session id; a
  JoinGroup gets ``error_code`` and generation -1. As in Kafka, an error with nowhere to go
  (Metadata for all topics, DescribeLogDirs before v3) is lost from the answer.
- :func:`without` / :func:`merge`: per-partition errors. The named partitions are taken out
  of the request before the handler runs (they are not applied: nothing is appended,
  committed or deleted there), and their error rows are put into the handler's answer, after
  the rows of the same topic, new topics at the end (Kafka builds its Produce answer the
  same way: the failed partitions' map is merged after the appended ones, grouped by topic).
  Fetch is the exception: it is not stripped (its fetch session must see every partition),
  it is answered at once (``min_bytes`` 0, as Kafka answers a fetch with an erroring
  partition at once) and the erroring rows replace the handler's.

One description per API (:data:`_SPECS`) drives all four: the request's array of items, the
response's, which fields carry the item's key on each side, the row's "no value" fields and
its error field; nested once for topic → partition. Pure functions; thread-safe.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Optional

from kafkasim.server import codec

__all__ = ["request_partitions", "error_answer", "without", "merge", "partition_errors_answer"]

_ME = None      # a key taken from the item itself (an array of strings or ints)


@dataclass(frozen=True)
class _Level:
    """One array of a request mirrored into the response's (see the module docstring)."""

    req: str                                       # the request's array field
    resp: str                                      # the response's array field
    keys: tuple[tuple[Optional[str], str], ...]    # (request item field or _ME, response row field)
    row: tuple[tuple[str, Any], ...] = ()          # Kafka's "no value" fields of an error row
    error: Optional[str] = "error_code"            # the row's error field (None: it has none)
    child: Optional["_Level"] = None


@dataclass(frozen=True)
class _Spec:
    level: Optional[_Level] = None
    top: tuple[tuple[str, Any], ...] = ()          # Kafka's "no value" top-level fields
    partitioned: bool = False                      # level = topics, child = partitions


def _topics(req, resp, name_req, name_resp, part_req, part_resp, part_key_req, part_key_resp,
            row=(), error="error_code", top=()) -> _Spec:
    return _Spec(_Level(req, resp, ((name_req, name_resp),), error=None,
                        child=_Level(part_req, part_resp, ((part_key_req, part_key_resp),), row, error)),
                 top, partitioned=True)


def _items(req, resp, keys, row=(), top=()) -> _Spec:
    return _Spec(_Level(req, resp, keys, row), top)


_SPECS: dict[str, tuple[_Spec, ...]] = {
    "Produce": (_topics("topic_data", "responses", "name", "name", "partition_data", "partition_responses",
                        "index", "index", (("base_offset", -1), ("log_append_time", -1),
                                           ("log_start_offset", -1))),),
    "Fetch": (_topics("topics", "responses", "topic", "topic", "partitions", "partitions", "partition",
                      "partition_index", (("high_watermark", -1), ("last_stable_offset", -1),
                                          ("log_start_offset", -1), ("aborted_transactions", None),
                                          ("preferred_read_replica", -1), ("records", b""))),),
    "ListOffsets": (_topics("topics", "topics", "name", "name", "partitions", "partitions", "partition_index",
                            "partition_index", (("timestamp", -1), ("offset", -1), ("leader_epoch", -1))),),
    "OffsetForLeaderEpoch": (_topics("topics", "topics", "topic", "topic", "partitions", "partitions",
                                     "partition", "partition", (("leader_epoch", -1), ("end_offset", -1))),),
    "DeleteRecords": (_topics("topics", "topics", "name", "name", "partitions", "partitions", "partition_index",
                              "partition_index", (("low_watermark", -1),)),),
    "OffsetCommit": (_topics("topics", "topics", "name", "name", "partitions", "partitions", "partition_index",
                             "partition_index"),),
    "TxnOffsetCommit": (_topics("topics", "topics", "name", "name", "partitions", "partitions",
                                "partition_index", "partition_index"),),
    "OffsetDelete": (_topics("topics", "topics", "name", "name", "partitions", "partitions", "partition_index",
                             "partition_index"),),
    "OffsetFetch": (_topics("topics", "topics", "name", "name", "partition_indexes", "partitions", _ME,
                            "partition_index", (("committed_offset", -1), ("committed_leader_epoch", -1),
                                                ("metadata", ""))),
                    _items("groups", "groups", (("group_id", "group_id"),))),
    "AddPartitionsToTxn": (_topics("v3_and_below_topics", "results_by_topic_v3_and_below", "name", "name",
                                   "partitions", "results_by_partition", _ME, "partition_index",
                                   error="partition_error_code"),),
    "DescribeProducers": (_topics("topics", "topics", "name", "name", "partition_indexes", "partitions", _ME,
                                  "partition_index"),),
    "ElectLeaders": (_topics("topic_partitions", "replica_election_results", "topic", "topic", "partitions",
                             "partition_result", _ME, "partition_id"),),
    "AlterPartitionReassignments": (_topics("topics", "responses", "name", "name", "partitions", "partitions",
                                            "partition_index", "partition_index"),),
    "WriteTxnMarkers": (_Spec(_Level("markers", "markers", (("producer_id", "producer_id"),), error=None,
                                     child=_Level("topics", "topics", (("name", "name"),), error=None,
                                                  child=_Level("partition_indexes", "partitions",
                                                               ((_ME, "partition_index"),))))),),
    "Metadata": (_items("topics", "topics", (("name", "name"), ("topic_id", "topic_id")),
                        (("partitions", ()), ("is_internal", False))),),
    "CreateTopics": (_items("topics", "topics", (("name", "name"),),
                            (("num_partitions", -1), ("replication_factor", -1))),),
    "DeleteTopics": (_items("topics", "responses", (("name", "name"), ("topic_id", "topic_id"))),
                     _items("topic_names", "responses", ((_ME, "name"),))),
    "CreatePartitions": (_items("topics", "results", (("name", "name"),)),),
    "DescribeGroups": (_items("groups", "groups", ((_ME, "group_id"),)),),
    "DeleteGroups": (_items("groups_names", "results", ((_ME, "group_id"),)),),
    "DescribeConfigs": (_items("resources", "results", (("resource_type", "resource_type"),
                                                        ("resource_name", "resource_name"))),),
    "IncrementalAlterConfigs": (_items("resources", "responses", (("resource_type", "resource_type"),
                                                                  ("resource_name", "resource_name"))),),
    "FindCoordinator": (_items("coordinator_keys", "coordinators", ((_ME, "key"),),
                               (("node_id", -1), ("host", ""), ("port", -1))),
                        _Spec(top=(("node_id", -1), ("host", ""), ("port", -1)))),
    "DescribeTransactions": (_items("transactional_ids", "transaction_states", ((_ME, "transactional_id"),),
                                    (("producer_id", -1), ("producer_epoch", -1))),),
    "ConsumerGroupDescribe": (_items("group_ids", "groups", ((_ME, "group_id"),)),),
    "ShareGroupDescribe": (_items("group_ids", "groups", ((_ME, "group_id"),)),),
    "DescribeShareGroupOffsets": (_items("groups", "groups", (("group_id", "group_id"),)),),
    "InitProducerId": (_Spec(top=(("producer_id", -1), ("producer_epoch", -1))),),
    "EndTxn": (_Spec(top=(("producer_id", -1), ("producer_epoch", -1))),),
    "JoinGroup": (_Spec(top=(("generation_id", -1),)),),
}
_NONE = _Spec()
_MISSING = object()


@functools.lru_cache(maxsize=None)
def _spec(api_key: int, api_name: str, version: int) -> tuple[_Spec, frozenset]:
    """The description that fits this version (its array fields exist on both sides), and the
    response's top-level field names."""
    resp_fields = frozenset(f.name for f in dataclasses.fields(codec.response_class(api_key, version)))
    req_fields = frozenset(f.name for f in dataclasses.fields(codec.request_class(api_key, version)))
    for spec in _SPECS.get(api_name, ()):
        if spec.level is None or (spec.level.req in req_fields and spec.level.resp in resp_fields):
            return spec, resp_fields
    return _NONE, resp_fields


def _key(item, field):
    return item if field is _ME else getattr(item, field, _MISSING)


def request_partitions(api_key: int, api_name: str, request) -> list[tuple[str, int]]:
    """The ``(topic, partition)`` pairs ``request`` (a :class:`~kafkasim.server.codec.Request`)
    names, in request order; ``[]`` for an API that names none (or a null topic list)."""
    spec = _spec(api_key, api_name, request.api_version)[0]
    if not spec.partitioned:
        return []
    level, child = spec.level, spec.level.child
    tkey, pkey = level.keys[0][0], child.keys[0][0]
    out = []
    for t in getattr(request.body, level.req) or ():
        name = getattr(t, tkey)
        for p in getattr(t, child.req) or ():
            out.append((name, p if pkey is _ME else getattr(p, pkey)))
    return out


def _rows(level: _Level, items, code_of) -> list:
    """Error rows mirroring the request's ``items`` at ``level``; ``code_of(path)`` gives the
    code of an item by the keys on the way to it (a leaf row with code None is left out)."""
    out = []
    for item in items or ():
        row = dict(level.row)
        for req_field, resp_field in level.keys:
            value = _key(item, req_field)
            if value is not _MISSING:
                row[resp_field] = value
        key = _key(item, level.keys[0][0])
        if level.child is not None:
            row[level.child.resp] = _rows(level.child, getattr(item, level.child.req, ()),
                                          functools.partial(_prefixed, code_of, key))
            if level.error is not None:
                row[level.error] = code_of((key,))
            out.append(row)
            continue
        code = code_of((key,))
        if code is None:
            continue
        if level.error is not None:
            row[level.error] = code
        out.append(row)
    return out


def _prefixed(code_of, prefix, path):
    return code_of((prefix, *path))


def error_answer(api_key: int, api_name: str, request, code: int, *, top_code: Optional[int] = None) -> dict:
    """The answer to ``request`` failed as a whole with Kafka error ``code`` (see the module
    docstring); ``top_code`` overrides the top-level code (0 when only the partitions fail)."""
    spec, resp_fields = _spec(api_key, api_name, request.api_version)
    out = dict(spec.top)
    out["error_code"] = code if top_code is None else top_code
    if spec.level is not None:
        out[spec.level.resp] = _rows(spec.level, getattr(request.body, spec.level.req, ()), lambda path: code)
    if api_name == "Fetch":
        out["session_id"] = getattr(request.body, "session_id", 0)
    return out


def partition_errors_answer(api_key: int, api_name: str, request, errors: dict) -> dict:
    """The answer when every partition ``request`` names fails with its code in ``errors``
    (``{(topic, partition): code}``) and the handler has nothing left to do."""
    spec = _spec(api_key, api_name, request.api_version)[0]
    out = dict(spec.top)
    out["error_code"] = 0
    out[spec.level.resp] = _rows(spec.level, getattr(request.body, spec.level.req, ()),
                                 lambda path: errors.get(path) if len(path) == 2 else 0)
    if api_name == "Fetch":
        out["session_id"] = getattr(request.body, "session_id", 0)
    return out


def _replace(obj, **changes):
    return obj._replace(**changes) if hasattr(obj, "_replace") else dataclasses.replace(obj, **changes)


def without(api_key: int, api_name: str, request, errors: dict):
    """``request`` without the partitions in ``errors`` (topics left empty are dropped), or
    None when nothing is left. Fetch is returned whole, with ``min_bytes`` 0, even when every
    partition fails: its handler keeps the fetch session's epoch moving (module docstring)."""
    spec = _spec(api_key, api_name, request.api_version)[0]
    level, child = spec.level, spec.level.child
    body = request.body
    if api_name == "Fetch":
        return request._replace(body=_replace(body, min_bytes=0))
    tkey, pkey = level.keys[0][0], child.keys[0][0]
    topics = []
    for t in getattr(body, level.req) or ():
        name = getattr(t, tkey)
        parts = tuple(p for p in getattr(t, child.req) or ()
                      if (name, p if pkey is _ME else getattr(p, pkey)) not in errors)
        if parts:
            topics.append(_replace(t, **{child.req: parts}))
    if not topics:
        return None
    return request._replace(body=_replace(body, **{level.req: tuple(topics)}))


def merge(api_key: int, api_name: str, request, result: dict, errors: dict) -> dict:
    """``result`` (a handler's answer to :func:`without`'s request) with the error rows of
    ``errors`` (``{(topic, partition): code}``) put in: an existing row of that partition is
    replaced (Fetch), else the row joins its topic's entry, or a new topic entry at the end;
    partitions in request order. A Fetch answered with a top-level error is left as it is."""
    spec = _spec(api_key, api_name, request.api_version)[0]
    level, child = spec.level, spec.level.child
    if api_name == "Fetch" and result.get("error_code"):
        return result
    tkey_resp, pkey_resp = level.keys[0][1], child.keys[0][1]
    topics = [dict(t) for t in result.get(level.resp, ())]
    by_name = {t[tkey_resp]: t for t in topics}
    row_defaults = dict(child.row)
    for (topic, partition), code in _in_request_order(api_key, api_name, request, errors):
        row = {**row_defaults, pkey_resp: partition}
        if child.error is not None:
            row[child.error] = code
        entry = by_name.get(topic)
        if entry is None:
            entry = by_name[topic] = {tkey_resp: topic, child.resp: []}
            topics.append(entry)
        rows = list(entry.get(child.resp, ()))
        for i, existing in enumerate(rows):
            if existing.get(pkey_resp) == partition:
                rows[i] = row
                break
        else:
            rows.append(row)
        entry[child.resp] = rows
    return {**result, level.resp: topics}


def _in_request_order(api_key, api_name, request, errors: dict) -> list:
    seen = []
    for tp in request_partitions(api_key, api_name, request):
        if tp in errors and tp not in seen:
            seen.append(tp)
    return [(tp, errors[tp]) for tp in seen]
