"""Plain-text report for terminals: findings and fixes first, then thread groups as gdb prints them.

Core data is printed as it is, except control characters (an ESC in a thread name must not
repaint the user's terminal), which are shown as ``\\xNN``, and invisible bidi/zero-width
characters, shown as ``\\uNNNN`` (``gdbext/model/termsafe.py``: the escaper the gdb commands use too).
"""

from __future__ import annotations

from typing import List

from hanganalyze.analyze.progress import progress_text
from hanganalyze.render import asynctree
from hanganalyze.render.gpuview import gpu_lines
from hanganalyze.render.jobview import JobView
from hanganalyze.render.rasview import ras_text_lines
from hanganalyze.render.view import GroupView, ReportView, build_view, files_summary
from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.termsafe import visible

#: Frames shown per idle group (the rest are summarised): idle stacks are rarely the story.
IDLE_FRAMES = 6
RULE = "=" * 78


def clean(s: object) -> str:
    """Terminal-safe text: control characters (ESC, BEL, CR...) become visible escapes, tabs stay.
    Leading and trailing whitespace goes (signature prose from YAML block scalars ends with a
    newline)."""
    return visible(str(s).strip(), keep="\t")


def _group_lines(g: GroupView) -> List[str]:
    lines = []
    head = clean(g.label)
    if g.size > 1:
        head += "  + %d more thread%s like this" % (g.size - 1, "s" * (g.size > 2))
    badges = g.badges()
    if badges:
        head += "  [%s]" % ", ".join(clean(b) for b in badges)
    lines.append(head)
    if g.size > 1:
        lines.append("  tids: %s" % g.tids(20))
    moved = progress_text(g.group.first.progress)  # repeated samples: stuck, progressing, spinning
    if moved:
        lines.append("  progress: %s" % clean(moved))
    waits = g.group.first.waits
    if waits:
        detail = waits.detail or ""
        owner = waits.owner_tid
        lines.append(
            "  waits on %s %s%s%s"
            % (
                clean(waits.kind or "?"),
                clean(waits.name or waits.resource or ""),
                " held by thread %s" % owner if owner is not None else "",
                " (%s)" % clean(detail) if detail else "",
            )
        )
    frames = g.frames
    shown = frames[:IDLE_FRAMES] if g.idle else frames
    placed_header_done = False
    for fv in shown:
        if not fv.placed and not placed_header_done:
            lines.append("  -- Python frames that could not be placed among the native ones --")
            placed_header_done = True
        mark = ">>" if fv.matched else "  "
        lines.append("%s%s" % (mark, clean(fv.text)))
    if len(shown) < len(frames):
        lines.append("    ... %d more frames (idle thread)" % (len(frames) - len(shown)))
    if not frames:
        lines.append("    (no frames)")
    if g.group.first.unwind_stop:
        lines.append("    (unwind stopped early: %s)" % clean(g.group.first.unwind_stop))
    return lines


#: Shared facts short enough to share one line (``source live · python 3.12.3 · threads 9``).
SHORT_FACT = 40


def indented(line: str) -> str:
    """A tree line made terminal-safe with its indentation kept (``clean`` strips it)."""
    return line[: len(line) - len(line.lstrip(" "))] + clean(line)


def rank_table_lines(job: JobView) -> List[str]:
    """The rank table as aligned columns; ``*`` marks the ranks the top cross-rank finding names."""
    gpu = ("gpu",) if job.gpu_column else ()  # GPU state came in (render/gpuview.py)
    head = (" " + job.words.unit, "host", "pid", "state", "progress", "sources") + gpu + ("where",)
    cells = [head] + [tuple(clean(c) for c in (r.ranks, r.host or "-", r.pid or "-", r.state or "-",
                                               r.progress or "-", r.sources or "-") + ((r.gpu or "-",) if gpu else ())
                            + (r.where or "-",))
                      for r in job.rows]
    cells[1:] = [(("*" if r.at_fault else " ") + row[0],) + row[1:] for r, row in zip(job.rows, cells[1:])]
    widths = [min(max(len(row[i]) for row in cells), 30) for i in range(len(head) - 1)]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in cells]


def shared_lines(job: JobView) -> List[str]:
    """Per-process metadata said once for all ranks, then only the differences."""
    sh = job.shared
    if sh is None:
        return []
    short = [(k, v) for k, v in sh.same if len(v) <= SHORT_FACT]
    out = ["SAME ON %s: %s" % (clean(sh.who).upper(), " · ".join("%s %s" % (k, clean(v)) for k, v in short))]
    out.extend("  %-10s %s" % (k, clean(v)) for k, v in sh.same if len(v) > SHORT_FACT)
    for k, vals in sh.differ:
        out.append("  DIFFERS %s: %s" % (k, "; ".join("%s on %s" % (clean(v), clean(r)) for r, v in vals)))
    return out


def first_screen_lines(view: ReportView) -> List[str]:
    """A job report's first screen: the verdict, the rank table, the shared metadata, where the
    ranks diverge, the idle wait-for graphs folded to one line."""
    job = view.job
    if job is None:
        return []
    out = ["VERDICT: " + clean(job.verdict)]
    if job.progress_note:
        out.append("  (%s)" % clean(job.progress_note))
    if job.rows or view.snapshot.processes:  # saved NCCL RAS output alone: no process, no table
        out.append("")
        out.extend(rank_table_lines(job))
    out.append("")
    out.extend(shared_lines(job))
    if job.divergence_lines:
        out.append("")
        out.append("WHERE %s DIVERGE (merged call tree, outermost first; common frames elided)"
                   % job.words.group.upper())
        out.extend("  " + indented(line) for line in job.divergence_lines)
    if job.idle_waitgraphs:
        n = len(job.idle_waitgraphs)
        out.append("")
        out.append("(%d idle wait-for graph%s folded: every thread in %s waits on a resource nobody holds)"
                   % (n, "s" * (n != 1), "them" if n != 1 else "it"))
    return out


def _job_lines(view: ReportView) -> List[str]:
    """The job section: facts, who is where (rank classes), failed inputs, the merged call tree."""
    job = view.job
    if job is None or not view.snapshot.processes:  # saved NCCL RAS output alone: its own section says it
        return []
    out = ["", RULE, "JOB: " + ", ".join("%s %s" % (k, clean(v)) for k, v in job.facts), RULE]
    if job.classes:
        out.append("")
        out.append("%s (%s)" % (job.words.classes.upper(), job.words.classes_about))
        for c in job.classes:
            out.append("  [%s] (%d) %s" % (clean(c.ranks), c.size, clean(c.state)))
    for title, err in job.failed:
        out.append("  NOT ANALYZED %s: %s" % (clean(title), clean(err)))
    if job.tree_lines:
        out.append("")
        out.append("MERGED CALL TREE (outermost frame first; [%s] (count) on each branch)" % job.words.units)
        out.extend("  " + indented(line) for line in job.tree_lines)
    if view.hidden_processes:
        out.append("")
        out.append("(%d processes not shown below: each is like the process shown for its %s)"
                   % (view.hidden_processes, job.words.classes[:-2]))
    return out


#: Mapped-file rows printed per process (the JSON and HTML reports have every one).
MAX_FILE_ROWS = 400


def file_row_text(r) -> str:
    """``mismatch  /usr/lib/libfoo.so  build-id 12ab.. in the core, 34cd.. on disk (/sysroot/usr/lib/libfoo.so)``."""
    line = "%-8s  %s" % (r.status, r.path)
    ids = []
    if r.build_id:
        ids.append("build-id %s in the core" % r.build_id)
    if r.disk_build_id and r.disk_build_id != r.build_id:
        ids.append("%s on disk" % r.disk_build_id)
    if ids:
        line += "  " + ", ".join(ids)
    if r.found and r.found != r.path:
        line += "  (found: %s)" % r.found
    return line


def _file_lines(p) -> List[str]:
    if not p.files:
        return []

    out = ["", "MAPPED FILES of %s: %s" % (clean(p.title), files_summary(p.files))]
    for r in p.files[:MAX_FILE_ROWS]:
        out.append("  " + clean(file_row_text(r)))
    if len(p.files) > MAX_FILE_ROWS:
        out.append("  ... %d more (the JSON and HTML reports list every one)" % (len(p.files) - MAX_FILE_ROWS))
    return out


def render_view_text(view: ReportView) -> str:
    out: List[str] = [RULE, "hanganalyze: " + clean(view.headline)]
    if view.bucket:
        out.append("bucket: %s" % view.bucket)
    for d in view.doubts:
        out.append("WARNING: " + clean(d))
    out.append(RULE)
    out.extend(first_screen_lines(view))
    if view.findings:
        out.append("")
        out.append("FINDINGS")
        for n, fv in enumerate(view.findings, 1):
            f = fv.finding
            out.append("")
            out.append("[%d] %s  (%s, signature %s)" % (n, clean(f.title), clean(f.severity), clean(f.signature)))
            if f.confidence is not None:
                out[-1] += "  confidence %.2f" % f.confidence
            if fv.process_label and len(view.snapshot.processes) > 1:
                out.append("    where: " + clean(fv.process_label))
            if f.summary:
                out.append("    " + clean(f.summary))
            for key, _label, text in fv.details:
                out.append("    %s: %s" % (key, clean(text)))
            if f.threads:
                out.append("    threads: " + ", ".join(str(t) for t in f.threads))
            for fix in f.fix:
                out.append("    fix: " + clean(fix))
            for link in fv.links + fv.other_refs:
                out.append("    see: " + clean(link))
            for ev in fv.evidence:
                line = "    evidence: %s" % clean(ev.thread)
                if ev.rule:
                    line += " [%s]" % clean(ev.rule)
                if ev.text:
                    line += " %s" % clean(ev.text)
                out.append(line)
                if ev.frame:
                    out.append("      " + clean(ev.frame))
    else:
        out.append("")
        if any(t.frames for p in view.snapshot.processes for t in p.threads):
            out.append("No finding: no signature in the database matched these stacks.")
        else:  # a log read as one (--input-format log) with no line a hang leaves: say what to capture
            out.append("No finding: the input holds no stack and no line a hang or crash leaves; while the "
                       "process hangs, capture its stacks (hanganalyze --pid PID, or py-spy dump --native "
                       "--pid PID) and give those.")
    out.extend(visible(line.rstrip(), keep="\t") for line in ras_text_lines(view.snapshot))  # render/rasview.py
    out.extend(_job_lines(view))
    gpu = gpu_lines(view.snapshot)
    if gpu:  # the device side (render/gpuview.py): only when GPU state came in
        out.extend(["", "GPUS"] + ["  " + clean(ln) for ln in gpu])
    for p in view.processes if view.job is None else ():  # a job says them once, on its first screen
        out.append("")
        out.append(clean(p.title))
        for k, v in p.facts:
            out.append("  %-10s %s" % (k, clean(v)))
        if p.libraries:
            out.append("  %-10s %s" % ("libraries", clean(", ".join(("%s %s" % lv).strip() for lv in p.libraries))))
    for p in view.processes:
        if p.waitgraph_cycles:
            out.append("")
            out.append("WAIT-FOR (%s)" % clean(p.title))
            for c in p.waitgraph_cycles:
                out.append("  " + clean(c))
    for p in view.processes:  # asyncio tasks (render/asynctree.py): their stacks are on no thread
        tree = asynctree.process_lines(p.process)
        if tree:
            out.extend(["", "ASYNCIO TASKS (%s)" % clean(p.title)])
            out.extend(visible(line.rstrip(), keep="\t") for line in tree)
    for p in view.processes:
        out.append("")
        out.append(RULE)
        summary = "THREADS of %s: %d thread%s in %d group%s" % (
            clean(p.title), p.thread_count, "s" * (p.thread_count != 1), len(p.groups), "s" * (len(p.groups) != 1)
        )
        if p.idle_threads:
            summary += ", %d idle" % p.idle_threads
        out.append(summary)
        out.append("(>> marks frames a finding matched; [py] marks Python frames)")
        out.append(RULE)
        for g in p.groups:
            out.append("")
            out.extend(_group_lines(g))
    for p in view.processes:
        out.extend(_file_lines(p))
    if view.warnings:
        out.append("")
        out.append("NOTES")
        for w in view.warnings:
            out.append("  - " + clean(w))
    return "\n".join(out) + "\n"


def render_text(snapshot: Snapshot) -> str:
    """The terminal report (the CLI's default format)."""
    return render_view_text(build_view(snapshot))
