"""The server-side assignors (KIP-848) by their ``group.consumer.assignors`` names.

Kafka's broker config ``group.consumer.assignors`` lists the assignors the group coordinator
offers; the first is used when a member names none (``group.remote.assignor`` unset). Kafka
4.0 accepts a built-in's short name (``uniform``, ``range``) or its full class name
(``org.apache.kafka.coordinator.group.assignor.UniformAssignor``); both work here. The
default is ``uniform,range``.

Usage::

    >>> server_assignor("uniform").name
    'uniform'
    >>> server_assignors("uniform, range")[1].name
    'range'

Invariants: names map to one stateless assignor instance each. Thread-safety: a read-only
table; safe to share.
"""

from __future__ import annotations

from typing import Iterable, Union

from kafkasim.errors import InvalidConfigurationError

from kafkasim.assignors.group_spec import ServerAssignor
from kafkasim.assignors.server_range import ServerRangeAssignor
from kafkasim.assignors.uniform import UniformAssignor

__all__ = [
    "GROUP_CONSUMER_ASSIGNORS", "GROUP_CONSUMER_ASSIGNORS_DEFAULT", "server_assignor",
    "server_assignors", "server_assignor_names",
]

GROUP_CONSUMER_ASSIGNORS = "group.consumer.assignors"
"""The broker config naming the server-side assignors (Kafka's ``CONSUMER_GROUP_ASSIGNORS_CONFIG``)."""
GROUP_CONSUMER_ASSIGNORS_DEFAULT = ("uniform", "range")
"""Its default: the first one is the group's default assignor."""

_BY_NAME: dict[str, ServerAssignor] = {"uniform": UniformAssignor(), "range": ServerRangeAssignor()}
_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def server_assignor_names() -> list[str]:
    """The built-in server-side assignor names, in Kafka's default order."""
    return list(GROUP_CONSUMER_ASSIGNORS_DEFAULT)


def server_assignor(name: str) -> ServerAssignor:
    """The server-side assignor for a short name or a Kafka class name.

    An unknown name raises InvalidConfigurationError naming it and the known names.
    """
    key = name.strip() if isinstance(name, str) else name
    key = _CLASS_NAMES.get(key, key)
    found = _BY_NAME.get(key) if isinstance(key, str) else None
    if found is None:
        raise InvalidConfigurationError(
            f"Invalid value {name!r} for configuration {GROUP_CONSUMER_ASSIGNORS}: unknown assignor; "
            f"known: {', '.join(server_assignor_names())}")
    return found


def server_assignors(value: Union[str, Iterable[str]]) -> list[ServerAssignor]:
    """The assignors of a ``group.consumer.assignors`` value (a comma-separated string or a list).

    An empty list or a name given twice raises InvalidConfigurationError (Kafka needs at least
    one and rejects duplicate names).
    """
    names = [n.strip() for n in value.split(",")] if isinstance(value, str) else [str(n).strip() for n in value]
    names = [n for n in names if n]
    if not names:
        raise InvalidConfigurationError(
            f"Invalid value {value!r} for configuration {GROUP_CONSUMER_ASSIGNORS}: at least one assignor is needed")
    assignors = [server_assignor(n) for n in names]
    seen: set[str] = set()
    for n, a in zip(names, assignors):
        if a.name in seen:
            raise InvalidConfigurationError(
                f"Invalid value {value!r} for configuration {GROUP_CONSUMER_ASSIGNORS}: assignor {n!r} given twice")
        seen.add(a.name)
    return assignors
