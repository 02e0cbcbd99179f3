"""broker: the in-process Kafka broker (topics over logs, the request API). See API.md."""

from broker.broker import EARLIEST, INTERNAL_TOPICS, LATEST, Broker, FetchResult, ProduceResult

__all__ = ["Broker", "ProduceResult", "FetchResult", "EARLIEST", "LATEST", "INTERNAL_TOPICS"]
