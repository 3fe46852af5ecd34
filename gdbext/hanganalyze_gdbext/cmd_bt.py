"""``hang-bt [-a]``: merged Python + native backtraces; ``hang-bt-filter on|off`` for plain ``bt``.

Output mimics gdb's ``bt`` (``#N  function (file:line) [library]``) with Python frames marked
``[py]`` and a header per thread: gdb thread number, LWP, Python thread name, GIL and GC state,
and how the merge was done.  Frames are numbered in the merged list (not gdb frame levels).
"""

import os
from typing import Dict, List, Optional

import gdb

from . import framefilter
from .collect import collect_process
from .commands import command, on_off, parser
from .gdbtarget import lwp_of
from .model import Frame, Process, Thread
from .model.termsafe import safe_lines


def format_frame(i: int, f: Frame) -> str:
    if f.kind == "python":
        loc = "%s:%s" % (f.file or "??", f.line if f.line is not None else "?")
        text = "#%-3d [py] %s (%s)" % (i, f.function or "??", loc)
        if f.note:
            text += "  <%s>" % f.note
        return text
    name = f.function or "??"
    parts = ["#%-3d %s" % (i, name)]
    if f.address is not None and not f.function:
        parts.append("at 0x%x" % f.address)
    if f.file:
        parts.append("(%s:%s)" % (f.file, f.line if f.line is not None else "?"))
    if f.library:
        parts.append("[%s]" % os.path.basename(f.library))
    if f.inlined:
        parts.append("[inlined]")
    return " ".join(parts)


def format_thread(t: Thread, num: Optional[int] = None) -> List[str]:
    head = "Thread %s (LWP %s)" % (num if num is not None else "?", t.tid)
    if t.python_name:
        head += ' "%s"' % t.python_name
    if t.os_name and t.os_name != t.python_name:
        head += " os-name=%s" % t.os_name
    if t.state.gil is not None or t.state.gc is not None:
        head += "  GIL: %s  GC: %s" % (t.state.gil or "?", {True: "running", False: "no", None: "?"}[t.state.gc])
    head += "  [%s]" % (t.merge or "native-only")
    lines = [head]
    lines += [format_frame(i, f) for i, f in enumerate(t.frames)]
    if t.python_frames:
        lines.append("  Python frames (not placed among the native frames):")
        lines += ["  " + format_frame(i, f) for i, f in enumerate(t.python_frames)]
    lines += ["  note: %s" % n for n in t.notes]
    return lines


def _thread_numbers() -> Dict[int, int]:
    out = {}
    for th in gdb.selected_inferior().threads():
        out[lwp_of(th)] = th.num
    return out


def _process_header(pyproc) -> str:
    if pyproc is None:
        return "Process: not a CPython process (native frames only)"
    text = "Python %s" % pyproc.version
    if pyproc.gil_holder_lwp is not None:
        text += ", GIL held by LWP %d" % pyproc.gil_holder_lwp
    if pyproc.gc_collecting:
        text += ", garbage collection running"
    return text


_BT = parser("hang-bt", "hang-bt [-a]", "Merged Python + native backtrace of the current thread (-a: all threads).")
_BT.add_argument("-a", dest="all", action="store_true", help="every thread of the process")
_BT.add_argument("which", nargs="?", choices=("all",), metavar="all", help="the same as -a")


@command(_BT)
def hang_bt(args, from_tty):
    nums = _thread_numbers()
    if args.all or args.which:
        pyproc = framefilter.python_process()  # walked once, shared with the frame filter
        proc: Process = collect_process(with_python=True, with_locks=False, pyproc=pyproc)
        out = [_process_header(pyproc)] + ["  note: %s" % n for n in proc.notes]
        for t in proc.threads:
            out.append("")
            out += format_thread(t, nums.get(t.tid))
    else:
        if gdb.selected_thread() is None:
            raise gdb.GdbError("hang-bt: no thread selected")
        t = framefilter.merged_thread()
        pyproc = framefilter.python_process()
        out = [_process_header(pyproc)] + format_thread(t, nums.get(t.tid))
    gdb.write(safe_lines(out))  # names come from the inferior: no raw ESC/newline on the terminal


_BT_FILTER = parser("hang-bt-filter", "hang-bt-filter on|off",
                    "Show Python frames in plain `bt` (on, the default) or not (off).")
on_off(_BT_FILTER, "on: plain `bt` shows the merged Python frames")


@command(_BT_FILTER)
def hang_bt_filter(args, from_tty):
    framefilter.install().enabled = args.state == "on"
    gdb.write("hanganalyze Python frame filter %s\n" % ("enabled" if args.state == "on" else "disabled"))


framefilter.install()
