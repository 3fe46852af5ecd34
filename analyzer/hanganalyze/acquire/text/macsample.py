"""macOS ``sample`` (and Activity Monitor's "Sample Process") call-graph trees.

::

    Call graph:
        2866 Thread_123   DispatchQueue_1: com.apple.main-thread  (serial)  -> a thread, its queue
        + 2866 start  (in libdyld.dylib) + 1  [0x7fff20379f3d]             -> count, function, library
        +   2866 main  (in Python) + 20  [0x100003f54]                     -> one level deeper
        +     2865 __psynch_cvwait  (in libsystem_kernel.dylib) + 10  [0x7fff20767cce]
        +     ! 1 __gettimeofday  (in libsystem_kernel.dylib) + 17  [0x7fff2076825a]
        2866 Thread_93633372                                               -> the next thread

A thread is a tree of the stacks seen over the samples: each line is one frame, its depth the
column its sample count starts at (the prefix is spaces and ``+ ! : |``), its count how many
samples passed through it.  Our model has one stack per thread: the heaviest path, taking at each
depth the child seen in most samples (the first on a tie), innermost frame first as the other
parsers give them; how many samples that innermost frame had is the thread's note.  Frames before
the first thread header (a paste that starts mid-tree) make a thread of their own.  ``spindump``'s
tree is read the same way: ``Thread 0x5c2    DispatchQueue "com.apple.main-thread"(1) ...`` heads a
thread, its frames are ``func + 118 (Python + 14950) [0x10c6ba3a6]``, a ``*`` marks kernel frames.  Every other
line (the "Sort by top of stack" table, the header fields) is a message; ``Binary Images:`` ends it.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int

NAME = "macos-sample"

#: The prefix, the sample count and the rest of a tree line.
_LINE = re.compile(r"^([ +!:|*]{0,400})(\d{1,10}) {1,2}(\S.{0,4000})$")
#: ``func  (in lib) + 224  [0x7fff2079a8fc]`` (optionally ``load address 0x.. + 0x..`` before the
#: address, several addresses, a ``file.c:12`` after it): the ``(in X)`` and the bracketed address
#: are what only this format prints.
_FRAME = re.compile(r"^(.{1,2000}?)  \(in ([^()]{1,300})\)(?: \+ \d{1,12})?(?:  load address 0x[0-9a-fA-F]{1,16}"
                    r" \+ 0x[0-9a-fA-F]{1,16})?  \[(0x[0-9a-fA-F]{1,16})(?:,0x[0-9a-fA-F]{1,16}){0,8}\]"
                    r"(?:\s+(\S{1,500}):(\d{1,9}))?\s*$")
#: ``Thread_93633372``, ``Thread_123   DispatchQueue_1: com.apple.main-thread  (serial)``,
#: ``Thread_123: worker-name``.
_THREAD = re.compile(r"^Thread_(\d{1,20})(?::\s*|\s+|$)(.{0,300})$")
#: spindump's ``func + 118 (Python + 14950) [0x10c6ba3a6]`` and ``??? (Python + 14950) [0x...]``.
#: (newer releases add the samples' range after the address: ``[0x7ff819fca3ea] 1-45``)
_SPIN_FRAME = re.compile(r"^(.{1,2000}?)(?: \+ \d{1,12})? \(([^()]{1,300}?) \+ \d{1,12}\) "
                         r"\[(0x[0-9a-fA-F]{1,16})\](?: \d{1,10}(?:-\d{1,10})?)?\s*$")
#: spindump's ``Thread 0x5c2    DispatchQueue "label"(1)    1001 samples (1-1001) ...``
_SPIN_THREAD = re.compile(r"^Thread (0x[0-9a-fA-F]{1,16})\s(.{0,1000})$")
_SPIN_NAME = re.compile(r'(?:Thread name|DispatchQueue) "([^"]{1,200})"')
_QUEUE = re.compile(r"^DispatchQueue_\d{1,10}:\s+(.{1,200}?)\s*(?:\((?:serial|concurrent)\))?\s*$")


class _Node:
    """One frame line of the tree: its count, frame and the lines one level deeper."""

    __slots__ = ("count", "frame", "children")

    def __init__(self, count: int, frame: Optional[Frame]) -> None:
        self.count = count
        self.frame = frame
        self.children: List[_Node] = []


def _frame(rest: str) -> Optional[Frame]:
    m = _FRAME.match(rest)
    file = line = None
    if m:
        file, line = m.group(4), m.group(5)
    else:
        m = _SPIN_FRAME.match(rest)
        if not m:
            return None
    func, lib = m.group(1).strip(), m.group(2).strip()
    unknown_lib = lib.startswith("<unknown") or lib == "???"
    return Frame(kind="native", function=None if func in ("???", "") else func,
                 library=None if unknown_lib else lib, address=to_int(m.group(3), 16),
                 file=file, line=to_int(line))


def _line(s: str) -> Optional[Tuple[int, int, str]]:
    """(depth, count, rest) of a tree line, else None."""
    if not s[:1] or s[:1] not in " +!:|0123456789":
        return None
    m = _LINE.match(s)
    if not m:
        return None
    return len(m.group(1)), int(m.group(2)), m.group(3)


def score(lines: List[str]) -> float:
    frames = threads = 0
    for line in lines:
        t = _line(line)
        if t is None:
            threads += 1 if _SPIN_THREAD.match(line.strip()) else 0
            continue
        if _FRAME.match(t[2]) or _SPIN_FRAME.match(t[2]):
            frames += 1
        elif _THREAD.match(t[2]):
            threads += 1
    if frames < 2:
        return 0.0
    return 2.0 * frames + 4.0 * threads


def _heaviest(root: _Node) -> List[Frame]:
    """The heaviest path below ``root``, innermost frame first."""
    path: List[Frame] = []
    node = root
    while node.children:
        best = node.children[0]
        for c in node.children[1:]:
            if c.count > best.count:
                best = c
        if best.frame is not None:
            path.append(best.frame)
        node = best
    path.reverse()
    return path


def _thread_of(tid: str, rest: str) -> Thread:
    """A thread from its header: sample's decimal ``Thread_N`` or spindump's ``Thread 0x..``."""
    rest = rest.strip()
    if tid.startswith("0x"):
        t = Thread(tid=to_int(tid, 16))
        names = _SPIN_NAME.findall(rest)
        t.name = names[-1] if names else None  # the thread's own name is printed after its queue
    else:
        t = Thread(tid=to_int(tid))
        q = _QUEUE.match(rest)
        t.name = (q.group(1) if q else rest) or None
    t.notes.append("macOS sample thread %s" % tid)
    return t


def _nested_flat(stack: List[Tuple[int, _Node]], depth: int, count: int) -> bool:
    """The line cannot be a sibling of the line before it at its depth: with it, the samples of
    its parent's children would outnumber the parent's own (each sample passes through one child
    at most).  A copy that lost the tree's indentation prints a chain of calls at one depth,
    caller first (open round 11's kitty sample: three 8989-sample lines at the thread header's
    column), so the line is that one's callee."""
    if len(stack) < 2 or stack[-1][0] != depth:
        return False
    parent = stack[-2][1]
    return parent.count > 0 and sum(c.count for c in parent.children) + count > parent.count


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    trees: List[Tuple[Thread, _Node]] = []
    stack: List[Tuple[int, _Node]] = []
    for line in lines:
        s = line.rstrip()
        if not s.strip():
            continue
        if s.strip().startswith("Binary Images:"):
            break
        sm = _SPIN_THREAD.match(s.strip())
        if sm:
            root = _Node(0, None)
            trees.append((_thread_of(sm.group(1), sm.group(2)), root))
            stack = [(-1, root)]
            continue
        t = _line(s)
        tm = _THREAD.match(t[2]) if t is not None else None
        if t is not None and tm is not None:
            root = _Node(t[1], None)
            trees.append((_thread_of(tm.group(1), tm.group(2)), root))
            stack = [(t[0], root)]
            continue
        fr = _frame(t[2]) if t is not None else None
        if t is None or fr is None:
            messages.append(s.strip())
            continue
        depth, count = t[0], t[1]
        if not trees:  # frames before any thread header: a paste that starts mid-tree
            root = _Node(count, None)
            trees.append((Thread(notes=["macOS sample thread (its header is not in the text)"]), root))
            stack = [(-1, root)]
        if not _nested_flat(stack, depth, count):
            while len(stack) > 1 and stack[-1][0] >= depth:
                stack.pop()
        node = _Node(count, fr)
        stack[-1][1].children.append(node)
        stack.append((depth, node))
    for thread, root in trees:
        thread.frames = _heaviest(root)
        if thread.frames:
            total = max(root.count, sum(c.count for c in root.children))
            inner = root
            while inner.children:
                inner = max(inner.children, key=lambda c: c.count)
            thread.notes.append("heaviest path of the sample tree: %d of %d samples end here" % (inner.count, total))
            proc.threads.append(thread)
    proc.messages.extend(cap_messages(messages, proc.notes))
