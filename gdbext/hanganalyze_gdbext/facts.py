"""``Process.python`` from the walker's findings, the same for the gdb and the direct reader."""

from typing import List, Tuple

from .model import PythonFacts
from .pyframes.target import ProcessTarget


def _libpython_loaded(target: ProcessTarget) -> bool:
    return any(n.rsplit("/", 1)[-1].startswith("libpython") for n in target.object_files())


def python_facts(pyproc, target: ProcessTarget) -> Tuple[PythonFacts, List[str]]:
    """(``Process.python``, process notes) from the walker: its ``summary()`` plus how CPython is
    built (``build``: "shared" when a libpython is mapped, else "static"; ``debug_info``: whether
    CPython's DWARF was there to check the offsets against).  The walker's notes (how
    ``_PyRuntime`` was found, table/DWARF mismatches, a free-threaded build...) go to
    ``Process.notes``, where reports show them."""
    try:
        facts = dict(pyproc.summary())
    except Exception as e:  # noqa: BLE001 - the version alone is still worth reporting
        facts = {"version": pyproc.version, "summary_error": str(e)}
    notes = [str(n) for n in facts.pop("notes", None) or []]
    facts["version"] = pyproc.version
    if target.object_files():
        facts["build"] = "shared" if _libpython_loaded(target) else "static"
    dwarf = target.python_has_dwarf()
    facts["debug_info"] = dwarf if dwarf is not None else pyproc.dwarf_checked is not None
    how = pyproc.runtime_found
    if how:
        facts["runtime"] = how
    # read as a document is: a key summary() gains without a field in PythonFacts is left out, never
    # an exception inside gdb that would cost the whole snapshot
    return PythonFacts.from_dict(facts), ["Python: %s" % n for n in notes]
