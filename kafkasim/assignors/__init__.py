"""Partition assignors: pure functions from subscriptions to an assignment, as Kafka's.

Built in, by their ``partition.assignment.strategy`` names: ``range``
(:class:`RangeAssignor`), ``roundrobin`` (:class:`RoundRobinAssignor`), ``sticky``
(:class:`StickyAssignor`) and ``cooperative-sticky`` (:class:`CooperativeStickyAssignor`).
Each gives the same output as Kafka's Java assignor of that name for the same input
(see docs/assignors.md for the deliberate differences).

Usage::

    >>> from kafkasim.assignors import get_assignor, Subscription
    >>> get_assignor("range").assign({"t0": 3}, {"C0": Subscription(["t0"]), "C1": Subscription(["t0"])})
    {'C0': [TopicPartition(topic='t0', partition=0), TopicPartition(topic='t0', partition=1)], 'C1': [TopicPartition(topic='t0', partition=2)]}

The server-side assignors of KIP-848 (``uniform``, ``range``: Kafka's group-coordinator
ones, over :mod:`kafkasim.assignors.group_spec`) are a separate family, looked up by their
``group.consumer.assignors`` names with :func:`server_assignor`.

``assign(partitions_per_topic, subscriptions, partition_racks=None)``: with
``partition_racks`` (TopicPartition -> racks of its replicas) and members' ``rack_id``,
range and the sticky assignors are rack-aware as Kafka >= 3.5 (KIP-881).

:func:`get_assignor` accepts a name, an :class:`Assignor` subclass or an instance;
:func:`register_assignor` adds a custom assignor by its ``name``.

Invariants: the registry maps a name to one assignor class or instance; built-ins
cannot be replaced.  Thread-safety: the registry is guarded by a lock; assignors are
stateless and safe to share.
"""

from __future__ import annotations

import threading
from typing import Union

from kafkasim.errors import InvalidConfigurationError

from kafkasim.assignors.base import (
    COOPERATIVE, DEFAULT_GENERATION, EAGER, Assignor, Subscription, revoked_partitions,
)
from kafkasim.assignors.range import RangeAssignor
from kafkasim.assignors.roundrobin import RoundRobinAssignor

__all__ = [
    "Subscription", "Assignor", "EAGER", "COOPERATIVE", "DEFAULT_GENERATION",
    "RangeAssignor", "RoundRobinAssignor", "StickyAssignor", "CooperativeStickyAssignor",
    "get_assignor", "register_assignor", "assignor_names", "revoked_partitions",
    "server_assignor", "server_assignors", "server_assignor_names",
]

AssignorLike = Union[str, type, Assignor]

_lock = threading.Lock()
_REGISTRY: dict[str, Union[type, Assignor]] = {}
_BUILTIN: set[str] = set()


def _check(obj, what) -> None:
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name:
        raise InvalidConfigurationError(f"assignor {what!r} has no string 'name'")
    if not callable(getattr(obj, "assign", None)):
        raise InvalidConfigurationError(f"assignor {what!r} has no assign(partitions_per_topic, subscriptions)")


def register_assignor(cls_or_instance: Union[type, Assignor]) -> None:
    """Make a custom assignor available by its ``name`` (a class or an instance).

    It needs ``name`` and a pure ``assign(partitions_per_topic, subscriptions)``;
    ``supported_protocols`` defaults to ``("eager",)``.  Registering the same name again
    replaces a custom assignor; replacing a built-in raises InvalidConfigurationError.
    """
    _check(cls_or_instance, cls_or_instance)
    name = cls_or_instance.name
    with _lock:
        if name in _BUILTIN and _REGISTRY.get(name) is not cls_or_instance:
            raise InvalidConfigurationError(f"assignor name {name!r} is a built-in and cannot be replaced")
        _REGISTRY[name] = cls_or_instance


def assignor_names() -> list[str]:
    """Every registered assignor name, sorted."""
    with _lock:
        return sorted(_REGISTRY)


def get_assignor(name_or_class_or_instance: AssignorLike) -> Assignor:
    """The assignor for a config name, a class (instantiated) or an instance (returned).

    An unknown name raises InvalidConfigurationError naming it and the known names.
    """
    value = name_or_class_or_instance
    if isinstance(value, str):
        key = value.strip()
        with _lock:
            found = _REGISTRY.get(key)
        if found is None:
            raise InvalidConfigurationError(
                f"Invalid value {value!r} for configuration partition.assignment.strategy: "
                f"unknown assignor; known: {', '.join(assignor_names())}")
        value = found
    if isinstance(value, type):
        _check(value, value)
        return value()
    _check(value, value)
    return value


from kafkasim.assignors.sticky import CooperativeStickyAssignor, StickyAssignor  # noqa: E402
from kafkasim.assignors.server import server_assignor, server_assignor_names, server_assignors  # noqa: E402

for _cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor):
    _REGISTRY[_cls.name] = _cls
    _BUILTIN.add(_cls.name)
del _cls
