"""record._codec reads the model's annotation texts as typing.get_type_hints would."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

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


def test_keyword_keys_tristate_flags_and_transient_fields():
    """``from_`` is written and read as "from"; an Optional[bool] writes its False (a plain bool
    only its True); a TRANSIENT field is declared but never written nor read."""
    facts = model.PythonFacts(version="3.12", gc_collecting=False, from_="file paths")
    assert facts.to_dict() == {"version": "3.12", "gc_collecting": False, "from": "file paths"}
    assert model.PythonFacts.from_dict({"version": "3.12", "from": "x", "unknown": 1}).from_ == "x"
    t = model.Thread(tid=1, current=False, py_activity="abc")
    assert "current" not in t.to_dict() and "py_activity" not in t.to_dict()
    p = model.Process(input_file="/in/rank0.txt")
    assert "input_file" not in p.to_dict()
    assert model.Process.from_dict(dict(p.to_dict(), input_file="/x")).input_file is None
    assert p == model.Process() and "input_file" not in repr(p)  # memory only: not compared, not shown
    s = model.Snapshot()
    s.stack_table = object()  # type: ignore[assignment]
    assert "stack_table" not in s.to_dict() and s == model.Snapshot()


def test_dist_keeps_the_key_order_a_join_wrote():
    """A rank joined from several inputs lists the keys of the input merged in first (as reports
    always have); a document read back keeps its order; one built field by field has the fields'."""
    env = model.DistIdentity(launcher="torch", from_="environ", world_size=2, launcher_pid=9)
    assert list(env.to_dict()) == ["launcher", "from", "world_size", "launcher_pid"]
    joined = env.filled_from(model.DistIdentity(from_="file name", local_rank=1))
    assert list(joined.to_dict()) == ["from", "local_rank", "launcher", "world_size", "launcher_pid"]
    assert joined.from_ == "environ" and joined.local_rank == 1
    doc = {"from": "environ", "launcher": "torch", "world_size": 2}
    assert list(model.DistIdentity.from_dict(doc).to_dict()) == list(doc)
    assert model.DistIdentity.from_dict(doc) == model.DistIdentity.from_dict(dict(reversed(list(doc.items()))))


def test_python_facts_has_a_field_for_every_key_the_walker_writes():
    """``facts.python_facts`` reads the walker's summary as a document (unknown keys left out, so
    that gdb never fails on one): each key the summary or python_facts writes needs its field."""
    gdbext = Path(model.__file__).resolve().parents[1]
    src = (gdbext / "pyframes" / "process.py").read_text() + (gdbext / "facts.py").read_text()
    keys = set(re.findall(r'"(\w+)": self\.', src)) | set(re.findall(r'(?:out|facts)\["(\w+)"\]', src))
    assert {"version", "gil_holder", "runtime", "debug_info"} <= keys  # the scan finds them
    assert keys - {f.name for f in dataclasses.fields(model.PythonFacts)} == {"notes"}  # notes: Process.notes
