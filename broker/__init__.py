"""kafkasim.broker: the in-process Kafka broker (topics over logs, the request API). See API.md.

Exports are lazy (:mod:`kafkasim._lazy`): importing this package imports nothing heavy.
"""

from kafkasim._lazy import lazy_exports

_EXPORTS = {name: "kafkasim.broker.broker" for name in (
    "Broker", "ProduceResult", "FetchResult", "ColumnFetchResult", "EARLIEST", "LATEST", "MAX_TIMESTAMP", "INTERNAL_TOPICS")}
_EXPORTS["Cluster"] = "kafkasim.broker.cluster"
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
