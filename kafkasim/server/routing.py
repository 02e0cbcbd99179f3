"""Which broker a command talks to: a running ``kafkasim serve`` over the wire, or the data dir.

:func:`open_broker` decides, in this order:

1. ``bootstrap`` given (``--bootstrap-server``) → a :class:`~kafkasim.server.remote.RemoteBroker`
   to that address;
2. the data dir's address file (``.server.json``, :mod:`kafkasim.server.address`) names a
   server that answers → a RemoteBroker to it (on a served cluster: the first broker
   whose listener answers);
3. the address file names a server whose process still runs but none of whose listeners
   answers: a served cluster with every broker stopped. A Kafka client then finds no
   broker and no partition leader, so this is :class:`~kafkasim.errors.LeaderNotAvailableError`
   naming the addresses and how to start a broker (the server holds the data dir's lock:
   opening the data dir here could only fail on the lock);
4. otherwise the data dir itself, embedded: a :class:`~kafkasim.broker.cluster.Cluster`
   when it holds one (``meta/cluster.json``), else a :class:`~kafkasim.broker.Broker`. A
   stale address file (its server died) gets a one-line ``notice`` and is removed once the
   embedded broker's lock proves no server holds the data dir.

The wire stack (the codec, kio) is imported only in cases 1 and 2: a command on a data dir
that no server serves never loads it. Thread-safety: plain functions.
"""

from __future__ import annotations

import os
from typing import Callable, Optional

from kafkasim.errors import InvalidArgumentError, LeaderNotAvailableError
from kafkasim.server.address import remove_address, server_for, server_process_alive

__all__ = ["open_broker"]


def open_broker(data_dir: Optional[str], *, bootstrap: Optional[str] = None,
                notice: Optional[Callable[[str], None]] = None, client_id: str = "kafkasim-cli"):
    """The broker a command should use (see the module docstring)."""
    if bootstrap:
        from kafkasim.server.remote import RemoteBroker, parse_bootstrap

        host, port = parse_bootstrap(bootstrap)
        return RemoteBroker(host, port, client_id=client_id)
    if data_dir is None:
        raise InvalidArgumentError("give a data dir or --bootstrap-server")
    info, live = server_for(data_dir)
    if info is not None and live:
        from kafkasim.server.remote import RemoteBroker

        return RemoteBroker(info["host"], info["port"], client_id=client_id, data_dir=data_dir)
    if info is not None and server_process_alive(info) and isinstance(info.get("brokers"), list):
        addresses = ", ".join(f"broker {b.get('id')} at {b.get('host')}:{b.get('port')}"
                              for b in info["brokers"] if isinstance(b, dict))
        raise LeaderNotAvailableError(
            f"no broker of the cluster that 'kafkasim serve' (pid {info['pid']}) serves from {data_dir} "
            f"answers ({addresses}): every broker is stopped, so no partition has a leader "
            f"(LEADER_NOT_AVAILABLE); start one with 'kafkasim cluster start-broker ID --data-dir {data_dir}'")
    if info is not None and notice is not None:
        notice(f"no server answers at {info['host']}:{info['port']} (stale "
               f"{os.path.join(data_dir, '.server.json')}, pid {info.get('pid', '?')}); "
               f"opening the data dir directly")
    if os.path.exists(os.path.join(data_dir, "meta", "cluster.json")):
        from kafkasim.broker.cluster import Cluster

        broker = Cluster(data_dir)
    else:
        from kafkasim.broker import Broker

        broker = Broker(data_dir)
    if info is not None:
        remove_address(broker.data_dir)     # we hold the lock: no server serves this dir
    return broker
