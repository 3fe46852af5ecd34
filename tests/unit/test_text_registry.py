"""The text formats are one registry (acquire/text/formats.py) over modules that follow its written
protocol: a format missing from the registry, or a module that does not follow the protocol, fails
here rather than being silently skipped by detection."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from hanganalyze.acquire import text
from hanganalyze.acquire.text import DESCRIPTIONS, parse_text
from hanganalyze.acquire.text.detect import FORMAT_NAMES, parser_for
from hanganalyze.acquire.text.formats import FORMATS, SPELLINGS, format_of
from hanganalyze.errors import InputError


def _parser_modules():
    """Every module of the text package that looks like a parser (a ``score`` and a ``parse``)."""
    for info in pkgutil.iter_modules(text.__path__):
        mod = importlib.import_module("hanganalyze.acquire.text." + info.name)
        if callable(getattr(mod, "score", None)) and callable(getattr(mod, "parse", None)):
            yield mod


def test_every_parser_module_has_one_registry_line():
    registered = [f.parser for f in FORMATS]
    assert len(set(map(id, registered))) == len(registered)
    assert {m.__name__ for m in _parser_modules()} == {m.__name__ for m in registered}


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_each_parser_follows_the_protocol(fmt):
    mod = fmt.parser
    assert isinstance(mod.NAME, str) and fmt.name == mod.NAME and format_of(mod) is fmt
    assert list(inspect.signature(mod.score).parameters) == ["lines"]
    assert list(inspect.signature(mod.parse).parameters) == ["lines", "proc"]
    assert hasattr(mod, "parse_processes") == fmt.several
    assert fmt.parser.score([]) == 0
    assert DESCRIPTIONS[fmt.name] == fmt.description
    assert parser_for(fmt.name) is mod and fmt.name in FORMAT_NAMES
    for alias in fmt.aliases:
        assert parser_for(alias) is mod and parser_for(alias.upper().replace("-", "_")) is mod


def test_aliases_name_one_format_each_and_unknown_names_are_one_line():
    assert len(SPELLINGS) == len(FORMATS) + sum(len(f.aliases) for f in FORMATS)
    with pytest.raises(InputError, match="unknown --input-format 'nope'"):
        parser_for("nope")


def test_a_format_of_several_processes_gives_each_its_note():
    two = "Thread 1 (Thread 0x7f (LWP 11)):\n#0  f () at a.c:1\n#1  g () at a.c:2\n" \
          "Thread 1 (Thread 0x7f (LWP 12)):\n#0  f () at a.c:1\n#1  g () at a.c:2\n"
    procs = parse_text(two).processes
    assert len(procs) == 2 and all(p.notes[-1] == "parsed as gdb backtrace" for p in procs)
