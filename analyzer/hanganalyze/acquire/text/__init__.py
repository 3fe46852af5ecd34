"""Pasted text -> Snapshot: gdb backtraces, py-bt, py-spy, pystack, faulthandler, tracebacks,
IPython/Jupyter tracebacks, lldb, pytest-timeout and pytest's own reports, stack dumpers
(``File: "x", line N, in f``), abseil deadlock reports, PyTorch's C++ frame lists, WinDbg and
Visual Studio call stacks.

One module per format (``gdb``, ``pybt``, ``pyspy`` (with py-spy < 0.3 and ``ray stack``),
``pyspy_json``, ``pystack``, ``faulthandler``, ``lldb``, ``pytest_timeout``, ``abseil``,
``cxxframes``, ``traceback``, ``ipython``, ``pytest_report``, ``stackdump``, ``windbg``), each
following the protocol ``formats.py`` writes down (``score(lines)``, ``parse(lines, process)``)
and listed there, one line each; ``detect`` picks one; ``common`` cleans the text and splits it
per process; ``unwrap`` undoes a wrapper on every line.

The steps: clean the text (ANSI, CRLF, control bytes, zero-width characters; a chat's or an issue's
``> `` quotes, shared indentation, Markdown fences and ``<details>`` tags); undo a wrapper most
lines share (``unwrap``: backticks, line numbers, log record prefixes) when a format then scores the
lines higher; split it per rank (``[rank3]:`` prefixes) and per ``Process N:`` / ``Stack dump for``
section; parse each part with the forced or best-scoring format; pick Python tracebacks out of the
leftover log lines of any other format. Lines that are not part of a dump stay in
``Process.messages`` for message-level signatures. A paste cut at the top or the bottom is parsed
for the frames it has (frames above the first thread header form a thread of their own); only text
with no frame at all is refused (a single frame line too weak for any score is still read:
``detect``), and a log with no frame and no known line is told what to capture instead.

Decisions (the same for every format, so signatures need not care where a stack came from):

* Frames are innermost first.  Tracebacks and pystack print outermost first: reversed.
* A frame without a symbol (gdb's ``?? ()``, py-spy's bare address, pystack's ``???``) has
  ``function=None``, as gdbext writes for cores; the matcher spells it ``??``, so a rule
  ``{function: "??", library: "libcuda.so*"}`` matches pastes and cores alike.
* ``Thread.tid`` is the kernel thread id (LWP) only: faulthandler's and py-spy's ``0x..``
  numbers are pthread ids and go to ``Thread.pthread_id``.
* Python-only dumps mark threads ``merge="python-only"``; py-spy ``--native`` and pystack
  ``--native`` are ``"merged"`` (the tool interleaved them); a gdb ``bt`` followed by ``py-bt``
  keeps the Python frames apart in ``python_frames`` (``"unmerged"``).
* Each Python traceback block is one Thread (chained blocks in printed order, with notes saying
  how they chain); its exception line is also a message.
* Several processes: launcher prefixes (``[rank3]:``), ``Process N:`` headers, ``==> FILE <==``
  separators (``tail``), several gdb sessions one after another, several py-spy JSON documents.
* Lines a tool prints about itself (gdb's ``[New LWP ..]``, banners, source echoes; pystack's
  core summary) are dropped; everything else unrecognised is a message, capped at 10,000 lines.
"""

from __future__ import annotations

import re
from typing import Iterator, List, Optional, Tuple

from hanganalyze import linememo
from hanganalyze.errors import InputError
from hanganalyze.loglines import data_known_lines, exception_line
from hanganalyze_gdbext.model import Process, PythonFacts, Snapshot

from . import log as _log
from . import traceback as _traceback
from .common import (
    Segment,
    cap_messages,
    clean_and_join,
    split_processes,
    split_ranks,
    strip_wrappers,
    unwrap_terminal,
    without_rank_tag,
)
from .detect import (
    FORMAT_NAMES,
    LOG_WITHOUT_KNOWN_LINE,
    PROFILE_TABLE,
    UNRECOGNISED,
    detect,
    parser_for,
    parses_a_frame,
    profile_table,
    scores,
)
from .formats import FORMATS, PARSERS, TextParser, format_of
from .unwrap import looks_like_log, unwrap_layers

__all__ = ["parse_text", "FORMAT_NAMES", "PARSERS"]

#: Printed in each process's notes, so a report says how its input was read.
DESCRIPTIONS = {f.name: f.description for f in FORMATS}


#: ``/usr/lib/python3.11/threading.py``, ``libpython3.11.so.1.0``: the interpreter's version.
_PY_VERSION_IN_PATH = re.compile(r"(?:/python|libpython)(3\.\d{1,2})(?:/|\.so|d?\.so)")


_PY_EXE = re.compile(r"(?:^|/)python(3\.\d{1,2})$")


def _infer_python(proc: Process) -> None:
    """Most dumps do not print the Python version, but their file paths do: use it when unique."""
    if proc.python:
        return
    seen = set()
    for t in proc.threads:
        for f in t.all_frames():
            for where in (f.file, f.library):
                if where and "python3." in where:
                    m = _PY_VERSION_IN_PATH.search(where)
                    if m:
                        seen.add(m.group(1))
    m = _PY_EXE.search(proc.executable or "")
    if m and not seen:
        seen.add(m.group(1))
    if len(seen) == 1:
        proc.python = PythonFacts(version=seen.pop(), from_="file paths")


def _has_text(lines: List[str]) -> bool:
    return any(line.strip() for line in lines)


#: Formats looked for in the lines left over by the first one (the registry's ``leftover``).
_SECOND_PASS = tuple(f.parser for f in FORMATS if f.leftover)


def _dumps_from_messages(proc: Process, mod: Optional[TextParser], auto: bool) -> None:
    """Log lines around a dump often hold the exception that started it all (any format), or,
    when the format was detected, a second dump of another kind (abseil's failure report above
    faulthandler's Python stacks, a traceback under a C++ frame list): parse them too.  Each
    format at most once, a bounded number of passes."""
    used = {mod}
    for _ in range(3):
        if not proc.messages:
            return
        best, best_score = None, 0.0
        for other in _SECOND_PASS if auto else (_traceback,):
            if other in used:
                continue
            sc = other.score(proc.messages)
            if sc > best_score:
                best, best_score = other, sc
        if best is None:
            return
        used.add(best)
        extra = Process(source="text")
        best.parse(proc.messages, extra)
        proc.cuda_kernels = proc.cuda_kernels or extra.cuda_kernels  # a session's bt, then its kernels
        if not extra.threads:
            return
        if best is not _traceback:
            what = DESCRIPTIONS[best.NAME]
            for t in extra.threads:
                t.notes.append("parsed as %s, from the lines around the main dump" % what)
        proc.threads.extend(extra.threads)
        proc.messages = extra.messages
        proc.signal = proc.signal or extra.signal
        proc.pid = proc.pid or extra.pid


def _parse_segment(seg: Segment, forced: Optional[TextParser]) -> List[Process]:
    mod = forced
    if mod is None:
        try:
            mod = detect(seg.lines)
        except InputError:
            mod = None
    procs = format_of(mod).parse_processes(seg.lines, seg.label) if mod is not None else None
    if procs is not None:
        # py-spy --json (pids are in the data), gdb (several sessions pasted one after another)
        for p in procs:
            p.pid = p.pid or seg.pid
            p.notes.append("parsed as %s" % DESCRIPTIONS[mod.NAME])
            _dumps_from_messages(p, mod, forced is None)
        return procs
    proc = Process(source="text", pid=seg.pid, label=seg.label)
    if mod is None:
        proc.messages = cap_messages([line.strip() for line in seg.lines if line.strip()], proc.notes)
    else:
        mod.parse(seg.lines, proc)
        proc.notes.append("parsed as %s" % DESCRIPTIONS[mod.NAME])
    _dumps_from_messages(proc, mod, forced is None)
    if not proc.threads and not proc.messages and not _has_tasks(proc):
        return []
    return [proc]


def _has_tasks(proc: Process) -> bool:
    """``python -m asyncio ps/pstree`` gives tasks and no thread, ``info cuda kernels`` kernels: answers too."""
    return (proc.asyncio is not None and any(lp.tasks for lp in proc.asyncio.loops)) or proc.cuda_kernels is not None


def _unwrapped(lines: List[str], forced: Optional[TextParser]) -> List[str]:
    """The lines without a wrapper every line of the paste shares (``unwrap``: backticks, line
    numbers, log record prefixes), when that makes them read better as a dump: the best (or the
    forced) format scores them higher than the lines as they came, or as high when no wrapper
    removed is a log record's own (``unwrap.KEPT``: a time, glog's thread id; backticks, quotes,
    line numbers, a launcher's tag say nothing) or a dump is read either way (its frames' times
    are no evidence; their indentation is); of several wrappers one inside another, as many as
    make the best score.  A plain log keeps its timestamps, unless without them it holds more
    known lines (``log.known_lines``: py-spy's ``Process 830:`` header, its ``Error: failed to``,
    read at a line's start), as the log did before a collector prefixed it."""
    best, best_score = lines, forced.score(lines) if forced is not None else scores(lines)[0][0]
    known: Optional[int] = None
    for bare, kept in unwrap_layers(lines):
        after = forced.score(bare) if forced is not None else scores(bare)[0][0]
        if after == best_score == 0 and kept and known is None:
            known = _known_or_data(_ends(lines))
        if after > best_score or (after == best_score and (
                not kept or after > 0 or (known is not None and _known_or_data(_ends(bare)) > known))):
            best, best_score = bare, after
    return best


def _known_or_data(lines: List[str]) -> int:
    """Known lines (``log.known_lines``), lines a signature's or a crash's pattern finds
    (``data_known_lines``) and an exception line: a pattern anchored at a line's start finds none
    under a prefix."""
    return _log.known_lines(lines) + data_known_lines(lines) + (exception_line(lines) is not None)


#: lines of a log's head and of its tail that decide whether its records keep their prefixes
ENDS = 10000


def _ends(lines: List[str]) -> List[str]:
    """A huge log's first and last ``ENDS`` lines (all of a shorter one): the lines a hang's record
    stands in (its start, its watchdog's last words), and a bound on counting known lines twice
    per wrapper over a 50 MB log (seconds each)."""
    return lines if len(lines) <= 2 * ENDS else lines[:ENDS] + lines[-ENDS:]


#: Process headers (``Process N:``, ``Stack dump for``, ``==> file <==``) a text is split at, at most: a
#: job's dump holds a few hundred; past that the rest is one segment (each costs a format detection).
MAX_SEGMENTS = 1000


def _parse_all(lines: List[str], forced: Optional[TextParser], ranks: Optional[List[Segment]] = None
               ) -> List[Process]:
    """Every process of the lines (``ranks``: their split by rank, when the caller made it)."""
    processes: List[Process] = []
    for ranked in ranks if ranks is not None else split_ranks(lines):
        if ranked.label is not None:  # a rank's lines may carry a wrapper inside the launcher's prefix
            ranked.lines = _unwrapped(unwrap_terminal(strip_wrappers(ranked.lines)), forced)
            ranked.lines = [without_rank_tag(x, ranked.label) for x in ranked.lines]
        segs = split_processes(ranked)
        if len(segs) > MAX_SEGMENTS:  # a hostile text of headers: the rest read as one, bounded
            rest = Segment(label=segs[MAX_SEGMENTS - 1].label, pid=segs[MAX_SEGMENTS - 1].pid,
                           lines=[x for seg in segs[MAX_SEGMENTS - 1:] for x in seg.lines])
            segs = segs[:MAX_SEGMENTS - 1] + [rest]
        for seg in segs:
            processes.extend(_parse_segment(seg, forced))
    return processes


def _join_broken(messages: List[str]) -> List[str]:
    """``log.join_broken``, also where every line carries a prefix the messages keep (a log
    collector's timestamp on each line, the second half of a message too): the halves are judged
    without it, and joined under the first one's."""
    joined = _log.join_broken(messages)
    layers = unwrap_layers(messages, chance=False) if len(messages) > 1 else []
    if not layers or len(layers[-1][0]) != len(messages):
        return joined
    bare = layers[-1][0]
    out: List[str] = []
    i = 0
    while i < len(messages):
        cur_bare, cur = bare[i].strip(), messages[i].strip()
        j = i + 1
        while j < len(messages) and j - i <= _log.MAX_JOIN and cur_bare and bare[j].strip():
            two = _log.join_broken([cur_bare, bare[j]])
            if len(two) != 1:
                break
            cur, cur_bare = cur + two[0][len(cur_bare):], two[0]
            j += 1
        out.append(cur)
        i = j
    return out if len(out) < len(joined) else joined


def _holds_known_line(messages: List[str]) -> bool:
    """A line a hang leaves is among the messages, as they are or without a wrapper they all
    share (a known line anchored at its start under a timestamp or a launcher's prefix)."""
    if _known_or_data(messages):
        return True  # (an exception line alone: a traceback cut above its frames, analyze/logtriage.py)
    layers = unwrap_layers(messages, chance=False)
    return bool(layers) and _known_or_data(layers[-1][0]) > 0


def _frame_candidates(lines: List[str]) -> Iterator[Tuple[List[str], List[str], Optional[List[Segment]]]]:
    """Where a frame too weak for any score may be: (the lines to look in, the lines to parse, their
    split by rank): the lines and each of their unwrap layers, then each rank's lines (of the lines
    or of a layer) and each of theirs (a time inside the launcher's tag: the rank's lines without it
    are parsed)."""
    layers = [lines] + [b for b, _ in unwrap_layers(lines, chance=False)]
    for bare in layers:
        yield bare, bare, None
    unquoted = _without_quote_pair(lines)
    if unquoted is not None:
        yield unquoted, unquoted, None
    # the launcher's tag under a collector's wrapper too (``[time] host >> [rank0]: File ...``)
    for base in layers:
        segs = split_ranks(base)
        for i, seg in enumerate(segs):
            if seg.label is not None:
                for bare in [seg.lines] + [b for b, _ in unwrap_layers(seg.lines, chance=False)]:
                    yield bare, base, segs[:i] + [Segment(lines=bare, label=seg.label)] + segs[i + 1:]


def _without_quote_pair(lines: List[str]) -> Optional[List[str]]:
    """The lines without the pair of double quotes a writer put around the whole paste (a frame
    line quoted in a sentence: ``"0x.. in f () from lib"``), when the first line opens one and the
    last closes it; None otherwise.  Read on the refusal path only, so no dump loses a quote of its own."""
    full = [i for i, x in enumerate(lines) if x.strip()]
    if not full or not (lines[full[0]].lstrip().startswith('"') and lines[full[-1]].rstrip().endswith('"')):
        return None
    out = list(lines)
    out[full[0]] = out[full[0]].lstrip()[1:]
    out[full[-1]] = out[full[-1]].rstrip()[:-1]
    return out if out[full[0]].strip() and out[full[-1]].strip() else None


def parse_text(text: str, input_format: Optional[str] = None) -> Snapshot:
    """Parse a pasted dump into a Snapshot (``Process.source == "text"``).

    ``input_format`` is one of FORMAT_NAMES (None or "auto" detects).  Raises InputError, with
    one line naming the formats understood, when the text is no known dump.
    """
    try:
        return _parse_text(text, input_format)
    finally:
        linememo.forget()  # the text is read: its lines need not stay in memory


def _parse_text(text: str, input_format: Optional[str]) -> Snapshot:
    forced = parser_for(input_format)
    if not isinstance(text, str):
        raise InputError("text input must be a string")
    lines = _unwrapped(clean_and_join(text), forced)
    if not _has_text(lines):
        raise InputError(UNRECOGNISED if text.strip() else "the text is empty")
    processes = _parse_all(lines, forced)
    if forced is None and not any(p.threads or _has_tasks(p) for p in processes):
        # a frame line too weak for any score is still read, under a log's prefixes or a rank's too,
        # or both (a rank's lines are parsed as ranks again: ``_parse_all`` splits them)
        for cand, whole, ranks in _frame_candidates(lines):
            framed = parses_a_frame(cand)
            if framed is not None:
                processes = _parse_all(whole, framed, ranks)
                break
    for proc in processes:
        _infer_python(proc)
        proc.messages = _join_broken(proc.messages)  # a message a terminal or a paste broke
    if not any(p.threads or _has_tasks(p) for p in processes):
        # a log with no frame is an input too when it holds lines a hang leaves (log.KNOWN_LINES)
        if any(p.messages for p in processes) and (
                forced is _log or (forced is None and any(_holds_known_line(p.messages) for p in processes))):
            return Snapshot(processes=processes)
        if forced is not None:
            raise InputError("found no threads or frames in the text as %s" % forced.NAME)
        raise InputError(PROFILE_TABLE if profile_table(lines) else
                         LOG_WITHOUT_KNOWN_LINE if looks_like_log(lines) else UNRECOGNISED)
    return Snapshot(processes=processes)
