"""gdb (and cuda-gdb) backtraces: ``thread apply all bt [full]`` and a single thread's ``bt``.

What gdb prints, and what becomes of it::

    Thread 3 (Thread 0x7f..6c0 (LWP 8331) "bwd-worker"):        -> Thread(tid=8331, name=...)
    #0  futex_wait (private=0, ...) at ../futex-internal.h:146   -> function, file, line
    #4  0x0000558b7a0e2229 in ?? ()                             -> function None, address
    #9  0x00007f..44a3 in ?? () from /lib/.../libstdc++.so.6     -> library
            __ret = -512                                          (``bt full`` locals: skipped)

With hanganalyze's gdb extension loaded, plain ``bt`` prints Python frames in place (its frame
filter, ``gdbext/framefilter.py``): each is named ``[py] qualname``, above the
``_PyEval_EvalFrameDefault`` frame that runs it, and only the first line of a gdb frame carries
``#N``; Python frames that could not be placed follow the last frame, marked ``[py?]``::

    #12 0x00007f..812 in [py] Thread._wait_for_tstate_lock () at /usr/lib/python3.12/threading.py:1167
    0x00007f..812 in [py] main () at app.py:49                   -> kind "python", in place
    0x00007f..812 in _PyEval_EvalFrameDefault (...) at ...        -> the native eval frame
    0x00007f..8ec in [py?] level3 () at app.py:42                 -> python_frames ("unmerged")

Frames stay innermost first, as gdb prints them.  ``??`` becomes ``function=None`` (see
``common.unknown_function``).  Lines gdb prints about itself (``[New LWP n]``, libthread_db,
source echo lines) are dropped; other lines are kept as the process's messages, because log
lines pasted around a backtrace (``terminate called ...``, NCCL errors) identify bugs too.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Set, Tuple

from hanganalyze.loglines import SIGNAL_THREAD_CUT_NOTE
from hanganalyze_gdbext.model import Frame, Process, Thread

from . import gdbwaits, pybt
from .common import balanced, split_call, to_int, unknown_function
from .gdbechoes import without_echoes
from .gdblines import (
    ADDR_IN,
    AT,
    CORE_BY,
    CURRENT,
    INFERIOR,
    THREAD,
    frame_match,
    header_lwp,
    is_noise,
    is_stop_echo,
    thread_from_header,
)

NAME = "gdb"

_RECEIVED = re.compile(
    r"^(?:Thread (\d{1,9})(?: \"[^\"]*\")? received|Program received|Program terminated with)"
    r" signal (SIG[A-Z0-9]+|CUDA_EXCEPTION_\d+)"
)
#: py-list's current line (libpython.py prints ``'%4s    %s' % ('>' + lineno, line)``): the line the
#: selected Python frame stands on; its function and file are not printed
_PYLIST_CURRENT = re.compile(r"^>(\d{1,7}) {2,}(\S.{0,300})$")
#: cuda-gdb: "[Switching focus to CUDA kernel 0, grid 1, block (0,0,0), thread (0,0,0), device 0, ...]"
#: ``info threads``: "[* ]N  Thread 0x.. (LWP n) "name" 0x.. in func (args) at file:line" -- each
#: thread's innermost frame (its selected one), a first look many pastes stop at
#: ``Thread 4 "python" hit Catchpoint 1 (exception thrown), 0x.. in __cxa_throw (...)``: gdb's stop at a
#: breakpoint, a catchpoint or a watchpoint; its location (after the comma) is the thread's frame #0
_HIT = re.compile(r"^(?:Thread (\d{1,9})(?: \"[^\"]*\")? hit )?(?:Temporary breakpoint|Breakpoint|Catchpoint|"
                  r"(?:Hardware )?(?:read |access )?[Ww]atchpoint) \d{1,6}(?: \([^)]{0,80}\))?, (\S.{0,4000})$")
#: A line that starts a record of its own, never the rest of a frame a terminal cut: a frame, a
#: thread, gdb's prompt or its bracketed messages, a sentence.
_NEW_RECORD = re.compile(r"^(?:#\d|Thread |\(gdb\)|\[|Backtrace |[A-Z][a-z]+(?:[ .!:]|$))")
_INFO_THREAD = re.compile(r"^(\*\s+)?(\d{1,9})\s+((?:Thread 0x[0-9a-fA-F]{1,16} )?\(LWP \d{1,10}\)"
                          r"(?: \"[^\"]{0,64}\")?|LWP \d{1,10}(?: \"[^\"]{0,64}\")?)\s+(\S.{0,4000})$")
_INFO_THREADS_HEADER = re.compile(r"^Id\s+Target Id\s+Frame\s*$")
_CUDA_FOCUS = re.compile(r"^\[(?:Switching focus to|Current focus set to) (CUDA kernel .{1,300})\]$")
_BACKTRACE_STOPPED = "Backtrace stopped:"
_ATTACHING = re.compile(r"^Attaching to (?:program: .{1,4000}, )?process (\d{1,10})\b")
_SOLIB = re.compile(r"^\S+\.so(?:\.[0-9.]+)?$")
#: A Python frame printed by gdbext's frame filter: optional eval-frame pc, ``[py]`` (placed) or
#: ``[py?]`` (not placed), the qualified name, ``()`` (no arguments), ``at file:line``.
_PY_FILTER = re.compile(r"^(?:0x[0-9a-fA-F]{1,16} in )?\[(py\??)\] (\S.*?) \(\)(?: at (.+?)(?::(\d{1,9}))?)?$")

#: Locals printed by ``bt full`` are indented; a frame cut by the terminal continues indented too.
_LOCALS_INDENT = "        "


def score(lines: List[str]) -> float:
    """Frame lines (``#N ...``) weigh most; thread headers and gdb's own remarks confirm."""
    frames = headers = remarks = 0
    for line in lines:
        s = line.lstrip()
        if s[:1] in "#-" and frame_match(s):
            # "#0 ..." alone is also gdb's echo of the stop location above a py-bt: weigh deeper
            # frames more, so a pasted py-bt is not taken for a native backtrace.
            frames += 1 if s.startswith("#0 ") else 2
        elif s.startswith("Thread ") and THREAD.match(s):
            headers += 1
        elif s.startswith(("[New LWP", "[New Thread", "[Current thread is", "Core was generated by")):
            remarks += 1
        elif s[:1].isdigit() or s.startswith("*"):
            m = _INFO_THREAD.match(s)
            if m and " in " in m.group(4):  # an ``info threads`` row: one frame per thread
                frames += 1
        elif _INFO_THREADS_HEADER.match(s):
            headers += 1
    if frames == 0:
        return 0.0
    return 2.0 * frames + 5.0 * headers + remarks


#: AddressSanitizer's (and the other sanitizers') frame after ``0x.. in``: the symbol with its
#: offset, then the module (with its architecture on macOS) and the offset in it.
_SANITIZER = re.compile(
    r"^(.{1,4000}?)(?:\+0x[0-9a-fA-F]{1,16})? \(([^()\s]{1,500}?)(?::\w{1,20})?\+0x[0-9a-fA-F]{1,16}\)$")
_SANITIZER_AT = re.compile(r"^([^\s/]\S{0,4000}) (/[^\s():]{1,500}):(\d{1,9})(?::\d{1,6})?$")
#: ``==20477==ERROR: AddressSanitizer: SEGV on unknown address``: a sanitizer that caught a signal.
_SANITIZER_SIGNAL = re.compile(r"^==\d{1,10}==\s?ERROR: \w{1,40}Sanitizer: (SEGV|BUS|FPE|ILL|ABRT)\b")


#: The note of a frame whose own arguments gdb could not read from its stack (``crashframes``: frame #0's
#: alone is a thread that ran off its stack).
_WRITERS_NOTE = re.compile(r"\s{1,80}(?:\u2190|<-{1,3})\s.{0,2000}$")
UNREADABLE_ARGS = "its arguments could not be read (gdb: Cannot access memory at address)"


def parse_frame_body(body: str) -> Frame:
    """``0x.. in func (args) at file:line`` / ``func (args) from lib`` -> Frame (linear scan); a
    writer's note after it (``  ← blocked here``, open round 107's annotated frames) is no part of it."""
    if "\u2190" in body or "<-" in body:
        body = _WRITERS_NOTE.sub("", body)
    f = _frame_body(body)
    if "<error reading variable: Cannot access memory at address" in body and f.note is None:
        f.note = UNREADABLE_ARGS
    return f


def _frame_body(body: str) -> Frame:
    f = Frame(kind="native")
    body = body.strip()
    if body.startswith("<") and body.endswith(">"):  # <signal handler called>, <function called from gdb>
        f.function = body
        return f
    m = ADDR_IN.match(body)
    if m:
        f.address = to_int(m.group(1), 16)
        body = m.group(2)
        m = _SANITIZER.match(body) if body.endswith(")") else None
        if m:  # a sanitizer's "#0 0x.. in pthread_mutex_lock+0xc (libsystem_pthread.dylib:arm64e+0x18e0)"
            f.function, f.library = unknown_function(m.group(1)), m.group(2)
            return f
        m = _SANITIZER_AT.match(body) if " at " not in body and " from " not in body else None
        if m:  # "#0 0x50b1e7 in main /tmp/use-after-free.c:6:10" (with symbols)
            f.function, f.file, f.line = unknown_function(m.group(1)), m.group(2), to_int(m.group(3))
            return f
    elif body.startswith("in ") and body[3:4].strip():
        body = body[3:]  # "#0  in func () from lib": a paste with the addresses taken out keeps gdb's "in"
    i = body.rfind(" from ")
    if i >= 0 and " " not in body[i + 6:].strip():
        f.library = body[i + 6:].strip() or None
        m = AT.match(f.library or "")
        if m and m.group(1).endswith(".py"):
            # torch's CapturedTraceback (ProcessGroupNCCL's "Stack trace of the failed collective:"),
            # "#0 all_gather_into_tensor from /x/distributed_c10d.py:4186": a Python frame, not a library
            f.kind, f.library, f.file, f.line = "python", None, m.group(1), to_int(m.group(2))
        body = body[:i]
    else:
        i = body.rfind(" at ")
        if i >= 0:
            tail = body[i + 4:].strip()
            m = AT.match(tail)
            if m:
                f.file = m.group(1)
                f.line = to_int(m.group(2))
                body = body[:i]
            elif _SOLIB.match(tail):
                # under a frame filter gdb prints a frame's shared object as "at LIB", not "from LIB"
                f.library = tail
                body = body[:i]
    name, _args = split_call(body)
    f.function = unknown_function(name if name.strip("() ") else None)  # "in  () at lib": no name
    return f


def filter_python_frame(body: str) -> Optional[Tuple[Frame, bool]]:
    """(Python frame, placed) from a frame-filter line body (``[py] f () at x.py:3``), else None.
    The pc gdb prints beside it is the eval frame's, so it is not kept as the frame's address."""
    if "[py" not in body[:40]:
        return None
    m = _PY_FILTER.match(body.strip())
    if not m:
        return None
    f = Frame(kind="python", function=m.group(2), file=m.group(3) or None, line=to_int(m.group(4)))
    return f, m.group(1) == "py"


def split_sessions(lines: List[str]) -> List[List[str]]:
    """Cut a paste of several gdb sessions (one per process) apart.

    gdb numbers threads from 1 in every session and ``thread apply all`` counts down, so a
    header whose number does not go down, naming an LWP this session has not shown, starts
    another process.  (``bt`` followed by ``py-bt`` repeats the same LWPs: one process.)
    The cut goes after the last frame of the previous session and its ``[Inferior .. detached]``.
    """
    chunks: List[List[str]] = []
    start = 0
    last_num: Optional[int] = None
    seen: set = set()
    last_content = -1  # index of the last frame / py-bt line of the current session
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("Thread "):
            m = THREAD.match(s)
            if m:
                num, lwp = int(m.group(1)), header_lwp(m.group(2))
                if last_num is not None and num >= last_num and lwp is not None and lwp not in seen and seen:
                    cut = last_content + 1
                    while cut < i and (not lines[cut].strip() or INFERIOR.match(lines[cut].strip())):
                        cut += 1
                    if cut > start:
                        chunks.append(lines[start:cut])
                        start = cut
                        seen = set()
                if lwp is not None:
                    seen.add(lwp)
                last_num = num
                continue
        if s.startswith(("#", "File ", "<built-in ")):
            last_content = i
    chunks.append(lines[start:])
    return chunks


def parse_processes(lines: List[str], label: Optional[str]) -> List[Process]:
    """One Process per gdb session in the paste (usually one)."""
    out = []
    for chunk in split_sessions(lines):
        proc = Process(source="text", label=label)
        parse(chunk, proc)
        if proc.threads or proc.messages:
            out.append(proc)
    return out


def parse(lines: List[str], proc: Process) -> None:
    """Fill ``proc`` with the threads, frames and messages found in gdb output."""
    r = _Reader(lines, proc)
    r.read()
    threads = without_echoes(r.threads, r.headless)
    single = len(threads) == 1 and not r.by_num
    _attach_stop(r, threads)
    if r.current_num is not None and r.current_num in r.by_num:
        r.by_num[r.current_num].current = True
    elif single:
        threads[0].current = True  # a single ``bt`` shows the selected thread
    for t in threads:
        _set_merge(t)
    proc.threads.extend(threads)
    r.owners.apply(proc)


#: A frame's place on its own line with its indentation lost: ``from /path/lib.so`` / ``at file.c:12``.
_FLUSH_PLACE = re.compile(r"^(?:from (?:/|[A-Za-z]:\\)\S{1,500}|at \S{1,500}:\d{1,7})$")


class _Reader:
    """One pass over gdb's lines: the threads so far, the thread frames go to (``cur``), and what
    earlier lines say about the next ones (a py-bt section, a frame-filter run, a device focus).
    Each ``_…`` step takes a line it recognises and says so; a line none takes is a message."""

    def __init__(self, lines: List[str], proc: Process) -> None:
        self.lines = lines
        self.proc = proc
        self.threads: List[Thread] = []
        self.by_num: Dict[str, Thread] = {}
        self.headless: List[Thread] = []  # frames printed before any "Thread N (...)" header
        self.cur: Optional[Thread] = None
        self.current_num: Optional[str] = None
        self.in_pybt = False  # inside a py-bt section pasted after (or between) native backtraces
        self.filter_run = False  # the last frame line was a "[py]" line of gdbext's frame filter
        self.focus: Optional[str] = None  # cuda-gdb's current device focus, names the device thread
        self.owners = gdbwaits.OwnerPrints()  # mutex owners gdb printed (``p *mutex``: __owner = N)
        self.old_num = -1  # the last "#N" of a Python 2 py-bt listing
        self.info_rows: Set[int] = set()  # threads known only from an ``info threads`` row (by id)
        self.i = 0  # the next line
        self.attached: Optional[int] = None  # "Attaching to process N"
        self.stop: Optional[str] = None  # gdb's echo of where it stopped, before any thread's frames

    def read(self) -> None:
        n = len(self.lines)
        while self.i < n:
            raw = self.lines[self.i]
            s = raw.strip()
            self.i += 1
            if not s:
                continue
            if s.startswith("Thread ") and self._thread_header(s):
                continue
            if (s[:1].isdigit() or s.startswith("*") or s.startswith("Id ")) and self._info_threads_line(s):
                continue
            if self._pybt_start(s):
                continue
            cur = self.cur
            if self.in_pybt and cur is not None and pybt.frame_line(raw, s, cur, cur.python_frames):
                continue
            if s[:1] in "#-" and self._frame_line(s):
                continue
            if cur is not None and cur.frames and not raw.startswith(_LOCALS_INDENT) and self._filter_line(cur, s):
                continue
            self.filter_run = False
            if not self._session_line(s) and not self._skipped(raw, s) and not self._pylist_line(s):
                self.proc.messages.append(s)

    def _pylist_line(self, s: str) -> bool:
        """``thread apply all py-list``: the ``>N`` line is the innermost Python frame's line
        (sourcewait.py reads it)."""
        m = _PYLIST_CURRENT.match(s)
        if not m or self.cur is None or self.cur.python_frames:
            return False
        f = Frame(kind="python", line=to_int(m.group(1)), source=m.group(2).strip())
        f.note = "py-list: the line the selected Python frame stands on"
        self.cur.python_frames.append(f)
        return True

    def _thread_header(self, s: str) -> bool:
        m = THREAD.match(s)
        if not m:
            return False
        cur = self.by_num.get(m.group(1))  # the same thread again: ``bt`` then ``py-bt``
        if cur is not None and header_lwp(m.group(2)) != cur.tid:
            cur = None  # same number, another thread: a second gdb session pasted below
        if cur is None:
            cur = thread_from_header(m.group(1), m.group(2))
            self.threads.append(cur)
            self.by_num[m.group(1)] = cur
        elif id(cur) in self.info_rows:  # its ``info threads`` row: the backtrace below replaces it
            self.info_rows.discard(id(cur))
            cur.frames = []
            cur.notes = [n for n in cur.notes if not n.startswith("info threads:")]
        self.cur = cur
        self.in_pybt = False
        self.old_num = -1  # frame numbers start again under each thread's header
        return True

    def _info_threads_line(self, s: str) -> bool:
        """An ``info threads`` row: the thread with its innermost frame (replaced by the frames of a
        ``thread apply all bt`` of the same thread further down), or the table's header."""
        if _INFO_THREADS_HEADER.match(s):
            return True
        m = _INFO_THREAD.match(s)
        if not m or not (" in " in m.group(4) or re.search(r"\) at \S+:\d+$", m.group(4))) or m.group(2) in self.by_num:
            return False
        t = thread_from_header(m.group(2), m.group(3))
        t.current = bool(m.group(1))
        if t.current:
            self.current_num = m.group(2)
        body = self._joined_row(m.group(4))
        t.frames.append(parse_frame_body(body))
        gdbwaits.gil_wait(t, body)
        t.notes.append("info threads: its innermost frame only")
        self.threads.append(t)
        self.by_num[m.group(2)] = t
        self.info_rows.add(id(t))
        return True

    def _joined_row(self, body: str) -> str:
        """An ``info threads`` row the terminal wrapped: its indented continuation lines, up to the
        balanced parenthesis (never the next row, which is indented too)."""
        lines, n, joined = self.lines, len(self.lines), 0
        while (self.i < n and joined < 20 and not balanced(body) and lines[self.i].startswith(" ")
               and not _INFO_THREAD.match(lines[self.i].strip())):
            body += " " + lines[self.i].strip()
            self.i += 1
            joined += 1
        return body

    def _pybt_start(self, s: str) -> bool:
        """py-bt's header, or its first frame line when the paste starts at it (py-bt-full and
        Python 2's py-bt print "#5 Frame 0x.., for file x.py, line 244, in wait (...)")."""
        if not (s == pybt.HEADER or (not self.in_pybt and s.startswith("#")
                                     and (pybt.is_full_frame(s) or pybt.is_full_state(s)))):
            return False
        if s != pybt.HEADER:
            self.cur = None if self.cur is not None and self.cur.frames else self.cur
            self.i -= 1  # read the frame line again, as py-bt's
        if self.cur is None:
            self.cur = self._headless()
        self.in_pybt = True
        return True

    def _selected_row(self) -> Optional[Thread]:
        """A plain ``bt`` after ``info threads`` is the selected thread's (the row marked ``*``):
        its frames replace that row's one frame (once; a second headless ``bt`` is a thread of its own)."""
        t = self.by_num.get(self.current_num) if self.current_num else None
        if t is None or id(t) not in self.info_rows or not t.current:
            return None
        self.info_rows.discard(id(t))
        t.frames = []
        t.notes = [n for n in t.notes if not n.startswith("info threads:")]
        return t

    def _headless(self, num: str = "0") -> Thread:
        t = Thread(notes=[] if num == "0" else ["the paste starts at frame #%s: the frames inside it are cut" % num])
        self.headless.append(t)
        return t

    def _frame_line(self, s: str) -> bool:
        """A "#N ..." frame line (with the lines a terminal wrapped it onto)."""
        m = frame_match(s)
        if not m:
            return False
        body = self._joined(m.group(2))
        self.in_pybt = False
        old = pybt.old_frame(body)
        if old is not None or body == pybt.OLD_LOCK_WAIT:
            # Python 2's py-bt numbers its lines like gdb's frames; a number that does not
            # grow starts another thread's (or another session's) listing
            num = int(m.group(1))
            if self.cur is None or self.cur.frames or num <= self.old_num:
                self.cur = self._headless()
            self.old_num = num
            if old is not None:
                self.cur.python_frames.append(old)
            return True
        cur = self.cur
        if cur is None or (m.group(1) == "0" and cur.frames):
            cur = self.cur = self._selected_row() or self._headless(m.group(1))
            if self.focus:  # cuda-gdb's ``bt`` with a device focus: the GPU thread's frames
                cur.name = self.focus.split(", device")[0]
                cur.notes.append("cuda-gdb device focus: %s" % self.focus)
        py = filter_python_frame(body)
        self.filter_run = py is not None
        if py is None:
            placed = pybt.eval_arg_frame(body)
            if placed is not None:
                cur.frames.append(placed)
            cur.frames.append(parse_frame_body(body))
            gdbwaits.gil_wait(cur, body)
            gdbwaits.mutex_wait(cur, body)
            gdbwaits.fatal_message(self.proc, cur.frames[-1], body)
        else:
            (cur.frames if py[1] else cur.python_frames).append(py[0])
        return True

    def _joined(self, body: str) -> str:
        """Join a frame line that the terminal wrapped: unbalanced parentheses (gdb's own indented
        continuation lines, or up to 3 pieces a terminal cut at its width with no indentation; a
        frame cut before its argument list has none yet), or a following indented "at file:line" /
        "from lib" line."""
        lines, n = self.lines, len(self.lines)
        joined = cut = 0
        while self.i < n and joined < 50 and (not balanced(body) or "(" not in body):
            nxt = lines[self.i]
            if nxt.startswith(" ") and "(" in body:
                body += " " + nxt.strip()
            elif cut < 3 and nxt and not nxt[0].isspace() and not _NEW_RECORD.match(nxt):
                body += nxt  # a terminal's cut inside the frame's text (no indentation): the rest of the word
                cut += 1
            else:
                break
            self.i += 1
            joined += 1
        if self.i < n and lines[self.i].lstrip().startswith(("at ", "from ")) and (
                lines[self.i].startswith(" ") or _FLUSH_PLACE.match(lines[self.i])):
            body += " " + lines[self.i].strip()  # (flush left: a page's copy lost the indentation)
            self.i += 1
        return body

    def _filter_line(self, cur: Thread, s: str) -> bool:
        """Lines of one gdb frame after its first under gdbext's frame filter: more Python frames,
        then the eval frame running them (no "#N"); "[py?]" after the last frame."""
        py = filter_python_frame(s)
        if py is not None:
            (cur.frames if py[1] else cur.python_frames).append(py[0])
            self.filter_run = self.filter_run or py[1]
            return True
        if self.filter_run and (ADDR_IN.match(s) or is_stop_echo(s)):
            cur.frames.append(parse_frame_body(s))
            self.filter_run = False
            return True
        return False

    def _session_line(self, s: str) -> bool:
        """What gdb says about the session: the selected thread, cuda-gdb's focus, the signal, the
        core's command line, the inferior's pid."""
        proc = self.proc
        m = CURRENT.match(s)
        if m:
            self.current_num = m.group(1)
            return True
        m = _CUDA_FOCUS.match(s)
        if m:
            self.focus = m.group(1)
            self.cur = None  # device frames follow, not the host thread's
            return True
        m = _SANITIZER_SIGNAL.match(s) if s.startswith("==") else None
        if m:  # the sanitizer caught a fatal signal; its frames follow (the signal's thread)
            proc.signal = proc.signal or "SIG" + m.group(1)
            proc.messages.append(s)
            return True
        m = _RECEIVED.match(s)
        if m:
            proc.signal = m.group(2)
            if m.group(1):
                self.current_num = m.group(1)
            proc.messages.append(s)
            return True
        m = _HIT.match(s) if " hit " in s or s[:1] in "BCTHrRaAw" else None
        if m and is_stop_echo(m.group(2)):
            if m.group(1):
                self.current_num = m.group(1)
            if self.stop is None and not self.threads and not self.headless:
                self.stop = m.group(2)
            proc.messages.append(s)
            return True
        m = CORE_BY.match(s)
        if m:
            proc.argv = m.group(1).split()
            if proc.argv:
                proc.executable = proc.executable or proc.argv[0]
            return True
        m = INFERIOR.match(s)
        if m:
            proc.pid = proc.pid or to_int(m.group(1))
            return True
        m = _ATTACHING.match(s) if s.startswith("Attaching") else None
        if m:
            self.attached = to_int(m.group(1))  # the line stays a message
        return False

    def _skipped(self, raw: str, s: str) -> bool:
        """Lines that are no message: where a backtrace stopped (a note of its thread), mutex
        owners gdb printed, gdb's own noise, ``bt full`` locals."""
        if s.startswith(_BACKTRACE_STOPPED):
            if self.cur is not None:
                self.cur.notes.append(s)
            return True
        if self.owners.line(s):
            return True
        if is_stop_echo(s):
            if self.stop is None and not self.threads and not self.headless:
                self.stop = s
            return True
        if is_noise(s):
            return True
        # a ``bt full`` local (or a continuation of one)
        return raw.startswith(_LOCALS_INDENT) and self.cur is not None and bool(self.cur.frames)


def _attach_stop(r: _Reader, threads: List[Thread]) -> None:
    """gdb's echo of where the process stopped when it attached (``0x.. in f (...) at file:line``)
    is frame #0 of the thread it selected, the one whose LWP is the pid: where a paste of ``thread
    apply all bt`` cut that thread's frames, the echo is still its innermost frame."""
    if r.stop is not None and not threads:  # the stop line alone (a quoted first look): its thread's frame #0
        threads.append(Thread(frames=[parse_frame_body(r.stop)], notes=["frame #0 from gdb's stop line alone"]))
    if r.stop is not None and r.current_num is not None and r.proc.signal and threads:
        # "Thread 1 received signal SIGSEGV" then its stop line, then other threads' ``bt``s that
        # leave thread 1 out (a cut paste): the stop line is that thread's frame #0, the one that crashed
        t = r.by_num.get(r.current_num)
        if t is None:
            t = Thread(notes=["gdb thread %s" % r.current_num])
            r.by_num[r.current_num] = t
            threads.insert(0, t)
        if not t.frames and not t.python_frames:
            t.frames.append(parse_frame_body(r.stop))
            t.notes.append("frame #0 from gdb's stop line on the signal (the thread's own frames are not in the text)")
            r.proc.messages.append(r.stop)  # its arguments are evidence too (interp=0x0)
    if r.proc.signal and r.current_num is not None and r.current_num not in r.by_num and threads:
        r.proc.notes.append(SIGNAL_THREAD_CUT_NOTE)  # (no stop line: thread N's frames are nowhere)
    if r.stop is None or r.attached is None:
        return
    t = next((t for t in threads if t.tid == r.attached and not t.frames and not t.python_frames), None)
    if t is not None:
        t.frames.append(parse_frame_body(r.stop))
        t.notes.append("frame #0 from gdb's stop line when it attached (the thread's own frames are not in the text)")


def _set_merge(t: Thread) -> None:
    """How the thread's Python frames sit among its native ones (``Thread.merge``)."""
    if t.python_frames and not t.frames:
        t.frames, t.python_frames = t.python_frames, []
        t.merge = "python-only"
    elif t.python_frames:
        # py-bt printed apart from bt, or the frame filter's "[py?]": not interleaved with certainty
        t.merge = "unmerged"
    elif any(f.kind == "python" for f in t.frames):
        t.merge = "merged"  # gdbext's frame filter placed them
    elif t.frames:
        t.merge = "native-only"
    else:
        t.notes.append("no frames printed")
