"""Markdown report for GitHub/GitLab issues: findings on top, stacks in ``<details>``, < 65,000 chars.

GitHub rejects issue bodies over 65,536 characters, so the report is assembled block by block:
the summary and findings always go in, then thread groups in reading order until the budget is
spent; whole groups are dropped (with a note saying how many), never half a block.

Core data cannot break the structure:

* stacks sit in fenced blocks whose fence is longer than any backtick run inside them;
* text outside fences is HTML-escaped and Markdown punctuation is backslash-escaped, so
  ``</details>``, ``<script>``, ``[x](javascript:..)`` or ``|`` stay literal text;
* inside ``<summary>`` (an HTML block, where Markdown is not processed) text is HTML-escaped only;
* control characters and newlines are made visible, so a thread name cannot start a new line;
* URLs, ``www.`` names and e-mail addresses in core data get a zero-width space after their
  trigger, so GitHub's autolinker does not turn them into links (only signature references link).
"""

from __future__ import annotations

import html
import re
from typing import List, Optional

from hanganalyze.analyze.progress import progress_text
from hanganalyze.render import asynctree
from hanganalyze.render.gpuview import gpu_lines
from hanganalyze.render.rasview import TITLE, ras_section
from hanganalyze.render.text import SHORT_FACT, clean, file_row_text, indented
from hanganalyze.render.view import FindingView, GroupView, ReportView, build_view, files_summary
from hanganalyze_gdbext.model import Snapshot

#: GitHub's limit is 65,536; keep a margin for the reporter's own words.
LIMIT = 65000
#: Frames shown per group (busy / idle); the rest are summarised inside the fence.
MAX_FRAMES = 120
IDLE_FRAMES = 12
#: Per-finding caps, so that findings always fit.
MAX_EVIDENCE = 12
MAX_FIELD = 600

#: Inline punctuation that can open a Markdown construct anywhere in a line (emphasis, code, links,
#: images, table cells, strikethrough); ``(``, ``.``, ``-``, ``#`` and intra-word ``_`` (never
#: emphasis in CommonMark/GFM: ``MASTER_ADDR``) are harmless mid-line and stay readable in raw text.
_MD_SPECIAL = re.compile(r"([\\`*\[\]|~!]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
#: What opens a block when it starts a line: headings, list items (``-``, ``+``, ``1.``, ``1)``),
#: setext underlines and thematic breaks (``=``/``-`` runs).
_MD_LINE_START = re.compile(r"^(#|[-+=]|\d+(?=[.)]))")


#: What GitHub's autolink extension turns into links even in escaped text (it runs after escapes
#: are resolved): ``https://``, ``www.`` and e-mail addresses.  A zero-width space after the trigger
#: keeps core data from becoming a link; only signature references are links.
_AUTOLINK = re.compile(r"(?i)(?<![A-Za-z0-9])(https?|ftp|www)(?=://|\.)|@(?=[A-Za-z0-9])")


def _no_autolink(text: str) -> str:
    return _AUTOLINK.sub(lambda m: m.group(0) + "\u200b", text)


def md(s: object, limit: int = MAX_FIELD, line_start: bool = True) -> str:
    """Inline Markdown text from core data: visible controls, HTML-escaped, punctuation escaped,
    autolink triggers defused.  ``line_start=False`` for table cells, where block markers such as
    ``1.`` mean nothing."""
    text = clean(s)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = html.escape(_no_autolink(text), quote=False)
    # html.escape produced &lt; etc.; escape Markdown punctuation but keep those entities intact.
    parts = re.split(r"(&(?:lt|gt|amp);)", text)
    text = "".join(p if p.startswith("&") and p.endswith(";") else _MD_SPECIAL.sub(r"\\\1", p) for p in parts)
    m = _MD_LINE_START.match(text) if line_start else None
    if m:  # "1. x" -> "1\. x", "# x" -> "\# x", "- x" -> "\- x"
        end = m.end()
        text = (text[:end] + "\\" + text[end:]) if m.group(1)[0].isdigit() else "\\" + text
    return text


#: Inside ``<summary>`` GitHub does not parse Markdown; these references only matter to renderers
#: that do, where ``[``/``]`` could form a link and `` ` ``/``*``/``~`` formatting.
_HTML_MD_ENTITIES = {c: "&#%d;" % ord(c) for c in "[]`*|~\\"}


def h(s: object, limit: int = MAX_FIELD) -> str:
    """Text for inside an HTML block (``<summary>``): HTML-escaped, and Markdown punctuation turned
    into character references, so that no renderer that does parse Markdown there finds a link."""
    text = clean(s)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return "".join(_HTML_MD_ENTITIES.get(c, c) for c in html.escape(_no_autolink(text), quote=True))


def fence(lines: List[str], lang: str = "text", indent: bool = False) -> str:
    """A fenced block that no content line can close: fence longer than any backtick run.
    ``indent`` keeps each line's leading spaces (a tree's levels), which ``clean`` strips."""
    body = "\n".join(indented(x) if indent else clean(x) for x in lines)
    longest = max((len(m.group(0)) for m in re.finditer(r"`+", body)), default=0)
    tick = "`" * max(3, longest + 1)
    return "%s%s\n%s\n%s" % (tick, lang, body, tick)


def link(url: str) -> str:
    """An autolink for an http(s) URL from a signature (already checked by ``view.safe_url``)."""
    return "<%s>" % url.replace(">", "%3E").replace("<", "%3C").replace(" ", "%20")


def _finding_block(n: int, fv: FindingView) -> str:
    f = fv.finding
    out = ["### %d. %s" % (n, md(f.title)), ""]
    meta = "**%s** · signature %s" % (md(f.severity), md(f.signature))
    if f.confidence is not None:
        meta += " · confidence %.2f" % f.confidence
    if fv.process_label:
        meta += " · %s" % md(fv.process_label)
    out += [meta, ""]
    if f.summary:
        out += [md(f.summary, 2000), ""]
    for _key, label, text in fv.details:
        out += ["**%s:** %s" % (label, md(text, 2000)), ""]
    if f.fix:
        out.append("**Fix:**")
        out.append("")
        out += ["- " + md(x, 1000) for x in f.fix]
        out.append("")
    if fv.links or fv.other_refs:
        refs = [link(u) for u in fv.links] + [md(r) for r in fv.other_refs]
        out += ["**References:** " + " · ".join(refs), ""]
    if fv.evidence:
        out.append("**Evidence that matched:**")
        out.append("")
        for ev in fv.evidence[:MAX_EVIDENCE]:
            line = "- " + md(ev.thread)
            if ev.rule:
                line += " — %s" % md(ev.rule)
            if ev.text:
                line += ": %s" % md(ev.text)
            out.append(line)
            if ev.frame:
                out.append("")
                out.append("\n".join("  " + x for x in fence([ev.frame]).split("\n")))
        if len(fv.evidence) > MAX_EVIDENCE:
            out.append("- … %d more pieces of evidence (see the JSON report)" % (len(fv.evidence) - MAX_EVIDENCE))
        out.append("")
    return "\n".join(out)


def _group_block(g: GroupView) -> str:
    summary = h(g.label)
    if g.hint:
        summary += " <i>%s</i>" % h(g.hint, 200)
    if g.size > 1:
        summary += " — <b>%d threads like this</b>" % g.size
    badges = g.badges()
    if badges:
        summary += " [%s]" % h(", ".join(badges))
    lines = []
    if g.size > 1:
        lines.append("tids: %s" % g.tids(40, "…"))
    moved = progress_text(g.group.first.progress)  # repeated samples: stuck, progressing, spinning
    if moved:
        lines.append("progress: %s" % moved)
    waits = g.group.first.waits
    if waits:
        w = "waits on %s %s" % (waits.kind or "?", waits.name or waits.resource or "")
        if waits.owner_tid is not None:
            w += " held by thread %s" % waits.owner_tid
        lines.append(w)
    cap = IDLE_FRAMES if g.idle else MAX_FRAMES
    placed_note = False
    for fv in g.frames[:cap]:
        if not fv.placed and not placed_note:
            lines.append("-- Python frames that could not be placed among the native ones --")
            placed_note = True
        lines.append(("=> " if fv.matched else "   ") + fv.text)
    if len(g.frames) > cap:
        lines.append("   … %d more frames" % (len(g.frames) - cap))
    if not g.frames:
        lines.append("(no frames)")
    if g.group.first.unwind_stop:
        lines.append("(unwind stopped early: %s)" % g.group.first.unwind_stop)
    return "<details%s><summary>%s</summary>\n\n%s\n\n</details>\n" % (
        "" if g.idle else " open" if g.group.in_finding else "",
        summary,
        fence(lines),
    )


def _omitted_note(groups: int, threads: int) -> str:
    plural = ("s" * (groups != 1), "s" * (threads != 1))
    return (
        "\n> **%d more thread group%s (%d thread%s) omitted** to stay under GitHub's size limit; "
        "attach the HTML or JSON report for every stack.\n" % (groups, plural[0], threads, plural[1])
    )


def _process_block(p) -> str:
    lines = ["**%s**" % md(p.title), "", "| | |", "|---|---|"]
    for k, v in p.facts:
        lines.append("| %s | %s |" % (md(k, line_start=False), md(v, line_start=False)))
    if p.libraries:
        libs = ", ".join(("%s %s" % lv).strip() for lv in p.libraries)
        lines.append("| libraries | %s |" % md(libs, 2000, line_start=False))
    return "\n".join(lines) + "\n\n"


def _process_line(p) -> str:
    facts = dict(p.facts)
    return "- %s: signal %s, python %s, %s threads\n" % (
        md(p.title), md(facts.get("signal", "")), md(facts.get("python", "")), p.thread_count
    )


class _Budget:
    """Adds whole blocks while they fit; counts what had to be left out."""

    def __init__(self, limit: int):
        self.left = limit
        self.parts: List[str] = []

    def add(self, block: str, reserve: int = 0) -> bool:
        if len(block) + reserve > self.left:
            return False
        self.parts.append(block)
        self.left -= len(block)
        return True


#: Share of the limit each section may use at most (groups get whatever is left).
PROCESS_SHARE = 0.15
FINDINGS_SHARE = 0.55
WAITFOR_SHARE = 0.08
#: The asyncio task trees together take at most this share of the limit (each cut with a note).
ASYNCIO_SHARE = 0.15
NOTES_MAX = 3000
#: Room kept for the omission notes.
NOTE_ROOM = 900
#: Above this many processes (multi-rank pastes) the summary is one line per process.
FULL_TABLES = 8


#: Share of the limit the job section (rank classes and call tree) may take.
JOB_MAX = 16000


def _job_block(view: ReportView) -> str:
    """Rank classes as a table, failed inputs, and the call tree as text in a details block."""
    job = view.job
    if job is None:
        return ""
    parts = ["\n### Job\n\n", " · ".join("%s **%s**" % (k, md(v, 200)) for k, v in job.facts), "\n\n"]
    if job.classes:
        parts.append("| %s | count | where |\n|---|---|---|\n" % job.words.units)
        for c in job.classes[:40]:
            parts.append("| %s | %d | %s |\n" % (md(c.ranks, 300).replace("|", "\\|"), c.size,
                                                 md(c.state, 400).replace("|", "\\|")))
        if len(job.classes) > 40:
            parts.append("\n%d more classes in the JSON report.\n" % (len(job.classes) - 40))
    for title, err in job.failed[:20]:
        parts.append("\n- **not analyzed** %s: %s" % (md(title, 200), md(err, 400)))
    if job.failed:
        parts.append("\n")
    if job.tree_lines:
        lines = []
        size = 0
        for line in job.tree_lines:
            size += len(line) + 1
            if size > JOB_MAX - 2000:
                lines.append("… (cut to stay under the size limit; the JSON report has the whole tree)")
                break
            lines.append(line)
        parts.append("\n<details><summary>Merged call tree (outermost frame first, %s on each branch)"
                     "</summary>\n\n" % job.words.units + fence(lines, indent=True) + "\n</details>\n")
    if view.hidden_processes:
        parts.append("\n%d processes are not shown below: each is like the process shown for its %s.\n"
                     % (view.hidden_processes, job.words.classes[:-2]))
    return "".join(parts)


#: Rows of the rank table and lines of the divergence tree on a job's first screen.
FIRST_ROWS = 40
FIRST_TREE_LINES = 60


def _cell(s: object, limit: int = 400) -> str:
    return md(s, limit, line_start=False).replace("|", "\\|")


def first_screen_block(view: ReportView) -> str:
    """A job report's first screen: the verdict, the rank table, the metadata all ranks share
    (said once) and what differs, where the ranks diverge (common frames elided), idle wait-for
    graphs folded to one line."""
    job = view.job
    if job is None:
        return ""
    parts = ["**Verdict:** %s\n\n" % md(job.verdict, 1500)]
    gpu = job.gpu_column  # GPU state came in (render/gpuview.py)
    parts.append("| %s | host | pid | state | progress | sources |%s where |\n|---|---|---|---|---|---|%s---|\n"
                 % (job.words.unit, " gpu |" if gpu else "", "---|" if gpu else ""))
    for r in job.rows[:FIRST_ROWS]:
        rank = ("**%s** (at fault)" if r.at_fault else "%s") % _cell(r.ranks, 300)
        parts.append("| %s |\n" % " | ".join([rank] + [_cell(x or "-") for x in (
            r.host, r.pid, r.state, r.progress, r.sources) + ((r.gpu,) if gpu else ()) + (r.where,)]))
    if len(job.rows) > FIRST_ROWS:
        parts.append("\n%d more rows in the JSON report.\n" % (len(job.rows) - FIRST_ROWS))
    if job.progress_note:
        parts.append("\n%s\n" % md(job.progress_note))
    sh = job.shared
    if sh is not None:
        same = " · ".join("%s **%s**" % (md(k, 40), md(v, 300)) for k, v in sh.same if len(v) <= SHORT_FACT)
        parts.append("\n**Same on %s:** %s\n" % (md(sh.who, 200), same or "nothing"))
        for k, v in sh.same:
            if len(v) > SHORT_FACT:
                parts.append("\n- %s: %s" % (md(k, 40), md(v, 2000)))
        for k, vals in sh.differ[:12]:
            parts.append("\n- differs, %s: %s" % (md(k, 40), "; ".join(
                "%s on %s" % (md(v, 300), md(r, 200)) for r, v in vals[:8])))
        parts.append("\n")
    if job.divergence_lines:
        lines = job.divergence_lines[:FIRST_TREE_LINES]
        if len(job.divergence_lines) > FIRST_TREE_LINES:
            lines.append("… (the merged call tree below has the rest)")
        parts.append("\n**Where %s diverge** (merged call tree, outermost frame first; common frames "
                     "elided):\n\n" % job.words.group + fence(lines, indent=True) + "\n")
    if job.idle_waitgraphs:
        n = len(job.idle_waitgraphs)
        parts.append("\n%d idle wait-for graph%s folded (every thread in %s waits on a resource nobody holds).\n"
                     % (n, "s" * (n != 1), "them" if n != 1 else "it"))
    return "".join(parts) + "\n"


#: Room the mapped-file tables may take (doubtful rows come first, so a cut drops matches).
FILES_MAX = 8000


def _files_block(view: ReportView, room: int) -> str:
    """Each core's mapped-file table in a details block, within ``room`` characters."""
    parts = []
    for p in view.processes:
        if not p.files:
            continue
        lines, size = [], 0
        for r in p.files:
            line = file_row_text(r)
            size += len(line) + 1
            if size > room - 600:
                lines.append("… %d more rows (the JSON and HTML reports list every one)"
                             % (len(p.files) - len(lines)))
                break
            lines.append(line)
        block = "\n<details><summary>Mapped files of %s: %s</summary>\n\n%s\n</details>\n" % (
            md(p.title), md(files_summary(p.files)), fence(lines))
        room -= len(block)
        if room < 0:
            break
        parts.append(block)
    return "".join(parts)


def _asyncio_block(title: str, head: str, text: str, room: int) -> str:
    """One loop's task tree as a fenced block under a heading; lines past ``room`` are cut with a note."""
    top = "\n### asyncio tasks of %s\n\n%s\n\n" % (md(title), md(head))
    lines, used = [], len(top) + 200
    for line in text.split("\n"):
        used += len(line) + 1
        if used > room:
            lines.append("... cut to stay under the size limit (the JSON report has every task)")
            break
        lines.append(line)
    if room < len(top) + 400:
        return ""
    return top + fence(lines, indent=True) + "\n"


def render_view_markdown(view: ReportView, limit: int = LIMIT) -> str:
    """Assemble whole blocks in reading order, each section within its share of ``limit``."""
    b = _Budget(limit - NOTE_ROOM)
    meta = []
    if view.bucket:
        meta.append("bucket `%s`" % view.bucket)
    meta.append(md(view.tool.strip()))
    b.add("## hanganalyze: %s\n\n%s\n\n" % (md(view.headline), " · ".join(meta)))
    for d in view.doubts[:5]:
        b.add("> **Warning:** %s\n\n" % md(d))

    b.add(first_screen_block(view))
    cap = b.left - int(limit * PROCESS_SHARE)
    dropped = 0
    for p in view.processes if view.job is None else ():  # a job says them once, on its first screen
        block = _process_block(p) if len(view.processes) <= FULL_TABLES else _process_line(p)
        if dropped or b.left - len(block) < cap or not b.add(block):
            dropped += 1
    if dropped:
        b.parts.append("\n> %d more process summaries omitted (see the JSON report).\n\n" % dropped)

    b.add("### Findings\n\n")
    if not view.findings:
        b.add("No signature in the database matched these stacks.\n")
    cap = b.left - int(limit * FINDINGS_SHARE)
    dropped = 0
    for n, fv in enumerate(view.findings, 1):
        block = _finding_block(n, fv) + "\n"
        if dropped or b.left - len(block) < cap or not b.add(block):
            dropped += 1
    if dropped:
        b.parts.append("\n> %d more finding%s omitted to stay under the size limit (see the JSON report).\n"
                       % (dropped, "s" * (dropped != 1)))

    ras = ras_section(view.snapshot)  # render/rasview.py
    if ras is not None:
        b.add("\n### %s\n\n- source: %s\n- %s\n%s" % (TITLE, md(ras.source), md(ras.verdict), "".join(
            "- %s\n" % md(x) for x in ras.lines + tuple("note: " + n for n in ras.notes))))
    job_block = _job_block(view)
    if job_block:
        b.add(job_block)
    gpu = gpu_lines(view.snapshot)
    if gpu:  # the device side (render/gpuview.py): only when GPU state came in
        b.add("\n### GPUs\n\n" + "".join("- %s\n" % md(ln.strip(), 600) for ln in gpu))

    cycles = [c for p in view.processes for c in p.waitgraph_cycles]
    if cycles:
        cap = b.left - int(limit * WAITFOR_SHARE)
        b.add("\n### Wait-for\n\n")
        for c in cycles:
            line = "- " + md(c, 1500) + "\n"
            if b.left - len(line) < cap or not b.add(line):
                break

    room = int(limit * ASYNCIO_SHARE)
    for p in view.processes:  # asyncio tasks (render/asynctree.py), as the text report shows them
        for _tid, head, text in asynctree.loop_blocks(p.process):
            block = _asyncio_block(p.title, head, text, min(room, b.left - 2000))
            if block and b.add(block):
                room -= len(block)
    files = _files_block(view, min(FILES_MAX, int(limit * 0.12)))

    b.left -= len(files)

    notes = ""
    if view.warnings:
        notes = "\n### Notes\n\n"
        for w in view.warnings[:30]:
            line = "- " + md(w) + "\n"
            if len(notes) + len(line) > NOTES_MAX:
                break
            notes += line
    b.left -= len(notes)

    omitted_groups = omitted_threads = 0
    for p in view.processes:
        header = "\n### Threads of %s (%d in %d groups, %d idle)\n\n" % (
            md(p.title), p.thread_count, len(p.groups), p.idle_threads
        )
        if omitted_groups or not b.add(header):
            omitted_groups += len(p.groups)
            omitted_threads += sum(g.size for g in p.groups)
            continue
        for g in p.groups:
            # once a group is left out, later (less important) ones are too: the order stays honest
            if omitted_groups or not b.add(_group_block(g) + "\n"):
                omitted_groups += 1
                omitted_threads += g.size
    if omitted_groups:
        b.parts.append(_omitted_note(omitted_groups, omitted_threads))
    b.parts.append(files)
    b.parts.append(notes)
    return "".join(b.parts)


def render_markdown(snapshot: Snapshot, limit: Optional[int] = None) -> str:
    """The Markdown report (always under ``LIMIT`` characters)."""
    return render_view_markdown(build_view(snapshot), limit or LIMIT)
