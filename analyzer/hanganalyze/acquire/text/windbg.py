"""Windows call stacks: WinDbg / cdb ``k`` tables and Visual Studio's Call Stack window (and VS
Code's, whose copy on Linux reads ``libc.so.6!__GI___poll(...) (/build/.../poll.c:29)``).

::

    .  0  Id: b10.dac Suspend: 1 Teb: 00007ff6`64a4e000 Unfrozen "MainThread"  -> a thread (tid 0xdac)
     # Child-SP          RetAddr           Call Site                             (or ``# ChildEBP RetAddr``)
    00 00000067`e0f3f278 00007ff8`8a192e2d ntdll!NtWaitForSingleObject+0xa      -> library ntdll
    04 001bd73c 748b5f4f clr!CLREventBase::WaitEx+0x152 [f:\\dd\\synch.cpp @ 763] -> file, line
    09 (Inline) -------- clr!Thread::EnablePreemptiveGC+0xfff998d4
    >  ntdll.dll!_NtWaitForSingleObject@12()  Unknown                (Visual Studio, columns split by
       python311.dll!take_gil(_ts * tstate) Line 331  C               tabs: the current frame ``>``)
       [Managed to Native Transition]                                 (skipped)
    00007FF86A59A4DC00007FF86A589BF0 torch_python.dll!initModule [<unknown file> @ <unknown line number>]
                                                                      (c10's own backtrace on Windows)

Frames are innermost first already, as everywhere.  ``module!function+0xoff`` splits into the
library (``module``) and the function; ``module+0x1234`` and VS's ``module.dll!771022cc()`` are
frames without a symbol (``function=None``).  A ``k`` table without a thread header is a thread of
its own; ``~*k`` gives one thread per ``Id:`` line, its tid the hex number after the dot.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, split_call, to_int

NAME = "windbg"

#: ``.  0  Id: b10.dac Suspend: 1 Teb: 00007ff6`64a4e000 Unfrozen "name"``
_THREAD = re.compile(
    r"^([.#])?\s*(\d{1,6})\s+Id: ([0-9a-fA-F]{1,8})\.([0-9a-fA-F]{1,8})\s+Suspend:.*?(?:\"(.{0,200})\")?\s*$")
#: (``~Nkb`` without the stack pointer column: `` RetAddr : Args to Child : Call Site``, open round 67)
_TABLE = re.compile(r"^#?\s*(?:(?:Child-?SP|ChildEBP)\s+RetAddr\b|RetAddr\s+: Args to Child\b)")
#: ``00 00000067`e0f3f278 00007ff8`8a192e2d ntdll!Func+0xa [path @ 12]``: a frame number, 1 to 6
#: hex columns (``kb`` adds the arguments), the call site.
_HEX = r"(?:[0-9a-fA-F]{8}`?[0-9a-fA-F]{0,8}|\(Inline\)|-{8})"
#: ``!analyze -v``'s STACK_TEXT puts the arguments between colons:
#: ``000000f7`bd5ef990 00007ffc`94c937e4 : 00000000`00000000 ... : python+0x1258``.
_ARGS = r"(?::(?: {1,8}" + _HEX + r"){1,8} {1,8}: |: )?"
_FRAME = re.compile(r"^(?:([0-9a-fA-F]{2,4}) )?(?:" + _HEX + r" {1,8}){1,6}" + _ARGS + r"(\S.*?)\s*$")
_SOURCE = re.compile(r"^(.*?) \[(.{1,500}) @ (\d{1,9})\]$")
_OFFSET = re.compile(r"^(.*?)\+0x[0-9a-fA-F]{1,16}$")
#: Visual Studio: ``module.dll!function(args) Line 12 + 0x5 bytes`` then tab-separated columns (VS 2003:
#: ``Line 212 + 0x5``, two spaces before it).
#: (``[Inline Frame] module.dll!function() Line 12`` for a call the compiler inlined into the next row)
_VS = re.compile(r"^[> ]?\s*(?:\[Inline Frame\] )?([\w.\-]{1,200}\.(?:dll|exe|pyd|sys|so|drv|py))!(.{1,4000}?)"
                 r"(?:\s{1,4}Line (\d{1,9}))?"
                 r"(?: \+ 0x[0-9a-fA-F]+(?: bytes)?)?"
                 r"(?:\t.*|(?<=[)\d])\s+(?:C\+\+|C|Unknown|Python|C#|Native)\s*)?$",
                 re.IGNORECASE)
#: Visual Studio's language column after two blanks: a copy whose tabs became spaces (a web page's, an
#: editor's), read as the tab-separated one.
_VS_LANG = re.compile(r"(?:\)|Line \d{1,9})\s+(?:C\+\+|C|Unknown|Python|C#|Native)\s*$")
#: A headerless ``kb`` row: at least two 8-digit hex columns, then ``module!function``.
_KB_ROW = re.compile(r"^(?:[0-9a-fA-F]{8}`?(?:[0-9a-fA-F]{8})? {1,8}){2,6}" + _ARGS + r"[\w.\-]{1,200}(?:![^ ]|\+0x)")
#: JUCE's SystemStats::getStackBacktrace on Windows (open round 106): a banner per thread, then
#: ``module!function()`` rows with neither address nor offset.
_BANNER = re.compile(r"^={4,40} Thread (\d{1,8}) ={4,40}$")
_BARE_ROW = re.compile(r"^([A-Za-z_][\w.\-]{0,100})!([A-Za-z_~?@$][\w:~<>?@$]{0,1000})\(\)$")
#: A line that heads one thread's rows in a paste of several ("Callstack:").
_STACK_HEADINGS = ("callstack", "call stack", "stack", "stack trace", "backtrace")
_ADDRESS_ONLY = re.compile(r"^[0-9a-fA-F]{6,16}\(\)$")
#: x86 ``kv`` / ``!cs -o`` annotations after the call site: `` (FPO: [3,0,0])``, `` (CONV: stdcall)``.
_ANNOTATIONS = re.compile(r"(?:\s+\((?:FPO|CONV|TrapFrame|ChildEBP)\b[^()]{0,80}\))+$")
#: ``!cs -o``: ``OwningThread = 0x00002878``, then ``OwningThread Stack =`` and that thread's ``k`` table.
_OWNER = re.compile(r"^OwningThread\s*=\s*(?:0x)?([0-9a-fA-F]{1,8})\s*$")


def _symbol(site: str) -> Frame:
    """``module!function+0xoff`` (or ``module+0xoff``) -> a native frame."""
    file = line = None
    m = _SOURCE.match(site)
    if m:
        site, file, line = m.group(1), m.group(2), to_int(m.group(3))
    m = _OFFSET.match(site)
    if m:
        site = m.group(1)
    module, bang, func = site.partition("!")
    if not bang:
        return Frame(kind="native", function=None, library=module or None, file=file, line=line)
    name, _args = split_call(func)
    return Frame(kind="native", function=name or None, library=module or None, file=file, line=line)


def _windbg_frame(s: str, numbered: bool = False) -> Optional[Frame]:
    """A ``k`` table row as a frame; ``numbered``: only a row with its frame number (``kn``), the
    one a paste without the table's header must show to be read as WinDbg's."""
    if not s[:1].isalnum() or "!" not in s and "+0x" not in s:
        return None
    if s.endswith(")") and ("(FPO" in s or "(CONV" in s):
        s = _ANNOTATIONS.sub("", s)
    m = _FRAME.match(s)
    if numbered and m and m.group(1) is None:
        return None
    if not m or " " in m.group(2).split(" [", 1)[0].split("(", 1)[0]:
        return None
    site = m.group(2)
    head = site.split("(", 1)[0].split(" [", 1)[0]
    if "!" not in head and not _OFFSET.match(head):
        return None
    return _symbol(site)


#: VS Code's module of a Linux frame: ``libpthread.so.0``, ``_C.cpython-38-x86_64-linux-gnu.so``.
_SO_MODULE = re.compile(r"^[\w.\-+]{1,200}\.so(?:\.\d{1,6}){0,4}$")


def _vscode_frame(s: str) -> Optional[Frame]:
    """VS Code's Call Stack copy: ``module.so!function(args) (file:line)`` (``Unknown Source:0``
    where the module has no line table); string operations only."""
    s = s.strip()
    if not s.endswith(")") or "!" not in s:
        return None
    k = s.rfind(" (")
    file, _sep, line = s[k + 2:-1].rpartition(":") if k > 0 else ("", "", "")
    module, bang, func = s[:k].partition("!")
    if not (bang and file and line.isdigit() and _SO_MODULE.match(module)):
        return None
    name, _args = split_call(func)
    known = file != "Unknown Source"
    return Frame(kind="native", function=name or None, library=module, file=file if known else None,
                 line=to_int(line) if known else None)


#: c10's own Windows backtrace (PyTorch's abort handler, a c10::Error's stack): the return address and
#: the symbol's glued, then ``module!function [file @ line]`` (``<unknown file> @ <unknown line number>``).
_C10_ROW = re.compile(r"^[0-9A-Fa-f]{16}[0-9A-Fa-f]{16} ([\w.\-]{1,200})!(\S{1,2000}) \[(.{1,1000}?) @ (.{1,60}?)\]$")
_C10_NOTE = "c10's Windows backtrace (PyTorch's own: its abort handler or an error's stack)"


def _c10_frame(s: str) -> Optional[Frame]:
    m = _C10_ROW.match(s) if "!" in s and " @ " in s else None
    if m is None:
        return None
    file, line = m.group(3), m.group(4)
    return Frame(kind="native", function=m.group(2), library=m.group(1),
                 file=None if file.startswith("<") else file, line=to_int(line) if line.isdigit() else None)


def _vs_frame(s: str) -> Optional[Frame]:
    if "!" not in s or not (s[:1] in "> \t[" or s[:1].isalnum()):
        return None
    code = _vscode_frame(s) if ".so" in s else None
    if code is not None:
        return code
    m = _VS.match(s)
    if not m:
        return None
    func = m.group(2).strip()
    line = to_int(m.group(3)) if m.group(3) else None
    if _ADDRESS_ONLY.match(func):
        return Frame(kind="native", function=None, library=m.group(1))
    name, _args = split_call(func)
    if m.group(1).lower().endswith(".py"):  # mixed-mode debugging: a Python frame ("threading.py!wait Line 340")
        return Frame(kind="python", function=name or None, file=m.group(1), line=line)
    return Frame(kind="native", function=name or None, library=m.group(1), line=line)


def score(lines: List[str]) -> float:
    tables = threads = frames = vs = kb = c10 = 0
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if _c10_frame(s) is not None:
            c10 += 1
        elif "RetAddr" in s and _TABLE.match(s):
            tables += 1
        elif " Id: " in s and _THREAD.match(s):
            threads += 1
        elif _windbg_frame(s) is not None:
            frames += 1
            kb += 1 if _KB_ROW.match(s) else 0
        elif ("\t" in line or _VS_LANG.search(line)) and _vs_frame(line) is not None:
            vs += 1
        elif ".so" in s and _vscode_frame(s) is not None:
            vs += 1
    if c10 >= 2:
        return 2.0 * c10
    banners = sum(1 for x in lines if x.startswith("====") and _BANNER.match(x.strip()))
    if banners and tables == 0 and threads == 0:
        return 4.0 * banners + 1.5 * sum(1 for x in lines if "!" in x and _BARE_ROW.match(x.strip()))
    if tables == 0 and threads == 0 and vs < 2:
        # a ``kb`` table pasted without its header: rows of 2+ hex columns then ``module!function``
        return 1.5 * kb if kb >= 3 else 0.0
    return 6.0 * tables + 4.0 * threads + (1.5 * frames if tables or threads else 0.0) + 1.5 * vs


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    owner: Optional[int] = None  # ``!cs -o``: the owning thread whose stack the next table is
    for line in lines:
        s = line.strip()
        if not s:
            continue
        m = _OWNER.match(s) if s.startswith("OwningThread") else None
        if m or s.startswith("-----"):  # each critical section's entry starts with a line of dashes
            owner = (to_int(m.group(1), 16) or None) if m else None  # 0: nobody owns it
        if " Id: " in s:
            m = _THREAD.match(s)
            if m:
                cur = Thread(tid=to_int(m.group(4), 16), current=m.group(1) == ".")
                proc.pid = proc.pid or to_int(m.group(3), 16)
                if m.group(5):
                    cur.name = m.group(5)
                cur.notes.append("WinDbg thread %s" % m.group(2))
                threads.append(cur)
                continue
        if "RetAddr" in s and _TABLE.match(s):
            if owner is not None:
                cur = next((t for t in threads if t.tid == owner and not t.frames), None)
                if cur is None:
                    cur = Thread(tid=owner)
                    threads.append(cur)
                cur.notes.append("WinDbg !cs: the owning thread's stack")
                owner = None
                continue
            if cur is None or cur.frames:
                cur = Thread()
                cur.notes.append("WinDbg call stack")
                threads.append(cur)
            continue
        m = _BANNER.match(s) if s.startswith("====") else None
        if m:
            cur = Thread()
            cur.notes.append("JUCE backtrace thread %s" % m.group(1))
            threads.append(cur)
            continue
        m = _BARE_ROW.match(s) if cur is not None and cur.notes[:1] and cur.notes[0].startswith("JUCE") else None
        if m:
            cur.frames.append(Frame(kind="native", function=m.group(2), library=m.group(1)))
            continue
        if s.rstrip(":").lower() in _STACK_HEADINGS and s.endswith(":"):
            cur = None  # "Callstack:" heads the next thread's rows (several pasted one after another)
            messages.append(s)
            continue
        f = _c10_frame(s)
        if f is not None and (cur is None or _C10_NOTE not in cur.notes):
            cur = Thread()
            cur.notes.append(_C10_NOTE)
            threads.append(cur)
        f = f or _windbg_frame(s, numbered=cur is None and not _KB_ROW.match(s))
        if f is not None and cur is None:
            cur = Thread()
            cur.notes.append("WinDbg call stack (its header is not in the text)")
            threads.append(cur)
        if f is None and "!" in line:
            f = _vs_frame(line.lstrip(" ") if line[:1] == " " and "\t" not in line[:3] else line)
            if f is not None and cur is None:
                cur = Thread()
                cur.notes.append("Visual Studio call stack")
                threads.append(cur)
        if f is not None and cur is not None:
            cur.frames.append(f)
            continue
        if s.startswith("[") and s.split("\t", 1)[0].endswith("]") and cur is not None:
            cur.notes.append(s.split("\t", 1)[0])  # "[Managed to Native Transition]"
            continue
        messages.append(s)
    proc.threads.extend(t for t in threads if t.frames)
    proc.messages.extend(cap_messages(messages, proc.notes))
