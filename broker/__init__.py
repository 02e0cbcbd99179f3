"""broker: the in-process Kafka broker (topics over logs, the request API). See API.md."""

from broker.broker import (
    EARLIEST, INTERNAL_TOPICS, LATEST, Broker, ColumnFetchResult, FetchResult, ProduceResult,
)

__all__ = ["Broker", "ProduceResult", "FetchResult", "ColumnFetchResult", "EARLIEST", "LATEST", "INTERNAL_TOPICS"]
