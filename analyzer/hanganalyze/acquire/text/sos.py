""".NET's SOS debugger extension (in lldb or WinDbg): ``eestack`` / ``dumpstack`` and ``clrstack``, what
people who host Python in .NET (pythonnet, CoreCLR) or .NET in Python paste when the process hangs or
crashes.

::

    Thread   1                                                    -> a thread (eestack's number)
    Current frame: libpython3.6m.so!Py_DecRef + 0xf               -> its innermost frame
    Child-SP         RetAddr          Caller, Callee              -> eestack / dumpstack rows follow
    00007FFFB92B1420 00007f8a3ced90cc (MethodDesc 00007f8a3d088a48 + 0x2c Python.Runtime.Runtime.XDecref(IntPtr)), ...
    00007FFFB92B1370 00007f8a3ced902d libcoreclr.so!CallDescrWorker + 0x12, calling ...
    OS Thread Id: 0x1a2c (3)                                      -> clrstack's thread
            Child SP               IP Call Site
    000000D5F0F7E8A8 00007ffd7a0c6f44 [HelperMethodFrame_1OBJ: 000000d5f0f7e8a8] System.Threading.Monitor.ObjWait(...)
    000000D5F0F7E9D0 00007ffd1b8a3e62 System.Threading.Monitor.Wait(System.Object, Int32)

Rows are innermost first, as every reader gives them.  A managed method is a frame whose function is
the method's full name (``Namespace.Type.Method``) and no library; a native row keeps its module as the
library.  ``dumpstack`` repeats a row for each return address it finds on the stack: a row equal to the
one before is read once.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, split_call, to_int

NAME = "sos"

_THREAD = re.compile(r"^(?:Thread\s{1,8}(\d{1,6})|OS Thread Id:\s{0,4}0x([0-9a-fA-F]{1,8})"
                     r"(?:\s{0,4}\((\d{1,6})\))?)\s*$")
_HEADER = re.compile(r"^(?:Child-SP\s{1,40}RetAddr\s{1,40}Caller,\s{0,4}Callee"
                     r"|Child SP\s{1,40}IP\s{1,40}Call Site)\s*$")
_CURRENT = re.compile(r"^Current frame:\s{0,8}(\S{1,2000}?)(?:\s{0,4}\+\s{0,4}0x[0-9a-fA-F]{1,16})?\s*$")
_ROW = re.compile(r"^[0-9a-fA-F]{8,16}\s{1,8}[0-9a-fA-F]{8,16}\s{1,8}(\S.{0,4000})$")
#: ``(MethodDesc 00007f8a3d088a48 + 0x2c Python.Runtime.Runtime.XDecref(IntPtr))``, then ``, calling ...``
_METHOD = re.compile(r"^\(MethodDesc [0-9a-fA-F]{1,16} \+ 0x[0-9a-fA-F]{1,8} (.{1,3000}?)\)(?:, calling .*)?$")
#: ``libcoreclr.so!CallDescrWorker + 0x12`` (``, calling ...`` after it)
_NATIVE = re.compile(r"^([\w.\-+]{1,200})!([^\s,]{1,2000}?)(?:\s{0,4}\+\s{0,4}0x[0-9a-fA-F]{1,16})?(?:, calling .*)?$")
#: clrstack's call site: a managed method (``A.B.C(args)``), after a ``[HelperMethodFrame...]`` tag.
_MANAGED = re.compile(r"^(?:\[[^\]]{1,300}\]\s{0,4})?([A-Za-z_][\w`]{0,300}(?:\.[\w`<>]{1,300}){1,40})\(.{0,3000}\)$")


def _site(site: str) -> Optional[Frame]:
    """One row's call site as a frame; None for what is not a frame (a transition frame's tag alone)."""
    m = _METHOD.match(site)
    if m:
        name, _args = split_call(m.group(1))
        return Frame(kind="native", function=name or None)
    m = _NATIVE.match(site)
    if m:
        return Frame(kind="native", function=m.group(2), library=m.group(1))
    m = _MANAGED.match(site)
    if m:
        return Frame(kind="native", function=m.group(1))
    return None


def score(lines: List[str]) -> float:
    headers = rows = 0
    for line in lines:
        s = line.strip()
        if _HEADER.match(s) or (s.startswith("OS Thread Id:") and _THREAD.match(s)):
            headers += 1
        elif s.startswith("Current frame:") and _CURRENT.match(s):
            headers += 1
        else:
            m = _ROW.match(s) if s[:1].isalnum() else None
            rows += 1 if m and _site(m.group(1)) is not None else 0
    return 6.0 * headers + 1.5 * rows if headers and rows else 0.0


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    cur: Optional[Thread] = None
    last = ""
    for line in lines:
        s = line.strip()
        if not s:
            continue
        m = _THREAD.match(s)
        if m:
            cur = Thread()
            if m.group(2):
                cur.tid = to_int(m.group(2), 16)
            cur.notes.append("SOS thread %s" % (m.group(1) or m.group(3) or m.group(2)))
            proc.threads.append(cur)
            last = ""
            continue
        if _HEADER.match(s):
            if cur is None or cur.frames and not cur.notes[-1].startswith("SOS current frame"):
                cur = Thread()
                proc.threads.append(cur)
            cur.notes.append(".NET SOS stack (eestack / dumpstack / clrstack)")
            continue
        m = _CURRENT.match(s) if s.startswith("Current frame:") else None
        if m:
            frame = _site(m.group(1))
            if frame is not None:
                if cur is None:
                    cur = Thread()
                    proc.threads.append(cur)
                cur.frames.append(frame)
                cur.notes.append("SOS current frame")
                last = ""
                continue
        m = _ROW.match(s) if s[:1].isalnum() else None
        frame = _site(m.group(1)) if m else None
        if frame is not None and cur is not None:
            site = m.group(1) if m else ""
            if site != last:
                cur.frames.append(frame)
            last = site
            continue
        messages.append(s)
    proc.threads[:] = [t for t in proc.threads if t.frames]
    proc.messages.extend(cap_messages(messages, proc.notes))
