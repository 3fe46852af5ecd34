"""Undo the wrappers that a paste put on every line, before detection, so every format benefits.

People paste dumps the way their tool showed them: each line in backticks (a chat's inline code),
numbered (an editor, a gist, ``cat -n``), Markdown's escapes kept (``\\!``, ``\\(``), quoted inside
another wrapper, ending in a shell's `` \\``, or prefixed by a log record (``2024-01-01 12:00:00,123
INFO``, GitHub Actions' ``2024-01-01T12:00:00.1234567Z``, journald's ``Jun 06 19:49:06 host prog[123]:``, glog's ``I1128
12:00:00.123456 123 file.cc:12]``, Ray's ``(pid=123)``, vLLM's ``INFO 08-02 18:15:15 file.py:226]``,
Python logging's ``INFO:root:``) or a collector's tag (srun's ``0: ``, docker compose's
``worker-1 | ``, kubectl's ``[pod/x/c] ``).  No parser knows ``File "..."`` after such a prefix.

Conservative on purpose: a wrapper is removed only when at least ``SHARE`` of the non-blank
lines carry the same one (a terminal-wrapped line or a blank may lack it), line numbers only when
they count up one by one (and only the numberer's blank), and ``parse_text`` keeps, of the layers
taken off one inside another (``unwrap_layers``), the one a format scores best: the lines as they
came when none reads better and a record's own prefix would go (``KEPT``: a plain log with
timestamps keeps its timestamps; a macOS crash report keeps its frame numbers).
Quotes (``> ``) and a stack printer's `` : `` margin (``gutter``) are ``common``'s and taken off
here again when they sit inside another wrapper (a margin under a timestamp or in backticks);
indentation, fences and launcher prefixes (``[rank3]:``) are ``common``'s.
Every expression is anchored and linear.
"""

from __future__ import annotations

import re
from typing import Callable, List, Optional, Pattern, Tuple

from hanganalyze.linememo import by_content

from .common import dedent, strip_quotes, strip_scroll_marker
from .gutter import strip_gutter
from .terminal import COMPOSE_TAG, KUBECTL_TAG, RANK_PREFIX, RAY_TAG, SRUN_TAG

#: The share of non-blank lines that must carry a wrapper for it to be removed.
SHARE = 0.8
#: Wrappers removed one inside another at most (a quote around a timestamp around backticks).
MAX_LAYERS = 5

_LEVEL = r"(?:\[?(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL|TRACE|NOTICE)\]?)"

#: An ISO date and time (a bracket around it is taken with it only when it closes right after it:
#: ``[2025-03-09 00:57:15 TP4]`` is sglang's record, no wrapper).
_STAMP = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?"

#: Record prefixes, each up to the start of the message (one space after it at most).
PREFIXES: Tuple[Tuple[str, Pattern[str]], ...] = (
    # 2024-01-01 12:00:00,123 INFO / [2024-01-01T12:00:00.1234567Z] / 2024-01-01 12:00:00 - name - ERROR -
    # (Python logging's "%(asctime)s - %(name)s - %(levelname)s - %(message)s": the logger's name first)
    # (not a level a vLLM record's date follows: "2024-01-01 12:00:00 ERROR 09-06 04:14:11 [core.py:640]"
    # is a collector's time around vLLM's record, whose level stays with it)
    ("timestamp", re.compile(
        r"^(?:\[" + _STAMP + r"\]|" + _STAMP + r")(?: - [\w.\-<>]{1,100}(?= - " + _LEVEL + r" ))?"
        r"(?:(?: -| \|)? " + _LEVEL + r"(?: -| \||:)?(?! \d\d-\d\d \d\d:))?(?: |$)")),
    # Jun 06 19:49:06 host prog[123]:  (journald in another locale too: "déc. 19 02:07:16 host bash[1]:")
    ("syslog", re.compile(
        r"^[^\W\d_]{3,5}\.? [ \d]\d \d\d:\d\d:\d\d [\w.\-]{1,100} [\w.\-/@]{1,100}(?:\[\d{1,10}\])?:(?: |$)")),
    # 28-Jun-2016 08:44:47  (a service's log: a date with the month's name, then the message; Bamboo's
    # build log puts a tab, not a space, between the two)
    ("dated", re.compile(r"^\d\d?-[^\W\d_]{3,5}-\d{4} \d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:[ \t]|$)")),
    # [  192s]  (the Open Build Service's build log: seconds since the build started; open round 47)
    ("elapsed", re.compile(r"^\[ {0,6}\d{1,7}s\] ")),
    # Mon Nov 24 15:03:14 2014 -  (C's ctime() then " - ": uWSGI's log, and others that print ctime)
    ("ctime", re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4} - ")),
    # Aug 20, 2023, 5:54:14 PM | WARNING |  (Colab's runtime log view: its own time, then the level)
    ("colab", re.compile(r"^[A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d\d:\d\d [AP]M \| [A-Z]{3,8} \|(?: |$)")),
    # I1128 12:00:00.123456 123 file.cc:12]
    ("glog", re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d(?:\.\d{1,9})? {1,8}\d{1,10} [\w.\-]{1,200}:\d{1,6}\](?: |$)")),
    # INFO 08-02 18:15:15 file.py:226]  (vLLM)
    # ... and since 2025 with the location in brackets: ERROR 08-03 13:35:33 [multiproc_executor.py:912]
    ("vllm", re.compile(r"^" + _LEVEL + r" \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./\-]{1,200}:\d{1,6}\](?: |$)")),
    # (pid=123) / (RayWorker pid=123, ip=10.0.0.1) / vLLM v1's (VllmWorker rank=2 pid=808339)
    ("ray", RAY_TAG),
    # [10:49:46.311 DataServer ERR]  (a time, the logger's or process's name and a short level in one
    # bracket: qcodes' server processes, open round 55)
    ("bracket-record", re.compile(r"^\[\d\d:\d\d:\d\d(?:[.,]\d{1,9})? [\w.\-]{1,100} "
                                  r"(?:ERR|WRN|WARN|INF|INFO|DBG|DEBUG|ERROR|CRIT|FATAL|TRC)\](?: |$)")),
    # [12:00:00] / 12:00:00.123
    ("time", re.compile(r"^(?:\[\d\d:\d\d:\d\d(?:[.,]\d{1,9})?\]|\d\d:\d\d:\d\d(?:[.,]\d{1,9})?)(?: |$)")),
    # [WARNING/MainProcess] / [2024-01-01 12:00:00,123: ERROR/ForkPoolWorker-3]  (celery's worker log: its
    # stdout and stderr are logged as WARNING records, so a stack printed in a task carries it on every line)
    ("celery", re.compile(r"^\[(?:" + _STAMP + r": )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)/[\w.\-]{1,100}\](?: |$)")),
    # INFO:root:  (Python logging's default format: level, then the logger's name)
    ("logging", re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.\-]{0,100}:")),
    # 0:   (srun --label: the task's number)
    ("srun", SRUN_TAG),
    # worker-1  |   (docker compose: the service's name, padded, and a bar)
    ("compose", COMPOSE_TAG),
    # [pod/trainer-0/main]  (kubectl logs --prefix) / pod/trainer-0
    ("kubectl", KUBECTL_TAG),
    # worker-0 >>   (a multi-node launcher's tag of the host a line came from, after its time: open round 52)
    ("host", re.compile(r"^[\w.\-]{1,100} >> ")),
    # E       Traceback (...)   (pytest's lines of a failure's explanation: "E" and seven blanks, or "E"
    # alone for a blank line; a test's captured traceback, opened sealed round 77)
    ("pytest-e", re.compile(r"^E(?: {7}|$)")),
)

#: Prefixes no prose line starts with: removed from as few as ``WRAPPED_SHARE`` of the lines, the
#: rest being the pieces a terminal cut off those long records (vLLM's and Ray's worker lines).
DISTINCT = ("vllm", "ray", "glog")
WRAPPED_SHARE = 0.4

_NUMBER = re.compile(r"^ {0,6}(\d{1,6})(?: {0,2}[:|.)\]] ?| +|\t|$)")
#: gdb's ``info threads`` rows (``  60   Thread 0x7f.. (LWP 80098) func (...) at f.c:57``): the numbers
#: that count up are gdb's thread ids, part of the text, not an editor's line numbers.
_INFO_ROW = re.compile(r"^[ *]{0,6}\d{1,6}\s+(?:Thread 0x[0-9a-fA-F]{1,16} )?\(LWP \d{1,10}\)")


#: Lines that must carry a wrapper when prose around the paste does not (a sentence above it).
SPAN_MIN = 3


def _share(lines: List[str], test: Callable[[str], bool]) -> bool:
    """``SHARE`` of the non-blank lines carry it; or of the paste's own span, from the first line
    that carries it to the last, when at least ``SPAN_MIN`` do (an issue's sentence above the
    paste and its thanks below carry no wrapper)."""
    nonblank = [x for x in lines if x.strip()]
    if len(nonblank) < 2:
        return False
    hits = [i for i, x in enumerate(nonblank) if test(x)]
    if len(hits) >= SHARE * len(nonblank):
        return True
    return len(hits) >= SPAN_MIN and len(hits) >= SHARE * (hits[-1] - hits[0] + 1)


def _backticked(s: str) -> bool:
    """One line in backticks; in two as well (a paste already in backticks, put in them again: one
    pair goes per layer), never a fence's three."""
    t = s.strip()
    return len(t) >= 3 and t[0] == "`" and t[-1] == "`" and not t.startswith("```") and not t.endswith("```")


def _strip_backticks(lines: List[str]) -> Optional[List[str]]:
    if not _share(lines, _backticked):
        return None
    out = []
    for x in lines:
        if _backticked(x):
            lead = x[: len(x) - len(x.lstrip())]
            t = x.strip()
            x = lead + t[1:-1]
        out.append(x)
    return out


#: Markdown's escape of a punctuation mark (``\!``, ``\(``, ``\_``): a copy of an issue's source
#: (SourceForge's migrated tickets) keeps them on every line of a call stack (open round 46's pywin32).
_MD_ESCAPE = re.compile(r"\\([!()*_\[\]<>#`{}|~+])")


def _strip_md_escapes(lines: List[str]) -> Optional[List[str]]:
    if not _share(lines, lambda x: _MD_ESCAPE.search(x) is not None):
        return None
    return [_MD_ESCAPE.sub(r"\1", x) for x in lines]


def _strip_numbers(lines: List[str]) -> Optional[List[str]]:
    """``12: text`` / ``12 | text`` / ``  12  text``: removed when the numbers count up by one.
    After a number and spaces only, as many spaces go as every numbered line has: the rest is
    the line's own indentation (py-spy's and a traceback's layout)."""
    numbered = [(_NUMBER.match(x), x) for x in lines]
    if not _share(lines, lambda x: _NUMBER.match(x) is not None) or _share(lines, lambda x: bool(_INFO_ROW.match(x))):
        return None
    nums = [int(m.group(1)) for m, _ in numbered if m]
    steps = sum(1 for a, b in zip(nums, nums[1:]) if b == a + 1)
    if len(nums) < 3 or steps < SHARE * (len(nums) - 1):
        return None
    gap = min((len(m.group(0)) - m.end(1) for m, x in numbered
               if m and m.group(0)[-1] == " " and not m.group(0)[m.end(1):].strip() and x[m.end():].strip()),
              default=0)
    out = []
    for m, x in numbered:
        if m is None:
            out.append(x)
        elif gap and m.group(0)[-1] == " " and not m.group(0)[m.end(1):].strip():
            out.append(x[m.end(1) + gap:])
        else:
            out.append(x[m.end():])
    return out


def _strip_continuation(lines: List[str]) -> Optional[List[str]]:
    """`` \\`` at the end of most lines (a shell's continuation, a chat that kept one): removed."""
    if not _share(lines, lambda x: x.endswith("\\")):
        return None
    return [x[:-1].rstrip() if x.endswith("\\") else x for x in lines]


#: Record prefixes that carry a time or a record's own fields (glog's time and thread id: gRPC's
#: fork wait is one thread's records over time; vLLM's file:line; journald's program): a log keeps
#: them unless a dump format reads the lines better without them (``parse_text``); a report shows
#: the log's lines as they were.  The other wrappers (backticks, quotes, line numbers, a launcher's
#: or a collector's tag) say nothing.
KEPT = ("timestamp", "syslog", "dated", "ctime", "colab", "glog", "vllm", "time", "ray", "celery", "shared", "tag",
        "bracket-record")


#: Lines of a long text's even sample that a prefix is first tried on (``_strip_prefix``).
SAMPLE = 1000


def _strip_prefix(lines: List[str], kinds: List[str]) -> Optional[List[str]]:
    best: Optional[Pattern[str]] = None
    best_n = 0
    share = SHARE
    best_name = ""
    nonblank = [x for x in lines if x.strip()]
    # a long text: a prefix that misses most of an even sample of its lines cannot be on their share
    # (the count below reads every line once per prefix: a 50 MB log's refusal stays in seconds)
    sample = nonblank[::len(nonblank) // SAMPLE] if len(nonblank) > 2 * SAMPLE else None
    for name, rx in PREFIXES:
        need = WRAPPED_SHARE if name in DISTINCT else SHARE
        if sample is not None and sum(1 for x in sample if rx.match(x)) < need * len(sample) / 2:
            continue
        n = sum(1 for x in nonblank if rx.match(x))
        if n > best_n:
            best, best_n, share, best_name = rx, n, (WRAPPED_SHARE if name in DISTINCT else SHARE), name
    if best is None or best_n < share * len(nonblank) or best_n < 2:
        return None
    out = []
    for x in lines:
        m = best.match(x)
        out.append(x[m.end():] if m else x)
    kinds.append(best_name)
    return out


#: What a launcher's tags and a log's records start with: a shared word over one of them is a tag.
_TAGGED = (RANK_PREFIX,) + tuple(rx for _, rx in PREFIXES)


def _strip_shared(lines: List[str], kinds: List[str]) -> Optional[List[str]]:
    """A word every non-blank line starts with, the same characters on each (a launcher's or a
    job's own tag, a logging format's process id or ``[file.py:64]`` under one second's records),
    then a blank: taken off one word at a time, so the next layer's known wrapper (``[rank1]:``,
    which names the rank and stays) is found again.  Only from 3 lines on: one or two lines may
    share a word by chance."""
    nonblank = [x for x in lines if x.strip()]
    if len(nonblank) < 3:
        return None
    word = nonblank[0].split(" ", 1)[0]
    if len(word) < 2 or RANK_PREFIX.match(word + " ") or any(not x.startswith(word + " ") for x in nonblank):
        return None
    out = [x[len(word) + 1:] if x.strip() else x for x in lines]
    # over a known wrapper on every line (a job's name over torchrun's ``[default1]:[rank1]:``) it is
    # a tag for sure; else a word shared by chance is possible ("shared"); both kept: a log rule may
    # read it (``[I ProcessGroupWrapper.cpp:562]``)
    tagged = all(any(rx.match(x) for rx in _TAGGED) for x in out if x.strip())
    kinds.append("tag" if tagged else "shared")
    return out


_FILE_LINE = re.compile(r'^File "(.*)", line (\d{1,9}),? in (.+)$')
_FILE_PIECE = re.compile(r'^File(?: "[^"]*"?,?)?$|^File "[^"]*", line \d{1,9},?$')


def join_file_pieces(lines: List[str]) -> Optional[List[str]]:
    """A traceback's ``File "path", line N, in f`` that a narrow terminal cut into pieces (``File`` /
    ``"/long/path.py",`` / ``line 83, in wrapper``), joined back; None when there is none.  The
    pieces are joined only when they make a whole ``File`` line (at most 3 more pieces)."""
    out: List[str] = []
    changed = False
    i = 0
    while i < len(lines):
        x = lines[i]
        s = x.strip()
        took = 0
        if s.startswith("File") and _FILE_PIECE.match(s):
            joined = s
            for k in range(1, min(4, len(lines) - i)):
                nxt = lines[i + k].strip()
                joined += (" " if joined.endswith((",", "File")) else "") + nxt
                if _FILE_LINE.match(joined):
                    took = k
                    break
        if took:
            out.append(x[: len(x) - len(x.lstrip())] + joined)
            changed = True
        else:
            out.append(x)
        i += took + 1
    return out if changed else None


def looks_like_log(lines: List[str]) -> bool:
    """Most non-blank lines are log records (one of ``PREFIXES``, any kind each): a log, not prose."""
    nonblank = [x for x in lines[:2000] if x.strip()]
    records = sum(1 for x in nonblank if any(rx.match(x) for _, rx in PREFIXES))
    return len(nonblank) >= 2 and records * 2 > len(nonblank)


def unwrap(lines: List[str]) -> List[str]:
    """The lines without the wrappers (up to ``MAX_LAYERS``, nested ones too: a timestamp
    inside backticks) that most lines share; the lines themselves when none."""
    layers = unwrap_layers(lines, chance=False)
    return layers[-1][0] if layers else lines


def unwrap_layers(lines: List[str], chance: bool = True) -> List[Tuple[List[str], bool]]:
    """``_layers`` of the lines, each layer a copy the caller may change (a long text's layers are
    found once, ``linememo``: parse_text asks for them from its unwrap, its refusal path and its
    message joiner).  ``chance=False``: not the layers under a shared word (``_strip_shared``), which
    only a format's score may pick (a frame too weak to score is no proof the word was a wrapper)."""
    return [(list(bare), kept) for bare, kept, shared in _layers(lines) if chance or not shared]


@by_content
def _layers(lines: List[str]) -> List[Tuple[List[str], bool, bool]]:
    """The lines after each wrapper taken off, outermost first (each with a traceback's cut
    ``File`` lines joined), and whether a prefix whose fields a rule reads (``KEPT``) was among the
    wrappers removed so far: without one, the lines lost nothing a log's reader needs.  Empty
    when there is nothing to undo.  The caller picks the layer a format reads best: a wrapper's
    look-alike inside the dump (a macOS crash report's frame numbers) is no wrapper."""
    kinds: List[str] = []
    layers: List[Tuple[List[str], bool, bool]] = []
    for _ in range(MAX_LAYERS):
        # a trailing "\\" before line numbers: both are taken off in turn, and the layer without the
        # "\\" alone keeps a format's own first column that counts up (a macOS report's frame numbers)
        step = (_strip_backticks(lines) or _strip_md_escapes(lines) or strip_quotes(lines) or strip_gutter(lines)
                or _strip_prefix(lines, kinds)
                or _strip_continuation(lines) or _strip_numbers(lines) or _strip_shared(lines, kinds))
        if step is None:
            break
        lines = dedent([strip_scroll_marker(x) for x in step])  # tmux's [390/7275] inside the wrapper
        layers.append((lines, any(k in KEPT for k in kinds), "shared" in kinds))
    if not layers:
        joined = join_file_pieces(lines)
        return [(dedent(joined), False, False)] if joined is not None else []
    out = []
    for bare, kept, shared in layers:
        joined = join_file_pieces(bare)
        out.append((dedent(joined) if joined is not None else bare, kept, shared))
    return out
