"""The text formats hanganalyze reads: one registry line per format, and the protocol its parser
module follows.  Adding a format is one new module in this folder and one line in ``FORMATS``
(docs/acquire.md, "Adding a text format"); detection (``detect.py``), ``--input-format`` and the
"parsed as ..." note all read this table.

The protocol, written down (``TextParser``; a module satisfies it by its module-level names):

* ``NAME``: the format's ``--input-format`` name, also its registry name.
* ``score(lines) -> float``: how sure the module is that these lines (cleaned, one process's
  part of the text) are its format: 0 for "not mine"; counts of lines only this format prints,
  weighted by how distinctive they are.  Bounded work: at most ``detect.SCORE_LINES`` from each
  end of a long text are given.
* ``parse(lines, proc) -> None``: fill the given ``Process`` (``source="text"``) with threads,
  frames innermost first, and the lines that are no part of a dump as ``proc.messages``.  Never
  raises on odd input: what it cannot read stays a message.
* with ``several=True`` in its registry line, also ``parse_processes(lines, label) -> [Process]``:
  a text of this format may hold several processes (gdb sessions pasted one after another, py-spy
  JSON documents), each a Process labelled ``label``.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Protocol, Tuple

from hanganalyze_gdbext.model import Process

from . import (
    abseil,
    calltree,
    coredumpctl,
    cudakernels,
    cudathreads,
    cxxframes,
    dbx,
    debugview,
    faulthandler,
    frametable,
    functrace,
    gdb,
    goroutines,
    gurumeditation,
    handlist,
    hserr,
    ipython,
    jvm,
    kstack,
    lldb,
    lldbgui,
    log,
    maccrash,
    macsample,
    pdbwhere,
    perf,
    pyasyncio,
    pybt,
    pyspy,
    pyspy_json,
    pystack,
    pytest_report,
    pytest_timeout,
    qgiscrash,
    rich,
    sos,
    stackdump,
    stackwalk,
    strace,
    taskstack,
    traceback,
    valgrind,
    windbg,
    x64dbg,
)


class TextParser(Protocol):
    """A text format's parser module (see the module docstring for what each name does)."""

    NAME: str

    def score(self, lines: List[str]) -> float: ...

    def parse(self, lines: List[str], proc: Process) -> None: ...


class TextFormat(NamedTuple):
    """One registry line: the parser, the words a report's notes use for it (``parsed as ...``),
    other ``--input-format`` spellings, whether it is looked for again in the lines another format
    left over (a traceback under a C++ frame list), and whether one text may hold several processes
    (then the module has ``parse_processes``)."""

    parser: TextParser
    description: str
    aliases: Tuple[str, ...] = ()
    leftover: bool = True
    several: bool = False

    @property
    def name(self) -> str:
        return self.parser.NAME

    def parse_processes(self, lines: List[str], label: Optional[str]) -> Optional[List[Process]]:
        """The processes of a text that may hold several; None for a format of one process."""
        return self.parser.parse_processes(lines, label) if self.several else None  # type: ignore[attr-defined]


#: Every text format, in the order ties between equal scores are broken.
FORMATS: Tuple[TextFormat, ...] = (
    TextFormat(pyspy_json, "py-spy dump --json", ("json", "py-spy-json"), leftover=False, several=True),
    TextFormat(gdb, "gdb backtrace", ("gdb-bt", "cuda-gdb"), several=True),
    TextFormat(pystack, "pystack"),
    TextFormat(pyspy, "py-spy dump", ("py-spy", "ray-stack")),
    TextFormat(pybt, "gdb py-bt", ("py-bt",)),
    TextFormat(faulthandler, "faulthandler dump"),
    TextFormat(lldb, "lldb backtrace", ("lldb",)),
    TextFormat(lldbgui, "lldb gui Threads window", ("lldb-gui-threads",)),
    TextFormat(maccrash, "macOS crash report", ("crash-report", "ips", "macos")),
    TextFormat(macsample, "macOS sample call graph", ("sample", "mac-sample")),
    TextFormat(pytest_timeout, "pytest-timeout stacks", ("pytest",)),
    TextFormat(abseil, "abseil stack report", ("absl", "glog")),
    TextFormat(cxxframes, "C++ frame list (PyTorch c10, backtrace_symbols)", ("c10", "torch-cpp", "pytorch-cpp")),
    TextFormat(ipython, "IPython/Jupyter traceback", ("jupyter", "ipython-tb")),
    TextFormat(pdbwhere, "pdb where (the debugger's stack)", ("pdb", "pdb-where", "ipdb")),
    TextFormat(rich, "rich traceback (boxed frames)", ("rich-traceback",)),
    TextFormat(pytest_report, "pytest failure report", ("pytest-report", "pytest-short", "pytest-long")),
    TextFormat(stackdump, "Python stack dumper (File: ..., # ThreadID:)", ("stacktracer", "dumpstacks")),
    TextFormat(traceback, "Python traceback", ("tb",)),
    TextFormat(debugview, "IDE debugger thread view (PyDev/Eclipse: function [file.py:N])", ("pydev", "eclipse")),
    TextFormat(windbg, "WinDbg / Visual Studio call stack", ("cdb", "visual-studio", "vs")),
    TextFormat(x64dbg, "x64dbg call stack view (Address, To, From, Comment)", ("x32dbg",)),
    TextFormat(sos, ".NET SOS stack (eestack, dumpstack, clrstack)", ("eestack", "clrstack", "dotnet")),
    TextFormat(stackwalk, "Windows stack print (N: Function - 0xAddress)", ("capturestackbacktrace", "symfromaddr")),
    TextFormat(frametable, "a stack copied from a table (Module | Function | Offset)", ("table", "markdown-table")),
    TextFormat(dbx, "dbx where (AIX, Solaris)", ("dbx-where", "aix")),
    TextFormat(pyasyncio, "python -m asyncio ps/pstree", ("asyncio-ps", "asyncio-pstree", "pstree"), leftover=False),
    TextFormat(taskstack, "asyncio task stacks (Task.print_stack)", ("task-stack", "print-stack"), leftover=False),
    TextFormat(cudakernels, "cuda-gdb info cuda kernels", ("info-cuda-kernels",)),
    TextFormat(cudathreads, "cuda-gdb info cuda threads", ("info-cuda-threads",)),
    TextFormat(jvm, "JVM thread dump (jstack)", ("jstack", "java")),
    TextFormat(hserr, "JVM fatal error log (hs_err_pid)", ("hs_err", "jvm-crash")),
    TextFormat(goroutines, "Go goroutine dump (SIGQUIT, panic, pprof)", ("go", "goroutine", "golang")),
    TextFormat(gurumeditation, "oslo Guru Meditation report", ("oslo", "guru")),
    TextFormat(coredumpctl, "systemd-coredump report (coredumpctl info)", ("systemd-coredump",)),
    TextFormat(kstack, "Linux kernel stack (/proc/PID/stack, the hung-task report)", ("kstack", "dmesg")),
    TextFormat(valgrind, "valgrind report (memcheck, helgrind, drd)", ("memcheck", "helgrind")),
    TextFormat(functrace, "function-call trace (vLLM's VLLM_TRACE_FUNCTION log)", ("vllm-trace", "call-trace")),
    TextFormat(strace, "strace output (the system call each thread stands in)", ("strace-p",)),
    TextFormat(qgiscrash, "QGIS crash report (its crash handler's stack)", ("qgis",)),
    TextFormat(perf, "perf top / perf report (a CPU profile: the hottest symbol)", ("perf-top", "perf-report")),
    TextFormat(calltree, "call chain written by hand (indented, outermost first)", ("call-tree",), leftover=False),
    TextFormat(handlist, "call list written by hand (arrows, module:function() lines)", ("hand-written",),
               leftover=False),
    # scores 0: used when asked for, or when no dump format scores but known log lines are there (detect)
    TextFormat(log, "log", leftover=False),
)

#: Registry name -> its line.
BY_NAME: Dict[str, TextFormat] = {f.name: f for f in FORMATS}
#: Registry name and every alias -> the registry name.
SPELLINGS: Dict[str, str] = {**{a: f.name for f in FORMATS for a in f.aliases}, **{f.name: f.name for f in FORMATS}}
#: The parser module of a format (``FORMATS`` as a dict; ``--input-format`` names).
PARSERS: Dict[str, TextParser] = {f.name: f.parser for f in FORMATS}


def format_of(parser: TextParser) -> TextFormat:
    """The registry line of a parser module."""
    return BY_NAME[parser.NAME]
