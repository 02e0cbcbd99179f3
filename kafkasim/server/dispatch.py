"""The complete dispatch table: importing this module registers every handler.

``APIS`` (API key → :class:`kafkasim.server.api.Api`) is what the server dispatches on
and exactly what ApiVersions advertises. Handlers live in ``apis_admin``, ``apis_data``,
``apis_groups``, ``apis_consumer_groups``, ``apis_share``, ``apis_partitions``, ``apis_producers`` and
``apis_txn``; each registers itself with :func:`kafkasim.server.api.api`.
Read-only after import; thread-safe.
"""

from __future__ import annotations

from kafkasim.server import (  # noqa: F401  (they fill APIS)
    apis_admin, apis_consumer_groups, apis_data, apis_groups, apis_partitions, apis_producers, apis_share,
    apis_txn,
)
from kafkasim.server.api import APIS, Api

__all__ = ["APIS", "Api"]
