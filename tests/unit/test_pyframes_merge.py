"""``merge.merge_thread`` on hand-built unwinds: placement by stack anchors, by eval-frame count,
truncation markers, refusal to guess, subinterpreter ordering, GIL/GC state.

The inputs are plain data with the attributes the merge reads (what ``native.unwind`` and the
walker produce); the real gdb path is covered by tests/integration/test_pyframes.py.
"""

from __future__ import annotations

from hanganalyze_gdbext import merge
from hanganalyze_gdbext.model import Frame, Thread

NORMAL, INLINE = 0, 1


class NF:  # the fields of native.NativeFrame the merge uses
    def __init__(self, name, sp, cfa, gdb_type=NORMAL, library="/usr/lib/libpython3.12.so"):
        self.frame = Frame(kind="native", function=name, library=library)
        self.sp, self.cfa, self.gdb_type = sp, cfa, gdb_type


class Group:
    def __init__(self, names, anchor=None):
        self.frames = [Frame(kind="python", function=n, file="x.py", line=1) for n in names]
        self.anchor = anchor


class PyThread:
    def __init__(self, groups, truncated=None, gil="no", gc=False, tstates=1, name="worker"):
        self.groups, self.truncated, self.gil, self.gc = groups, truncated, gil, gc
        self.name, self.pthread_id, self.notes, self.tstates = name, 0x7F00, [], tstates


class PyProc:
    """The ``PyProcess`` facts ``merge_thread`` reads (GIL build)."""

    def __init__(self, threads, version=(3, 12), collecting=False, dwarf=True):
        self.threads, self.version_info = threads, version
        self.gc_collecting, self.dwarf_checked = collecting, dwarf
        self.free_threading, self.gil_enabled = False, None


def natives(*spec):
    """spec: (name, sp) innermost first; cfa = next frame's sp, like native.unwind."""
    out = [NF(n, sp, None, t) for n, sp, t in spec]
    for a, b in zip(out, out[1:]):
        a.cfa = b.sp
    return out


def kinds(t):
    return [(f.kind[0], f.function) for f in t.frames]


STACK = natives(("futex_wait", 100, NORMAL), ("??", 200, NORMAL), ("_PyEval_EvalFrameDefault", 300, NORMAL),
                ("builtin_sorted", 400, NORMAL), ("??", 500, NORMAL), ("start_thread", 600, NORMAL))


def run(pyth, nat=STACK, **kw):
    t = Thread(tid=7, os_name="python3")
    merge.merge_thread(t, nat, PyProc({7: pyth}, **kw))
    return t


def test_anchors_place_groups_even_on_nameless_frames():
    # second activation's eval frame is "??" (a .cold part or a stripped build): the anchor finds it
    t = run(PyThread([Group(["key", "wait"], anchor=350), Group(["do_sort", "main"], anchor=520)]))
    assert t.merge == "merged" and t.name == "worker" and t.python_name == "worker"
    assert kinds(t) == [("n", "futex_wait"), ("n", "??"), ("p", "key"), ("p", "wait"),
                        ("n", "_PyEval_EvalFrameDefault"), ("n", "builtin_sorted"), ("p", "do_sort"),
                        ("p", "main"), ("n", "??"), ("n", "start_thread")]


def test_count_fallback_and_refusal():
    nat = natives(("f", 100, NORMAL), ("_PyEval_EvalFrameDefault", 200, NORMAL), ("c", 300, NORMAL),
                  ("_PyEval_EvalFrameDefault", 400, NORMAL))
    t = run(PyThread([Group(["inner"]), Group(["outer"])]), nat, version=(3, 9))
    assert t.merge == "merged"
    assert [f.function for f in t.frames] == ["f", "inner", "_PyEval_EvalFrameDefault", "c", "outer",
                                              "_PyEval_EvalFrameDefault"]
    # three Python activations for two eval frames: nothing is guessed or dropped
    t = run(PyThread([Group(["a"]), Group(["b"]), Group(["c"])]), nat, version=(3, 9))
    assert t.merge == "unmerged" and [f.function for f in t.frames] == [n.frame.function for n in nat]
    assert [f.function for f in t.python_frames] == ["a", "b", "c"]
    assert any("not merged" in n for n in t.notes)
    # an inlined frame named like the eval loop is not an activation
    nat2 = natives(("_PyEval_EvalFrameDefault", 100, INLINE), ("_PyEval_EvalFrameDefault", 100, NORMAL))
    assert run(PyThread([Group(["only"])]), nat2, version=(3, 10)).merge == "merged"


def test_truncated_chain_keeps_known_frames_and_marks_the_gap():
    nat = natives(("f", 100, NORMAL), ("_PyEval_EvalFrameDefault", 200, NORMAL),
                  ("_PyEval_EvalFrameDefault", 300, NORMAL), ("start", 400, NORMAL))
    marker = Frame(kind="python", function="<python frame chain truncated>", marker=True, note="cycle")
    t = run(PyThread([Group(["inner"])], truncated=marker), nat, version=(3, 8))
    assert t.merge == "merged"
    assert [f.function for f in t.frames] == ["f", "inner", "_PyEval_EvalFrameDefault",
                                              "<python frame chain truncated>", "_PyEval_EvalFrameDefault", "start"]
    # nothing readable at all: native frames as unwound, the marker listed apart
    t = run(PyThread([], truncated=marker), nat)
    assert t.merge == "unmerged" and t.python_frames == [marker]


def test_subinterpreter_groups_are_ordered_by_anchor():
    # discovery order: the main interpreter's outer group first, the subinterpreter's inner one last
    t = run(PyThread([Group(["runner"], anchor=520), Group(["sub_inner"], anchor=310)], tstates=2))
    assert [f.function for f in t.frames if f.kind == "python"] == ["sub_inner", "runner"]
    # ...and without anchors two thread states are never interleaved by guesswork
    t = run(PyThread([Group(["runner"]), Group(["sub_inner"])], tstates=2))
    assert t.merge == "unmerged"


def test_native_only_threads():
    t = Thread(tid=9, os_name="nccl")
    merge.merge_thread(t, STACK, PyProc({}))
    assert t.merge == "native-only" and t.python_name is None and len(t.frames) == len(STACK)
    t = run(PyThread([]))
    assert t.merge == "native-only" and t.python_name == "worker"


def test_gil_and_gc_states():
    waiting = natives(("futex_wait", 100, NORMAL), ("take_gil", 200, NORMAL),
                      ("_PyEval_EvalFrameDefault", 300, NORMAL))
    assert run(PyThread([Group(["spin"], anchor=350)]), waiting).state.gil == "waiting"
    stripped = natives(("__futex_abstimed_wait_common", 100, NORMAL), ("pthread_cond_timedwait", 150, NORMAL),
                       ("PyEval_RestoreThread", 200, NORMAL), ("??", 300, NORMAL))
    assert run(PyThread([]), stripped).state.gil == "waiting"
    assert run(PyThread([], gil="held"), waiting).state.gil == "held"
    # stripped: condvar wait <- nameless runtime frame (take_gil) <- eval loop
    nameless = natives(("___pthread_cond_timedwait64", 100, NORMAL), ("??", 200, NORMAL),
                       ("_PyEval_EvalFrameDefault", 300, NORMAL))
    nameless[1].frame.library = "/usr/bin/python3.11"
    assert run(PyThread([Group(["spin"], anchor=350)]), nameless).state.gil == "waiting"
    nameless[1].frame.library = "/usr/lib/libnccl.so.2"  # a nameless frame of another library
    assert run(PyThread([Group(["spin"], anchor=350)]), nameless).state.gil == "no"
    lock_wait = natives(("do_futex_wait", 100, NORMAL), ("PyThread_acquire_lock_timed", 150, NORMAL),
                        ("??", 200, NORMAL), ("_PyEval_EvalFrameDefault", 300, NORMAL))
    assert run(PyThread([Group(["acquire"], anchor=350)]), lock_wait).state.gil == "no"
    gc_stack = natives(("futex", 100, NORMAL), ("gc_collect_main", 200, NORMAL))
    assert run(PyThread([], gc=None), gc_stack, collecting=True).state.gc is True
    named = natives(("futex", 100, NORMAL), ("_PyEval_EvalFrameDefault", 200, NORMAL))
    assert run(PyThread([], gc=None), named, collecting=True).state.gc is False
    assert run(PyThread([], gc=None), STACK, collecting=True).state.gc is None  # nameless runtime frames
    other_lib = natives(("collect", 100, NORMAL))
    other_lib[0].frame.library = "/usr/lib/libfoo.so"
    assert run(PyThread([], gc=False), other_lib).state.gc is False


def test_314_tail_call_handler_frames_stay_inside_the_python_frame():
    nat = natives(("futex_wait", 100, NORMAL), ("PyObject_Vectorcall", 150, NORMAL),
                  ("_TAIL_CALL_CALL.llvm.123", 200, NORMAL), ("_PyEval_EvalFrameDefault", 300, NORMAL),
                  ("start", 400, NORMAL))
    t = run(PyThread([Group(["f"], anchor=350)]), nat, version=(3, 14))
    assert [f.function for f in t.frames] == ["futex_wait", "PyObject_Vectorcall", "f", "_TAIL_CALL_CALL.llvm.123",
                                              "_PyEval_EvalFrameDefault", "start"]
