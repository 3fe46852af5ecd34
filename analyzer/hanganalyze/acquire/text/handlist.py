"""Call lists written by hand that are not staircases (``calltree``): how an issue's author sums up
each thread's stack in a few names, outermost call first.

Two shapes are read:

* arrow blocks, one block a thread (blocks apart by a blank line or a new label), the thread's name
  in the left column::

      main thread   faulthandler_cancel_dump_traceback_later_py     -> label, first frame
                    -> cancel_dump_traceback_later                   -> "-> B": the line before calls B
                    -> PyThread_acquire_lock_timed
                    -> __psynch_cvwait          <- blocked, holding the GIL   -> a comment

      Timer thread  thread_run -> acquire_timed                       -> "A -> B" on one line

* a flat list of ``module:function()`` lines (C files' names before the colon), an indented line a
  call the line above makes, ``<-- comment`` after a call::

      pystate:PyGILState_Ensure()
      pystate:new_threadstate()
        HEAD_LOCK()  <--   DEADLOCK HERE!

* a Python stack abridged to ``file.py:LINE`` rows (or a profiler's ``file.py:function:LINE``), outermost
  first (indented as a staircase or not, ``->`` before a callee), each row's function
  (``Service.shutdown()``) or source line (``wait([future], timeout=None)``), a ``-> call`` after a
  function its line::

      test_service.py:63 test_start()
        -> iomediator.py:117 IoMediator.shutdown() -> self.interface.cancel()
      zarr/core/sync.py:152             wait([future], timeout=None)   # <- blocks forever

No tool prints these, so the guards are strict: every name a C / C++ / dotted symbol, an arrow
block with at least ``MIN_FRAMES`` frames and one ``->`` continuation line (prose's "A -> B" is one
line), a flat list with at least ``MIN_FRAMES`` calls of which ``MIN_MODULE`` carry ``module:`` (a
script's ``f()`` lines carry none), Python rows at least ``MIN_FRAMES`` in a row from two files or
more, each row's text code, not prose nor a log record (``app.py:12 - server started``).  Frames
come out innermost first; comments are messages.  Not looked for in another format's leftovers: a
hand-written list is a whole paste.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, indent_of

NAME = "hand-list"

MIN_FRAMES = 3
MIN_MODULE = 3
_SYM = r"~?[A-Za-z_][\w.]{0,200}(?:::~?[A-Za-z_][\w.]{0,200}){0,20}(?:\(\))?"
#: (an Objective-C method too: ``-[_MTLCommandBuffer waitUntilCompleted]``, ``+[NSThread sleepForTimeInterval:]``)
_SYMBOL = re.compile(r"^(?:%s|[-+]\[\w{1,200}(?:\(\w{1,200}\))? [\w:]{1,300}\])$" % _SYM)
#: ``<- comment`` / ``<-- comment`` / ``# comment`` after a name, or an aside in parentheses after two
#: spaces or more (``__psynch_cvwait  (never returns)``).
_COMMENT = re.compile(r"\s{1,200}(?:<-{1,4}|#)\s.{0,2000}$|\s{1,200}<-{1,4}$|\s{2,200}\([^()]{1,200}\)$")
#: ``label   name`` (two blanks or more between a label of words and the first name).
_LABELLED = re.compile(r"^([A-Za-z][\w .#-]{0,60}?)\s{2,60}(\S.{0,4000})$")
#: ``pystate:PyGILState_Ensure()`` / ``HEAD_LOCK()`` with its comment.
_CALL = re.compile(r"^(?:([A-Za-z_][\w.]{0,100}):)?([A-Za-z_][\w.]{0,300})\(\)(?:\s{1,200}<-{1,4}.{0,2000})?$")


#: ``  -> pkg/file.py:118 Service.shutdown() -> self.cancel()`` / ``file.py:93   .translate()  # note``
_PY_ROW = re.compile(r"^(?:->\s{0,4})?([\w./\\-]{1,300}\.pyx?):(\d{1,7})\s{1,60}(\S.{0,1000}?)$")
#: ``c:\\...\\requests\\sessions.py:Session.get:600``: a profiler's frame (Austin's ``file:function:line``, a
#: stack copied from its output, outermost first; open round 65)
_PY_QUAL = re.compile(r"^((?:[A-Za-z]:)?[\w./\\-]{1,300}\.pyx?):([A-Za-z_<][\w.<>]{0,300}):(\d{1,7})$")
_PY_FUNC = re.compile(r"^([A-Za-z_<][\w.<>]{0,300})\(\)(?:\s{0,8}->\s{0,8}(\S.{0,1000}))?$")
_PY_NAME = re.compile(r"^(?:[A-Za-z_][\w.]{0,300}|<(?:module|lambda|listcomp|dictcomp|setcomp|genexpr)>)$")
#: What a code row's text may hold: no sentence (words apart by spaces outside a call's parentheses).
_PROSE = re.compile(r"^[^()]{0,400}?\b[A-Za-z]{2,40} [A-Za-z]{2,40} [A-Za-z]{2,40}\b"
                    r"|^[-:|>]|\{'|': |\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b")


#: ``release        redis/connection.py:1529``: py-spy's frame as a table row (the function first, then
#: its place, innermost first as py-spy prints them; open sealed round 92)
_PY_FN_ROW = re.compile(r"^([A-Za-z_<][\w.<>]{0,300})\s{2,60}([\w./\\-]{1,300}\.pyx?):(\d{1,7})$")


def _py_row(line: str) -> Optional[Tuple[Frame, Optional[str]]]:
    """A Python row as a frame (and its comment); None for any other line."""
    body, comment = _split_comment(line.strip())
    fn = _PY_FN_ROW.match(body)
    if fn:
        return Frame(kind="python", file=fn.group(2), line=int(fn.group(3)), function=fn.group(1)), comment
    head = line.lstrip(" \t->").split(None, 1)
    if not head or (".py:" not in head[0] and ".pyx:" not in head[0]):
        return None  # (its first word is the row's file: a py-spy frame's "(file.py:12)" comes last)
    body, comment = _split_comment(line.strip())
    q = _PY_QUAL.match(body)
    if q:
        return Frame(kind="python", file=q.group(1), line=int(q.group(3)), function=q.group(2)), comment
    m = _PY_ROW.match(body)
    if not m:
        return None
    text = m.group(3).strip()
    if _PROSE.match(text):
        return None
    f = _PY_FUNC.match(text)
    if f:
        return Frame(kind="python", file=m.group(1), line=int(m.group(2)), function=f.group(1),
                     source=f.group(2)), comment
    if _PY_NAME.match(text):
        return Frame(kind="python", file=m.group(1), line=int(m.group(2)), function=text), comment
    return Frame(kind="python", file=m.group(1), line=int(m.group(2)), source=text), comment


def _py_rows(lines: List[str]) -> Optional[Tuple[List[Frame], List[str], range]]:
    """(frames outermost first, comments, line range) of the longest run of Python rows."""
    best: Optional[Tuple[List[Frame], List[str], range]] = None
    if not any(".py:" in x or ".pyx:" in x for x in lines):
        return None
    frames: List[Frame] = []
    comments: List[str] = []
    start = row_indent = 0
    for i, line in enumerate(lines + [""]):
        got = _py_row(line) if line.strip() else None
        if got is None and frames and line.strip() in ("...", "\u2026"):
            continue  # the writer's elision of frames between two rows: the run goes on
        if got is not None:
            if not frames:
                start = i
            frames.append(got[0])
            row_indent = indent_of(line)
            if got[1]:
                comments.append("%s:%s: %s" % (got[0].file, got[0].line, got[1]))
            continue
        if (frames and line.strip() and indent_of(line) > row_indent and frames[-1].function
                and frames[-1].source is None):
            frames[-1].source = line.strip()[:300]  # the row's source line under it (TensorFlow's traced stack)
            continue
        if (len(frames) >= MIN_FRAMES and len({f.file for f in frames}) >= 2
                and any(f.function and f.function[:1].isalpha() or (f.source or "").endswith(")") for f in frames)
                and (best is None or len(frames) > len(best[0]))):
            best = (frames, comments, range(start, i))
        frames, comments = [], []
    return best


def _split_comment(s: str) -> Tuple[str, Optional[str]]:
    m = _COMMENT.search(s)
    if not m:
        return s, None
    return s[:m.start()].rstrip(), s[m.start():].strip().lstrip("<-#").strip() or None


#: ``- **main thread**: `a -> b -> c` (a note)``: a writer's bullet naming a thread, its chain in code
#: quotes, a note after it (open round 104's summary of a macOS sample, one chain a thread).
_QUOTED_CHAIN = re.compile(r"^(?:[-*\u2022]\s{1,4})?(?:\*\*|__)?([^`*:]{1,60}?)(?:\*\*|__)?\s{0,4}:\s{0,8}"
                           r"`([^`]{1,2000}->[^`]{1,2000})`\s{0,8}(.{0,2000})$")


def _arrow_line(line: str) -> Optional[Tuple[Optional[str], List[str], bool, Optional[str]]]:
    """(label, names, continues, comment) of one arrow-block line; None when it is not one."""
    quoted = _QUOTED_CHAIN.match(line.strip())
    if quoted:
        parts = [p.strip() for p in quoted.group(2).split("->")]
        if len(parts) >= MIN_FRAMES and all(_SYMBOL.match(p) for p in parts):
            return (quoted.group(1).strip(), [p[:-2] if p.endswith("()") else p for p in parts], False,
                    quoted.group(3).strip().strip("()").strip() or None)
        return None
    body, comment = _split_comment(line.strip())
    label = None
    continues = body.startswith("->")
    if not continues:
        m = _LABELLED.match(body)
        if m and ("->" in m.group(2) or _SYMBOL.match(m.group(2).strip())):
            label, body = m.group(1).strip(), m.group(2).strip()
            if body.startswith("->"):
                continues = True
    parts = [p.strip() for p in body.split("->")]
    if continues:
        parts = parts[1:]
    if not parts or not all(_SYMBOL.match(p) for p in parts):
        return None
    return label, [p[:-2] if p.endswith("()") else p for p in parts], continues, comment


def _arrow_blocks(lines: List[str]) -> List[Tuple[Optional[str], List[str], List[str], range]]:
    """(label, names outermost first, comments, line range) of each arrow block."""
    blocks: List[Tuple[Optional[str], List[str], List[str], range]] = []
    cur: Optional[Tuple[Optional[str], List[str], List[str], int, int]] = None  # label, names, comments, start, conts
    if not any("->" in x for x in lines):
        return blocks  # (every arrow block has one: a text without any is read no further)

    def close(end: int) -> None:
        if cur is not None and cur[4] >= 1 and len(cur[1]) >= MIN_FRAMES:
            blocks.append((cur[0], cur[1], cur[2], range(cur[3], end)))

    for i, line in enumerate(lines):
        got = _arrow_line(line) if line.strip() else None
        if got is None:
            close(i)
            cur = None
            continue
        label, names, continues, comment = got
        if cur is None or (not continues and label is not None):
            close(i)
            cur = (label, [], [], i, 0)
        elif not continues:
            close(i)
            cur = (None, [], [], i, 0)
        cur = (cur[0] or label, cur[1] + names, cur[2] + ([comment] if comment else []), cur[3],
               cur[4] + (1 if continues or len(names) > 1 else 0))
    close(len(lines))
    return blocks


def _flat_list(lines: List[str]) -> Optional[Tuple[List[str], List[str], range]]:
    """(names outermost first, comments, line range) of the longest flat ``module:function()`` list."""
    best: Optional[Tuple[List[str], List[str], range]] = None
    if not any("():" in x or "()" in x for x in lines):
        return None
    names: List[str] = []
    comments: List[str] = []
    modules = 0
    start = 0
    for i, line in enumerate(lines + [""]):
        s = line.strip()
        m = _CALL.match(s) if s else None
        if m:
            if not names:
                start = i
            names.append(m.group(2))
            modules += 1 if m.group(1) else 0
            _body, comment = _split_comment(s)
            if comment:
                comments.append("%s: %s" % (m.group(2), comment))
            continue
        if s and indent_of(line) > 0 and names:
            continue  # an indented note between the calls ("get_reentrant() = 0")
        if len(names) >= MIN_FRAMES and modules >= MIN_MODULE and (best is None or len(names) > len(best[0])):
            best = (names, comments, range(start, i))
        names, comments, modules = [], [], 0
    return best


#: A bare native name on a line of its own (``do_futex_wait``, ``c10d::ProcessGroupNCCL::barrier``).
_BARE = re.compile(r"^~?[A-Za-z_]\w{0,200}(?:::~?[A-Za-z_]\w{0,200}){0,20}$")
#: Names only a stack holds (the waits under every hang, CPython's own, a thread's start): one of them
#: makes a column of bare names a stack and not a list of words.
_STACK_WORD = re.compile(r"^(?:_?Py[A-Z]\w*|_Py\w+|\w*futex\w*|__new_sem_wait\w*|__?lll_lock\w*|pthread_\w+|"
                         r"__pthread_\w+|start_thread|clone3?|__clone\w*|\w*_nanosleep|__poll|epoll_wait|take_gil)$")
#: The outer end of a stack: a column that starts with one of these lists the outermost call first.
_OUTERMOST = re.compile(r"^(?:main|_start|start_thread|clone3?|__clone\w*|Py_RunMain|Py_BytesMain|__libc_start_main)$")


#: A line that says a stack follows (a tool's or a report's heading), and the underline under it.
_STACK_HEADING = re.compile(r"^(?:stack ?trace|back ?trace|call ?stack|stack)\s*:?$", re.I)
_UNDERLINE = re.compile(r"^[-=~_]{3,}$")
#: A list marker before a name (``>> pqWaitTimed``, ``- foo``, ``* bar``).
_MARKER = re.compile(r"^(?:>{1,2}|[-*\u2022])\s+")


def _headed(lines: List[str], start: int) -> bool:
    """The column at ``start`` stands right under a stack heading (an underline between them)."""
    k = start - 1
    if k >= 0 and _UNDERLINE.match(lines[k].strip()):
        k -= 1
    return k >= 0 and bool(_STACK_HEADING.match(lines[k].strip()))


def _bare_list(lines: List[str]) -> Optional[Tuple[List[str], range]]:
    """(names innermost first, line range) of the longest column of bare native names (a stack summed
    up by hand: ``do_futex_wait`` / ``_PySemaphore_Wait`` / ``stop_the_world`` ...), at least
    ``MIN_FRAMES + 1`` names, most of them C names (an underscore or a ``::``), one a name only a stack
    holds (``_STACK_WORD``); printed innermost first as a ``bt`` is, unless it starts at the outer end.
    Under a stack heading (``StackTrace`` / ``-----------``) two names are a stack: the heading says
    what the column is.  A list marker before each name (``>> name``) is not part of it."""
    best: Optional[Tuple[List[str], range]] = None
    names: List[str] = []
    start = 0
    for i, line in enumerate(lines + [""]):
        s = _MARKER.sub("", line.strip())
        if s and _BARE.match(s):
            if not names:
                start = i
            names.append(s)
            continue
        headed = len(names) >= 2 and _headed(lines, start)
        if ((headed or (len(names) > MIN_FRAMES and 2 * sum(1 for n in names if "_" in n or "::" in n) > len(names)
                        and any(_STACK_WORD.match(n) for n in names)))
                and (best is None or len(names) > len(best[0]))):
            best = (names, range(start, i))
        names = []
    if best is not None and _OUTERMOST.match(best[0][0]) and not _OUTERMOST.match(best[0][-1]):
        best = (list(reversed(best[0])), best[1])
    return best


def _ascii_arrows(lines: List[str]) -> List[str]:
    """A typeset arrow (``→``, ``←``: a writer's editor or a rendered page) is the ``->`` / ``<-`` it
    stands for."""
    return [x.replace("\u2192", "->").replace("\u2190", "<-") if ("\u2192" in x or "\u2190" in x) else x
            for x in lines]


def score(lines: List[str]) -> float:
    lines = _ascii_arrows(lines)
    blocks = _arrow_blocks(lines)
    if blocks:
        return 0.5 * sum(len(b[1]) for b in blocks)
    rows = _py_rows(lines)
    if rows:
        return 0.5 * len(rows[0])
    flat = _flat_list(lines)
    if flat:
        return 0.5 * len(flat[0])
    bare = _bare_list(lines)
    return 0.25 * len(bare[0]) if bare else 0.0


def parse(lines: List[str], proc: Process) -> None:
    lines = _ascii_arrows(lines)
    taken = set()
    messages: List[str] = []
    blocks = _arrow_blocks(lines)
    if blocks:
        for label, names, comments, span in blocks:
            thread = Thread(name=label)
            thread.notes.append("call list written by hand (arrows, outermost first)")
            thread.frames = [Frame(kind="native", function=n) for n in reversed(names)]
            messages.extend(comments)
            proc.threads.append(thread)
            taken.update(span)
    elif _py_rows(lines):
        frames, comments, span = _py_rows(lines)  # type: ignore[misc]
        thread = Thread(merge="python-only")
        thread.notes.append("Python stack written by hand (file.py:LINE rows, outermost first)")
        if all(_PY_FN_ROW.match(_split_comment(lines[i].strip())[0]) for i in span
               if lines[i].strip() not in ("...", "\u2026")):  # py-spy's rows as a table: innermost first
            thread.frames = list(frames)
            thread.notes[-1] = "Python stack written as a table (function, file.py:LINE rows, innermost first)"
        else:
            thread.frames = list(reversed(frames))
        messages.extend(comments)
        proc.threads.append(thread)
        taken.update(span)
    else:
        flat = _flat_list(lines)
        if flat:
            names, comments, span = flat
            thread = Thread()
            thread.notes.append("call list written by hand (module:function() lines, outermost first)")
            thread.frames = [Frame(kind="native", function=n) for n in reversed(names)]
            messages.extend(comments)
            proc.threads.append(thread)
            taken.update(span)
        bare = None if flat else _bare_list(lines)
        if bare:
            names, span = bare
            thread = Thread()
            thread.notes.append("call list written by hand (bare function names, innermost first)")
            thread.frames = [Frame(kind="native", function=n) for n in names]
            proc.threads.append(thread)
            taken.update(span)
    messages.extend(line.strip() for i, line in enumerate(lines) if i not in taken and line.strip())
    proc.messages.extend(cap_messages(messages, proc.notes))
