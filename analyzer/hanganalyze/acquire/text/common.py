"""Helpers shared by the text parsers: cleaning pasted text, splitting it per process, frames.

Pasted text arrives in every state a terminal, a log collector or a chat window leaves it in:
ANSI colours, CRLF, NUL bytes, lines prefixed by a launcher (``[rank3]:``), lines wrapped at
the terminal width.  Cleaning happens once here so that each format parser sees plain lines.

Every regular expression in this package is anchored and free of nested quantifiers over the
same characters, so matching is linear in the line length: a megabyte of hostile text must
parse in well under a second.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from hanganalyze.acquire.ranks import rank_from_name
from hanganalyze.cnames import last_group_start
from hanganalyze_gdbext.model import Frame

#: CSI sequences (colours, cursor moves) and OSC sequences (terminal titles, hyperlinks).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
#: Control characters other than tab and newline (NUL from binary junk, backspaces, bells).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

#: Launcher prefixes that tag each line with its rank.  torchrun: ``[rank3]:`` (and
#: ``[default3]:`` with ``--tee``); Open MPI ``--tag-output``: ``[1,3]<stderr>:``.
_RANK_PREFIX = re.compile(r"^\[(rank|default)(\d{1,6})\]:\s?|^\[\d{1,6},(\d{1,6})\]<std(?:out|err)>:\s?")
#: A rank's line glued to the end of a progress bar: tqdm redraws its bar with a carriage return
#: and no newline, so the next line another rank writes lands on the bar's line.
_GLUED_RANK = re.compile(r"(?<=it/s\]|s/it\])\[(?:rank|default)\d{1,6}\]:")

#: Lines longer than this are cut: nothing meaningful in a dump is this long, and it bounds work.
MAX_LINE = 20000


#: Zero-width characters (and GitHub's ``&#8203;``, which it puts after a ``#`` so that ``#3`` is no
#: issue link) that a copy from a web page leaves inside ``frame #3``.
_ZERO_WIDTH = re.compile(r"[\u200b\u200c\u200d\u2060\ufeff]|&#8203;|&#x200[bB];")


#: The HTML entities a copy of a rendered page's source leaves in a dump (``&lt;module&gt;``,
#: ``File &quot;x.py&quot;``), decoded in one pass (``&amp;lt;`` gives ``&lt;``, as a browser shows it).
_ENTITY = re.compile(r"&(?:lt|gt|amp|quot|apos|nbsp|#39|#x27|#34|#60|#62);")
_ENTITIES = {"&lt;": "<", "&gt;": ">", "&amp;": "&", "&quot;": '"', "&apos;": "'", "&nbsp;": " ",
             "&#39;": "'", "&#x27;": "'", "&#34;": '"', "&#60;": "<", "&#62;": ">"}
#: Spaces a web page or a word processor puts for plain ones (no-break, figure, narrow no-break):
#: an indentation of them is indentation, which py-spy's and traceback's layouts read.
_ODD_SPACES = str.maketrans({"\u00a0": " ", "\u2007": " ", "\u202f": " "})


def clean_lines(text: str) -> List[str]:
    """Text -> lines without ANSI escapes, carriage returns, control characters, zero-width
    characters, HTML entities, no-break spaces, a terminal multiplexer's scroll position or
    trailing blanks, and without the wrapping a chat or an issue added (see ``strip_wrappers``)."""
    return _clean(text)[0]


def clean_and_join(text: str) -> List[str]:
    """``clean_lines``, then the lines a terminal cut at its width joined again (``unwrap_terminal``),
    judged on the lines as they came: a cut piece ending in a blank is still the width long."""
    lines, shape = _clean(text)
    return unwrap_terminal(lines, shape)


def _clean(text: str) -> Tuple[List[str], Optional[List[Tuple[int, str]]]]:
    """``clean_lines``'s lines, and each one's (length, trailing blanks) as it came, when the
    lines are still one for one (no pager prompt joined two)."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    if "&#" in text or any(c in text for c in "\u200b\u200c\u200d\u2060\ufeff"):
        text = _ZERO_WIDTH.sub("", text)
    if "&" in text:
        text = _ENTITY.sub(lambda m: _ENTITIES[m.group(0)], text)
    text = text.translate(_ODD_SPACES)
    raw = text.split("\n")
    lines = strip_wrappers([strip_scroll_marker(line[:MAX_LINE].rstrip()) for line in raw])
    if "--Type <RET> for more" in text:
        return _join_pager_prompts(lines), None
    return lines, [(len(x), x[len(x.rstrip()):]) for x in raw]


_PAGER = "--Type <RET> for more, q to quit, c to continue without paging--"


def _join_pager_prompts(lines: List[str]) -> List[str]:
    """gdb's pager prompt in the middle of a line (``... private=--Type <RET> for more, q to quit,
    c to continue without paging--`` / ``private@entry=0) at x.c:139``): the line goes on below the
    prompt, so the prompt goes and the two pieces are one line again."""
    out: List[str] = []
    join: Optional[str] = None  # the indentation of the line the prompt cut, when the next line continues it
    for line in lines:
        if join is not None:
            if join and line.startswith(join):  # an indent the whole paste carries (prose kept it)
                line = line[len(join):]
            out[-1] += line if len(out[-1]) < MAX_LINE else ""
            join = None
        else:
            out.append(line)
        i = out[-1].find(_PAGER)
        if i >= 0:
            rest = out[-1][i + len(_PAGER):]
            out[-1] = out[-1][:i] + rest
            if i > 0 and not rest.strip():
                join = out[-1][: len(out[-1]) - len(out[-1].lstrip(" \t"))]
    return out


def strip_scroll_marker(line: str) -> str:
    """tmux's / screen's copy-mode position (``   [390/7275]``) copied at the right edge of a line."""
    if not line.endswith("]"):
        return line
    i = line.rfind("[")
    a, sep, b = line[i + 1:-1].partition("/")
    if i > 2 and sep and a.isdigit() and b.isdigit() and len(a) + len(b) <= 14 and line[i - 2:i] == "  ":
        return line[:i].rstrip()
    return line


#: Markdown fences (```text, ~~~) and the HTML tags GitHub issues fold dumps in.
_FENCE = re.compile(r"^(?:`{3,}|~{3,})[\w+.-]{0,40}$")
#: Tags with at most a few plain attributes (``<details open>``, ``<pre lang="text">``): never
#: ``<code object at 0x..>`` or ``<module>``, which dumps print themselves.
_HTML_TAG = re.compile(
    r'</?(?:details|summary|p|pre|code|br|blockquote|b|i|em|strong|tt)(?: [\w-]{1,20}(?:="[^"<>]{0,100}")?){0,5} ?/?>',
    re.IGNORECASE,
)
_HTML_LINE_START = ("<details", "</details", "<summary", "</summary", "<p>", "</p>", "<p ", "<pre>", "<pre ",
                    "</pre>", "<code>", "</code>", "<br", "<blockquote", "</blockquote")
#: ``> `` quote markers, nested ones too (``> > ``), after at most 3 spaces.
_QUOTE = re.compile(r"^ {0,3}(?:> ?){1,20}")


def _unwrap_line(line: str) -> str:
    s = line.strip()
    if s.startswith(("```", "~~~")) and _FENCE.match(s):
        return ""
    if s.startswith("<") and s.lower().startswith(_HTML_LINE_START):
        low = s.lower()
        if low.startswith(("<details", "<summary", "</details", "</summary")) and "</summary>" in low:
            return ""  # "<details><summary>the title</summary>": the title is no part of the dump
        rest = _HTML_TAG.sub("", line)
        return rest if rest.strip() else ""
    return line


def strip_wrappers(lines: List[str]) -> List[str]:
    """Undo what a chat window or an issue template did to a pasted dump.

    * ``> `` quote prefixes, when at least half of the non-blank lines carry one (an email or
      GitHub quote of the dump; pytest's few ``>`` source lines do not qualify);
    * Markdown fences and ``<details>`` / ``<summary>`` / ``<p>`` / ``<pre>`` lines;
    * an indentation shared by every non-blank line (a Markdown code block indented by 4 spaces,
      a chat client's indent), so that each format sees its own indentation again.

    Linear: each line is looked at a bounded number of times.
    """
    nonblank = [line for line in lines if line.strip()]
    if not nonblank:
        return lines
    lines = strip_quotes(lines) or lines
    if any(("```" in line or "~~~" in line or "<" in line) for line in nonblank):
        lines = [_unwrap_line(line) if ("`" in line or "~" in line or "<" in line) else line for line in lines]
    return dedent(lines)


def strip_quotes(lines: List[str]) -> Optional[List[str]]:
    """The lines without their ``> `` quote markers when at least half of the non-blank lines
    carry one (pytest's few ``>`` source lines do not qualify); None when they do not.  As many
    levels go as every quoted line has: a ``>`` the dump printed itself (gdb's ``py-list`` marks
    the current line ``>339``) stays under the quote's own."""
    nonblank = [line for line in lines if line.strip()]
    quoted = sum(1 for line in nonblank if line.lstrip(" ")[:1] == ">")
    if not nonblank or quoted * 2 < len(nonblank):
        return None
    found = [_QUOTE.match(line) for line in lines]
    depth = min(m.group(0).count(">") for m in found if m)
    out = []
    for line, m in zip(lines, found):
        if m is None:
            out.append(line)
            continue
        end = m.start()
        for _ in range(depth):
            end = line.index(">", end) + 1
            if line[end:end + 1] == " ":
                end += 1
        out.append(line[end:])
    return out


def dedent(lines: List[str]) -> List[str]:
    """Remove the leading whitespace every non-blank line shares (none when one line has none)."""
    prefix: Optional[str] = None
    for line in lines:
        if not line.strip():
            continue
        lead = line[: len(line) - len(line.lstrip(" \t"))]
        if not lead:
            return lines
        if prefix is None:
            prefix = lead
        elif not lead.startswith(prefix):
            n = 0
            limit = min(len(prefix), len(lead))
            while n < limit and prefix[n] == lead[n]:
                n += 1
            prefix = prefix[:n]
            if not prefix:
                return lines
    if not prefix:
        return lines
    n = len(prefix)
    return [line[n:] if line.startswith(prefix) else line.lstrip(" \t") for line in lines]


@dataclass
class Segment:
    """The lines of one process: from one launcher prefix, or one ``Process N:`` section."""

    lines: List[str] = field(default_factory=list)
    label: Optional[str] = None
    pid: Optional[int] = None


def split_ranks(lines: List[str]) -> List[Segment]:
    """Group launcher-prefixed lines by rank; untagged lines form their own segment (first).

    Returns one untagged segment when no line carries a prefix.
    """
    by_label: Dict[str, Segment] = {}
    untagged = Segment()
    for line in lines:
        m = _RANK_PREFIX.match(line)
        if not m and "]:" in line:
            g = _GLUED_RANK.search(line)
            if g:
                untagged.lines.append(line[:g.start()])
                line = line[g.start():]
                m = _RANK_PREFIX.match(line)
        if not m:
            untagged.lines.append(line)
            continue
        label = "rank%s" % (m.group(2) if m.group(2) is not None else m.group(3))
        seg = by_label.get(label)
        if seg is None:
            seg = by_label[label] = Segment(label=label)
        seg.lines.append(line[m.end():])
    if not by_label:
        return [untagged]
    ranked = sorted(by_label.values(), key=lambda s: int(s.label[4:]))  # type: ignore[index]
    if any(line.strip() for line in untagged.lines):
        return [untagged] + ranked
    return ranked


#: ``Process 1234: python train.py`` (py-spy), ``Process 1234:`` (hand-written separators),
#: ``==> pid 1234 <==``-like separators are not guessed at.
_PROCESS_HEADER = re.compile(r"^\s{0,4}Process (\d{1,10})(?::|\s*$)")


#: ``tail -n +1 rank0.txt rank1.txt`` / ``head`` of several files: ``==> rank0.txt <==``.
_FILE_HEADER = re.compile(r"^==> (.{1,300}) <==$")
def _file_label(name: str) -> str:
    """``rankN`` when the file's name says its rank (``ranks.rank_from_name``, the one rule)."""
    r = rank_from_name(name)
    return "rank%d" % r if r is not None else name.rsplit("/", 1)[-1]


#: ``ray stack``: ``Stack dump for USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND`` (a
#: ``ps aux`` line) above each worker's py-spy dump.
STACK_DUMP_FOR = "Stack dump for "


def stack_dump_header(line: str) -> Optional[Tuple[int, List[str]]]:
    """(pid, command words) of a ``ray stack`` header line, else None."""
    s = line.strip()
    if not s.startswith(STACK_DUMP_FOR):
        return None
    words = s[len(STACK_DUMP_FOR):].split()
    if len(words) < 2 or not words[1].isdigit() or len(words[1]) > 10:
        return None
    return int(words[1]), words[10:]


def _prose_only(lines: List[str]) -> bool:
    """Lines above a first header that hold no dump: a shell prompt, a sentence (nothing indented)."""
    return all(not x.strip() or (x[:1] not in (" ", "\t") and not x.startswith("Thread ")) for x in lines)


def split_processes(seg: Segment) -> List[Segment]:
    """Split a segment at ``Process N:`` header lines (one segment per pid), at the
    ``==> FILE <==`` lines with which ``tail``/``head`` separate files (labelled by file), and at
    ``ray stack``'s ``Stack dump for ...`` lines (the ``Process N:`` line py-spy prints under
    one of those names the same process: no second split)."""
    out: List[Segment] = []
    cur = Segment(label=seg.label, pid=seg.pid)
    ray_pid: Optional[int] = None  # the pid of the ``Stack dump for`` line that opened ``cur``
    leading = True  # ``cur`` holds the lines above the first header
    for line in seg.lines:
        m = _PROCESS_HEADER.match(line)
        if m and ray_pid is not None and to_int(m.group(1)) == ray_pid:
            ray_pid = None
            cur.lines.append(line)
            continue
        f = _FILE_HEADER.match(line) if m is None and line.startswith("==> ") else None
        sd = stack_dump_header(line) if m is None and f is None and "Stack dump for " in line[:40] else None
        if sd is not None and leading and cur.pid is None and _prose_only(cur.lines):
            # "$ ray stack" (or a sentence) above the first dump: part of that dump's paste
            cur.pid, ray_pid, leading = sd[0], sd[0], False
            cur.lines.append(line)
            continue
        if m or f or sd is not None:
            leading = False
            if any(x.strip() for x in cur.lines) or cur.pid is not None:
                out.append(cur)
            if m:
                cur = Segment(label=cur.label, pid=int(m.group(1)))  # keeps a file's label
                ray_pid = None
            elif sd is not None:
                cur = Segment(label=cur.label, pid=sd[0])
                ray_pid = sd[0]
            else:
                cur = Segment(label=_file_label(f.group(1)), pid=None)
                ray_pid = None
                continue
        cur.lines.append(line)
    out.append(cur)
    # Lines before the first header (if any) that hold nothing stay out.
    return [s for s in out if any(x.strip() for x in s.lines)] or [seg]


def to_int(s: Optional[str], base: int = 10) -> Optional[int]:
    if s is None:
        return None
    try:
        return int(s, base)
    except ValueError:
        return None


def python_frame(function: Optional[str], file: Optional[str], line: Optional[int]) -> Frame:
    """A Python frame as every parser here builds it (``<module>`` etc. kept as printed)."""
    return Frame(kind="python", function=function or None, file=file or None, line=line)


def unknown_function(name: Optional[str]) -> Optional[str]:
    """gdb, py-spy and pystack print ``??`` (or nothing) for a pc without a symbol.

    The snapshot model says "unknown" with ``None`` (that is what gdbext writes for a core), so a
    signature written for ``?? () from libcuda.so.1`` matches pasted text and cores alike by
    checking ``function is None`` together with the library.
    """
    if name is None:
        return None
    name = name.strip()
    if not name or name in ("??", "???", "<unknown>", "[unknown]", "unknown"):
        return None
    return name


def split_call(text: str) -> Tuple[str, Optional[str]]:
    """Split ``name (args)`` at its last top-level parenthesised group: (name, args).

    C++ names carry their own parameter lists (``std::terminate() ()``): only the final
    balanced group is the argument list.  Walks back once from the end, so it is linear.
    """
    text = text.rstrip()
    i = last_group_start(text)
    if i is None:
        return text, None
    name = text[:i].rstrip()
    if not name:
        return text, None
    return name, text[i:]


def balanced(text: str) -> bool:
    """True when every '(' has its ')': a gdb frame line cut by the terminal is not."""
    return text.count("(") <= text.count(")")


#: ``File "path", line N, in func`` (tracebacks, py-bt, pystack) and ``File "path", line N in
#: func`` (faulthandler: no comma).  Applied to a stripped line with ``match``: one start only.
PY_FILE_LINE = re.compile(r'^File "(.*)", line (\d{1,9})(,?) in (.+)$')


def parse_py_file_line(s: str) -> Optional[Tuple[Frame, bool]]:
    """A stripped ``File ...`` line -> (Python frame, had_comma); None when it is not one."""
    if not s.startswith("File "):
        return None
    m = PY_FILE_LINE.match(s)
    if not m:
        return None
    return python_frame(m.group(4).strip(), m.group(1), to_int(m.group(2))), bool(m.group(3))


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


#: Message lines kept per process; the rest are summarised in a note (reports stay readable).
MAX_MESSAGES = 10000


def cap_messages(messages: List[str], notes: List[str]) -> List[str]:
    """Keep the first and last halves of a very long log: the start and the end hold the news."""
    if len(messages) <= MAX_MESSAGES:
        return messages
    half = MAX_MESSAGES // 2
    notes.append("%d log lines in the middle of the text were left out" % (len(messages) - 2 * half))
    return messages[:half] + messages[-half:]


#: A line that starts one of these is a new record, never the tail of a wrapped line.
_RECORD_START = re.compile(
    r"^(?:#\d|Thread |Current thread |Traceback |Process |\[(?:rank|default)\d|\s*File \"|\s*\((?:Python|C)\) "
    r"|\s*(?:\* )?(?:frame|thread) #|\s*frame_#_|\s*@ |~~~|Stack (?:dump for|of) |Exception raised from "
    r"|\d{1,10} +0x[0-9a-fA-F]{1,16} "  # a ``python -m asyncio ps`` row (tid, task id)
    # a WinDbg ``k`` row (frame number, Child-SP / ChildEBP, RetAddr, ``kb``'s arguments, the call site)
    r"|(?:[0-9a-fA-F]{2,4} )?(?:[0-9a-fA-F]{8}`?(?:[0-9a-fA-F]{8})? ){2,6}[\w.\-]{1,200}!"
    r"|\[(?:Current thread is|New Thread|New LWP|Thread 0x|Inferior )|\(gdb\) "  # gdb's own remarks, its prompt
    # a timestamped log record (glog / abseil "E0118 11:40:08.99", ISO "2024-02-27 15:56:22"): records
    # of one fixed format and message are all one length, which is no terminal's wrap
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d[ T]\d\d:\d\d"
    # a line of a box (rich's traceback panels): every line of a box is the box's width by design
    r"|\s*[│╭╰])"
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
    if head == "`":  # each line in backticks
        return True
    if n == len(b) and not b.strip(" 0"):  # a numbered blank line ("18") under "17 text"
        return n >= 1
    return n >= 2 and bool(head.strip()) and (any(c in _WRAPPER_END for c in head) or bool(_NUMBERED.match(head)))


#: The widths terminals are opened at: a text whose longest lines are one of them may be cut there
#: even when only one or two lines were long enough to be cut.
_USUAL_WIDTHS = frozenset((80, 100, 120, 132, 160, 200))


def _mid_word(line: str, glue: str, piece: str) -> bool:
    """Whether the cut between ``line`` and ``piece`` falls inside a word or a path (``<_io.Buffer``
    + ``edWriter``, ``name='<stdout`` + ``>'>``), right after a blank the terminal kept (``at
    interpreter `` + ``shutdown``) or right before it (``at interpreter`` + `` shutdown``), or
    inside brackets the piece closes (``block=<`` + ``optimized out>) at x.c:89``): a program's own
    word wrap at the same width cuts between words and keeps no blank, a line of its own starts
    with a capital (``Python v3.11.7``) where a cut word seldom goes on with one, and an indented
    line of its own with more than one blank."""
    if not line or not piece:
        return False
    if _closes(line, piece):
        return True
    if piece[:1] == " " and piece[1:2].islower() and not glue:
        return _wordish(line[-1])
    if piece[0].isupper() or piece[0] in " \t":
        return False
    if glue:
        return piece[0].islower()
    return _wordish(line[-1]) and (_wordish(piece[0]) or piece[0] in ">)]}'\",;:")


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
    weak = False
    if width is None:
        longest = max((n for n, _ in shape), default=0)
        if longest not in _USUAL_WIDTHS:
            return lines
        width, weak = longest, True
    out: List[str] = []
    glue: Optional[str] = None  # the blanks the line above ended with, when it was cut at the width
    for line, (n, trail) in zip(lines, shape):
        if (glue is not None and line.strip() and not _RECORD_START.match(line) and len(out[-1]) < MAX_LINE
                and not _same_wrapper(out[-1], line) and not (out[-1].endswith(" \\") and line.endswith(" \\"))
                and not (weak and not _mid_word(out[-1], glue, line))):
            out[-1] += glue + line
        else:
            out.append(line)
        glue = trail if n == width else None
    return out
