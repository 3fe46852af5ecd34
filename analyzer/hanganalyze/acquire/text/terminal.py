"""Join the lines a terminal cut at its width again (a copy from a narrow window), before any
format reads them: ``unwrap_terminal`` and the rules of what is a cut piece and what is a line of
its own (``common.clean_and_join`` calls it on the lines as they came, ``parse_text`` again on each
rank's lines).  Linear: each line is looked at a bounded number of times.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

#: Lines longer than this are cut: nothing meaningful in a dump is this long, and it bounds work.
MAX_LINE = 20000

#: Launcher prefixes that tag each line with its rank.  torchrun: ``[rank3]:`` (and
#: ``[default3]:`` with ``--tee``); Open MPI ``--tag-output``: ``[1,3]<stderr>:``.
RANK_PREFIX = re.compile(r"^\[(rank|default)(\d{1,6})\]:\s?|^\[\d{1,6},(\d{1,6})\]<std(?:out|err)>:\s?")
#: Tags a collector puts on every line it passes on (``unwrap.PREFIXES`` takes them off): Ray's worker
#: ``(pid=123)`` / ``(RayWorker pid=123, ip=10.0.0.1)`` / vLLM v1's ``(VllmWorker rank=2 pid=808339)``,
#: srun's task ``0: ``, docker compose's service ``worker-1  | ``, kubectl's ``[pod/trainer-0/main] ``.
RAY_TAG = re.compile(r"^\((?:[\w:.=\-]{1,80} ){0,3}pid=\d{1,10}(?:, ip=[\w.:\-]{1,60})?\)(?: |$)")
SRUN_TAG = re.compile(r"^ {0,4}\d{1,5}:(?: |$)")
COMPOSE_TAG = re.compile(r"^[\w.\-]{1,100} {0,40}\|(?: |$)")
KUBECTL_TAG = re.compile(r"^\[pod/[\w.\-/]{1,200}\](?: |$)|^pod/[\w.\-]{1,200} ")
_TAGS = (RANK_PREFIX, RAY_TAG, SRUN_TAG, COMPOSE_TAG, KUBECTL_TAG)


#: A line that starts one of these is a new record, never the tail of a wrapped line.
_RECORD_START = re.compile(
    r"^(?:#\d|Thread |Current thread |Traceback |Process |\[(?:rank|default)\d|\s*File \"|\s*\((?:Python|C)\) "
    r"|\s*(?:\* )?(?:frame|thread) #|\s*frame_#_|\s*@ |~~~|Stack (?:dump for|of) |Exception raised from "
    r"|\d{1,10} +0x[0-9a-fA-F]{1,16} "  # a ``python -m asyncio ps`` row (tid, task id)
    # a WinDbg ``k`` row (frame number, Child-SP / ChildEBP, RetAddr, ``kb``'s arguments, the call site)
    r"|(?:[0-9a-fA-F]{2,4} )?(?:[0-9a-fA-F]{8}`?(?:[0-9a-fA-F]{8})? ){2,6}[\w.\-]{1,200}!"
    r"|\[(?:Current thread is|New Thread|New LWP|Thread 0x|Inferior )|\(gdb\) "  # gdb's own remarks, its prompt
    # a Go goroutine dump's header and its call lines (``runtime.gopark(0x1?, ...)``, ``sync.(*Mutex).Lock(...)``)
    r"|goroutine \d{1,12} \[|[a-z][\w./-]{0,200}\.(?:\(\*?\w{1,100}\)\.)?\w{1,200}\((?:[^()]{0,400}|\.\.\.)\)$"
    # cuda-gdb's ``info cuda threads``: its kernel line and its rows (block, thread), all as wide as its header
    r"|Kernel \d{1,9}\s*$|\*?\s*\(\d{1,6},\d{1,6},\d{1,6}\)\s+\(\d{1,6},\d{1,6},\d{1,6}\)\s"
    # a timestamped log record (glog / abseil "E0118 11:40:08.99", ISO "2024-02-27 15:56:22"): records
    # of one fixed format and message are all one length, which is no terminal's wrap
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d[ T]\d\d:\d\d"
    # a line of a box (rich's traceback panels): every line of a box is the box's width by design
    # (a box's right edge alone is the tail of a box line a terminal cut)
    r"|\s*[│╭╰](?!\s*$))"
)


def terminal_width(lines: List[str]) -> Optional[int]:
    """The width a terminal hard-wrapped this text at, or None when it does not look wrapped.

    A copy from a terminal cuts every long line at exactly the window width W: no line is longer,
    and several are exactly W characters long.
    """
    return _width([len(line) for line in lines], lines)


def _width(lengths: List[int], lines: List[str]) -> Optional[int]:
    """The longest length when at least three lines have it: three different lines, or any three
    at a usual terminal width.  The same line printed again (one frame in several processes'
    interleaved tracebacks) is one line, not three cuts, at an odd width; at 80 or 120 the cuts of
    lines that share a start (one long path) are alike and still the terminal's."""
    longest = max(lengths, default=0)
    if longest < 60:
        return None
    full = [line for n, line in zip(lengths, lines) if n == longest]
    if len(full) < 3 or (longest not in _USUAL_WIDTHS and len(set(full)) < 3):
        return None
    return longest


#: The characters a per-line wrapper ends with (``0: ``, ``worker-1 | ``, ``INFO:root:``, ``(pid=1) ``).
_WRAPPER_END = frozenset(":|]>)`")


_DIGITS = str.maketrans("123456789", "000000000")
_NUMBERED = re.compile(r"^ *0+ ")


def _same_wrapper(record: str, line: str) -> bool:
    """Whether ``line`` starts as ``record`` does (digits aside: ``12 `` and ``13 ``), up to and past
    a wrapper's end character or a line number's blank (``0: `` on both): a new record under a
    prefix every line carries, not the rest of the one above.  A terminal's cut falls anywhere, so
    a piece beginning like its record's first characters is rare."""
    a, b = record[:200].translate(_DIGITS), line[:200].translate(_DIGITS)
    n = 0
    limit = min(len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    head = a[:n]
    if head == "`":  # each line in backticks (a lone "`" is the closing one of the line above)
        return b.strip() != "`"
    if n == len(b) and not b.strip(" 0"):  # a numbered blank line ("18") under "17 text"
        return n >= 1
    return n >= 2 and bool(head.strip()) and (any(c in _WRAPPER_END for c in head) or bool(_NUMBERED.match(head)))


#: The widths terminals are opened at: a text whose longest lines are one of them may be cut there
#: even when only one or two lines were long enough to be cut.
_USUAL_WIDTHS = frozenset((80, 100, 120, 132, 160, 200))


def _mid_word(line: str, glue: str, piece: str) -> bool:
    """Whether the cut between ``line`` and ``piece`` falls inside a word or a path (``<_io.Buffer``
    + ``edWriter``, ``name='<stdout`` + ``>'>``), right after a blank the terminal kept (``at
    interpreter `` + ``shutdown``; ``+ 10  `` + ``[0x7fff5ffe8866]``; inside a run of blanks:
    ``thread_pool.cc:254]      `` + ``Waiting for...``) or right before it (``at
    interpreter`` + `` shutdown``), or
    inside brackets the piece closes (``block=<`` + ``optimized out>) at x.c:89``): a program's own
    word wrap at the same width cuts between words and keeps no blank, a line of its own starts
    with a capital (``Python v3.11.7``) where a cut word seldom goes on with one, and an indented
    line of its own with more than one blank."""
    if not line or not piece:
        return False
    if _closes(line, piece):
        return True
    if piece[:1] == " " and piece[1:2].islower() and not glue:
        return _wordish(line[-1]) or line[-1] in ")]}>'\"`"  # after a word, or a closing bracket or quote
    if len(glue) >= 2 and piece[0] not in " \t":
        return True  # cut inside a run of blanks (a column's padding, glog's): the next column goes on
    if piece[0].isupper() or piece[0] in " \t":
        return False
    if glue:  # the line was filled with blanks to the width: a lower-case word or one bracketed token goes on
        return piece[0].islower() or (piece[0] in "[(<" and " " not in piece)
    if line[-1] == ":" and piece[0].isdigit() and piece[:2] != "0x":
        return True  # a file:line cut after its colon ("team.c:" + "122")
    return _wordish(line[-1]) and (_wordish(piece[0]) or piece[0] in ">)]}'\",;:`")


def _wordish(c: str) -> bool:
    return c.isalnum() or c in "_./-"


_PAIRS = (("(", ")"), ("<", ">"), ("[", "]"), ("{", "}"))


def _closes(line: str, piece: str) -> bool:
    """Whether ``line`` leaves a bracket open and the first bracket of ``piece`` closes it."""
    for o, c in _PAIRS:
        if line.count(o) > line.count(c):
            i, j = piece.find(c), piece.find(o)
            if i >= 0 and (j < 0 or i < j):
                return True
    return False


#: A traceback's whole ``File "path", line N, in func`` line: the indented line under it is its source, never
#: the rest of a cut line (open round 49's Windows paths, one line exactly the width long).
_WHOLE_FILE_LINE = re.compile(r'^\s*File "[^"]{1,2000}", line \d{1,9}, in [\w<>.]{1,300}$')


def unwrap_terminal(lines: List[str], shape: Optional[List[Tuple[int, str]]] = None) -> List[str]:
    """Join the pieces of lines that a terminal cut at its width (copy-paste from a narrow window).

    Pieces are joined as they were cut (mid-word), so ``../sysdeps/np`` + ``tl/futex.h:146``
    gives back the path.  A piece that starts a new record (``#3``, ``Thread ...``) is never joined.
    ``shape``: each line's length and trailing blanks as it came (``clean_and_join``), so that a
    piece cut after a blank counts as full and keeps its blank.  A line and a piece that both end
    in `` \\`` carry a shell's continuation on every line: each is a line of its own (a cut piece
    ends where the width falls, seldom in a blank and a backslash).  With fewer than three full lines,
    at a usual terminal width only, a piece is joined only when the cut falls inside a word (an
    indented line, or a program's own word wrap at that width, is a line of its own).
    """
    if shape is None or len(shape) != len(lines):
        shape = [(len(x), "") for x in lines]
    width = _width([n for n, _ in shape], lines)
    full = [(n, trail) for (n, trail), x in zip(shape, lines) if x.strip()]
    if width is not None and full and all(n == width and trail for n, trail in full[:-1]) and (
            len(full) > 2 or full[-1][0] == width):
        # every line filled with blanks to one width (a screen's copy): none was cut; the last one may
        # have lost its blanks where the copy ended (open round 56's UCX backtrace)
        return lines
    weak = False
    if width is None:
        longest = max((n for n, _ in shape), default=0)
        if longest not in _USUAL_WIDTHS and longest - _tag_len(lines, shape, longest) not in _USUAL_WIDTHS:
            return lines
        width, weak = longest, True
    out: List[str] = []
    glue: Optional[str] = None  # the blanks the line above ended with, when it was cut at the width
    tags_cut = _tags_cut(lines, shape, width)
    for line, (n, trail) in zip(lines, shape):
        tagged = _same_tag(out[-1], line) if glue is not None else None
        above, piece = (out[-1] if out else "", line) if tagged is None else (out[-1][tagged[0]:], line[tagged[1]:])
        if (glue is not None and piece.strip() and not _RECORD_START.match(piece) and len(out[-1]) < MAX_LINE
                and not (tagged is not None and tags_cut)
                and not _same_wrapper(above, piece)
                and not (out[-1].endswith(" \\") and line.endswith(" \\"))
                and not ((piece[:1].isspace() or looks_like_statement(piece)) and _WHOLE_FILE_LINE.match(above))
                and not (weak and not _mid_word(above, glue, piece))):
            out[-1] += glue + piece
        else:
            out.append(line)
        glue = trail if n == width else None
    return out


def _tags_cut(lines: List[str], shape: List[Tuple[int, str]], width: int) -> bool:
    """Whether the terminal cut lines a collector had already tagged (``srun``'s output in a narrow
    window: the pieces carry no tag), not pieces it tagged one by one: more full tagged lines go on
    on a line without a tag than on one with the same tag.  Then a line under the same tag is the
    collector's next line, never a piece (a tagged line exactly the width long and the next one)."""
    untagged = same = 0
    for i in range(len(lines) - 1):
        nxt = lines[i + 1]
        if shape[i][0] != width or not nxt.strip() or not any(rx.match(lines[i]) for rx in _TAGS):
            continue
        if _same_tag(lines[i], nxt) is not None:
            same += 1
        elif not any(rx.match(nxt) for rx in _TAGS):
            untagged += 1
    return untagged > same


def _tag_len(lines: List[str], shape: List[Tuple[int, str]], longest: int) -> int:
    """The length of the tag (``_TAGS``) on the first line ``longest`` long, 0 when none: a line cut
    at a usual width and then tagged is that width and its tag long."""
    for line, (n, _) in zip(lines, shape):
        if n == longest:
            m = next((m for m in (rx.match(line) for rx in _TAGS) if m), None)
            return m.end() if m else 0
    return 0


def _same_tag(line: str, piece: str) -> Optional[Tuple[int, int]]:
    """The lengths of the tag ``line`` and ``piece`` both start with (``[rank0]: ``, srun's ``0: ``,
    ``worker-1  | ``...), else None: output cut at a width and then tagged line by line (rich's
    console wraps at 80 columns when it writes to a pipe, and the launcher tags each piece) is
    judged here without its tags, where each line's trailing blanks are still known, as an
    untagged cut is (a wrapper inside the tag, each line in backticks, still says a new line)."""
    for rx in _TAGS:
        a = rx.match(line)
        if a:
            b = rx.match(piece)
            return (a.end(), b.end()) if b and a.group(0).rstrip() == b.group(0).rstrip() else None
    return None


#: A Python statement's start: a keyword, or a name called, indexed or assigned.
_PY_STMT = re.compile(r"^(?:(?:with|for|while|if|elif|return|yield|await|raise|async|assert|del|import|from|lambda|"
                      r"not|print)\b|[A-Za-z_][\w.]*\s*(?:\(|\[|=|\+=|-=)|[a-z_]\w*: [A-Za-z_][\w.\[\], ]* = )")


def looks_like_statement(s: str) -> bool:
    """A line that reads as a frame's source statement (``with self._lock:``, ``task = get()``): a
    paste that lost its indentation leaves a frame's source flush left, where only its look tells it
    from the next line of the log (a banner, a record, an exception's line are none)."""
    return bool(_PY_STMT.match(s)) and (s[:1].isalnum() or s[:1] == "_")

