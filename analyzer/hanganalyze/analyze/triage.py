"""The triage: an answer for every input, as WinDbg's ``!analyze`` always names a faulting frame.

Known-bug signatures fit the shapes they were written from; most real hangs match none, and "no
known bug matched" told users nothing.  The triage says, from any stack or log: per thread, what
it waits for (GPU work, a collective, a lock and its owner, the GIL, a join, a child process, a
queue or pipe, network or file I/O, a sleep, the loader lock) or that it runs; which thread(s) the
hang is about; the blame frame (the first frame outside the C runtime, the interpreter, the CUDA
driver and the wait helpers); and what to capture or set next.  It is one finding per process
(signature ``triage``, severity ``triage``), first when no known bug matched, and the bucket id is
then built on its wait and blame frame (``bucket.bucket_text``).

The categories, their frame patterns and the next steps are data: ``signatures/triage/waits.yaml``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hanganalyze.analyze import crashframes
from hanganalyze.analyze.crashframes import CRASH_FRAMES, crash_on_stack, proven, raising_c10
from hanganalyze.analyze.extbuild import build_lock_wait
from hanganalyze.analyze.findings import from_rule
from hanganalyze.analyze.forkchild import inherited_lock_wait
from hanganalyze.analyze.logtriage import log_answer
from hanganalyze.analyze.logwait import crash_from_timeout, message_category, paste_timeouts, timed_out
from hanganalyze.analyze.lonestop import lone_crash, lone_stop
from hanganalyze.analyze.outsideabort import abort_from_outside
from hanganalyze.analyze.programkind import advice_fits, advice_text, input_kind, program_kinds
from hanganalyze.analyze.ranksets import compress_ranks
from hanganalyze.analyze.ruledecl import rule
from hanganalyze.analyze.rules import load_rules
from hanganalyze.analyze.sourcewait import called_method, source_wait
from hanganalyze.analyze.threadchoice import background, helper_order, join_holds_lock, main_first, main_missing
from hanganalyze.analyze.triagetable import Category, glob_match, path_hit, table
from hanganalyze.frametext import FrameStyle, frame_text
from hanganalyze.loglines import DEVICE_NOTE, EXCEPTHOOK_NOTE, SIGNAL_THREAD_CUT_NOTE
from hanganalyze.names import basename, normalize_native_name, wait_name
from hanganalyze_gdbext.model import Evidence, Finding, Frame, Process, Snapshot, Thread, Triage, TriageThread
from hanganalyze_gdbext.model.labels import ThreadStyle, thread_label
from hanganalyze_gdbext.model.signals import FATAL_SIGNALS

#: The triage's rule id: its title, severity and cause are its entry of ``signatures/rules/rules.yaml``.
SIGNATURE = "triage"
#: Threads named in the evidence, at most.
MAX_ABOUT = 6
#: Threads listed in ``Finding.triage.threads``, at most (a 1,000-thread process stays small).
MAX_LISTED = 64


def _names(f: Frame) -> Tuple[str, str]:
    if not f.function or f.function == "??":
        return "", ""
    norm = normalize_native_name(f.function)
    return norm, wait_name(norm)


def _frame_matches(cat: Category, f: Frame) -> bool:
    if f.marker:
        return False
    if f.kind == "python":
        # a paste's own annotation after the name ("join  # <-- HERE") is not part of it
        file, func = basename(f.file), (f.function or "").split(" ", 1)[0].rsplit(".", 1)[-1]
        if path_hit(cat, f.file):
            return True
        return any(glob_match(file, pf) and glob_match(func, pn) for pf, pn in cat.python)
    norm, short = _names(f)
    if not norm:
        lib = basename(f.library)
        return bool(lib) and any(glob_match(lib, g) for g in cat.unnamed)
    return any(rx is not None and bool(rx.search(norm) or rx.search(short)) for rx in (cat.native, cat.context))


def _entering(cat: Category, f: Frame) -> bool:
    func = (f.function or "").split(" ", 1)[0].rsplit(".", 1)[-1]
    return any(glob_match(basename(f.file), pf) and glob_match(func, pn) for pf, pn in cat.entered)


@dataclass
class ThreadTriage:
    """What one thread waits for (``category``), where (``frame``) and the blame frame."""

    thread: Thread
    category: Category
    frame: Optional[int] = None
    blame: Optional[int] = None
    owner: Optional[int] = None
    how: str = "frames"
    #: "forked" / "likely": a forked child waiting for a lock it inherited (``forkchild.py``)
    inherited: Optional[str] = None

    def record(self) -> TriageThread:
        frames = self.thread.all_frames()
        waits_in = frame_text(frames[self.frame], FrameStyle.TRIAGE) if self.frame is not None else None
        blame = frame_text(frames[self.blame], FrameStyle.TRIAGE) if self.blame is not None else None
        return TriageThread(tid=self.thread.tid, name=self.thread.name, wait=self.category.id,
                            waits_in=waits_in, blame=blame, owner=self.owner, inherited=self.inherited)


def _crashed(proc: Process, t: Thread, first: bool, threads: Sequence[Thread] = ()) -> bool:
    """The thread that got a fatal signal; without a signal, the current (else the first) thread of a
    process whose log says it crashed ("Fatal Python error", LOG(FATAL), gdb's "received signal
    SIGSEGV"), or whose reader marked a current thread.  ``threads``: the threads with frames (a
    current thread with none, faulthandler's "<no Python frame>", does not hide one that has them)."""
    threads = threads or proc.threads
    if proc.signal not in FATAL_SIGNALS:
        if crash_on_stack(t, lambda f: _names(f)[0], proc.signal is None) or lone_stop(proc, t, threads):
            return True  # abort on top of its stack (SIGABRT, whatever the paste left out), a fatal handler on it
        if not (t.current or first):
            return False
        if message_category(proc, [table().crashed])[0] is None and not (t.current and crashframes.marked(proc)):
            return False
        return t.current or not any(x.current for x in threads)
    if t.current:
        return True
    if first and len(threads) == 1 and SIGNAL_THREAD_CUT_NOTE not in proc.notes:
        return True  # one thread and a fatal signal: the signal's thread (a UCX or glog backtrace)
    return any(CRASH_FRAMES.match(_names(f)[1] or (f.function or "")) for f in t.frames[:10])


_WAIT_KINDS = {"mutex": "lock", "rwlock": "lock", "pylock": "lock", "rlock": "lock", "futex": "lock",
               "join": "join", "pyjoin": "join", "gil": "gil", "condvar": "condition"}


def _asleep_above(cat: Category, frames: Sequence[Frame], i: int) -> bool:
    """``only_above``: every frame inside the matched one is a wait primitive (module data)."""
    if cat.only_above is None:
        return True
    for f in frames[:i]:
        norm, short = _names(f)
        if not norm:
            if f.kind == "python" or not table().skip_libraries.search(basename(f.library) or ""):
                return False
        elif not (cat.only_above.search(norm) or cat.only_above.search(short)):
            return False
    return True


def _called_from_outside(cat: Category, frames: Sequence[Frame], i: int, selected: bool = False) -> bool:
    """A frame matched only by its library (an unnamed driver frame) counts when something outside
    that library and the C runtime called it: a host thread that entered the driver.  The driver's
    own helper threads (started inside it, polling its event queue) wait for nothing of the program.
    A frame of a library only host threads pass through (``entered_from``: the CUDA runtime) counts
    as such a caller.  ``selected``: the stack is gdb's lone ``bt`` (no thread list; a py-spy dump's
    named threads may stand beside it): the thread gdb had selected, the main thread at attach (a
    driver's helper thread shows only in ``thread apply all bt``), so a cut stack of driver frames
    is still a host thread's."""
    norm, _short = _names(frames[i])
    if norm or frames[i].kind == "python" or selected:
        return True
    for f in frames[i + 1:]:
        if f.marker:
            continue
        lib = basename(f.library)
        if lib and any(glob_match(lib, g) for g in cat.entered_from):
            return True
        if f.kind == "python" or (lib and not any(glob_match(lib, g) for g in cat.unnamed)
                                  and not table().skip_libraries.search(lib)):
            return True
    return False


def classify(proc: Process, t: Thread, crashed: bool = False, memo: Optional[Dict[tuple, tuple]] = None
             ) -> ThreadTriage:
    """``_classify``; a cut traceback's last line calling its own object's method: that method's wait
    (``called_method``); the fork hazard (``forkchild.py``): a forked child's lock wait, or a std
    stream's flush or logging's lock read as I/O or nothing."""
    r = _classify(proc, t, crashed, memo)
    cut = r.category is table().runs and crashframes.cut_traceback(t)
    callee = called_method(t.all_frames()) if cut else None
    if callee is not None:
        c = _classify(proc, replace(t, frames=[callee] + t.all_frames(), python_frames=[]), crashed)
        r = ThreadTriage(t, c.category, 0, r.blame, r.owner, "callee") if c.category is not r.category else r
    if r.inherited is None and r.how not in ("signal", "samples"):
        how = inherited_lock_wait(t.all_frames(), r.category.id, proc.messages)
        if how is not None:
            lock = table().by_id("lock") or r.category
            frame = r.frame if r.frame is not None else 0
            r = ThreadTriage(t, lock, frame, r.blame, r.owner, r.how, how)
    return r


def _classify(proc: Process, t: Thread, crashed: bool = False, memo: Optional[Dict[tuple, tuple]] = None
              ) -> ThreadTriage:
    """The first category (``waits.yaml`` order) one of the thread's innermost frames matches.  A
    thread that repeated samples saw run Python code (``progress``) runs, wherever it was caught.
    ``memo`` (one dict per snapshot) reuses the answer of threads that share their frame lists
    (``analyze/intern.py``): a job repeats the same few stacks."""
    if memo is not None:
        w = t.waits
        key = (id(t.frames), id(t.python_frames) if t.python_frames else 0, crashed,
               (w.kind, w.frame) if w is not None else None, t.state.gil if t.state is not None else None,
               t.progress.state if t.progress is not None else None)
        hit = memo.get(key)
        if hit is not None and hit[0] is t.frames:
            return ThreadTriage(t, hit[1], hit[2], hit[3], w.owner_tid if w is not None else None, hit[4], hit[5])
        r = classify(proc, t, crashed)
        memo[key] = (t.frames, r.category, r.frame, r.blame, r.how, r.inherited)
        return r
    tab = table()
    frames = t.all_frames()
    owner = t.waits.owner_tid if t.waits is not None else None
    if crashed:  # blamed under the signal's trampoline: the handler only printed the crash
        return ThreadTriage(t, tab.crashed, None, blame_frame(frames, crashframes.below_handler(frames)), owner,
                            "signal")
    if t.progress is not None and t.progress.state == "progressing":
        return ThreadTriage(t, tab.runs, None, blame_frame(frames), owner, "samples")
    lock = table().by_id("lock")
    # a GIL wait known from memory or from the arguments gdb printed (the GIL's condition variable):
    # in the GIL's place of the order, before the condition variable or futex it waits in
    gil = t.waits is not None and t.waits.kind == "gil"
    if t.waits is not None and (t.waits.name or "").startswith("_rtld_global+") and tab.by_id("loader-lock"):
        # glibc's loader locks live in _rtld_global: gdb printed one as the mutex's argument (open round 107)
        return ThreadTriage(t, tab.by_id("loader-lock"), t.waits.frame, blame_frame(frames, t.waits.frame or 0),
                            owner, "memory")
    said = not gil and t.state.gil == "waiting" and all(f.kind == "python" or f.marker for f in frames)  # py-bt
    selected = (t.current and t.tid is None and t.name is None and not t.python_frames  # gdb's lone bt, beside
                and all(x is t or x.tid is not None or x.name is not None for x in proc.threads))  # named threads
    # the innermost Python line, where no native frame but a lock primitive is innermost (sourcewait.py):
    # it speaks for its own frame, before a frame list's match further out
    src = source_wait(frames, through_lock=True) if crashframes.interrupted_wait(t, proc.messages) else None
    src_cat = tab.by_id(src[0]) if src is not None else None
    k = next((i for i, f in enumerate(frames[:12]) if f.kind == "python"), -1)  # entering a primitive
    ent = next((c for c in tab.categories if k >= 0 and c.entered and _entering(c, frames[k])), None)
    for cat in tab.categories:
        for i, f in enumerate(frames[:cat.within]):
            if src_cat is not None and src is not None and (i > src[1] or (f.kind != "python" and not f.marker)):
                break
            if (_frame_matches(cat, f) and _called_from_outside(cat, frames, i, selected)
                    and _asleep_above(cat, frames, i) and not tab.vetoed(cat, frames, i)):
                # the loader's frame innermost: the paste stops there, or the lock wait is inlined
                if cat.needs_lock_wait and i > 0 and not (lock and any(_frame_matches(lock, g) for g in frames[:i])):
                    break
                if ent is not None and k < i:
                    cat, i = ent, k
                return ThreadTriage(t, cat, i, blame_frame(frames, i), owner)
        if gil and cat.id == "gil":
            return ThreadTriage(t, cat, t.waits.frame, blame_frame(frames, t.waits.frame or 0), owner, "memory")
        if said and cat.id == "gil":  # the dumper's word for a Python-only stack: innermost, inside its last call
            return ThreadTriage(t, cat, None, blame_frame(frames), owner, "gil state")
    if t.waits is not None and t.waits.kind in _WAIT_KINDS:
        cat = tab.by_id(_WAIT_KINDS[t.waits.kind]) or tab.runs
        return ThreadTriage(t, cat, t.waits.frame, blame_frame(frames, t.waits.frame or 0), owner, "memory")
    if src_cat is not None and src is not None:
        return ThreadTriage(t, src_cat, src[1], blame_frame(frames, src[1]), owner, "source line")
    if frames and any(n.startswith(DEVICE_NOTE) for n in t.notes):  # a kernel's own frames: the GPU's work
        return ThreadTriage(t, tab.by_id("gpu") or tab.runs, 0, blame_frame(frames), owner, "gpu")
    if t.state.gil == "waiting":
        cat = tab.by_id("gil") or tab.runs
        return ThreadTriage(t, cat, None, blame_frame(frames), owner, "gil state")
    return ThreadTriage(t, tab.runs, None, blame_frame(frames), owner)


def _skipped(f: Frame) -> bool:
    tab = table()
    if f.marker:
        return True
    if f.kind == "python":
        file = basename(f.file)
        if file in tab.skip_python_files:
            return True
        path = f.file or ""
        return bool(re.search(r"/lib/python\d[.\d]*t?/(?!.*(site|dist)-packages/)", path))
    lib = basename(f.library)
    if lib and tab.skip_libraries.search(lib):
        return True
    norm, short = _names(f)
    if not norm:
        return not lib  # a ?? frame with a library outside the runtime still says where
    return bool(tab.skip_functions.search(norm) or tab.skip_functions.search(short)
                or any(c.native is not None and (c.native.search(short) or c.native.search(norm))
                       for c in tab.categories if c.id != "collective"))


def blame_frame(frames: Sequence[Frame], start: int = 0) -> Optional[int]:
    """The first frame from ``start`` outward outside the runtime, the interpreter, the driver and
    the wait helpers; None when every frame is one of those."""
    for i in range(max(start, 0), len(frames)):
        if not _skipped(frames[i]):
            return i
    for i in range(0, min(max(start, 0), len(frames))):
        if not _skipped(frames[i]):
            return i
    return None


# --------------------------------------------------------------------------------------------
# One process
# --------------------------------------------------------------------------------------------


def subject(proc: Process, rows: List[ThreadTriage]) -> List[ThreadTriage]:
    """The threads the hang is about: the most telling category (crash, lock, GIL, collective...),
    the main thread first within it, then threads sharing its wait and blame frame, then the
    owner of what it waits for."""
    if not rows:
        return []
    tab = table()
    rank = {c.id: c.rank for c in tab.categories}
    rank.update({tab.crashed.id: 0, tab.runs.id: 5})
    if join_holds_lock([(r.category.id, r.owner) for r in rows], rank):
        rank["join"] = rank.get("lock", rank.get("join", 5))  # the join-vs-lock deadlock: threadchoice.py
    # a runtime's helper thread (threadchoice.py) comes after the program's threads that wait in
    # something, whatever its own wait (cuda-gdb's helper on a futex is not the GPU hang's thread),
    # and after the main thread or one in the program's code even where that one runs
    helper = [helper_order(r.thread, proc) for r in rows]
    waiting = any((helper[i] < 2 and rank.get(r.category.id, 5) < 5) or (helper[i] == 0 and r.category is tab.runs)
                  for i, r in enumerate(rows))
    back = background(helper, [r.category.id for r in rows])
    order = sorted(range(len(rows)), key=lambda i: ((waiting and helper[i] == 2 and rows[i].category is not tab.crashed)
                                                    or back[i],
                                                    rank.get(rows[i].category.id, 5),
                                                    helper[i] if len(rows) > 1 else 0,
                                                    main_first(rows[i].thread, i, proc), i))
    first = rows[order[0]]
    key = (first.category.id, _blame_key(first))
    about = [first] + [r for r in (rows[i] for i in order[1:]) if (r.category.id, _blame_key(r)) == key]
    owners = {r.owner for r in about if r.owner is not None}
    about += [r for r in rows if r.thread.tid in owners and r not in about]
    if first.category.id == "gil":
        about += [r for r in rows if r.thread.state.gil == "held" and r not in about]
    return about[:MAX_ABOUT]


def _blame_key(r: ThreadTriage) -> str:
    frames = r.thread.all_frames()
    return frame_text(frames[r.blame], FrameStyle.TRIAGE) if r.blame is not None else ""


def _next_steps(proc: Process, cat: Category, frames_seen: bool, alone: bool = True
                ) -> Tuple[List[str], Optional[str]]:
    """The next steps and the cause for a wait of ``cat``, chosen from the category's advice
    entries by what the process is and how it was read (``programkind.py``): no ML advice for a
    plain program, never the command the user just ran."""
    tab = table()
    kinds, source = program_kinds(proc), input_kind(proc)

    def fitting(entries: Sequence[Any]) -> List[str]:
        return [advice_text(e) for e in entries if advice_fits(e, kinds, source, alone)]

    steps = fitting(cat.next) + fitting(tab.general.get("parent", []))
    cause = next(iter(fitting(cat.cause)), None)
    if not frames_seen:
        return steps + fitting(tab.general["log_only"]), cause
    frame_kinds = {f.kind for t in proc.threads for f in t.all_frames() if not f.marker}
    if frame_kinds == {"python"}:
        steps += fitting(tab.general["python_only"])
    elif frame_kinds == {"native"}:
        steps += fitting(tab.general["native_only"])
    native = [f for t in proc.threads for f in t.frames if f.kind == "native" and not f.marker]
    if native and sum(1 for f in native if (not f.function or f.function == "??") and not f.line) * 2 > len(native):
        steps += fitting(tab.general["unnamed"])
    return steps, cause


def _confidence(first: ThreadTriage, frames_seen: bool) -> float:
    if not frames_seen:
        return 0.4
    if first.category.id == "runs":
        return 0.3
    conf = 0.6 if first.how in ("frames", "signal") else 0.5
    if first.owner is not None:
        conf += 0.2
    if first.thread.merge == "python-only":
        conf -= 0.1
    return round(min(conf, 0.8), 2)


def triage_process(index: int, proc: Process, known_crash: bool = False, memo: Optional[Dict[tuple, tuple]] = None,
                   alone: bool = True, paste: Optional[Category] = None) -> Optional[Finding]:
    """The triage finding of one process; None when it has neither threads nor a log line that
    names a wait or a hang.
    ``known_crash``: a known bug of severity crash or error matched the process (its signal line may
    be cut from the paste): the current (else the first) thread crashed unless it waits.
    ``memo``: see ``classify``.  ``alone``: the only process of the snapshot (the advice differs).
    ``paste``: the wait a timeout line of its paste names (``logwait.py``), for frames that name none."""
    tab = table()
    threads = [t for t in proc.threads if any(not f.marker for f in t.all_frames())]
    if not threads:
        said = log_answer(proc, known_crash)
        if said is None:
            return None
        cat, msg = said.category, said.message
        ev = [Evidence(message=msg, rule="wait: %s" % cat.id, text=proc.messages[msg][:300])] if msg is not None else []
        info = Triage(wait=cat.id, label=cat.label, from_="log")
        return _finding(index, proc, said.summary, ev, info, *_next_steps(proc, cat, False, alone), said.confidence)
    crashed = [t for i, t in enumerate(threads) if _crashed(proc, t, i == 0, threads)][:1]
    crashed = [] if crashed and abort_from_outside(proc) else crashed  # a kill -ABRT of a hung process
    if known_crash and not crashed:
        crashed = [next((t for t in threads if t.current), threads[0])]
    rows = [classify(proc, t, memo=memo) for t in threads]
    timeout = timed_out(proc.messages)[0]
    if not crashed and crashframes.crash_not_shown(proc) and (paste is None or timeout is None):
        return _unshown_crash(index, proc, rows, alone)
    consequence = timeout if crashed else None
    if crashed and consequence is None and crash_from_timeout(proc, crashed[0], crashframes.raised(crashed[0])):
        consequence = paste  # the crash is a traceback's with no exception of its own: the timeout's
    for i, r in enumerate(rows):
        # a crash known from the log only: unless the thread's frames tell a stronger story (a
        # collective's watchdog that aborted the process after a timeout is the collective's)
        if r.thread in crashed and consequence is not None:
            if r.category.rank >= 3:  # the log says which wait the abort ended
                rows[i] = ThreadTriage(r.thread, consequence, None, r.blame, r.owner, "log")
        elif r.thread in crashed and (proc.signal in FATAL_SIGNALS or r.category.rank >= 3
                                      or crashframes.raised(r.thread) or lone_crash(proc, r.thread, threads)
                                      or raising_c10(r.thread, lambda f: _names(f)[0])
                                      or proven(proc.messages, r.thread.all_frames(), lambda f: _names(f)[0], r.frame)):
            rows[i] = classify(proc, r.thread, crashed=True, memo=memo)
    if all(any(n.startswith("Python traceback") for n in r.thread.notes) for r in rows):
        # tracebacks only: a thread that threading's excepthook reports, or a child multiprocessing
        # reports, is gone (no dump of other threads in the text waits for it)
        rows = [ThreadTriage(r.thread, tab.crashed, None, r.blame, r.owner, "exception")
                if (r.category is tab.runs or EXCEPTHOOK_NOTE in r.thread.notes) and crashframes.thread_ended(r.thread)
                else r for r in rows]
    about = subject(proc, rows)
    first = about[0]
    if first.category is tab.runs:  # the frames name no wait: a log line may (py-bt's "Waiting for the GIL")
        said, _msg = message_category(proc, [c for c in tab.categories if c.messages is not None])
        said = said or paste or build_lock_wait(proc.messages)[0]  # a timeout line (logwait.py), a build's lock
        if said is not None:
            first.category, first.how = said, "log"
        elif crashframes.uncaught(proc, first.thread, threads):
            first.category, first.how = tab.crashed, "exception"
        else:  # no thread waits: a thread's exception is the story (a traceback beside a native stack too)
            runs = [first] + [r for r in rows if r is not first and r.category is tab.runs]
            k = crashframes.raiser([r.thread for r in runs], proc.messages)
            if k is not None:
                first, about = runs[k], [runs[k]] + [r for r in about if r is not runs[k]]
                first.category, first.how = tab.crashed, "raised"
    cat = first.category
    blame = _blame_key(first) or None
    lead = thread_label(first.thread, ThreadStyle.TRIAGE)
    if cat is tab.crashed and first.how in ("exception", "raised"):
        summary = crashframes.exception_summary(lead, first.thread, proc.messages, first.how == "exception")
    elif cat is tab.crashed:
        summary = "%s crashed%s" % (lead, " (%s)" % proc.signal if proc.signal else "")
    elif cat is tab.runs and first.how == "samples" and first.thread.progress is not None:
        pr = first.thread.progress
        summary = "no hang seen: %s made progress over %.1f s (%d samples)" % (lead, pr.window_s or 0.0, pr.samples)
    elif cat is tab.runs and "py-spy: idle" in first.thread.notes:  # off the CPU when py-spy looked: no run
        summary = ("no thread waits in a wait this tool knows: %s was idle when py-spy read it (off the CPU: in a "
                   "system call or a wait its Python frames do not show)" % lead)
    elif cat is tab.runs:
        summary = "no thread waits in a wait this tool knows: %s runs" % lead
    else:
        summary = "%s waits for %s" % (lead, cat.label)
        if first.frame is not None:
            summary += " in %s" % frame_text(first.thread.all_frames()[first.frame], FrameStyle.TRIAGE)
        if first.inherited is not None:
            summary += (" (a forked child%s: the lock was inherited locked from a parent thread that does "
                        "not exist here)" % ("" if first.inherited == "forked" else ", likely"))
    if first.owner is not None:
        summary += ", held by LWP %d" % first.owner
    if blame:
        summary += "; blame frame: %s" % blame
    same = sum(1 for r in about if r.category is cat) - 1
    if same > 0:
        summary += " (and %d more thread(s) the same way)" % same
    counts: Dict[str, int] = {}
    for r in rows:
        counts[r.category.id] = counts.get(r.category.id, 0) + 1
    summary += ". Threads: %s" % ", ".join("%d %s" % (n, c) for c, n in sorted(counts.items(), key=lambda x: -x[1]))
    ev = []
    for r in about:
        frames = r.thread.all_frames()
        where = (" in %s" % frame_text(frames[r.frame], FrameStyle.TRIAGE)) if r.frame is not None else ""
        text = "%s: %s%s" % (thread_label(r.thread, ThreadStyle.TRIAGE),
                             r.category.label if r.category is not tab.crashed else "crashed", where)
        if r.blame is not None:
            text += "; blame frame %s" % frame_text(frames[r.blame], FrameStyle.TRIAGE)
        ev.append(Evidence(thread=r.thread.tid, frame=r.blame if r.blame is not None else r.frame,
                           rule="wait: %s" % r.category.id, text=text,
                           function=frames[r.blame].function if r.blame is not None else None))
    info = Triage(wait=cat.id, label=cat.label, about=[r.thread.tid for r in about], blame=blame,
                  threads=[r.record() for r in rows[:MAX_LISTED]], from_=first.how)
    return _finding(index, proc, summary, ev, info, *_next_steps(proc, cat, True, alone), _confidence(first, True))


def _unshown_crash(index: int, proc: Process, rows: List[ThreadTriage], alone: bool) -> Finding:
    """The process crashed in a thread its text leaves out (``crashframes.crash_not_shown``): no
    thread is named for the crash, and the threads shown are listed as they stand."""
    cat, shown = table().crashed, [r.category.id for r in rows]
    what, note, first = crashframes.crash_not_shown(proc) or crashframes.UNSHOWN["report"]
    summary = ("the process crashed%s (%s); the text does not show which thread crashed, so none is named. Threads "
               "shown: %s" % (" (%s)" % proc.signal if proc.signal else "", what,
                              ", ".join("%d %s" % (shown.count(w), w) for w in dict.fromkeys(shown))))
    info = Triage(wait=cat.id, label=cat.label, threads=[r.record() for r in rows[:MAX_LISTED]], from_="report")
    steps, cause = _next_steps(proc, cat, True, alone)
    ev = [Evidence(rule="wait: crashed", text=note)]
    return _finding(index, proc, summary, ev, info, [first] + steps, cause, 0.5)


def _finding(index: int, proc: Process, summary: str, ev: List[Evidence], info: Triage,
             steps: List[str], cause: Optional[str], confidence: float) -> Finding:
    rule = load_rules().by_id(SIGNATURE)
    if info.wait == "runs" and info.from_ == "samples":
        title = rule.text("title_samples")
    elif info.wait == "crashed" and info.from_ == "raised":
        title = rule.text("title_raised")
    elif info.wait in ("crashed", "runs"):
        title = rule.text("title_crashed" if info.wait == "crashed" else "title_runs")
    else:
        title = rule.text("title_wait") % info.label
    return from_rule(rule, index, summary, ev, confidence, threads=[t for t in info.about if t is not None],
                     title=title, fix=steps, cause=cause, triage=info)


# --------------------------------------------------------------------------------------------
# The snapshot
# --------------------------------------------------------------------------------------------


def _process_key(proc: Process, known_crash: bool) -> tuple:
    """Everything ``triage_process`` reads of a process to choose its wait and blame frame, tids
    left out: threads by their (interned) frame lists, so only threads sharing their frame lists
    compare equal."""
    threads = []
    for t in proc.threads:
        w = t.waits
        threads.append((id(t.frames), id(t.python_frames) if t.python_frames else 0,
                        (w.kind, w.frame, w.owner_tid is not None) if w is not None else None,
                        t.state.gil if t.state is not None else None,
                        t.progress.state if t.progress is not None else None,
                        t.current, t.name, proc.pid is not None and t.tid == proc.pid))
    return (known_crash, proc.signal, tuple(proc.messages), crashframes.marked(proc), tuple(threads))


@rule("triage", stage="report", reads="every thread's frames, waits and log (signatures/triage/waits.yaml)")
def triage_findings(snapshot: Snapshot) -> List[Finding]:
    """One triage finding per process (processes with the same wait and blame frame share one);
    the registry (``analyze/registry.py``) places them first when no known bug matched, last
    otherwise.  Processes read from node summaries have no stacks: their summaries' triage
    groups stand for them."""
    summary = snapshot.node_summary
    if summary is not None and summary.level:
        found = [g.finding for g in summary.triage]
    else:
        found = _triage_groups(snapshot)
    for f in found:
        if len(f.processes) > 1:
            # ranks as a range set: a 131,072-rank job's summary stays one line
            f.summary += " (in %d processes%s)" % (len(f.processes), ", ranks %s" % compress_ranks(f.ranks)
                                                    if f.ranks else "")
    return found


def _triage_groups(snapshot: Snapshot) -> List[Finding]:
    """The triage findings of the processes, one per (wait, blame frame), members in ``processes``."""
    found: List[Finding] = []
    vague: List[Finding] = []
    by_key: Dict[Tuple[str, Optional[str]], Finding] = {}
    crashes = set()  # a known bug's crash or error (an OOM, a thread limit): it ended the process
    for f in snapshot.findings:
        if f.severity in ("crash", "error"):
            crashes.update(f.processes or ([f.process] if f.process is not None else []))
    ranks_of: Dict[int, set] = {}  # id(finding) -> its ranks, as a set (a list look-up per rank is quadratic)
    memo: Dict[tuple, tuple] = {}
    # a process whose triage inputs equal an earlier one's (interned frame lists) joins that one's
    # group without a finding of its own: a job repeats the same few processes
    group_of: Dict[tuple, Optional[tuple]] = {}
    many = len(snapshot.processes) > 1
    timeouts = paste_timeouts(snapshot.processes)
    for i, proc in enumerate(snapshot.processes):
        known_crash, paste = i in crashes, timeouts.get(id(proc))
        pkey = (_process_key(proc, known_crash), paste and paste.id) if many else None
        key = group_of.get(pkey, False) if pkey is not None else False
        if key is False:
            f = triage_process(i, proc, known_crash=known_crash, memo=memo, alone=not many, paste=paste)
            if f is None:
                key = None
            elif f.triage.from_ == "log" and f.triage.wait == "runs":  # type: ignore[union-attr]
                key = ("vague",)
            else:
                key = (f.triage.wait, f.triage.blame)  # type: ignore[union-attr]
            if pkey is not None:
                group_of[pkey] = key
            if f is None:
                continue
            if key == ("vague",):
                vague.append(f)  # a log naming no wait: the answer only when nothing else says more
                continue
        elif key is None or key == ("vague",) or key not in by_key:
            continue  # the same as an earlier process: nothing, or a vague log, already kept
        if many and key in by_key:
            first = by_key[key]
            first.processes.append(i)  # in process order: still sorted
            seen = ranks_of.get(id(first))
            if seen is None:
                seen = ranks_of[id(first)] = set(first.ranks)
            if proc.rank is not None and proc.rank not in seen:
                seen.add(proc.rank)
                first.ranks.append(proc.rank)
            continue
        if len(snapshot.processes) > 1:
            f.processes = [i]
            f.ranks = [proc.rank] if proc.rank is not None else []
        by_key[key] = f
        found.append(f)
    return sorted(found, key=lambda f: main_missing(snapshot.processes[f.process])) or vague[:1]  # threadchoice.py
