"""Every implementation of the broker API matches the one typed Protocol (broker/protocol.py).

For each method the Protocol declares, the implementation has it, and its parameters agree:
the same positional parameters in the same order with the same defaults, and every declared
keyword-only parameter with its default (or ``**kwargs`` that forward it to the coordinator,
which is checked the same way). An implementation may add optional keyword-only parameters
of its own (``node=`` on a cluster's calls).
"""

from __future__ import annotations

import inspect

import pytest

from kafkasim.broker import Broker
from kafkasim.broker.cluster import Cluster
from kafkasim.broker.protocol import (
    BrokerAPI, ConsumerGroupAPI, ServedBrokerAPI, ShareGroupAPI, TransactionAdminAPI, TransactionalBrokerAPI,
)
from kafkasim.server.remote import RemoteBroker

P = inspect.Parameter


def _declared(protocol) -> list[str]:
    return sorted(n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")) + (
        _declared(BrokerAPI) if protocol in (ServedBrokerAPI, TransactionalBrokerAPI, TransactionAdminAPI, ConsumerGroupAPI,
                                          ShareGroupAPI) else [])


def _problems(impl, protocol) -> list[str]:
    out = []
    for name in _declared(protocol):
        want_fn = getattr(protocol, name)
        have_fn = getattr(impl, name, None)
        if have_fn is None:
            out.append(f"{impl.__name__}.{name} is missing")
            continue
        want = inspect.signature(want_fn).parameters
        have = inspect.signature(have_fn).parameters
        wpos = [(n, p.default) for n, p in want.items() if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
        hpos = [(n, p.default) for n, p in have.items() if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
        extra = hpos[len(wpos):]
        if hpos[:len(wpos)] != wpos or any(d is P.empty for _, d in extra):
            out.append(f"{impl.__name__}.{name}{inspect.signature(have_fn)}: positional parameters differ "
                       f"from {list(want)}")
        forwards = any(q.kind is P.VAR_KEYWORD for q in have.values())
        for n, p in want.items():
            if p.kind is P.KEYWORD_ONLY and not forwards and (n not in have or have[n].default != p.default):
                out.append(f"{impl.__name__}.{name}: keyword-only {n}={p.default!r} missing or different")
        for n, p in have.items():
            if p.kind is P.KEYWORD_ONLY and n not in want and p.default is P.empty:
                out.append(f"{impl.__name__}.{name}: requires keyword {n} the Protocol does not declare")
    return out


@pytest.mark.parametrize("impl", [Broker, Cluster, RemoteBroker], ids=lambda c: c.__name__)
def test_every_implementation_matches_the_broker_api(impl):
    assert _problems(impl, BrokerAPI) == []


def test_group_calls_forwarded_with_kwargs_match_the_coordinator():
    """Broker and Cluster forward the group calls' keywords to the GroupCoordinator, so the
    coordinator is what must match the Protocol there."""
    from kafkasim.coordinator.coordinator import GroupCoordinator

    group_calls = ["join_group", "sync_group", "heartbeat", "leave_group", "offset_commit"]

    class Only:
        pass

    for name in group_calls:
        setattr(Only, name, getattr(GroupCoordinator, name))
    problems = [p for p in _problems(Only, BrokerAPI) if any(f".{n}" in p for n in group_calls)]
    assert problems == []


@pytest.mark.parametrize("impl", [Broker, Cluster], ids=lambda c: c.__name__)
def test_in_process_brokers_serve_the_wire_front_end(impl):
    assert _problems(impl, ServedBrokerAPI) == []


@pytest.mark.parametrize("impl", [Broker, Cluster], ids=lambda c: c.__name__)
def test_in_process_brokers_serve_transactional_clients(impl):
    """The calls the transactional producer and the read_committed consumer make."""
    assert _problems(impl, TransactionalBrokerAPI) == []


def test_the_check_catches_a_drifted_signature():
    class Drifted:
        def list_offsets(self, topic, partition):      # lost its timestamp
            ...

    problems = _problems(Drifted, BrokerAPI)
    assert any("list_offsets" in p and "positional" in p for p in problems)
    assert any("produce is missing" in p for p in problems)


def test_instances_are_recognised_by_isinstance(tmp_path):
    with Broker(tmp_path / "d") as b:
        assert isinstance(b, ServedBrokerAPI) and isinstance(b, BrokerAPI)
    assert not isinstance(object(), BrokerAPI)


@pytest.mark.parametrize("impl", [Broker, Cluster, RemoteBroker], ids=lambda c: c.__name__)
def test_every_implementation_serves_the_transaction_admin_calls(impl):
    """kafkasim transactions works on a data dir and against a server alike."""
    assert _problems(impl, TransactionAdminAPI) == []


@pytest.mark.parametrize("impl", [Broker, Cluster], ids=lambda c: c.__name__)
def test_in_process_brokers_serve_consumer_groups(impl):
    """ConsumerGroupHeartbeat / ConsumerGroupDescribe (KIP-848), which kafkasim serve answers."""
    assert _problems(impl, ConsumerGroupAPI) == []


@pytest.mark.parametrize("impl", [Broker, Cluster], ids=lambda c: c.__name__)
def test_in_process_brokers_serve_share_groups(impl):
    """ShareGroupHeartbeat, ShareFetch, ShareAcknowledge and the share-group admin calls (KIP-932)."""
    assert _problems(impl, ShareGroupAPI) == []
