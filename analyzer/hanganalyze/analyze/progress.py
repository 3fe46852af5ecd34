"""Stuck or slow: what repeated samples (``acquire/sampling.py``) change in the findings.

A hang signature says "this thread waits in X"; one snapshot of a busy process says that too, for
the instant it was taken (a healthy gloo job gave ``gloo-recv-timeout`` and ``collective-hang`` at
confidence 1.0 in 3 runs of 3).  With several samples a wait counts only where it held:

* per process (``gate_findings``, after matching): a hang, deadlock or info finding whose thread made
  progress (``progress.state == "progressing"``) is dropped, with a note saying so; one whose
  threads held in every sample says for how long ("held for 1.0 s over 3 samples"), and its
  confidence grows with that window (``window_factor``);
* per job (``job_findings``, on the cross-rank findings): a job whose ranks all made progress gets
  no hang finding; a collective hang or mismatch in which a rank moved is a snapshot of a busy
  job, dropped; a straggler is either "stuck in X" or "slow, not stuck: moving through X, Y" (then
  an info finding: the others wait for it, but it is not hung); every rank spinning in the device
  sync after the same collective is a GPU-side hang, not a straggler.

A core is one sample: nothing changes, and a note says that stuck or slow cannot be told.
Spinning threads (the NCCL/CUDA busy-wait) hold their place: they keep their findings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence

from hanganalyze.analyze.rules import RuleSet, load_rules
from hanganalyze_gdbext.model import Finding, Process, Samples, Snapshot, ThreadProgress
from hanganalyze_gdbext.model.job import (
    ONE_SAMPLE_NOTE,  # noqa: F401 - named here too (its users import it so)
    JobRankProgress,
)

if TYPE_CHECKING:  # job.py's type; job.py imports this module
    from hanganalyze.analyze.rankstate import RankState

#: Findings the samples can contradict: they say a thread or a job waits for ever.
HANG_SEVERITIES = frozenset({"hang", "deadlock"})
#: Per-process findings that describe where a thread is at the instant of a sample (the hang
#: classes, and info such as ``cuda-sync-busy-spin``): a healthy loop passes through a device sync
#: every step, so they hold only where the thread held.  Crashes and errors are facts of the
#: process, not of the instant.
SAMPLED_SEVERITIES = HANG_SEVERITIES | {"info"}
#: How samples judge a job rule's finding is data (``samples:`` in ``signatures/rules/rules.yaml``):
#: ``waits``, ranks wait for each other (dropped when one of them moved); ``straggler``, the named
#: ranks are stuck, or slow when they moved.  (``rank-missing`` counts processes only: neither.)
WAITS, STRAGGLER = "waits", "straggler"
#: The named text of a ``waits`` rule added when every rank it names spins in the device sync.
ALL_SPINNING = "all_spinning"
#: The job rule that names a slow rank (``crossrank.rank_slow``).
SLOW_RANK = "rank-slow"
#: Window (seconds) from which a wait that held gets its signature's full confidence.
FULL_WINDOW_S = 5.0
LONGER = "--samples 5 --interval 2 watches for 8 s"


def window_factor(window_s: Optional[float]) -> float:
    """Confidence of a wait that held over ``window_s``: 0.75 at an instant, growing to 1.0 at
    FULL_WINDOW_S (a one-second hang is weaker evidence than a ten-second one)."""
    if not window_s or window_s <= 0:
        return 0.75
    return round(min(1.0, 0.75 + 0.25 * window_s / FULL_WINDOW_S), 3)


def held_text(proc: Process) -> str:
    """``held for 1.0 s over 3 samples``."""
    s = proc.samples or Samples()
    return "held for %.1f s over %d samples" % (s.window_s or 0.0, s.count or 1)


def thread_progress(proc: Process, tid: Optional[int]) -> Optional[ThreadProgress]:
    """The thread's progress when it was sampled more than once and classified."""
    t = proc.thread_by_tid(tid) if tid is not None else None
    if t is None or t.progress is None or t.progress.state == "unknown":
        return None
    return t.progress


def progress_text(p: Optional[ThreadProgress]) -> Optional[str]:
    """One line for a thread's header in a report: ``stuck: held for 1.0 s over 3 samples``."""
    if p is None:
        return None
    if p.state == "unknown" or p.window_s is None:
        return "%s (seen in %d sample%s)" % (p.state, p.samples, "s" * (p.samples != 1))
    text = "%s over %.1f s, %d samples" % (p.state, p.window_s, p.samples)
    if p.cpu_s is not None:
        text += ", cpu %.2f s" % p.cpu_s
    if p.state == "progressing" and p.changed:
        text += "; moved through %s" % ", ".join(p.changed[:3])
    return text


def _scale(f: Finding, window_s: Optional[float]) -> None:
    if f.confidence is not None:
        f.confidence = round(f.confidence * window_factor(window_s), 3)


def gate_findings(snapshot: Snapshot) -> None:
    """Per-process hang, deadlock and info findings hold only where their threads held (module doc)."""
    kept: List[Finding] = []
    for f in snapshot.findings:
        proc = snapshot.processes[f.process] if 0 <= f.process < len(snapshot.processes) else None
        if f.severity not in SAMPLED_SEVERITIES or proc is None:
            kept.append(f)
            continue
        if proc.source == "core" and ONE_SAMPLE_NOTE not in proc.notes:
            proc.notes.append(ONE_SAMPLE_NOTE)
        if not proc.samples:
            kept.append(f)
            continue
        tids = list(dict.fromkeys(list(f.threads) + [e.thread for e in f.evidence if e.thread is not None]))
        progs = {tid: thread_progress(proc, tid) for tid in tids}
        moved = [tid for tid, p in progs.items() if p is not None and p.state == "progressing"]
        if moved:
            p = progs[moved[0]]
            proc.notes.append("%s not reported: thread %s made progress over %.1f s (%d samples)%s" % (
                f.signature, moved[0], (p.window_s or 0.0) if p else 0.0, p.samples if p else 0,
                ": moved through %s" % ", ".join(p.changed[:3]) if p and p.changed else ""))
            continue
        if any(p is not None for p in progs.values()):
            f.summary = "%s (%s)" % (f.summary or f.title, held_text(proc))
            _scale(f, proc.samples.window_s)
        kept.append(f)
    snapshot.findings = kept


def rank_progress(snapshot: Snapshot, s: RankState) -> Optional[ThreadProgress]:
    """The progress of the thread that says where rank ``s`` is."""
    if not 0 <= s.process < len(snapshot.processes):
        return None
    return thread_progress(snapshot.processes[s.process], s.thread)


def rank_facts(snapshot: Snapshot, states: Sequence[RankState]) -> List[JobRankProgress]:
    """Per rank: how the thread that says where it is moved (``Snapshot.job.progress``)."""
    out: List[JobRankProgress] = []
    for s in states:
        p = rank_progress(snapshot, s)
        if p is not None:
            out.append(JobRankProgress(process=s.process, rank=s.rank, thread=s.thread, state=p.state,
                                       window_s=p.window_s, samples=p.samples, cpu_s=p.cpu_s, changed=p.changed[:4]))
    return out


def _who(s: RankState) -> str:
    return "rank %d" % s.rank if s.rank is not None else "process %d" % s.process


def straggler_text(s: RankState, p: Optional[ThreadProgress]) -> str:
    """``rank 1 is stuck in X (held for 1.0 s over 3 samples)`` / ``rank 1 is slow, not stuck:
    moving through X, Y`` / ``rank 1 spins in X``."""
    where = s.where or "an unknown place"
    if p is None:
        return "%s is in %s (one sample)" % (_who(s), where)
    if p.state == "progressing":
        return "%s is slow, not stuck: moving through %s" % (_who(s), ", ".join(p.changed[:3]) or where)
    if p.state == "spinning":
        return "%s spins in %s (%.2f s of CPU in %.1f s)" % (_who(s), where, p.cpu_s or 0.0, p.window_s or 0.0)
    return "%s is stuck in %s (held for %.1f s over %d samples)" % (_who(s), where, p.window_s or 0.0, p.samples)


def job_findings(snapshot: Snapshot, states: Sequence[RankState], findings: List[Finding],
                 rules: Optional[RuleSet] = None) -> List[Finding]:
    """The cross-rank findings (and peer waits) checked against what each rank did over the samples
    (``rules``: the rule list whose ``samples:`` say how; the built-in one when not given)."""
    by_proc = {s.process: s for s in states}
    progs = {s.process: rank_progress(snapshot, s) for s in states}
    known = {i: p for i, p in progs.items() if p is not None}
    hangs = [f for f in findings if f.severity in HANG_SEVERITIES]
    if not known:
        if hangs and any(p.source == "core" for p in snapshot.processes) \
                and not any(ONE_SAMPLE_NOTE in p.notes for p in snapshot.processes) \
                and ONE_SAMPLE_NOTE not in snapshot.warnings:
            snapshot.warnings.append(ONE_SAMPLE_NOTE)
        return findings
    window = max((p.window_s or 0.0) for p in known.values())
    count = max(p.samples for p in known.values())
    held = "held for %.1f s over %d samples" % (window, count)
    with_stack = [s for s in states if s.state not in ("error", "no-stack")]
    if with_stack and all(known.get(s.process) is not None and known[s.process].state == "progressing"
                          for s in with_stack):
        if hangs:
            snapshot.warnings.append("every rank made progress over %.1f s (%d samples): no hang; %s"
                                     % (window, count, ", ".join(sorted({f.signature for f in hangs}))
                                        + " not reported"))
        return [f for f in findings if f.severity not in HANG_SEVERITIES]
    rules = rules if rules is not None else load_rules()
    waits, straggling = rules.sampled(WAITS), rules.sampled(STRAGGLER)
    out: List[Finding] = []
    for f in findings:
        involved = [by_proc[i] for i in dict.fromkeys(list(f.processes) + [e.process for e in f.evidence
                                                                            if e.process is not None])
                    if i in by_proc]
        moving = [s for s in involved if known.get(s.process) is not None
                  and known[s.process].state == "progressing"]
        if f.signature in waits:
            if moving:
                snapshot.warnings.append("%s not reported: %s made progress over %.1f s"
                                         % (f.signature, ", ".join(_who(s) for s in moving[:8]), window))
                continue
            spinning = rules.by_id(f.signature).texts.get(ALL_SPINNING)
            if spinning and involved and all(
                    s.state == "device-sync" and known.get(s.process) is not None
                    and known[s.process].state == "spinning" for s in involved):
                f.summary += spinning
        elif f.signature in straggling:
            stragglers = [by_proc[i] for i in f.processes if i in by_proc]
            waiters = [s for s in involved if s not in stragglers]
            if any(s in moving for s in waiters):
                snapshot.warnings.append("%s not reported: the waiting ranks made progress over %.1f s"
                                         % (f.signature, window))
                continue
            f.summary += "; " + "; ".join(straggler_text(s, known.get(s.process)) for s in stragglers[:8])
            if stragglers and all(s in moving for s in stragglers):
                f.severity = "info"  # the others wait for a slow rank, nobody is hung
                f.confidence = round((f.confidence or 0.5) * 0.6, 3)
                out.append(f)
                continue
        elif f.severity not in HANG_SEVERITIES:
            out.append(f)
            continue
        if "held for" not in f.summary:
            f.summary += " (%s; %s)" % (held, LONGER)
        _scale(f, window)
        out.append(f)
    return _slow_first(out, rules)


def _slow_first(found: List[Finding], rules: RuleSet) -> List[Finding]:
    """A slow-rank finding (made only where progress was seen) replaces the job findings its rule
    ``supersedes`` on the ranks it names, and leads: "slow" and "stuck" never describe one rank."""
    slow = [f for f in found if f.signature == SLOW_RANK]
    if not slow:
        return found
    return slow + rules.superseded(slow, [f for f in found if f.signature != SLOW_RANK])
