"""Python tracebacks (``Traceback (most recent call last):``), chained ones included, in logs.

Each traceback block becomes one Thread whose frames are reversed to innermost first (Python
prints the outermost call first).  The exception line (``ValueError: ...``, with its
continuation lines) goes to the thread's notes *and* to the process's messages, because many
signatures are about the message (``InvalidArgumentError``, NCCL errors) rather than the stack.
Chains are kept in order, each block noting how it relates to the next:

    Traceback ...  ValueError          note: "chained: during handling of it, the next was raised"
    During handling of the above exception, another exception occurred:
    Traceback ...  RuntimeError

``Exception in thread NAME:`` before a block (threading.excepthook) names the thread.
Every other line is a log line and stays in ``Process.messages``.  ``File ..., in f`` lines
before any header (a paste cut at the top) form a block too, taken as printed outermost first.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze.loglines import EXCEPTHOOK_NOTE, MP_CHILD_NOTE
from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, indent_of, looks_like_statement, parse_py_file_line

NAME = "traceback"

HEADER = "Traceback (most recent call last):"
_CHAIN = {
    "During handling of the above exception, another exception occurred:": "during handling of it, the next was raised",
    "The above exception was the direct cause of the following exception:": "it was the direct cause of the next",
}
#: torch elastic's failure summary names a failed rank's error with its traceback (``traceback : Traceback
#: ...``, from the rank's error file): the exception it died of, whose line the summary may cut.
_FAILURE_RECORD = re.compile(r"^traceback\s*:$")
FAILURE_RECORD_NOTE = "exception: the rank's error in torch elastic's failure summary (its exception line cut)"
#: multiprocessing's line before a child's traceback (BaseProcess._bootstrap): ``Process SpawnProcess-1:``
_MP_CHILD = re.compile(r"^Process [\w.:\-]{1,80}:$")
_EXC_IN_THREAD = re.compile(r"^Exception in thread (.+?)(?: \(\w+\))?:$")
#: ``pkg.mod.ErrorName: message`` / ``ErrorName`` alone: a dotted identifier, then ':' or the end.
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]{0,200})(?::\s?(.*))?$")
#: Exception groups (3.11+) draw boxes: ``  | `` and ``  +-+---- 1 ----`` prefixes.
_GROUP_PREFIX = re.compile(r"^\s{0,40}(?:\+[-+ 0-9.]{0,60}|\|)\s?")
#: A per-line record prefix a traceback logged through a logger or a process tag gets on every line:
#: Ray's and vLLM's ``(Name pid=123, ip=...)`` and vLLM's ``ERROR 08-02 18:15:15 file.py:226]``.
_RECORD_PREFIX = re.compile(
    r"^(?:\((?:[\w:.\-]{1,80} )?pid=\d{1,10}(?:, ip=[\w.:\-]{1,60})?\) ?)?"
    r"(?:(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? [\w./\-]{1,200}:\d{1,6}\] ?)?")


def _body(line: str) -> str:
    """The line without a record prefix (``_RECORD_PREFIX``), or the line itself."""
    if line[:1] not in "(IWEDC":
        return line
    m = _RECORD_PREFIX.match(line)
    return line[m.end():] if m and m.end() else line


def score(lines: List[str]) -> float:
    headers = frames = 0
    for line in lines:
        s = _body(line).strip()
        if s.endswith(HEADER):
            headers += 1
        elif s.startswith("File ") and ", line " in s and (", in " in s or s.endswith(", in")):
            frames += 1
    if headers == 0:
        # No header: a paste cut at the top, inside the frames.  Any format with a header of its
        # own outscores this.
        return 0.5 * frames
    return 4.0 * headers + frames


def _strip_group(line: str) -> str:
    if "|" in line[:40] or "+-" in line[:40]:
        m = _GROUP_PREFIX.match(line)
        if m and m.end() > 0:
            return line[m.end():]
    return line


def _exception_line(s: str) -> bool:
    m = _EXCEPTION.match(s)
    if not m:
        return False
    name = m.group(1).rsplit(".", 1)[-1]
    # Exception class names end this way by convention; KeyboardInterrupt & co. are the rest.
    return name.endswith(("Error", "Exception", "Interrupt", "Exit", "Warning", "Timeout", "Group", "Failure")) or (
        m.group(2) is not None and name[:1].isupper() and " " not in m.group(1)
    )


def _named_exception(s: str) -> bool:
    """``RuntimeError:`` and the like: an exception class by its conventional name, not a log level
    (``ERROR:``), which ``_exception_line`` would take for a class with an empty message."""
    m = _EXCEPTION.match(s)
    name = m.group(1).rsplit(".", 1)[-1] if m else ""
    return not name.isupper() and name.endswith(("Error", "Exception", "Interrupt", "Exit", "Failure"))


#: The note of a stack a logger printed between two records (no exception line: not a traceback, so
#: the triage reads its innermost frame as where the thread stood).
LOGGED_STACK = "Python stack printed in a log (no exception: frames as printed, outermost first)"
_HEADLESS = ("Python traceback (its header is not in the text: the paste starts inside it; "
             "frames taken as printed outermost first)")
#: The note of a headerless listing the text ends on (no exception line after its frames): read as a
#: stack dump (format_stack, a thread dumper), whose innermost printed frame is where the thread stood.
CUT_STACK = ("Python stack (neither a traceback header nor an exception line in the text: "
             "frames as printed, outermost first)")


#: A line that heads a stack a program printed (no exception follows it): gevent's monitor's "Blocked
#: Stack (for thread id 0x..):", logging's "Call stack:", a dumper's "Stack of thread X:".
_STACK_HEADING = re.compile(r"^(?:[\w ]{0,40}\b[Ss]tack(?: of [\w .<>-]{1,80})?(?: \([^()]{0,80}\))?|Call stack):$")


#: What a terminal's cut leaves of a File line's function on the next line: a name's rest, no blank.
#: (lower case, or the rest of ``<locals>``: an exception's name, ``KeyboardInterrupt``, is no piece)
_NAME_PIECE = re.compile(r"^[a-z_<>.][\w<>.]{0,200}$")


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    blocks: List[Thread] = []
    pending_name: Optional[str] = None
    mp_child = False  # the last line was multiprocessing's "Process NAME:"
    cur: Optional[Thread] = None
    state = "log"  # "log" | "frames" | "exception"
    frames_indent = 0
    after_source = False  # the last line was a frame's source line (a terminal may have cut it)
    heading = False  # the last line was a log record ending in a colon: a stack may follow
    blank = gap = False
    for idx, raw in enumerate(lines):
        if raw.startswith("^C") and raw[2:].lstrip().startswith(("File ", "Traceback (")):
            messages.append("^C")  # the terminal's echo of a Ctrl-C glued to the line it printed next
            raw = raw[2:]
        body = _body(raw)
        if body is not raw:
            bs = body.strip()
            if state != "log" or bs.endswith(HEADER) or bs.startswith("File "):
                raw = body  # a traceback's line under its record prefix
        line = _strip_group(raw)
        s = line.strip()
        gap, blank = blank, not s  # the line before this one was blank
        if s.endswith(HEADER):
            prefix = s[: -len(HEADER)].strip()
            if (prefix and state == "frames" and cur is not None and cur.frames and _named_exception(prefix)
                    and not any(n.startswith("exception: ") for n in cur.notes)):
                # an exception whose message is another process's traceback (torch's DataLoader re-raising
                # a worker's error: "RuntimeError: Traceback (most recent call last):"): the open
                # traceback's exception line, and the remote traceback's header
                cur.notes.append("exception: %s" % s)
            elif prefix and prefix not in ("+ Exception Group", "Exception Group"):
                messages.append(prefix)  # a log prefix glued to the header ("ERROR: Traceback ...")
            cur = Thread(name=pending_name, python_name=pending_name)
            cur.notes.append("Python traceback")
            if pending_name is not None:
                cur.notes.append(EXCEPTHOOK_NOTE)
            elif mp_child and not prefix:
                cur.notes.append(MP_CHILD_NOTE)
            if _FAILURE_RECORD.match(prefix):
                cur.notes.append(FAILURE_RECORD_NOTE)  # the rank raised it: no wait, whatever line it shows
            blocks.append(cur)
            pending_name = None
            state = "frames"
            frames_indent = -1
            continue
        if state == "log" and (not blocks or heading or _headerless_done(blocks[-1])) and s.startswith("File ") \
                and ", in " in s:
            parsed = parse_py_file_line(s)
            if parsed is not None and parsed[1]:
                # frames before any header: the paste starts inside a traceback, or a log record
                # ending in a colon ("Stacktrace of <Transport>:") heads a stack a logger printed
                cur = Thread(name=pending_name, python_name=pending_name)
                cur.notes.append(LOGGED_STACK if heading else _HEADLESS)
                blocks.append(cur)
                pending_name = None
                state = "frames"
                frames_indent = -1
        if state == "frames" and cur is not None:
            if s.isdigit() and len(s) <= 6 and indent_of(line) == 0:
                continue  # a web log viewer's line number on a line of its own, between frame lines
            parsed = parse_py_file_line(s)
            if parsed is not None:
                after_source = True  # its source line may follow at any indentation (cut by a terminal)
                cur.frames.append(parsed[0])
                frames_indent = indent_of(line)
                continue
            if (after_source and cur.frames and cur.frames[-1].source is None and cur.frames[-1].function
                    and indent_of(line) == 0 and _NAME_PIECE.match(s) and not _exception_line(s)):
                cur.frames[-1].function += s  # the rest of the File line's function a terminal cut ("<lo" + "cals>.f")
                continue
            if s and (indent_of(line) > frames_indent >= 0 or s.startswith(("^", "~"))
                      or (after_source and _wrapped_source(s))
                      or (after_source and frames_indent == 0 and _flush_left_source(s, lines, idx))):
                if cur.frames and not s.startswith(("^", "~")):
                    if cur.frames[-1].source is None:
                        cur.frames[-1].source = s[:300]  # the frame's source line (sourcewait.py)
                    elif after_source and indent_of(line) <= frames_indent:
                        cur.frames[-1].source = (cur.frames[-1].source + " " + s)[:300]
                    after_source = indent_of(line) > frames_indent
                continue  # source text and caret lines under a frame
            if not cur.frames and s.startswith("(") and s.endswith(")") and len(s) < 200:
                cur.notes.append(s.strip("()"))  # better_exchook's aside under the header: "(Exclude vars ...)"
                continue
            if s.startswith("[Previous line repeated"):
                cur.notes.append(s.strip("[]"))
                continue
            if _MP_CHILD.match(s):
                # a multiprocessing child's line before its own traceback, printed into the same
                # terminal between this traceback's lines (a parent and its child interrupted at once)
                messages.append(s)
                continue
            if s in ("...", "\u2026", "[...]"):  # the paster's elision of frames, no exception line
                if "frames left out of the paste (...)" not in cur.notes:
                    cur.notes.append("frames left out of the paste (...)")
                continue
            if not s:
                continue
            if (_looks_like_log(raw.strip()) and not _exception_line(s) and cur.frames
                    and "Python traceback" not in cur.notes):
                # frames with no "Traceback" header, then the next log record, no exception line: a
                # stack a logger printed (format_stack, a watchdog's dump), its innermost frame where
                # the thread stood (a headed traceback cut before its exception keeps the old reading)
                cur.notes[:] = [LOGGED_STACK if n.startswith("Python traceback") else n for n in cur.notes]
                state = "log"
                heading = s.endswith(":")
                messages.append(s)
                continue
            if gap and indent_of(line) <= max(frames_indent, 0) and (
                    not _EXCEPTION.match(s) or cur.notes[:1] == [LOGGED_STACK]):
                # prose after a blank line (the sentence under the paste): no exception line,
                # the frames end here as where the text ends
                if cur.notes[:1] == [_HEADLESS]:
                    cur.notes[0] = CUT_STACK
                state = "log"
                messages.append(s)
                continue
            if _exception_line(s) or indent_of(line) <= max(frames_indent, 0):
                state = "exception"
                cur.notes.append("exception: %s" % s)
                messages.append(s)
                continue
        elif state == "exception" and cur is not None:
            if not s:
                state = "log"
                continue
            if s in _CHAIN:
                cur.notes.append("chained: %s" % _CHAIN[s])
                state = "log"
                continue
            last = cur.notes[-1][len("exception: "):]
            if (_exception_line(s) and cur.frames and cur.frames[-1].source is None and "\n" not in last
                    and not _exception_line(last)):
                # a paste that lost its indentation: the line under the innermost frame was its source,
                # this one is the exception (open round 44's backticked fairseq lines)
                cur.frames[-1].source, cur.notes[-1] = last[:300], "exception: %s" % s
                messages[-1:] = [s] if messages and messages[-1] == last else messages[-1:] + [s]
                continue
            if not _exception_line(s) and not s.startswith(("Traceback", "[")) and indent_of(line) == 0 \
                    and len(cur.notes) < 50 and not _looks_like_log(s):
                # A multi-line exception message continues until a blank line.
                cur.notes[-1] += "\n" + s
                messages.append(s)
                continue
            state = "log"
        if s in _CHAIN:
            if blocks:
                blocks[-1].notes.append("chained: %s" % _CHAIN[s])
            continue
        m = _EXC_IN_THREAD.match(s)
        if m:
            pending_name = m.group(1)
            messages.append(s)
            continue
        if s:
            mp_child = bool(_MP_CHILD.match(s))  # multiprocessing's line over a child's uncaught exception
            messages.append(s)
            heading = s.endswith(":") and (_looks_like_log(raw.strip()) or bool(_STACK_HEADING.match(s)))
    if state == "frames" and cur is not None and cur.notes[:1] == [_HEADLESS]:
        # no header and the text ends on frames: neither end says an exception, so the listing reads
        # as a stack dump (format_stack, a thread dumper): its innermost printed frame is where it stood
        cur.notes[0] = CUT_STACK
    for a, b in zip(blocks, blocks[1:]):
        ended = next((n for n in (EXCEPTHOOK_NOTE, MP_CHILD_NOTE) if n in a.notes), None)
        if ended is not None and any(n.startswith("chained: ") for n in a.notes):
            # one thread's chain: its next block is the same thread, ended by the same uncaught exception
            b.name = b.name or a.name
            b.python_name = b.python_name or a.python_name
            if ended not in b.notes:
                b.notes.insert(1, ended)
    for t in blocks:
        if FAILURE_RECORD_NOTE in t.notes and sum(n.startswith("exception: ") for n in t.notes) > 1:
            t.notes.remove(FAILURE_RECORD_NOTE)  # the summary kept the exception's own line: that one
        if t.notes[:1] in ([_HEADLESS], [CUT_STACK]) and printed_innermost_first(t.frames):
            t.notes[0] = INNERMOST_FIRST  # py-bt, pystack, a dumper's listing cut above its header
        else:
            t.frames.reverse()  # innermost first, as every other source
        t.merge = "python-only"
    proc.threads.extend(blocks)
    proc.messages.extend(cap_messages(messages, proc.notes))


INNERMOST_FIRST = ("Python stack printed innermost first (no header in the text; each frame's source "
                   "line calls the frame printed above it)")


#: An annotated assignment (``callback: Call = self._queue.get()``), which reads like ``Name: message``.
_ANNOTATED = re.compile(r"^[a-z_]\w{0,80}: [A-Za-z_][\w.\[\], ]{0,200} = \S")


def _flush_left_source(s: str, lines: List[str], idx: int) -> bool:
    """A line right under a File line of a traceback that lost its indentation (a rendered page's
    copy): the frame's source when it is no exception line and the next line is the next frame's
    File line or the exception line (an exception line ends the frames; nothing follows it there), or
    the text ends there (a chunk cut under the innermost frame: a statement, no exception's line)."""
    if (_EXCEPTION.match(s) and not _ANNOTATED.match(s)) or not (looks_like_statement(s) or _wrapped_source(s)) \
            or not (s[:1].isalnum() or s[:1] in "_([{'\""):
        return False  # (a banner between two stacks, "!!! Segfault encountered !!!", is no source)
    nxt = next((x.strip() for x in lines[idx + 1:] if x.strip() and not x.strip().startswith(("^", "~"))), None)
    if nxt is None:
        return looks_like_statement(s)
    return (nxt.startswith("File ") and parse_py_file_line(nxt) is not None) or _exception_line(nxt)


def _calls(source: Optional[str], function: Optional[str]) -> bool:
    name = (function or "").rsplit(".", 1)[-1]
    if not source or not name or name.startswith("<"):
        return False
    return re.search(r"(?<![\w])%s\s*\(" % re.escape(name), source) is not None


def printed_innermost_first(frames: List[Frame]) -> bool:
    """Whether a listing with no header was printed innermost first: its source lines say the call
    order (a caller's line calls its callee by name).  py-bt, pystack and thread dumpers print the
    innermost frame first, tracebacks last; a paste cut above its header keeps neither word, but
    two or more callers' lines calling the frame printed above them, and none the one below, do."""
    down = up = 0
    for a, b in zip(frames, frames[1:]):
        if (a.function or "") == (b.function or ""):
            continue  # recursion says nothing about the order
        down += _calls(a.source, b.function)
        up += _calls(b.source, a.function)
    return up >= 2 and down == 0


def _headerless_done(block: Thread) -> bool:
    """Whether ``block`` had no header and has ended in its exception line: the next ``File`` line
    opens another block.  Several processes interrupted at once (Ctrl-C over a pool's workers)
    print their tracebacks into one terminal, line by line in turn, so a paste of the middle holds
    one headerless block after another, each ending in its own ``KeyboardInterrupt``."""
    return (bool(block.notes) and block.notes[0].startswith("Python traceback (its header is not in the text")
            and any(n.startswith("exception: ") for n in block.notes))


_CODE_CHARS = re.compile(r"[(),=\[]")
#: ``Fatal Python error: ...``, ``Python runtime state: ...``: a message's words before a colon, no code
_PROSE_HEAD = re.compile(r"^[A-Z]\w*(?: \w+){0,6}: ")


def _wrapped_source(s: str) -> bool:
    """The rest of a frame's source line that a narrow terminal moved to a line of its own, at the
    left margin (``    return`` / ``func(*args, **kwargs)``): code, not an exception's line."""
    return (not _exception_line(s) and not _EXCEPTION.match(s) and bool(_CODE_CHARS.search(s))
            and not _PROSE_HEAD.match(s) and not _looks_like_log(s))


_LOG_START = re.compile(r"^(?:\d{4}-\d\d-\d\d|\[|[IWEF]\d{4} |INFO|WARNING|ERROR|DEBUG|CRITICAL)")


def _looks_like_log(s: str) -> bool:
    return bool(_LOG_START.match(s))
