"""Which locks a frame holds, from its source (``model/heldsource.py``): real files written here,
parsed as the frames of a real process would be (``held_at(path, line, function)``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

from hanganalyze_gdbext.model import heldsource

SOURCE = '''\
import threading
lock_a = threading.Lock()


def nested(self):
    with lock_a:
        with self.inner, locks[2]:
            work()                      # 8: holds lock_a, self.inner, locks[2]
    done()                              # 9: holds nothing


def manual():
    lock_a.acquire()
    step()                              # 14: holds lock_a
    lock_a.release()
    after()                             # 16: released


def timed():
    lock_a.acquire(timeout=1)
    step()                              # 21: may not hold it


def conditional():
    if ready():
        lock_a.acquire()
    step()                              # 27: not provable (acquired in a branch)


def waiter(cond):
    with cond:
        cond.wait()                     # 32: Condition.wait releases it


def header():
    with lock_a:                        # 36: blocked here: still acquiring
        pass


def outer():
    with lock_a:
        def inner():
            return 1                    # 43: another function's frame
        inner()                         # 44: holds lock_a


@decorated
def late():
    with ring[i]:
        go()                            # 50
'''


def _held(tmp_path: Path, line: int, function: str, first=None) -> List[str]:
    p = tmp_path / "app.py"
    if not p.exists():
        p.write_text(SOURCE)
    return [h.text for h in heldsource.held_at(str(p), line, function, first)]


def test_with_blocks_around_the_current_line(tmp_path):
    assert _held(tmp_path, 8, "nested") == ["lock_a", "self.inner", "locks[2]"]
    assert _held(tmp_path, 9, "nested") == []
    assert _held(tmp_path, 8, "Worker.nested") == ["lock_a", "self.inner", "locks[2]"]  # qualname


def test_the_with_line_itself_is_still_acquiring(tmp_path):
    assert _held(tmp_path, 36, "header") == []


def test_acquire_without_release(tmp_path):
    _held(tmp_path, 14, "manual")  # writes app.py
    held = heldsource.held_at(str(tmp_path / "app.py"), 14, "manual")
    assert [(h.text, h.how, h.line) for h in held] == [("lock_a", "acquire", 13)]
    assert held[0].describe("app.py") == "`lock_a.acquire()` at app.py:13"
    assert _held(tmp_path, 16, "manual") == []  # released in between
    assert _held(tmp_path, 21, "timed") == []  # a timeout may have failed
    assert _held(tmp_path, 27, "conditional") == []  # in a branch: not proven


def test_condition_wait_releases_its_lock(tmp_path):
    assert _held(tmp_path, 32, "waiter") == []


def test_nested_functions_and_names_must_match(tmp_path):
    assert _held(tmp_path, 43, "inner") == []  # inner's own frame holds nothing
    assert _held(tmp_path, 44, "outer") == ["lock_a"]
    assert _held(tmp_path, 44, "other") == []  # the frame runs another function: no claim


def test_a_changed_file_gives_nothing(tmp_path):
    assert _held(tmp_path, 50, "late", first=47) == ["ring[i]"]  # co_firstlineno: the decorator line
    assert _held(tmp_path, 50, "late", first=48) == []  # the def moved: stale source
    assert _held(tmp_path, 44, "outer", first=40) == ["lock_a"]
    assert _held(tmp_path, 44, "outer", first=39) == []


def test_unreadable_or_oversized_sources(tmp_path):
    assert heldsource.held_at(str(tmp_path / "missing.py"), 3, "f") == []
    assert heldsource.held_at("<stdin>", 3, "f") == []
    big = tmp_path / "big.py"
    big.write_text("def f():\n    with a:\n        x()\n" + "#" * heldsource.MAX_SOURCE_BYTES)
    assert heldsource.held_at(str(big), 3, "f") == []
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    assert heldsource.held_at(str(bad), 1, "f") == []


def test_the_lock_being_acquired(tmp_path):
    p = tmp_path / "app.py"
    p.write_text(SOURCE)
    assert heldsource.acquiring_at(str(p), 36, "header") == "lock_a"
    assert heldsource.acquiring_at(str(p), 13, "manual") == "lock_a"
    assert heldsource.acquiring_at(str(p), 14, "manual") is None


def test_only_module_globals_name_one_object_across_frames(tmp_path):
    p = tmp_path / "app.py"
    p.write_text(SOURCE)
    assert heldsource.refers_to_global(str(p), 14, "manual", "lock_a")
    assert heldsource.refers_to_global(str(p), 8, "nested", "locks[2]")
    assert not heldsource.refers_to_global(str(p), 8, "nested", "self.inner")  # a parameter
    assert not heldsource.refers_to_global(str(p), 32, "waiter", "cond")
    assert not heldsource.refers_to_global(str(p), 14, "no_such_function", "lock_a")


def test_file_names_from_a_core_are_not_trusted(tmp_path):
    """co_filename comes from the target's memory: a FIFO, a device or /proc would block or lie."""
    fifo = tmp_path / "fifo.py"
    os.mkfifo(str(fifo))
    assert heldsource.held_at(str(fifo), 3, "f") == []  # returns at once: never opened
    assert heldsource.held_at("/proc/self/status", 3, "f") == []
    assert heldsource.held_at("/dev/zero", 3, "f") == []
