"""PLACEHOLDER (owned by the reports work): Markdown report."""

from __future__ import annotations


def render_markdown(snapshot):
    lines = []
    for f in snapshot.findings:
        lines.append("FINDING %s [%s]: %s" % (f.signature, f.severity, f.title))
    for p in snapshot.processes:
        lines.append("process %s %s signal=%s" % (p.pid, p.executable, p.signal))
        for t in p.threads:
            lines.append("  thread %s %s" % (t.tid, t.name or ""))
            for i, fr in enumerate(t.frames):
                lines.append("    #%d %s %s %s:%s" % (i, fr.kind, fr.function or "??", fr.file or fr.library, fr.line))
    return "\n".join(lines) + "\n"
