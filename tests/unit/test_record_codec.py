"""record._codec reads the model's annotation texts as typing.get_type_hints would."""

from __future__ import annotations

import dataclasses
import typing

import hanganalyze_gdbext.model as model
from hanganalyze_gdbext.model import asyncio as masyncio
from hanganalyze_gdbext.model import collectives, job, record, waitgraph


def _records():
    out = []
    for mod in (model, masyncio, collectives, job, waitgraph):
        out += [c for c in vars(mod).values() if isinstance(c, type) and issubclass(c, record.Record)
                and dataclasses.is_dataclass(c)]
    return list(dict.fromkeys(out))


def test_codec_as_type_hints_give_it():
    classes = _records()
    assert len(classes) > 20
    fast = 0
    for cls in classes:
        record._CODECS.pop(cls, None)
        hints = typing.get_type_hints(cls)
        slow = [(f.name, f.name.rstrip("_")) + record._how(hints[f.name]) for f in dataclasses.fields(cls)
                if f.name not in cls.TRANSIENT]
        assert record._codec(cls) == slow, cls.__name__
        names = vars(__import__(cls.__module__, fromlist=["_"]))
        fast += all(record._how_text(f.type, names) is not None for f in dataclasses.fields(cls))
    assert fast >= len(classes) - 2  # nearly all without get_type_hints


def test_unknown_forms_fall_back():
    assert record._how_text("Union[int, str]", {}) is None
    assert record._how_text("Missing", {}) is None
    assert record._how_text("List[Missing]", {}) is None
    assert record._how_text("Optional[bool]", {}) == (record._TRISTATE, None, True)
    assert record._how_text("bool", {}) == (record._FLAG, None, False)
    assert record._how_text("Optional[List[str]]", {}) == (record._PLAIN, None, True)
    assert record._how_text("List[List[str]]", {}) == (record._LIST, None, False)
