"""The live view (``kafkasim view``): a web page that shows a data dir as the course's diagram.

Producers on the left, ``murmur2(key) mod N`` routing into partitions in the middle (records,
log end offsets and append rates per partition), the consumer group's members on the right with
the partitions each owns, rebalances as they happen, and the brokers. Everything is read from
the data dir's files, read-only, while another process (``kafkasim serve``, a lab) writes them:

- :mod:`kafkasim.view.tail`: follows one partition directory's segment files;
- :mod:`kafkasim.view.groups`: folds ``__consumer_offsets`` into groups, owners and rebalances;
- :mod:`kafkasim.view.txns`: open transactions (partitions' batches and ``__transaction_state``)
  and each partition's last stable offset;
- :mod:`kafkasim.view.snapshot`: :class:`DataDirWatcher`, one JSON-ready snapshot per poll;
- :mod:`kafkasim.view.server`: :class:`ViewServer`, the page, ``/snapshot.json`` and ``/events``
  (server-sent events); the page itself is ``static/`` (HTML, CSS, plain JS; no build step).

This package imports only storage's read-only layout helpers and the log's transaction fold
(``storage.transactions``, pure), the record format and the offsets- and transaction-topic codecs (an import-linter contract forbids the broker, clients and log writers).
Importing it is cheap: the submodules load when used.
"""

__all__ = ["DataDirWatcher", "ViewServer"]


def __getattr__(name: str):
    if name == "DataDirWatcher":
        from kafkasim.view.snapshot import DataDirWatcher
        return DataDirWatcher
    if name == "ViewServer":
        from kafkasim.view.server import ViewServer
        return ViewServer
    raise AttributeError(f"module 'kafkasim.view' has no attribute {name!r}")
