"""Snapshots written before a module moved still restore: the unpickler finds each old path where it went."""

from __future__ import annotations

import importlib
import io
import pickle

import pytest

from engram.policies.base import MOVED_MODULES, MOVED_NAMES, _StateUnpickler, moved_module


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_every_module_that_moved_is_found_where_it_went_and_no_longer_where_it_was(old):
    importlib.import_module("engram." + MOVED_MODULES[old])
    if old not in ("shard", "boot"):  # engram.shard and engram.boot are packages again, of what moved into them
        with pytest.raises(ImportError):
            importlib.import_module("engram." + old)


def test_a_class_carried_out_of_its_module_is_found_in_its_new_one():
    for (old, name), new in MOVED_NAMES.items():
        assert moved_module(f"engram.{old}", name) == f"engram.{new}"
        assert isinstance(getattr(importlib.import_module(f"engram.{new}"), name), type)


def _pickle_naming(module: str, name: str, state: bytes = b"}") -> bytes:
    """A protocol-2 pickle that builds `module.name` with no arguments and sets `state` (an empty dict)."""
    return (b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\n)\x81" + state + b"b.")


def test_a_snapshot_naming_an_old_module_path_restores_into_the_class_of_today():
    from engram.memory.cognitive.graph import Edge

    restored = _StateUnpickler(io.BytesIO(pickle.dumps({"edge": Edge("t-a", "t-b", "semantic", 0.5)}, protocol=2)
                                          .replace(b"engram.memory.cognitive.graph", b"engram.cognitive.graph"))).load()
    assert restored["edge"] == Edge("t-a", "t-b", "semantic", 0.5)


def test_a_path_that_never_existed_is_still_refused():
    with pytest.raises(Exception, match="nowhere"):
        _StateUnpickler(io.BytesIO(_pickle_naming("engram.nowhere", "Thing"))).load()
    with pytest.raises(pickle.UnpicklingError):
        _StateUnpickler(io.BytesIO(_pickle_naming("os", "system"))).load()
