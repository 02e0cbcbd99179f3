"""Handlers for the cluster and admin APIs: ApiVersions, UpdateFeatures, Metadata, FindCoordinator,
InitProducerId, CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs, DescribeLogDirs.

Each handler translates the typed request into broker calls and the result into a
response dict (see :mod:`kafkasim.server.api`). No broker logic lives here: validation
of names, counts and configs is the broker's (its errors carry their Kafka codes).
Loop-thread coroutines; the broker calls run on the executor.
"""

from __future__ import annotations

import shutil

from kafkasim.config import LogConfig
from kafkasim.errors import (
    CoordinatorNotAvailableError, InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidRequestError,
    TopicAlreadyExistsError, UnknownTopicOrPartitionError,
)
from kafkasim.server import cluster
from kafkasim.server.api import APIS, api, error_code, error_message
from kafkasim.server.codec import ms

__all__ = ["advertised_versions", "advertised_features"]

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DEFAULT = 5
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


def advertised_versions() -> list[dict]:
    """ApiVersions' ``api_keys``: exactly the dispatch table."""
    return [{"api_key": a.key, "min_version": a.min_version, "max_version": a.max_version}
            for a in sorted(APIS.values(), key=lambda a: a.key)]


def advertised_features(broker, version: int) -> dict:
    """ApiVersions' feature fields (v3+, KIP-584), as a Kafka 4 broker fills them: every
    supported feature with its level range — for v0–v3 requests without the features whose
    range starts at 0 (Kafka's schema: older clients cannot read such a range) — and the
    finalized levels (min = max = the level) with their epoch. ``transaction.version`` 2
    finalized is what tells a client to use KIP-890's transactions (EndTxn v5, Produce v12,
    TxnOffsetCommit v5)."""
    supported = [{"name": name, "min_version": lo, "max_version": hi}
                 for name, (lo, hi) in sorted(broker.supported_features.items()) if version >= 4 or lo > 0]
    finalized = [{"name": name, "min_version_level": level, "max_version_level": level}
                 for name, level in sorted(broker.finalized_features.items())]
    return {"supported_features": supported, "finalized_features": finalized,
            "finalized_features_epoch": broker.finalized_features_epoch}


@api(18, "ApiVersions", 0, 4)
async def api_versions(ctx, req):
    return {"error_code": 0, "api_keys": advertised_versions(), **advertised_features(ctx.broker, req.api_version)}


_UPGRADE_TYPES = {1: "upgrade", 2: "safe_downgrade", 3: "unsafe_downgrade"}   # FeatureUpdate.UpgradeType


@api(57, "UpdateFeatures", 0, 2)
async def update_features(ctx, req):
    """``kafka-features.sh upgrade/downgrade``: ``Broker.update_features``, all or none. v0's
    ``allow_downgrade`` is a safe downgrade; v1's ``upgrade_type`` 1/2/3 upgrade/safe/unsafe
    downgrade, and ``validate_only``. Success: a NONE result per feature (v0–1; v2 has no
    results); failure: the top-level error (INVALID_UPDATE_VERSION) and no results, as
    Kafka's ``UpdateFeaturesResponse.createWithErrors``."""
    body = req.body
    levels, types = {}, {}
    for u in body.feature_updates:
        if u.feature in levels:
            exc = InvalidRequestError(f"UpdateFeatures: feature {u.feature!r} appears more than once")
            ctx.refused(str(exc))
            return {"error_code": error_code(exc), "error_message": str(exc), "results": []}
        levels[u.feature] = int(u.max_version_level)
        if req.api_version == 0:
            types[u.feature] = "safe_downgrade" if u.allow_downgrade else "upgrade"
        else:
            types[u.feature] = _UPGRADE_TYPES.get(int(u.upgrade_type), f"unknown ({int(u.upgrade_type)})")
    _, code, message = await ctx.attempt(ctx.broker.update_features, levels, upgrade_types=types,
                                         validate_only=bool(getattr(body, "validate_only", False)))
    if code:
        return {"error_code": code, "error_message": message, "results": []}
    return {"error_code": 0, "error_message": None,
            "results": [{"feature": name, "error_code": 0, "error_message": None} for name in levels]}


@api(3, "Metadata", 0, 12)
async def metadata(ctx, req):
    body = req.body
    topics = body.topics
    if topics is None or (req.api_version == 0 and not topics):
        names = None            # null (v1+) or empty (v0): every topic
    else:
        names = []
        for t in topics:
            name = getattr(t, "name", None)
            if name is None and getattr(t, "topic_id", None) is not None:
                name, code, _ = await ctx.attempt(cluster.topic_name_for_id, ctx.broker, t.topic_id)
                if name is None:
                    continue
            names.append(name)
    # a missing topic is created as the broker's auto.create.topics.enable says (when the
    # request allows it), by the same Broker.auto_create_topic every in-process client uses
    create = ctx.broker.auto_create_topic if getattr(body, "allow_auto_topic_creation", True) else None
    return await ctx.call(cluster.describe_cluster, ctx.broker, ctx.node, ctx.options.cluster_id,
                          names, create, ctx.topology)


def _unserved_key_type(ctx, key_type: int) -> Exception:
    """The answer to a coordinator kind kafkasim does not serve (share groups, key type 2)."""
    exc = InvalidRequestError(f"coordinator key type {key_type} is not one kafkasim serves")
    ctx.refused(str(exc))
    return exc


@api(10, "FindCoordinator", 0, 4)
async def find_coordinator(ctx, req):
    """Groups (key type 0) and transactional ids (1) have one coordinator: this broker, or on
    a served cluster the cluster's group coordinator (the controller; not the leader of the
    id's ``__transaction_state`` partition as in Kafka, see docs/differences.md)."""
    body = req.body
    key_type = getattr(body, "key_type", KEY_TYPE_GROUP)
    keys = body.coordinator_keys if req.api_version >= 4 else (body.key,)
    out = []
    coordinator = ctx.node if ctx.topology is None else await ctx.call(ctx.topology.coordinator)
    for key in keys:
        if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
            exc = _unserved_key_type(ctx, key_type)
            out.append({"key": key, "node_id": -1, "host": "", "port": -1,
                        "error_code": error_code(exc), "error_message": str(exc)})
        elif coordinator is None:
            exc = CoordinatorNotAvailableError("no broker of the cluster is up")
            out.append({"key": key, "node_id": -1, "host": "", "port": -1,
                        "error_code": error_code(exc), "error_message": error_message(exc)})
        else:
            out.append({"key": key, "node_id": coordinator.node_id, "host": coordinator.host,
                        "port": coordinator.port, "error_code": 0, "error_message": None})
    if req.api_version >= 4:
        return {"coordinators": out}
    first = out[0]
    return {k: first[k] for k in ("node_id", "host", "port", "error_code", "error_message")}


@api(22, "InitProducerId", 0, 5)
async def init_producer_id(ctx, req):
    """Without a transactional id: a new idempotent producer id. With one: the transaction
    coordinator's (``Broker.init_transactional_producer_id``), fencing the id's earlier
    producer; the version decides PRODUCER_FENCED (v4+) or INVALID_PRODUCER_EPOCH. v5 only
    lets the answer carry TRANSACTION_ABORTABLE (KIP-890); v6 (KIP-939 two-phase commit) is
    not served."""
    body = req.body
    if body.transactional_id is not None:
        result, code, _ = await ctx.attempt(
            ctx.broker.init_transactional_producer_id, body.transactional_id, ms(body.transaction_timeout),
            producer_id=getattr(body, "producer_id", -1), producer_epoch=getattr(body, "producer_epoch", -1),
            version=req.api_version)
    else:
        result, code, _ = await ctx.attempt(ctx.broker.init_producer_id)
    if code:
        return {"error_code": code, "producer_id": -1, "producer_epoch": -1}
    pid, epoch = result
    return {"error_code": 0, "producer_id": pid, "producer_epoch": epoch}


def _config_rows(broker, name: str, keys=None) -> list[dict]:
    """A topic's effective configs, Kafka-named, with where each value comes from."""
    overrides = broker.describe_topic(name).get("configs") or {}
    rows = []
    for key, value in sorted(broker.topic_config(name).to_kafka().items()):
        if keys is not None and key not in keys:
            continue
        rows.append({"name": key, "value": _config_text(value), "read_only": False,
                     "is_default": key not in overrides, "is_sensitive": False,
                     "config_source": SOURCE_DYNAMIC_TOPIC if key in overrides else SOURCE_DEFAULT,
                     "synonyms": [], "documentation": None})
    return rows


def _config_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@api(19, "CreateTopics", 2, 7)
async def create_topics(ctx, req):
    body = req.body
    out = []
    for t in body.topics:
        row = {"name": t.name, "error_message": None}
        try:
            if t.assignments:
                raise InvalidReplicaAssignmentError(
                    f"topic {t.name!r}: manual replica assignment is not supported by kafkasim")
            partitions = ctx.broker.broker_config["num.partitions"] if t.num_partitions == -1 else t.num_partitions
            rf = (ctx.broker.broker_config["default.replication.factor"] if t.replication_factor == -1
                  else t.replication_factor)
            configs = {c.name: c.value for c in t.configs}
            if body.validate_only:
                await ctx.call(_validate_new_topic, ctx.broker, t.name, configs)
            else:
                await ctx.call(ctx.broker.create_topic, t.name, partitions, rf, configs)
                d = await ctx.call(ctx.broker.describe_topic, t.name)
                row["topic_id"] = cluster.topic_id(d)
                row["configs"] = await ctx.call(_config_rows, ctx.broker, t.name)
            row.update(error_code=0, num_partitions=partitions, replication_factor=rf)
        except Exception as exc:
            row.update(error_code=error_code(exc), error_message=error_message(exc))
        out.append(row)
    return {"topics": out}


def _validate_new_topic(broker, name: str, configs: dict) -> None:
    """validate_only: the topic must not exist and the configs must parse (the broker's
    name and count checks run only on a real create; see docs/differences.md)."""
    if name in broker.list_topics(include_internal=True):
        raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
    LogConfig.from_overrides(configs)


@api(20, "DeleteTopics", 1, 6)
async def delete_topics(ctx, req):
    body = req.body
    if req.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(n, None) for n in body.topic_names]
    out = []
    for name, tid in wanted:
        row = {"name": name, "topic_id": tid, "error_message": None}
        try:
            if name is None:
                name = row["name"] = await ctx.call(cluster.topic_name_for_id, ctx.broker, tid)
            await ctx.call(ctx.broker.delete_topic, name)
            row["error_code"] = 0
        except Exception as exc:
            row.update(error_code=error_code(exc), error_message=error_message(exc))
        out.append(row)
    return {"responses": out}


@api(37, "CreatePartitions", 0, 3)
async def create_partitions(ctx, req):
    body = req.body
    out = []
    for t in body.topics:
        row = {"name": t.name, "error_message": None}
        try:
            if t.assignments:
                raise InvalidReplicaAssignmentError(
                    f"topic {t.name!r}: manual replica assignment is not supported by kafkasim")
            if body.validate_only:
                current = await ctx.call(ctx.broker.partition_count, t.name)
                if t.count <= current:
                    raise InvalidPartitionsError(
                        f"Topic currently has {current} partitions, which is higher than or "
                        f"equal to the requested {t.count}.")
            else:
                await ctx.call(ctx.broker.create_partitions, t.name, t.count)
            row["error_code"] = 0
        except Exception as exc:
            row.update(error_code=error_code(exc), error_message=error_message(exc))
        out.append(row)
    return {"results": out}


@api(32, "DescribeConfigs", 1, 4)
async def describe_configs(ctx, req):
    out = []
    for r in req.body.resources:
        row = {"resource_type": r.resource_type, "resource_name": r.resource_name,
               "error_message": None, "configs": []}
        try:
            if r.resource_type == RESOURCE_TOPIC:
                keys = None if r.configuration_keys is None else set(r.configuration_keys)
                row["configs"] = await ctx.call(_config_rows, ctx.broker, r.resource_name, keys)
            elif r.resource_type != RESOURCE_BROKER:  # a broker: no broker configs to show
                raise InvalidRequestError(f"resource type {r.resource_type} is not supported by kafkasim")
            row["error_code"] = 0
        except Exception as exc:
            row.update(error_code=error_code(exc), error_message=error_message(exc))
        out.append(row)
    return {"results": out}


OP_SET, OP_DELETE = 0, 1


def _alter_topic(broker, name: str, changes: dict, validate_only: bool) -> None:
    if validate_only:
        current = broker.describe_topic(name).get("configs") or {}
        merged = {**current, **{k: v for k, v in changes.items() if v is not None}}
        for k, v in changes.items():
            if v is None:
                merged.pop(k, None)
        LogConfig.from_overrides(merged)
        return
    broker.alter_topic_configs(name, changes)


@api(44, "IncrementalAlterConfigs", 0, 1)
async def incremental_alter_configs(ctx, req):
    """Topic configs: SET and DELETE (``Broker.alter_topic_configs``); APPEND/SUBTRACT (list
    configs) and broker resources are not served and answer INVALID_REQUEST."""
    body = req.body
    out = []
    for r in body.resources:
        row = {"resource_type": r.resource_type, "resource_name": r.resource_name, "error_message": None}
        try:
            if r.resource_type != RESOURCE_TOPIC:
                raise InvalidRequestError(
                    f"resource type {r.resource_type}: kafkasim alters topic configs only")
            changes = {}
            for c in r.configs:
                if c.config_operation == OP_SET:
                    changes[c.name] = c.value
                elif c.config_operation == OP_DELETE:
                    changes[c.name] = None
                else:
                    raise InvalidRequestError(
                        f"config {c.name!r}: operation {c.config_operation} (APPEND/SUBTRACT) is not "
                        "supported by kafkasim; SET the whole value")
            await ctx.call(_alter_topic, ctx.broker, r.resource_name, changes, body.validate_only)
            row["error_code"] = 0
        except Exception as exc:
            row.update(error_code=error_code(exc), error_message=error_message(exc))
        out.append(row)
    return {"responses": out}


def _log_dir_topics(broker, wanted) -> list[dict]:
    """Per topic, each partition's size in bytes (``Broker.describe_topic``)."""
    names = broker.list_topics(include_internal=True) if wanted is None else [t for t, _ in wanted]
    only = None if wanted is None else dict(wanted)
    out = []
    for name in names:
        try:
            d = broker.describe_topic(name)
        except UnknownTopicOrPartitionError:
            continue                       # as Kafka: a partition this log dir lacks is left out
        keep = None if only is None else set(only[name])
        out.append({"name": name, "partitions": [
            {"partition_index": p["partition"], "partition_size": p["size_bytes"], "offset_lag": 0,
             "is_future_key": False}
            for p in d["partitions"] if keep is None or p["partition"] in keep]})
    return out


@api(35, "DescribeLogDirs", 1, 4)
async def describe_log_dirs(ctx, req):
    """One log dir, the data dir, with each partition's size (``kafka-log-dirs --describe``)."""
    topics = req.body.topics
    wanted = None if topics is None else [(t.topic, tuple(t.partitions)) for t in topics]
    try:
        rows = await ctx.call(_log_dir_topics, ctx.broker, wanted)
        usage = await ctx.call(shutil.disk_usage, ctx.broker.data_dir)
        result = {"error_code": 0, "log_dir": ctx.broker.data_dir, "topics": rows,
                  "total_bytes": usage.total, "usable_bytes": usage.free}
    except Exception as exc:
        result = {"error_code": error_code(exc), "log_dir": getattr(ctx.broker, "data_dir", ""),
                  "topics": [], "total_bytes": -1, "usable_bytes": -1}
    return {"error_code": 0, "results": [result]}
