"""Go's goroutine dumps: what a Go program prints on SIGQUIT (``kill -QUIT``, Ctrl-\\), on a panic, on
the runtime's own fatal errors ("all goroutines are asleep - deadlock!"), and what
``/debug/pprof/goroutine?debug=2`` serves.  ML serving stacks are often Go around Python or C++
(ollama over llama.cpp, a Ray or Kubernetes side-car): their hang reports carry these dumps.

::

    SIGQUIT: quit                                           -> a message
    goroutine 7 [chan receive, 42 minutes]:                 -> a thread "goroutine 7", its state a note
    runtime.gopark(0x10120fcc8?, 0x0?, 0x0?, 0x0?, 0x0?)   -> a frame: function ...
        /usr/lib/go/src/runtime/proc.go:398 +0xce fp=0x..   -> ... its file and line (a tab before it)
    sync.(*Mutex).Lock(...)                                 -> ``(...)``: an inlined call
        /usr/lib/go/src/sync/mutex.go:83
    created by main.main in goroutine 1                     -> a note (who started it)

Frames are innermost first, as Go prints them.  What each goroutine waits for is read from its
frames (``signatures/triage/waits.yaml``: a channel receive is a queue's wait, ``sync.(*Mutex).Lock``
a lock's); the state in the header (``[semacquire]``, ``[IO wait]``) is kept as a note.  Goroutine 1
runs ``main.main``: it is the program's main thread.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int

NAME = "goroutines"

#: ``goroutine 7 [chan receive, 42 minutes]:`` (``[running]``, ``[syscall, locked to thread]`` ...).
_HEADER = re.compile(r"^goroutine (\d{1,12}) (?:gp=0x[0-9a-f]{1,16} m=\S{1,12} mp=0x[0-9a-f]{1,16} )?"
                     r"\[([^\]]{1,200})\]:$")
#: ``pkg/path.(*Type).Method(0xc000123456, {0x1, 0x2})`` / ``main.main()`` / ``sync.(*Mutex).Lock(...)``.
_CALL = re.compile(r"^(?P<func>[\w./*()\[\]{}\-~%$]{1,400}?)\((?P<args>[^()]{0,2000}|\.\.\.)\)$")
#: the frame's place: a tab, ``/path/file.go:123``, then ``+0x1d`` and ``fp= sp= pc=`` when printed.
_WHERE = re.compile(r"^(?P<file>\S{1,600}\.(?:go|s|c)):(?P<line>\d{1,7})(?: \+0x[0-9a-f]{1,8})?(?: .{0,200})?$")
_CREATED = re.compile(r"^created by (\S{1,400})(?: in goroutine (\d{1,12}))?$")
#: A goroutine's state (its header's first word group) -> the runtime function it waits in.  Go hides
#: the runtime's frames by default (GOTRACEBACK=single): the state is then the dump's only word for
#: the wait, and stands as that frame, noted as such.
STATE_WAITS = {
    "chan receive": "runtime.chanrecv", "chan receive (nil chan)": "runtime.chanrecv",
    "chan send": "runtime.chansend", "chan send (nil chan)": "runtime.chansend",
    "select": "runtime.selectgo", "select (no cases)": "runtime.selectgo",
    "semacquire": "sync.runtime_SemacquireMutex", "sync.Mutex.Lock": "sync.runtime_SemacquireMutex",
    "sync.RWMutex.Lock": "sync.runtime_SemacquireRWMutex", "sync.RWMutex.RLock": "sync.runtime_SemacquireRWMutexR",
    "sync.WaitGroup.Wait": "sync.(*WaitGroup).Wait", "sync.Cond.Wait": "sync.(*Cond).Wait",
    "IO wait": "internal/poll.runtime_pollWait", "sleep": "time.Sleep",
}
_RUNTIME = ("runtime.", "sync.", "internal/", "time.Sleep")


def score(lines: List[str]) -> float:
    heads = frames = 0
    for line in lines:
        s = line.strip()
        if s.startswith("goroutine ") and _HEADER.match(s):
            heads += 1
        elif line[:1] == "\t" and _WHERE.match(s):
            frames += 1
    if heads == 0 or frames == 0:
        return 0.0
    return 8.0 * heads + frames


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    cur: Optional[Thread] = None
    pending: Optional[Frame] = None  # a call line whose place line may follow
    for line in lines:
        s = line.strip()
        if not s:
            pending = None
            continue
        m = _HEADER.match(s)
        if m:
            cur = Thread(name="goroutine %s" % m.group(1))  # (a goroutine id is no LWP: no tid)
            cur.notes.append("goroutine state: %s" % m.group(2))
            if m.group(2).startswith("running"):
                cur.current = True  # the goroutine that runs: in a panic's dump, the one that panicked
            if m.group(1) == "1":
                cur.python_name = "MainThread"  # goroutine 1 runs main.main: the program's main thread
            proc.threads.append(cur)
            pending = None
            continue
        if cur is not None:
            w = _WHERE.match(s) if pending is not None else None
            if w:
                pending.file, pending.line = w.group("file"), to_int(w.group("line"))
                pending = None
                continue
            c = _CALL.match(s)
            if c and "." in c.group("func"):
                pending = Frame(kind="native", function=c.group("func"))
                if c.group("args") == "...":
                    pending.inlined = True
                cur.frames.append(pending)
                continue
            k = _CREATED.match(s)
            if k:
                by = " in goroutine %s" % k.group(2) if k.group(2) else ""
                cur.notes.append("created by %s%s" % (k.group(1), by))
                pending = Frame(kind="native", function=None)  # its place line follows: no frame of this goroutine
                continue
        pending = None
        messages.append(s)
    for t in proc.threads:
        t.frames = [f for f in t.frames if f.function]
        state = next((n[len("goroutine state: "):] for n in t.notes if n.startswith("goroutine state: ")), "")
        wait = STATE_WAITS.get(state.split(",")[0].strip())
        if wait and t.frames and not (t.frames[0].function or "").startswith(_RUNTIME):
            note = "the goroutine's state [%s]: the runtime's frames are not in the dump" % state
            t.frames.insert(0, Frame(kind="native", function=wait, note=note))
    proc.messages.extend(cap_messages(messages, proc.notes))
