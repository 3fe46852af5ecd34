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
from typing import Callable, Dict, List, Optional, Tuple

from hanganalyze.acquire.ranks import rank_from_name
from hanganalyze.acquire.text.gutter import strip_gutter
from hanganalyze.cnames import last_group_start
from hanganalyze_gdbext.model import Frame

from .terminal import MAX_LINE, RANK_PREFIX, looks_like_statement, terminal_width, unwrap_terminal  # noqa: F401

__all__ = ["MAX_LINE", "terminal_width", "unwrap_terminal"]  # read from here by other modules and tests

#: CSI sequences (colours, cursor moves) and OSC sequences (terminal titles, hyperlinks).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
#: Colour codes a copy kept without their ESC byte (a Jupyter traceback copied from a rendered page;
#: Windows' console shows the ESC as ``←``): ``[0;31m``, ``[1m``; read only where the reset ``[0m``
#: is there at least twice, as no dump prints it.
_BARE_SGR = re.compile(r"←?\[\d{1,3}(?:;\d{1,3}){0,4}m")
#: Control characters other than tab and newline (NUL from binary junk, backspaces, bells).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

#: Launcher prefixes that tag each line with its rank (``terminal.RANK_PREFIX``).
_RANK_PREFIX = RANK_PREFIX
#: A rank's line glued to the end of a progress bar: tqdm redraws its bar with a carriage return
#: and no newline, so the next line another rank writes lands on the bar's line.
_GLUED_RANK = re.compile(r"(?<=it/s\]|s/it\])\[(?:rank|default)\d{1,6}\]:")

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


#: A note a paster wrote beside a line, after two or more blanks: ``frame (file.py:95)    <-- never returns``.
_ARROW_NOTE = re.compile(r"(?<=\S)\s{2,}<-{1,3}(?:\s.*)?$")


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
    if text.count("[0m") >= 2:
        text = _BARE_SGR.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.count("^M\n") * 2 > text.count("\n"):
        text = text.replace("^M\n", "\n")  # a carriage return as ``cat -v`` or less shows it, on most lines
    text = _CONTROL.sub("", text)
    if "&#" in text or any(c in text for c in "\u200b\u200c\u200d\u2060\ufeff"):
        text = _ZERO_WIDTH.sub("", text)
    if "&" in text:
        text = _ENTITY.sub(lambda m: _ENTITIES[m.group(0)], text)
    text = text.translate(_ODD_SPACES)
    if "comment " in text:
        text = _migrated_frame_numbers(text)
    raw = text.split("\n")
    if "<-" in text:
        raw = [_ARROW_NOTE.sub("", x) for x in raw]  # a paster's note beside a frame ("   <-- never returns")
    lines = strip_wrappers([strip_scroll_marker(_lead_tabs(line)[:MAX_LINE].rstrip()) for line in raw])
    if "--Type <RET> for more" in text:
        return _join_pager_prompts(lines), None
    shape = [(len(x), x[len(x.rstrip()):]) for x in raw]
    keep = _single_spaced(lines) if len(lines) == len(shape) else None
    if keep is not None:
        return [lines[i] for i in keep], [shape[i] for i in keep]
    return lines, shape


#: Lines a double-spaced copy must have before it is read as one (a short text proves nothing).
_DOUBLE_MIN = 4


def _single_spaced(lines: List[str]) -> Optional[List[int]]:
    """The lines to keep of a double-spaced copy (a web page, a word processor or a chat that put a
    blank line under every line): one blank line less in every run of them; None for any other
    text.  It is one when no two non-blank lines follow each other and most (3 in 4) are followed
    by exactly one blank: no dump prints that (a gdb argument's wrapped line, a traceback's source
    line would stand apart from their frame)."""
    full = [i for i, x in enumerate(lines) if x.strip()]
    if len(full) < _DOUBLE_MIN or any(b == a + 1 for a, b in zip(full, full[1:])):
        return None
    if sum(1 for a, b in zip(full, full[1:]) if b == a + 2) * 4 < (len(full) - 1) * 3:
        return None
    # a line, or the second and later blanks of a run
    return [i for i, x in enumerate(lines) if x.strip() or (i > 0 and not lines[i - 1].strip())]


#: Google Code's issue export (projects migrated to GitHub in 2015) turned a line's leading ``#N`` into
#: ``comment N.``: gdb's frame numbers in old pastes read ``comment 0.  0x.. in sem_wait () from ...``.
_MIGRATED = re.compile(r"^comment (\d{1,4})\.  (?=0x[0-9a-fA-F]{4,16} in |[\w:~<>]{1,300} \()", re.MULTILINE)


def _migrated_frame_numbers(text: str) -> str:
    """gdb's ``#N`` given back where at least two lines carry the export's ``comment N.`` for it."""
    if len(_MIGRATED.findall(text)) < 2:
        return text
    return _MIGRATED.sub(lambda m: "#%s  " % m.group(1), text)


def _lead_tabs(line: str) -> str:
    """The line with the tabs of its indentation as four spaces each: an editor or a chat that
    indents with tabs keeps the layout the readers compare by width (a gdb argument's wrapped
    line, a traceback's source line under its ``File`` line) only where a tab and the spaces it
    stands for count alike.  Tabs inside the line (a crash report's column) stay."""
    if line[:1] != "\t" and not line.startswith(" \t"):
        return line
    body = line.lstrip(" \t")
    return line[: len(line) - len(body)].expandtabs(4) + body


_PAGER = "--Type <RET> for more, q to quit, c to continue without paging--"
_ZEROS = str.maketrans("123456789", "000000000")  # a prefix's digits aside (a time, a line number)


def _join_pager_prompts(lines: List[str]) -> List[str]:
    """gdb's pager prompt in the middle of a line (``... private=--Type <RET> for more, q to quit,
    c to continue without paging--`` / ``private@entry=0) at x.c:139``): the line goes on below the
    prompt, so the prompt goes and the two pieces are one line again."""
    out: List[str] = []
    join: Optional[str] = None  # the indentation of the line the prompt cut, when the next line continues it
    before = ""  # what stood before that prompt
    for line in lines:
        if join is not None and before.strip() and line.translate(_ZEROS).startswith(before.translate(_ZEROS)):
            out[-1] = line  # the prompt was a line of its own under a prefix every line has ("[rank0]: ", a time)
            join = None
        elif join is not None:
            if join and line.startswith(join):  # an indent the whole paste carries (prose kept it)
                line = line[len(join):]
            out[-1] += line if len(out[-1]) < MAX_LINE else ""
            join = None
        else:
            out.append(line)
        i = out[-1].find(_PAGER)
        if i >= 0:
            rest = out[-1][i + len(_PAGER):]
            before, out[-1] = out[-1][:i], out[-1][:i] + rest
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
#: Jira's wiki markup around a paste: ``{code:python}`` ... ``{code}``, ``{noformat}``, ``{quote}``.
_JIRA = re.compile(r"^\{(?:code|noformat|quote|panel)(?::[^{}\s][^{}]{0,100})?\}$")
#: ``> `` quote markers, nested ones too (``> > ``), after at most 3 spaces.
_QUOTE = re.compile(r"^ {0,3}(?:> ?){1,20}")


#: ``#<span></span>2``: an empty span an issue tracker's migration left inside a line (Trac's and
#: Google Code's issues moved to GitHub: gdb's ``#2`` must not become a Markdown heading or a link).
_EMPTY_SPAN = re.compile(r'<span(?: [\w-]{1,20}(?:="[^"<>]{0,100}")?){0,5}></span>', re.IGNORECASE)


def _unwrap_line(line: str) -> str:
    if "<span" in line or "<SPAN" in line:
        line = _EMPTY_SPAN.sub("", line)
    s = line.strip()
    if (s.startswith(("```", "~~~")) and _FENCE.match(s)) or (s.startswith("{") and _JIRA.match(s)):
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
    * Markdown fences (a chat's too, glued to the first or last line), Jira's ``{code}`` lines and
      ``<details>`` / ``<summary>`` / ``<p>`` / ``<pre>`` lines;
    * a `` : `` / `` | `` margin every non-blank line carries (gutter.py), inside those;
    * an indentation shared by every non-blank line (a Markdown code block indented by 4 spaces,
      a chat client's indent), so that each format sees its own indentation again.

    Linear: each line is looked at a bounded number of times.
    """
    nonblank = [line for line in lines if line.strip()]
    if not nonblank:
        return lines
    lines = strip_quotes(lines) or lines
    if any(("```" in line or "~~~" in line or "<" in line or line.lstrip()[:1] == "{") for line in nonblank):
        if any("```" in line for line in nonblank):
            lines = _glued_fences(lines)
        lines = [_unwrap_line(line) if ("`" in line or "~" in line or "<" in line or "{" in line) else line
                 for line in lines]
    return dedent(strip_gutter(lines) or lines)


def _glued_fences(lines: List[str]) -> List[str]:
    """A chat's code block typed around a paste (Slack, Discord): a fence glued to the paste's first
    line (`````Traceback``) or to its last (``KeyboardInterrupt`````), which no Markdown renderer
    takes as one, goes when it pairs with the fence that closes or opens the same block (a fence on
    its own line goes in ``_unwrap_line``)."""
    out = list(lines)
    opened: Optional[Tuple[int, bool]] = None  # the line that opened a block, and whether glued
    for i, line in enumerate(lines):
        s = line.strip()
        if "```" not in s:
            continue
        alone = bool(_FENCE.match(s))
        if opened is None:
            if alone or (s.startswith("```") and not s.endswith("```")):
                opened = (i, not alone)
            continue
        if not alone and not (s.endswith("```") and not s.startswith("```")):
            continue
        if opened[1]:
            out[opened[0]] = out[opened[0]].replace("```", "", 1)
        if not alone:
            out[i] = out[i][: out[i].rstrip().rfind("```")]
        opened = None
    return out


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
    if not any(found):
        return None  # the markers sit under an indentation deeper than a quote's (a code block's)
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


_CUT_TAG = re.compile(r"^(?:rank|default)\d{1,6}\]:\s")


def split_ranks(lines: List[str]) -> List[Segment]:
    """Group launcher-prefixed lines by rank; untagged lines form their own segment (first).

    Returns one untagged segment when no line carries a prefix.
    """
    by_label: Dict[str, Segment] = {}
    untagged = Segment()
    for i, line in enumerate(lines):
        if i == 0 and line.startswith(("rank", "default")) and _CUT_TAG.match(line):
            line = "[" + line  # a chunk that starts one character into its first tag ("rank1]: Traceback")
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
        seg.lines.append(without_rank_tag(line[m.end():], label))
    if not by_label:
        return [untagged]
    ranked = sorted(by_label.values(), key=lambda s: int(s.label[4:]))  # type: ignore[index]
    if any(line.strip() for line in untagged.lines):
        return [untagged] + ranked
    return ranked


def without_rank_tag(line: str, label: str) -> str:
    """``line`` without a launcher's tag of rank ``label`` at its start: a launcher's log that a
    launcher or a collector tagged again (``[rank0]: [rank0]: Traceback``, under a time between the
    two too) is the rank's log, its lines as the inner launcher wrote them."""
    m = _RANK_PREFIX.match(line) if line[:1] == "[" else None
    if m and "rank%s" % (m.group(2) if m.group(2) is not None else m.group(3)) == label:
        return line[m.end():]
    return line


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


#: ``logging/init.py``: a package's ``__init__.py`` whose underscores Markdown took for bold marks (an
#: issue's paste outside a code block); no package of note names a module ``init.py``.
_MARKDOWN_INIT = re.compile(r"(?<=[/\\])init\.py$")


def python_frame(function: Optional[str], file: Optional[str], line: Optional[int]) -> Frame:
    """A Python frame as every parser here builds it (``<module>`` etc. kept as printed)."""
    if file and file.endswith("init.py") and "__init__" not in file:
        file = _MARKDOWN_INIT.sub("__init__.py", file)
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
#: A web page that took ``<module>`` for an HTML tag leaves ``..., line 106, in`` (open round 69).
PY_FILE_LINE = re.compile(r'^File "(.*)",\s{1,12}line (\d{1,9})(,?)\s{1,12}in(?: (.+))?$')  # (a terminal's spaces)


def parse_py_file_line(s: str) -> Optional[Tuple[Frame, bool]]:
    """A stripped ``File ...`` line -> (Python frame, had_comma); None when it is not one."""
    if not s.startswith("File "):
        return None
    m = PY_FILE_LINE.match(s)
    if not m:
        return None
    func, source = (m.group(4) or "<module>").strip(), None
    if " " in func and func[:1] not in "'\"":  # (ctypes' "in 'calling callback function'" is one name)
        # dask's task call stack joins the frame's source line to its File line: "in run result = f()"
        func, source = func.split(" ", 1)
    frame = python_frame(func, m.group(1), to_int(m.group(2)))
    frame.source = source.strip()[:300] if source else None
    return frame, bool(m.group(3))


def numbered_run(lines: List[str], i: int, count: int, is_row: Callable[[str], bool]) -> bool:
    """Lines ``i`` on (blank lines skipped) are ``count`` rows ``is_row`` accepts, numbered one after
    another by their first word: a stack's rows whose header a paste cut, not a few numbered lines
    that look like rows (maccrash.py, cxxframes.py)."""
    want: Optional[int] = None
    seen = 0
    for j in range(i, len(lines)):  # no slice: it is asked at every numbered line of a long text
        s = lines[j].strip()
        if not s:
            continue
        if not s[:1].isdigit() or not is_row(s):
            return False
        n = int(s.split(" ", 1)[0])
        if want is not None and n != want:
            return False
        want, seen = n + 1, seen + 1
        if seen == count:
            return True
    return False


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

