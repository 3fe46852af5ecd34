"""JVM thread dumps (``jstack PID``, ``kill -3``, ``jcmd PID Thread.print``, a Spark UI's or an
IDE's copy of them): the Java side of a process that embeds Python (libpython-clj, JPype, Jython)
or that Python drives (PySpark's driver over py4j, a Bazel or Gradle build running Python tools).

::

    "main" #1 prio=5 os_prio=0 cpu=61.2ms elapsed=9.1s tid=0x7f.. nid=0x3c19 waiting for monitor entry [0x7f..]
                                                         -> a thread: name, tid (nid: the LWP)
       java.lang.Thread.State: BLOCKED (on object monitor)            -> a note
        at app.Ledger.transfer(Ledger.java:42)                        -> a frame (function, file, line)
        - waiting to lock <0x000000076ab62208> (a app.Account)        -> Thread.waits: a monitor ...
        - locked <0x000000076ab62218> (a app.Account)                 -> ... whose holder is the
                                                                        thread that printed "locked"
        at java.lang.Thread.run(java.base@17/Thread.java:833)
    Found one Java-level deadlock:                                    -> a message (the JVM's own
    "ScriptSupport":                                                     cycle report: its threads'
      waiting to lock monitor 0x.. (object 0x.., a cls),                 headers are "name": and its
      which is held by "Worker-2"                                        lines messages)

Frames are innermost first, as the JVM prints them; each is a native-kind frame named
``package.Class.method`` with its ``File.java`` and line (``Native Method`` and ``Unknown Source``
have none).  A monitor the thread waits to enter (``waiting to lock``) or a lock it parks on
(``parking to wait for`` a ReentrantLock, a read-write lock, a semaphore) is its wait, a mutex held
by the thread whose dump says ``locked`` it (or lists it under ``Locked ownable synchronizers``):
the wait-for graph then finds a Java-level deadlock the way it finds a pthread one.  What other
waits the frames show (``Object.wait``, a blocking queue's ``take``, ``Thread.sleep``, a socket
read) are read from the method names (``signatures/triage/waits.yaml``).

Only a thread header, a ``java.lang.Thread.State:`` line or a lock line makes a text this format:
``at ...(File.java:N)`` lines alone are a Java exception's stack trace (a Py4JJavaError), which
holds no thread's wait.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread, Wait

from .common import cap_messages, to_int

NAME = "jvm-threads"

#: ``"name" #12 daemon prio=5 os_prio=0 ... tid=0x.. nid=0x1a2b <state> [0x..]``: the quoted name,
#: then at least one of the fields every JVM since 6 prints (a wrapped header keeps only the first).
_HEADER = re.compile(r'^"(?P<name>[^"]{0,300})"(?P<rest> .{0,600})?$')
#: ... at least one of the fields every JVM since 6 prints after the name (a wrapped header keeps
#: only the first few): what tells it from a quoted line of prose
_HEADER_FIELD = re.compile(r"(?:^ #\d{1,9}\b|\bprio=\d|\btid=0x|\bnid=(?:0x)?[0-9a-fA-F]| - Thread t@\d)")
#: NetBeans / VisualVM (and JMC's copy): ``"Timer-46" - Thread t@1884806``: the Java thread id, the
#: one its lock lines name an owner by (``owned by "name" t@1792157``).
_T_AT = re.compile(r" - Thread t@(\d{1,19})$")
#: The header's second half, where a terminal or a chat wrapped it: ``tid=0x.. nid=0x.. runnable [0x..]``.
_HEADER_TAIL = re.compile(r"^tid=0x[0-9a-fA-F]{1,16}\b")
_NID = re.compile(r"\bnid=(0x[0-9a-fA-F]{1,16}|\d{1,10})\b")
_STATE = re.compile(r"^java\.lang\.Thread\.State: ([A-Z_]{4,16})(?: \(([\w ]{1,40})\))?$")
#: ``at pkg.Class.method(File.java:12)``; a module prefix (``java.base@17/``) before the class.
_FRAME = re.compile(r"^at (?:[\w.@-]{1,100}/)?(?P<func>[\w$.<>/-]{1,400})\((?P<src>[^()]{0,300})\)$")
_SOURCE = re.compile(r"^(?P<file>[\w$.-]{1,200}\.(?:java|scala|kt|groovy|clj|cljc)):(?P<line>\d{1,7})$")
#: ``- waiting to lock <0x..> (a cls)`` and its kin, under the frame they belong to.
#: (VisualVM prints the identity hash without ``0x`` and the owner it knows after the class:
#: ``- waiting to lock <60eba516> (a X) owned by "name" t@1792157``)
_LOCKLINE = re.compile(r"^- (?P<what>locked|waiting to lock|waiting on|parking to wait for|"
                       r"waiting to re-lock in wait\(\)|"
                       r"eliminated)\s{1,4}<(?P<addr>(?:0x)?[0-9a-fA-F]{1,16})>(?: \(a (?P<cls>[\w$.]{1,300})\))?"
                       r'(?: owned by "(?P<owner>[^"]{0,300})" t@(?P<owner_id>\d{1,19}))?$')
#: ``- <0x..> (a java.util.concurrent.locks.ReentrantLock$NonfairSync)`` under "Locked ownable synchronizers:".
_OWNABLE = re.compile(r"^- <(?P<addr>0x[0-9a-fA-F]{1,16})> \(a (?P<cls>[\w$.]{1,300})\)$")
#: Parking on one of these is waiting for a lock (its holder lists it as an ownable synchronizer);
#: parking on anything else (a condition, a latch, a future) is left to the frames.
_PARKED_LOCK = re.compile(r"^java\.util\.concurrent\.locks\.(ReentrantLock|ReentrantReadWriteLock)\$\w+$")
_HTML = re.compile(r"</?(?:b|i|em|strong|code)>")


def _clean(s: str) -> str:
    return _HTML.sub("", s).strip()


#: ``"name":``: a thread's header in the JVM's deadlock report (its cycle, then "Java stack information
#: for the threads listed above").
_REPORT_HEADER = re.compile(r'^"(?P<name>[^"]{1,300})":(?P<rest>)$')


def _header(s: str) -> Optional[re.Match]:
    m = _HEADER.match(s)
    if m is None or not m.group("rest") or not _HEADER_FIELD.search(m.group("rest")):
        return _REPORT_HEADER.match(s)
    return m


def score(lines: List[str]) -> float:
    heads = states = locks = frames = 0
    for line in lines:
        s = _clean(line)
        if s.startswith('"') and _header(s):
            heads += 1
        elif s.startswith("java.lang.Thread.State: ") and _STATE.match(s):
            states += 1
        elif s.startswith("- ") and _LOCKLINE.match(s):
            locks += 1
        elif s.startswith("at ") and _FRAME.match(s):
            frames += 1
    if heads + states + locks == 0:
        return 0.0  # a Java exception's stack trace, not a thread dump
    return 5.0 * (heads + states) + 3.0 * locks + 1.0 * frames


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    holders: Dict[str, Thread] = {}  # lock address -> the thread that holds it
    wanted: Dict[int, str] = {}  # id(thread) -> the address it waits for
    ownable = False
    for line in lines:
        s = _clean(line)
        if not s:
            continue
        m = _header(s) if s.startswith('"') else None
        if m is not None:
            cur = Thread(name=m.group("name"))
            nid = _NID.search(m.group("rest")) or _T_AT.search(m.group("rest"))
            cur.tid = to_int(nid.group(1), 16 if nid.group(1).startswith("0x") else 10) if nid else None
            if nid is not None and nid.re is _T_AT:
                cur.notes.append("its id is the Java thread id (t@%s), the one owners are named by" % nid.group(1))
            threads.append(cur)
            ownable = False
            continue
        if cur is not None and _HEADER_TAIL.match(s) and not cur.frames:
            nid = _NID.search(s)
            if nid and cur.tid is None:
                cur.tid = to_int(nid.group(1), 16 if nid.group(1).startswith("0x") else 10)
            continue
        m = _STATE.match(s) if s.startswith("java.lang.Thread.State: ") else None
        if m is not None:
            if cur is None:
                cur = Thread()
                threads.append(cur)
            cur.notes.append("Java thread state %s%s" % (m.group(1), " (%s)" % m.group(2) if m.group(2) else ""))
            continue
        m = _FRAME.match(s) if s.startswith("at ") else None
        if m is not None:
            if cur is None:
                cur = Thread()
                cur.notes.append("the thread header is not in the text (the paste starts inside its frames)")
                threads.append(cur)
            src = _SOURCE.match(m.group("src"))
            cur.frames.append(Frame(kind="native", function=m.group("func"),
                                    file=src.group("file") if src else None,
                                    line=int(src.group("line")) if src else None))
            continue
        m = _LOCKLINE.match(s) if s.startswith("- ") else None
        if m is not None and cur is not None:
            what, addr, cls = m.group("what"), m.group("addr").lower(), m.group("cls") or ""
            if what == "locked":
                holders.setdefault(addr, cur)
            elif what == "waiting to lock" or (what == "parking to wait for" and _PARKED_LOCK.match(cls)):
                cur.waits = Wait(kind="mutex", resource=addr, name="%s <%s>" % (cls, addr) if cls else addr,
                                 frame=max(0, len(cur.frames) - 1),
                                 detail="Java %s <%s> (a %s)" % (what, addr, cls or "?"))
                wanted[id(cur)] = addr
                if m.group("owner_id"):  # VisualVM names the owner: its t@ id is the owner's header's
                    cur.waits.owner_tid = to_int(m.group("owner_id"))
                    cur.waits.detail += ", owned by \"%s\" t@%s" % (m.group("owner"), m.group("owner_id"))
            continue
        if s == "Locked ownable synchronizers:":
            ownable = True
            continue
        m = _OWNABLE.match(s) if ownable and cur is not None and s.startswith("- <") else None
        if m is not None:
            holders.setdefault(m.group("addr").lower(), cur)  # type: ignore[arg-type]
            continue
        messages.append(s)
    for t in threads:
        addr = wanted.get(id(t))
        holder = holders.get(addr) if addr else None
        if t.waits is not None and holder is not None and holder is not t:
            t.waits.owner_tid = holder.tid
            t.waits.detail = "%s, held by \"%s\"" % (t.waits.detail, holder.name or "?")
    proc.threads.extend(threads)
    proc.messages.extend(cap_messages(messages, proc.notes))
