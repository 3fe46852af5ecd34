"""Match a Snapshot against the compiled signature database (pure: no I/O, no gdb).

How a signature matches one process:
  1. its ``conditions`` hold (library present / version range, Python version, signal);
  2. one of its clauses holds: every required thread rule is met by its own thread(s) (distinct
     threads: "thread X in A while another thread in B"), counting rules (``max``) hold, every
     message rule finds a line in ``process.messages``, and ``thread_count`` holds.
A thread meets a rule when its frames (``thread.all_frames()``, innermost first) contain the
rule's steps in order (each step further out than the previous one, within ``gap`` frames) and
none of its ``not`` patterns.  A step may match through its ``stripped`` fallback (exported
neighbour + library, for builds without internal symbols) at a lower confidence.

Tasks: a rule whose ``scope`` holds "tasks" is also (or only) tried on each pending asyncio task
(``Process.asyncio``) as a pseudo-thread: its coroutine stack is the frames, its name the thread
name; evidence names the task (``task 'Task-3' (0x7f..)``) and its loop's thread, with no frame
index (the frames are the task's, not the thread's).  Rules without ``scope`` see threads only.

Speed: names are normalized once per frame and indexed per process (name -> threads); a clause is
only tried when every required rule's anchor names occur in the process, and a rule only on the
threads that contain one of its anchors.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

from hanganalyze import rxcache
from hanganalyze.analyze import absence
from hanganalyze.analyze.conditions import check_conditions, known_libraries
from hanganalyze.analyze.findings import from_signature
from hanganalyze.analyze.sigmodel import (
    Clause,
    FramePattern,
    Signature,
    SignatureDB,
    Step,
    ThreadRule,
    conflicting_lines,
)
from hanganalyze.frametext import FrameStyle, frame_text
from hanganalyze.names import glibc_alias, normalize_function
from hanganalyze_gdbext.model import Evidence, Finding, Frame, Process, Snapshot, Thread
from hanganalyze_gdbext.model.asyncio import AsyncTask
from hanganalyze_gdbext.model.labels import ThreadStyle, thread_label

#: Confidence factor for each step matched only through its stripped fallback.
STRIPPED_FACTOR = 0.75
#: Confidence factor when a rule needs a GIL state the snapshot does not know.
UNKNOWN_GIL_FACTOR = 0.8

_NEEDS_NORMALISING = rxcache.compile(r"[(\[.@ ]")

#: A frame as the matcher sees it: (normalized function, library basename, file, kind).
FrameKey = Tuple[str, str, str, str, str]


def _norm(name: Optional[str], cache: Dict[Optional[str], str]) -> str:
    hit = cache.get(name)
    if hit is None:
        if name and name != "??" and not _NEEDS_NORMALISING.search(name):
            hit = name
        else:
            hit = normalize_function(name)
        cache[name] = hit
    return hit


def _frame_matches(pat: FramePattern, key: FrameKey) -> bool:
    norm, lib, file_, kind, source = key
    if pat.kind and kind != pat.kind:
        return False
    if pat.source is not None and not pat.source.search(source):
        return False
    if pat.function is not None and not (
        pat.function.matches(norm)
        or (kind == "python" and "." in norm and pat.function.matches(norm.rsplit(".", 1)[1]))
    ):
        return False
    if pat.library is not None and not pat.library.search(lib):
        return False
    if pat.file is not None:
        # py-spy, faulthandler-less tracebacks and pystack shorten site-packages paths to the
        # package's relative path (torch/utils/file_baton.py): a "*/pkg/mod.py" glob matches it too
        return bool(pat.file.search(file_) or (not pat.file_has_slash and pat.file.search(os.path.basename(file_)))
                    or (pat.file_has_slash and file_ and file_[0] != "/" and pat.file.search("/" + file_)))
    return True


@dataclass
class _ThreadView:
    """A thread's frames with normalized names, computed once per match run."""

    index: int
    thread: Thread
    frames: List[Frame]
    norms: List[str]
    names: Set[str]
    keys: List[Optional[FrameKey]]  # None for marker frames, which never match
    stack: int = 0  # threads with identical keys share this number (positions are computed once)
    key_positions: Optional[Dict[FrameKey, List[int]]] = None  # distinct key -> frame indices
    task: Optional[AsyncTask] = None  # a pending asyncio task seen as a pseudo-thread
    loop_thread: Optional[int] = None  # ... and the tid of the thread running its loop

    def who(self) -> str:
        if self.task is not None:
            return "task %r (%s)" % (self.task.name or "?", self.task.id)
        return thread_label(self.thread, ThreadStyle.WHO)


class _Matcher:
    def __init__(self, process: Process):
        self.process = process
        self._cache: Dict[Optional[str], str] = {}
        self._libbase: Dict[Optional[str], str] = {}
        self.views: List[_ThreadView] = []
        self.by_name: Dict[str, List[int]] = {}
        self._stacks: Dict[Tuple[Optional[FrameKey], ...], int] = {}
        for t in process.threads:
            self._add_view(t, t.all_frames())
        self.n_threads = len(self.views)
        self.all_names = set(self.by_name)
        self._tasks_added = False
        self._frame_cache: Dict[int, Dict[FrameKey, bool]] = {}
        self._pos_cache: Dict[Tuple[int, int], Tuple[List[int], Set[int]]] = {}
        self._lib_names: Optional[List[Tuple[str, Optional[str], str]]] = None

    def _add_view(self, t: Thread, frames: List[Frame], task: Optional[AsyncTask] = None,
                  loop_thread: Optional[int] = None) -> None:
        cache, libbase, stacks = self._cache, self._libbase, self._stacks
        ti = len(self.views)
        # Python names are qualnames ("Thread.join"): kept as they are, and also indexed by
        # their last part so that a rule may name just the function ("join").
        norms = [(f.function or "??") if f.kind == "python" else _norm(f.function, cache) for f in frames]
        names = set(norms)
        names.update(n.rsplit(".", 1)[1] for n, f in zip(norms, frames) if f.kind == "python" and "." in n)
        # ... and glibc's exported spelling of an internal alias (__GI___dl_iterate_phdr): a rule's anchor
        # written with the exported name finds the thread (Pattern.matches compares both spellings)
        names.update(glibc_alias(n) for n, f in zip(norms, frames) if f.kind != "python" and n[:1] == "_")
        keys: List[Optional[FrameKey]] = []
        for f, n in zip(frames, norms):
            if f.marker:
                keys.append(None)
                continue
            lib = libbase.get(f.library)
            if lib is None:
                lib = libbase[f.library] = os.path.basename(f.library or "")
            # a Windows paste's paths (C:\\...\\queues.py) glob like POSIX ones
            file_ = f.file.replace("\\", "/") if f.file and "\\" in f.file else (f.file or "")
            keys.append((n, lib, file_, f.kind, f.source.strip() if f.source else ""))
        stack = stacks.setdefault(tuple(keys), len(stacks))
        self.views.append(_ThreadView(ti, t, frames, norms, names, keys, stack, task=task,
                                      loop_thread=loop_thread))
        for n in names:
            self.by_name.setdefault(n, []).append(ti)

    def add_tasks(self) -> None:
        """Views of the pending asyncio tasks, after the threads' (once, when a rule needs them)."""
        if self._tasks_added:
            return
        self._tasks_added = True
        state = self.process.asyncio
        shared: Dict[tuple, _ThreadView] = {}  # 10,000 tasks parked alike: their stack is read once
        for lp in state.loops if state is not None else ():
            pseudo = Thread(tid=lp.thread)  # the loop's thread (a task's name: ``view.task.name``)
            for task in lp.tasks:
                if task.state != "pending" or not task.coroutine_stack:
                    continue
                frames = task.coroutine_stack
                sk = tuple((f.function, f.library, f.file, f.kind, f.marker) for f in frames)
                like = shared.get(sk)
                if like is None:
                    self._add_view(pseudo, frames, task, lp.thread)
                    shared[sk] = self.views[-1]
                    continue
                ti = len(self.views)
                self.views.append(_ThreadView(ti, pseudo, frames, like.norms, like.names, like.keys, like.stack,
                                              task=task, loop_thread=lp.thread))
                for n in like.names:
                    self.by_name[n].append(ti)
        self.all_names = set(self.by_name)

    # ----- frames ---------------------------------------------------------------------------
    def frame_ok(self, pat: FramePattern, key: Optional[FrameKey]) -> bool:
        """Does the frame match the pattern?  Cached per pattern and distinct frame content."""
        if key is None:
            return False
        cache = self._frame_cache.get(id(pat))
        if cache is None:
            cache = self._frame_cache[id(pat)] = {}
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = _frame_matches(pat, key)
        return hit

    def positions(self, pat: FramePattern, tv: _ThreadView) -> Tuple[List[int], Set[int]]:
        """Indices of the thread's frames that match the pattern (sorted, and as a set), once per
        pattern and distinct stack (identical threads share the answer), testing each distinct
        frame once; a thread without one of the pattern's anchor names is not scanned at all."""
        ck = (id(pat), tv.stack)
        hit = self._pos_cache.get(ck)
        if hit is None:
            idx: List[int] = []
            anchors = pat.anchors()
            if anchors is None or not anchors.isdisjoint(tv.names):
                if tv.key_positions is None:
                    tv.key_positions = {}
                    for i, key in enumerate(tv.keys):
                        if key is not None:
                            tv.key_positions.setdefault(key, []).append(i)
                cache = self._frame_cache.get(id(pat))
                if cache is None:
                    cache = self._frame_cache[id(pat)] = {}
                for key, where in tv.key_positions.items():
                    ok = cache.get(key)
                    if ok is None:
                        ok = cache[key] = _frame_matches(pat, key)
                    if ok:
                        idx.extend(where)
                idx.sort()
            hit = self._pos_cache[ck] = (idx, set(idx))
        return hit

    def _step_positions(self, st: Step, tv: _ThreadView, allow_stripped: bool) -> Tuple[List[int], Set[int], Set[int]]:
        """(sorted indices matching the step, that set, the subset matched only via stripped)."""
        main, main_set = self.positions(st, tv)
        if not allow_stripped or st.stripped is None:
            return main, main_set, set()
        extra, extra_set = self.positions(st.stripped, tv)
        via = extra_set - main_set
        if st.within is not None:  # the innermost step: unnamed C-library frames stand for a wait only from
            # the top of the stack down (a handler's or another library's code above them runs; opened round 101)
            via = {i for i in via if all(j in extra_set or j in main_set for j in range(i))}
        if not via:
            return main, main_set, via
        both = main_set | via
        return sorted(both), both, via

    def search_stack(
        self, steps: Sequence[Step], tv: _ThreadView, allow_stripped: bool
    ) -> Optional[List[Tuple[int, int, bool]]]:
        """[(step, frame index, via_stripped)] for the first ordered placement of the steps.

        Walks only the frames that match each step (``positions``), in frame order, so a thread
        is scanned once per pattern, not once per placement tried."""
        n = len(tv.frames)
        failed: Set[Tuple[int, int]] = set()
        per_step: List[Optional[Tuple[List[int], Set[int], Set[int]]]] = [None] * len(steps)

        def at(si: int) -> Tuple[List[int], Set[int], Set[int]]:
            ps = per_step[si]
            if ps is None:
                ps = per_step[si] = self._step_positions(steps[si], tv, allow_stripped)
            return ps

        # Fail fast, step by step (most threads fail the innermost step, often within a few
        # frames): a depth-limited first step is tried on its few frames before any full scan,
        # then a required step with no match, or the first one beyond its depth limit.
        st0 = steps[0] if steps else None
        if st0 is not None and not st0.optional and st0.within is not None:
            head = tv.keys[: st0.within]
            if not any(self.frame_ok(st0, k) for k in head) and not (
                allow_stripped and st0.stripped is not None and any(self.frame_ok(st0.stripped, k) for k in head)
            ):
                return None
        for si, st in enumerate(steps):
            if st.optional:
                continue
            order = at(si)[0]
            if not order or (si == 0 and st.within is not None and order[0] >= st.within):
                return None

        def rec(si: int, prev: int) -> Optional[List[Tuple[int, int, bool]]]:
            if si == len(steps):
                return []
            if (si, prev) in failed:
                return None
            st = steps[si]
            order, members, via = at(si)
            hi = n - 1
            if st.within is not None and prev < 0:
                hi = min(hi, st.within - 1)
            if st.gap is not None and prev >= 0:
                hi = min(hi, prev + 1 + st.gap)
            for i in order[bisect.bisect_right(order, prev):]:
                if i > hi:
                    break
                if st.repeat:  # the same frame for the whole run: the next step after it
                    if tv.keys[i:i + st.repeat].count(tv.keys[i]) == st.repeat:
                        rest = rec(si + 1, i + st.repeat - 1)
                        if rest is not None:
                            return [(si, i, i in via)] + rest
                    continue
                # The innermost step (where the thread waits) often matches a run of frames
                # (futex -> ... -> pthread_cond_wait): report the outermost, the one a reader
                # recognises, and keep the innermost as the fallback placement.
                j = i
                while si == 0 and j + 1 < n and (j + 1) in members:
                    j += 1
                for k in ((j, i) if j != i else (i,)):
                    rest = rec(si + 1, k)
                    if rest is not None:
                        return [(si, k, k in via)] + rest
            if st.optional:
                rest = rec(si + 1, prev)
                if rest is not None:
                    return rest
            failed.add((si, prev))
            return None

        return rec(0, -1)

    # ----- threads --------------------------------------------------------------------------
    def thread_rule(self, rule: ThreadRule, tv: _ThreadView) -> Optional[Tuple[List[Evidence], float]]:
        t = tv.thread
        if rule.thread_name is not None:
            names = [x for x in ((t.name, t.os_name, t.python_name) if tv.task is None else (tv.task.name,)) if x]
            if not any(rule.thread_name.search(x) for x in names):
                return None
        gil_factor = 1.0
        gil_ev: List[Evidence] = []
        if rule.gil is not None:
            state = t.state.gil if t.state is not None else None
            if state is None:
                gil_factor = UNKNOWN_GIL_FACTOR
            elif state != rule.gil:
                return None
            else:
                gil_ev.append(Evidence(thread=t.tid, rule="%s: GIL %s" % (rule.rule, rule.gil), text="GIL %s" % state))
        task = tv.task
        if not rule.stack:
            if any(self.frame_ok(pat, k) for pat in rule.not_ for k in tv.keys):
                return None
            if task is not None:
                return [Evidence(thread=t.tid, rule=rule.rule, text=tv.who())], 1.0
            return [Evidence(thread=t.tid, rule=rule.rule, text="thread name %s" % (t.name,))], 1.0
        placed = self.search_stack(rule.stack, tv, allow_stripped=False)
        if placed is None and any(s.stripped is not None for s in rule.stack):
            placed = self.search_stack(rule.stack, tv, allow_stripped=True)
        if placed is None:
            return None
        for pat in rule.not_:  # after the (usually failing) stack search: cheaper that way
            if any(self.frame_ok(pat, k) for k in tv.keys):
                return None
        conf = gil_factor
        ev = list(gil_ev)
        for si, fi, via in placed:
            step = rule.stack[si]
            text = frame_text(tv.frames[fi], FrameStyle.EVIDENCE)
            ev.append(Evidence(
                thread=t.tid, frame=fi if task is None else None,  # a task's frames are no thread's
                rule="%s: %s" % (rule.rule, (step.stripped.text if via and step.stripped else step.text)),
                text=text if task is None else "%s: %s" % (tv.who(), text),
                function=tv.frames[fi].function or "??",
                stripped=via,
            ))
            if via:
                conf *= STRIPPED_FACTOR
        return ev, conf

    def candidates(self, rule: ThreadRule) -> List[int]:
        """Views the rule may match: threads and/or pending tasks (``scope``), by anchor names."""
        threads, tasks = "threads" in rule.scope, "tasks" in rule.scope
        if tasks:
            self.add_tasks()
        anchors = rule.anchors()
        if anchors is None:
            out = list(range(len(self.views)))
        else:
            seen: Set[int] = set()
            for a in anchors:
                seen.update(self.by_name.get(a, ()))
            out = sorted(seen)
        if threads and tasks:
            return out
        n = self.n_threads
        return [i for i in out if i < n] if threads else [i for i in out if i >= n]

    def rule_hits(self, rule: ThreadRule) -> List[Tuple[int, List[Evidence], float]]:
        hits = []
        for ti in self.candidates(rule):
            r = self.thread_rule(rule, self.views[ti])
            if r is not None:
                hits.append((ti, r[0], r[1]))
        return hits

    # ----- clauses --------------------------------------------------------------------------
    def clause(self, clause: Clause) -> Optional[Tuple[float, List[Evidence], List[int], List[str]]]:
        """(confidence, evidence, tids, summary parts) when the clause holds."""
        tc = clause.thread_count
        if tc:
            n = len(self.process.threads)
            if n < tc.get("min", 0) or ("max" in tc and n > tc["max"]):
                return None
        required = [r for r in clause.threads if not r.optional and r.max is None]
        if any("tasks" in r.scope for r in required):
            self.add_tasks()
        for r in required:  # cheap pre-check through the name index
            a = r.anchors()
            if a is not None and not (a & self.all_names):
                return None
        evidence: List[Evidence] = []
        parts: List[str] = []
        conf = clause.confidence
        hits_by_rule = {id(r): self.rule_hits(r) for r in required}
        order = sorted(required, key=lambda r: len(hits_by_rule[id(r)]))
        chosen: Dict[int, List[Tuple[int, List[Evidence], float]]] = {}
        used: Set[int] = set()

        def assign(k: int) -> bool:
            if k == len(order):
                return True
            r = order[k]
            free = [h for h in hits_by_rule[id(r)] if h[0] not in used]
            if len(free) < r.min:
                return False
            if r.min <= 1:
                for h in free:
                    used.add(h[0])
                    chosen[id(r)] = [h] if r.min == 1 else []
                    if assign(k + 1):
                        return True
                    used.discard(h[0])
                return False
            take = free  # "at least N threads": all of them are evidence
            for h in take:
                used.add(h[0])
            chosen[id(r)] = take
            if assign(k + 1):
                return True
            for h in take:
                used.discard(h[0])
            return False

        if not assign(0):
            return None
        # counting rules look at the other threads: "no other thread in X" (max 0), "at least N"
        for r in clause.threads:
            if r.max is not None:
                hits = [h for h in self.rule_hits(r) if h[0] not in used]
                if len(hits) > r.max or len(hits) < r.min:
                    return None
                if r.max == 0 and absence.unseen(self.process):
                    conf = min(conf, absence.CAP)
                for _ti, ev, _c in hits[:3]:
                    evidence.extend(ev)
        tids: List[int] = []
        for r in required:
            hs = chosen.get(id(r), [])
            for ti, ev, c in hs:
                evidence.extend(ev)
                conf *= c
                t = self.views[ti].thread
                if t.tid is not None and t.tid not in tids:
                    tids.append(t.tid)
            if hs:
                parts.append(self._describe(r, hs))
        for r in clause.threads:
            if r.optional:
                for ti, ev, _c in self.rule_hits(r):
                    if ti in used:
                        continue
                    evidence.extend(ev)
                    t = self.views[ti].thread
                    if t.tid is not None and t.tid not in tids:
                        tids.append(t.tid)
                    parts.append(self._describe(r, [(ti, ev, _c)]))
                    break
        if conf <= absence.CAP and absence.unseen(self.process) and any(r.max == 0 for r in clause.threads):
            parts.append(absence.NOTE)
        for mr in clause.messages:
            hit = conflicting_lines(mr, self.process.messages) if mr.conflict else next(
                ([mi] for mi, line in enumerate(self.process.messages) if mr.regex.search(line)), None)
            if hit is None or (mr.absent is not None and any(mr.absent.search(x) for x in self.process.messages)):
                return None
            for mi in hit:
                line = self.process.messages[mi]
                evidence.append(Evidence(message=mi, rule=mr.rule, text=line.strip()[:300]))
            parts.append("the log says %s" % " but ".join(repr(self.process.messages[mi].strip()[:160]) for mi in hit))
        return conf, evidence, tids, parts

    def _describe(self, rule: ThreadRule, hits: List[Tuple[int, List[Evidence], float]]) -> str:
        ti, ev, _c = hits[0]
        tv = self.views[ti]
        who = tv.who()
        if tv.task is not None and tv.loop_thread is not None:
            who += " of the loop in thread %s" % tv.loop_thread
        frames = [e.function or "??" for e in ev if e.frame is not None or (tv.task is not None and e.function)]
        more = " and %d more %s" % (len(hits) - 1, "task(s)" if tv.task is not None else "thread(s)") if len(
            hits) > 1 else ""
        if not frames:
            return "%s%s matches %s" % (who, more, rule.rule)
        chain = frames[0] + "".join(", called from %s" % f for f in frames[1:])
        stripped = sum(1 for e in ev if e.stripped)
        note = " (%d frame(s) matched without symbols)" % stripped if stripped else ""
        return "%s%s is in %s%s" % (who, more, chain, note)

    # ----- conditions (``conditions.py``) ---------------------------------------------------
    def libraries(self) -> List[Tuple[str, Optional[str], str]]:
        """(name, version, where) of every library known (``conditions.known_libraries``)."""
        if self._lib_names is None:
            self._lib_names = known_libraries(self.process, [tv.frames for tv in self.views])
        return self._lib_names

    def conditions(self, sig: Signature) -> Optional[Tuple[float, List[Evidence], List[str]]]:
        """``conditions.check_conditions`` over this process's facts and libraries."""
        return check_conditions(sig, self.process, self.libraries())


def match_process(process: Process, index: int, db: SignatureDB) -> List[Finding]:
    m = _Matcher(process)
    findings = []
    for sig in db.signatures:
        cond = m.conditions(sig)
        if cond is None:
            continue
        factor, cond_ev, cond_notes = cond
        best = None
        for clause in sig.clauses:
            r = m.clause(clause)
            if r is not None and (best is None or r[0] > best[0]):
                best = r
                if r[0] >= 1.0:
                    break
        if best is None:
            continue
        conf, evidence, tids, parts = best
        summary = "%s: %s." % (sig.title, "; ".join(parts)) if parts else sig.title + "."
        if cond_notes:
            summary += " " + " ".join("%s." % n for n in cond_notes)
        findings.append(from_signature(sig, index, tids, summary, evidence + cond_ev, round(conf * factor, 3)))
    return findings


def match_snapshot(snapshot: Snapshot, db: SignatureDB) -> List[Finding]:
    """Every signature finding in every process of the snapshot."""
    out: List[Finding] = []
    for i, p in enumerate(snapshot.processes):
        out.extend(match_process(p, i, db))
    return out
