"""``Broker(topic_id_seed=...)``: seeded topic ids, so a seeded simulation whose outcome depends
on topic ids (KIP-848's server assignors order topics by id) runs the same every time."""

from __future__ import annotations

import uuid

import pytest

from kafkasim.broker import Broker
from kafkasim.errors import InvalidArgumentError


def _ids(path, **kw):
    with Broker(path, **kw) as b:
        for name in ("a", "b", "c"):
            b.create_topic(name, 2)
        return [b.describe_topic(n)["topic_id"] for n in ("a", "b", "c")]


def test_the_same_seed_gives_the_same_topic_ids_in_creation_order(tmp_path):
    first = _ids(tmp_path / "1", topic_id_seed="lab:42")
    assert first == _ids(tmp_path / "2", topic_id_seed="lab:42")
    assert len(set(first)) == 3                                   # each creation draws a new id
    assert all(uuid.UUID(hex=str(t)).version == 4 for t in first)
    assert first != _ids(tmp_path / "3", topic_id_seed="lab:43")


def test_without_a_seed_topic_ids_are_random(tmp_path):
    assert _ids(tmp_path / "1") != _ids(tmp_path / "2")


def test_a_recreated_topic_gets_a_new_id_under_a_seed(tmp_path):
    with Broker(tmp_path / "d", topic_id_seed=7) as b:
        b.create_topic("t", 1)
        old = b.describe_topic("t")["topic_id"]
        b.delete_topic("t")
        b.create_topic("t", 1)
        assert b.describe_topic("t")["topic_id"] != old


@pytest.mark.parametrize("seed", [1.5, True, b"x", ["s"]])
def test_a_bad_seed_is_refused_naming_it(tmp_path, seed):
    with pytest.raises(InvalidArgumentError, match="topic_id_seed"):
        Broker(tmp_path / "d", topic_id_seed=seed)
    assert not (tmp_path / "d").exists()                          # refused before touching the disk
