"""A core analyzed with the wrong ``--exe`` (issue 30): the report names the executable the core
ran, and uses it when it is here with the core's build-id, so no finding is lost.

Real cores of the C++ terminate fixture (std::terminate -> SIGABRT, taken at the abort under gdb),
analyzed with ``--exe`` naming another fixture binary.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import core_at_abort, fixture_binary, run_hanganalyze  # noqa: E402

from hanganalyze.elf import build_id_of_file  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

SIG = "std-thread-joinable-terminate"


def _analyze(core: Path, exe: Path, engine: str = "direct"):
    res = run_hanganalyze([core, "--exe", exe, "--format", "json", "--engine", engine], timeout=180)
    data = json.loads(res.stdout)
    return res.returncode, [f["signature"] for f in data["findings"]], data.get("warnings", [])


@pytest.mark.parametrize("engine", ["direct", "gdb"])
def test_wrong_exe_names_the_real_one_and_uses_it(tmp_path, engine):
    real = fixture_binary("cxx_thread_terminate")
    other = fixture_binary("cxx_mutex_deadlock")
    core = core_at_abort([str(real)], tmp_path)
    # control: the right --exe gives the finding and no build-id warning
    code, ids, warnings = _analyze(core, real, engine)
    assert code == 6 and SIG in ids and not [w for w in warnings if "build-id" in w], (code, ids, warnings)

    code, ids, warnings = _analyze(core, other, engine)
    ran = os.path.realpath(real)  # the kernel records the resolved path (build/ may be a symlink)
    line = [w for w in warnings if w.startswith("the core was made by")]
    assert line == [
        "the core was made by %s (build-id %s); --exe names %s (build-id %s), which does not match: "
        "using %s instead, the build the core ran" % (ran, build_id_of_file(real), other, build_id_of_file(other), ran)
    ], warnings
    assert code == 6 and SIG in ids, (code, ids, warnings)  # the finding is kept: the real binary was used


def test_wrong_exe_when_the_real_one_was_rebuilt(tmp_path):
    """The executable the core ran is another build now: named, with both build-ids, and doubted."""
    app = tmp_path / "app"
    shutil.copy2(fixture_binary("cxx_thread_terminate"), app)
    ran_id = build_id_of_file(app)
    core = core_at_abort([str(app)], tmp_path / "cores")
    shutil.copy2(fixture_binary("txt_joinable"), app)  # "rebuilt"
    other = fixture_binary("cxx_mutex_deadlock")
    _code, _ids, warnings = _analyze(core, other)
    line = [w for w in warnings if w.startswith("the core was made by")]
    assert len(line) == 1, warnings
    assert line[0] == (
        "the core was made by %s (build-id %s); --exe names %s (build-id %s), which does not match: stacks may be "
        "wrong (%s here is another build (build-id %s))" % (app, ran_id, other, build_id_of_file(other), app,
                                                            build_id_of_file(app)))
    app.unlink()
    _code, _ids, warnings = _analyze(core, other)
    assert any(w.startswith("the core was made by %s (build-id %s)" % (app, ran_id))
               and w.endswith("stacks may be wrong (%s is not on this machine)" % app) for w in warnings), warnings
