"""``/metrics``: the server's Prometheus metrics (``kafkasim serve --metrics-port P``).

Served by ``prometheus_client``'s HTTP server on ``127.0.0.1:P`` from a registry of its own
(nothing leaks into the process-global registry). Names follow Prometheus' conventions
(``_total`` counters, ``_seconds`` histograms, base units); the Kafka JMX metric each one
stands for is in docs/server.md.

===========================================  =========  ======================================
metric                                       type       labels / meaning
===========================================  =========  ======================================
kafkasim_partition_bytes_in_total            counter    topic, partition: record-batch bytes
                                                        appended by Produce (BytesInPerSec)
kafkasim_partition_messages_in_total         counter    topic, partition: records appended
                                                        (MessagesInPerSec)
kafkasim_partition_log_end_offset            gauge      topic, partition (LogEndOffset)
kafkasim_partition_log_start_offset          gauge      topic, partition (LogStartOffset)
kafkasim_partition_high_watermark            gauge      topic, partition (the HW; = LEO on one broker)
kafkasim_partition_size_bytes                gauge      topic, partition (Log Size)
kafkasim_group_committed_offset              gauge      group, topic, partition
kafkasim_group_lag                           gauge      group, topic, partition: records (LEO - committed)
kafkasim_under_replicated_partitions         gauge      partitions whose ISR is short of their
                                                        replicas (UnderReplicatedPartitions; 0 here)
kafkasim_offline_partitions                  gauge      partitions without a leader
                                                        (OfflinePartitionsCount; 0 here)
kafkasim_broker_up                           gauge      broker, rack: 1 alive, 0 stopped or isolated
                                                        (a served cluster only, as the rest of this
                                                        block)
kafkasim_broker_replicas                     gauge      broker: replicas it hosts (PartitionCount)
kafkasim_broker_leaders                      gauge      broker: partitions it leads (LeaderCount)
kafkasim_broker_size_bytes                   gauge      broker: bytes of its replicas' logs (Log Size)
kafkasim_broker_under_replicated_partitions  gauge      broker: partitions it leads whose ISR is short
                                                        (the broker's UnderReplicatedPartitions)
kafkasim_broker_offline_partitions           gauge      broker: partitions it holds a replica of that
                                                        have no leader
kafkasim_requests_total                      counter    api: requests answered (RequestsPerSec)
kafkasim_request_duration_seconds            histogram  api: from parse to response, holds included
                                                        (TotalTimeMs)
kafkasim_faults_injected_total               counter    api, action, broker: requests a fault rule
                                                        acted on (kafkasim.faults); action is error,
                                                        latency, throttle, drop-before or drop-after
===========================================  =========  ======================================

The produce counters are kept by the server as it appends (:meth:`ServerMetrics.produced`)
and exported for *every* partition of every non-internal topic, zero until its first
record, so averages over a topic's partitions count the idle ones (the hot-partition alert,
``alerts.yml``, depends on it). Offsets, groups and partition health are read from the
broker at scrape time. Counters restart at zero with the server, as Kafka's do.

Thread-safety: :meth:`ServerMetrics.produced`, :meth:`ServerMetrics.request` and
:meth:`ServerMetrics.fault` are called
from the event loop; a scrape runs on the HTTP server's thread; the counts dict is guarded
by a lock, and the broker is thread-safe.
"""

from __future__ import annotations

import logging
import threading
from typing import Optional

__all__ = ["ServerMetrics", "DEFAULT_METRICS_PORT", "LATENCY_BUCKETS"]

log = logging.getLogger("kafkasim.server")

DEFAULT_METRICS_PORT = 9308
"""The port ``--metrics-port`` documents as a suggestion (Kafka exporters commonly use 9308);
metrics are off unless the option is given."""

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0)


class ServerMetrics:
    """The server's metrics over ``broker``; :meth:`start` serves them over HTTP."""

    def __init__(self, broker) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.broker = broker
        self.registry = CollectorRegistry(auto_describe=False)
        self._lock = threading.Lock()
        self._produced: dict[tuple[str, int], list[int]] = {}   # (topic, partition) -> [bytes, records]
        self._requests = Counter("kafkasim_requests", "Requests answered, by API.", ["api"],
                                 registry=self.registry)
        self._latency = Histogram("kafkasim_request_duration_seconds",
                                  "Time from a parsed request to its response, by API (held requests "
                                  "included).", ["api"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self._faults = Counter("kafkasim_faults_injected", "Requests a fault rule acted on, by API, "
                               "action (error, latency, throttle, drop-before, drop-after) and broker.",
                               ["api", "action", "broker"], registry=self.registry)
        self.registry.register(_BrokerCollector(self))
        self._http = None
        self.host: Optional[str] = None
        self.port: Optional[int] = None

    # ------------------------------------------------------------------ recording (event loop)

    def produced(self, topic: str, partition: int, nbytes: int, records: int) -> None:
        """Count one successful append of ``records`` records in ``nbytes`` batch bytes."""
        with self._lock:
            c = self._produced.get((topic, partition))
            if c is None:
                c = self._produced[(topic, partition)] = [0, 0]
            c[0] += nbytes
            c[1] += records

    def request(self, api: str, seconds: float) -> None:
        self._requests.labels(api).inc()
        self._latency.labels(api).observe(seconds)

    def fault(self, api: str, action: str, broker) -> None:
        """Count one request a fault rule acted on with ``action``."""
        self._faults.labels(api, action, str(broker)).inc()

    def produced_counts(self) -> dict[tuple[str, int], tuple[int, int]]:
        with self._lock:
            return {k: (v[0], v[1]) for k, v in self._produced.items()}

    # ------------------------------------------------------------------ serving

    def start(self, port: int, host: str = "127.0.0.1") -> tuple[str, int]:
        """Serve ``/metrics`` on ``host:port`` (port 0: a free one); returns the bound address."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._http = server
        self.host, self.port = server.server_address[:2]
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)
        return self.host, self.port

    def close(self) -> None:
        server, self._http = self._http, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def exposition(self) -> bytes:
        """The text a scrape gets (Prometheus text format)."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _BrokerCollector:
    """Reads the broker at scrape time: produce counters per partition, offsets, groups, health."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        broker = self._metrics.broker
        tp_labels = ["topic", "partition"]
        bytes_in = CounterMetricFamily("kafkasim_partition_bytes_in",
                                       "Record-batch bytes appended by Produce, per partition.",
                                       labels=tp_labels)
        msgs_in = CounterMetricFamily("kafkasim_partition_messages_in",
                                      "Records appended by Produce, per partition.", labels=tp_labels)
        leo = GaugeMetricFamily("kafkasim_partition_log_end_offset", "Log end offset.", labels=tp_labels)
        lso = GaugeMetricFamily("kafkasim_partition_log_start_offset", "Log start offset.", labels=tp_labels)
        hw = GaugeMetricFamily("kafkasim_partition_high_watermark", "High watermark.", labels=tp_labels)
        size = GaugeMetricFamily("kafkasim_partition_size_bytes", "Bytes of the partition's segments.",
                                 labels=tp_labels)
        under = GaugeMetricFamily("kafkasim_under_replicated_partitions",
                                  "Partitions whose in-sync replicas are fewer than their replicas.")
        offline = GaugeMetricFamily("kafkasim_offline_partitions", "Partitions without a leader.")
        committed = GaugeMetricFamily("kafkasim_group_committed_offset", "A group's committed offset.",
                                      labels=["group", "topic", "partition"])
        lag = GaugeMetricFamily("kafkasim_group_lag", "A group's lag in records (log end - committed).",
                                labels=["group", "topic", "partition"])
        produced = self._metrics.produced_counts()
        n_under = n_offline = 0
        try:
            for name in broker.list_topics(include_internal=True):
                try:
                    d = broker.describe_topic(name)
                except Exception:
                    continue            # deleted meanwhile
                for p in d["partitions"]:
                    labels = [name, str(p["partition"])]
                    if not d.get("internal"):
                        b, m = produced.get((name, p["partition"]), (0, 0))
                        bytes_in.add_metric(labels, b)
                        msgs_in.add_metric(labels, m)
                    leo.add_metric(labels, p["log_end_offset"])
                    lso.add_metric(labels, p["log_start_offset"])
                    hw.add_metric(labels, p["high_watermark"])
                    size.add_metric(labels, p["size_bytes"])
                    n_under += len(p["isr"]) < len(p["replicas"])
                    n_offline += p["leader"] is None or p["leader"] < 0
            for g in broker.list_groups():
                try:
                    desc = broker.describe_group(g["group_id"])
                except Exception:
                    continue
                for r in desc.get("partitions", ()):
                    labels = [g["group_id"], r["topic"], str(r["partition"])]
                    if r["committed"] is not None:
                        committed.add_metric(labels, r["committed"])
                    if r["lag"] is not None:
                        lag.add_metric(labels, r["lag"])
        except Exception:               # a broker closing under a scrape: answer what we have
            log.debug("metrics scrape: broker not readable", exc_info=True)
        under.add_metric([], n_under)
        offline.add_metric([], n_offline)
        return [bytes_in, msgs_in, leo, lso, hw, size, committed, lag, under, offline, *_per_broker(broker)]


def _per_broker(broker) -> list:
    """The per-broker gauges of a served cluster (none for one plain broker)."""
    from prometheus_client.core import GaugeMetricFamily

    if not hasattr(broker, "describe_cluster"):
        return []
    try:
        d = broker.describe_cluster()
    except Exception:
        log.debug("metrics scrape: cluster not readable", exc_info=True)
        return []
    up = GaugeMetricFamily("kafkasim_broker_up", "1 when the broker is alive, 0 when stopped or isolated.",
                           labels=["broker", "rack"])
    families = {key: GaugeMetricFamily(f"kafkasim_broker_{name}", text, labels=["broker"]) for key, name, text in (
        ("replicas", "replicas", "Replicas the broker hosts."),
        ("leaders", "leaders", "Partitions the broker leads."),
        ("bytes", "size_bytes", "Bytes of the broker's replica logs."),
        ("under", "under_replicated_partitions", "Partitions the broker leads whose ISR is short of their replicas."),
        ("offline", "offline_partitions", "Partitions the broker holds a replica of that have no leader."))}
    under = {b["id"]: 0 for b in d["brokers"]}
    offline = dict(under)
    for p in d["partitions"]:
        if p["under_replicated"] and p["leader"] in under:
            under[p["leader"]] += 1
        if p["offline"]:
            for b in p["replicas"]:
                if b in offline:
                    offline[b] += 1
    for b in d["brokers"]:
        label = [str(b["id"])]
        up.add_metric([str(b["id"]), b["rack"] or ""], 1 if b["state"] == "alive" else 0)
        families["replicas"].add_metric(label, b["replicas"])
        families["leaders"].add_metric(label, b["leaders"])
        families["bytes"].add_metric(label, b["bytes"])
        families["under"].add_metric(label, under[b["id"]])
        families["offline"].add_metric(label, offline[b["id"]])
    return [up, *families.values()]
