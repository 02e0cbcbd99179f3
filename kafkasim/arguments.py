"""Argument checks for the public entry points: one small helper, one message format.

Every public method of the broker, the producer and the consumer checks its plain
arguments (topic, partition, offset, timeout, data dir, config mappings) with
:func:`check_arg` before it touches any state, so a wrong type is a
:class:`~kafkasim.errors.InvalidArgumentError` naming the argument and the value —
``offset must be an int, got str: '5'`` — never a bare ``TypeError`` from deep inside.
Kafka's own rules with Kafka's error codes stay where they are (a topic name is an
``InvalidTopicError``, a partition count ``InvalidPartitionsError``, a record field
``InvalidRecordError``, see :mod:`kafkasim.records.validation`); this module checks only
what Kafka's typed API would not even compile.

Kinds (``check_arg(name, value, kind)``):

==========  ==============================================  ===========================
kind        accepts                                          returns
==========  ==============================================  ===========================
int         an ``int``, not a ``bool``                        the int
number      an ``int`` or ``float``, not a ``bool``, not NaN   the number
str         a non-empty ``str``                               the str
path        a non-empty ``str`` or ``os.PathLike`` of one      the path as a ``str``
bytes       ``bytes``, ``bytearray`` or ``memoryview``          the value
mapping     a ``collections.abc.Mapping``                     the mapping
a class     an instance of it                                 the instance
==========  ==============================================  ===========================

``min``/``max`` bound an int or number; ``none_ok`` lets ``None`` through; ``what`` says
what the argument must be in the message. :func:`check_topic_partition` and
:func:`check_commit_offsets` build on it for the shapes every client passes around;
:func:`bad_arg` is the error itself, for a caller whose test is not one of the kinds.

Pure functions; thread-safe.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, Optional

from kafkasim.errors import InvalidArgumentError
from kafkasim.types import OffsetAndMetadata, TopicPartition

__all__ = ["check_arg", "bad_arg", "check_topic_partition", "check_commit_offsets"]

_WHAT = {"int": "an int", "number": "a number", "str": "a non-empty str",
         "path": "a non-empty path (str or os.PathLike)", "bytes": "bytes", "mapping": "a mapping"}


def _int(v: Any):
    if type(v) is int:
        return True, v
    ok = isinstance(v, int) and not isinstance(v, bool)
    return ok, int(v) if ok else v        # an int subclass (IntEnum, ...) as a plain int


def _number(v: Any):
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and not (isinstance(v, float) and math.isnan(v))
    return ok, v


def _str(v: Any):
    return isinstance(v, str) and v != "", v


def _path(v: Any):
    if isinstance(v, os.PathLike):
        try:
            v = os.fspath(v)
        except TypeError:
            return False, v
    return isinstance(v, str) and v != "", v


def _bytes(v: Any):
    return isinstance(v, (bytes, bytearray, memoryview)), v


def _mapping(v: Any):
    return isinstance(v, Mapping), v


_CHECKS = {"int": _int, "number": _number, "str": _str, "path": _path, "bytes": _bytes, "mapping": _mapping}


def check_arg(name: str, value: Any, kind: str | type, *, min: Optional[float] = None,
              max: Optional[float] = None, none_ok: bool = False, what: Optional[str] = None) -> Any:
    """``value`` if it is a valid ``kind`` (see the module docstring), else InvalidArgumentError.

    >>> check_arg("offset", 5, "int", min=0)
    5
    >>> check_arg("offset", "5", "int")
    Traceback (most recent call last):
    ...
    kafkasim.errors.InvalidArgumentError: offset must be an int, got str: '5'
    """
    if value is None and none_ok:
        return None
    if isinstance(kind, type):
        ok, out = isinstance(value, kind), value
        what = what or f"a {kind.__module__}.{kind.__qualname__}"
    else:
        ok, out = _CHECKS[kind](value)
        what = what or _WHAT[kind]
    if not ok:
        raise bad_arg(name, value, what + (" or None" if none_ok else ""))
    if (min is not None and out < min) or (max is not None and out > max):
        bounds = (f"in [{min}, {max}]" if min is not None and max is not None
                  else f">= {min}" if min is not None else f"<= {max}")
        raise InvalidArgumentError(f"{name} must be {what} {bounds}, got {value!r:.80}")
    return out


def bad_arg(name: str, value: Any, what: str) -> InvalidArgumentError:
    """The error for argument ``name`` that is not ``what``: ``<name> must be <what>, got <type>: <value>``."""
    return InvalidArgumentError(f"{name} must be {what}, got {type(value).__name__}: {value!r:.80}")


def check_topic_partition(tp: Any, name: str = "partition") -> TopicPartition:
    """``tp`` — a TopicPartition or a ``(topic, partition)`` pair — as a TopicPartition."""
    if type(tp) is TopicPartition and type(tp[0]) is str and type(tp[1]) is int:
        return tp
    if not isinstance(tp, (tuple, list)) or len(tp) != 2 or not isinstance(tp[0], str) \
            or isinstance(tp[1], bool) or not isinstance(tp[1], int):
        raise bad_arg(name, tp, "a TopicPartition (topic: str, partition: int)")
    return TopicPartition(tp[0], int(tp[1]))


def check_commit_offsets(offsets: Any, name: str = "offsets") -> dict[TopicPartition, OffsetAndMetadata]:
    """``{TopicPartition: OffsetAndMetadata | int}`` (what a commit takes) normalised to
    ``{TopicPartition: OffsetAndMetadata}``; the error names the partition and the bad offset.
    Any int offset is a valid commit: Kafka stores the sentinels (-1, -2) admin tools commit."""
    check_arg(name, offsets, "mapping", what="a mapping of TopicPartition to OffsetAndMetadata or int")
    out = {}
    for tp, om in offsets.items():
        tp = check_topic_partition(tp, f"a partition in {name}")
        if isinstance(om, OffsetAndMetadata):
            check_arg(f"the offset committed for {tp}", om.offset, "int")
            if not isinstance(om.metadata, str):
                check_arg(f"the metadata committed for {tp}", om.metadata, "str", what="a str")
        else:
            om = OffsetAndMetadata(check_arg(f"the offset committed for {tp}", om, "int",
                                             what="an int or an OffsetAndMetadata"))
        out[tp] = om
    return out
