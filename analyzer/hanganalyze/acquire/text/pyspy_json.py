"""``py-spy dump --json``: a JSON list of threads, each with its frames innermost first.

Keys used: ``pid``, ``thread_id`` (pthread id), ``os_thread_id`` (LWP), ``thread_name``,
``owns_gil``, ``active``, ``frames[]`` of ``name``, ``filename``, ``line`` (and ``module``
for native frames).  Threads of several pids (``--subprocesses``) become several processes.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import python_frame, unknown_function

NAME = "pyspy-json"

_PY_SUFFIXES = (".py", ".pyx", ".pyi", ".pyw")


def score(lines: List[str]) -> float:
    # The document may follow a shell prompt or a log line: look for it near the top.
    if not any(line.lstrip().startswith(("[", "{")) for line in lines[:50]):
        return 0.0
    head = "\n".join(lines[:400])
    if '"frames"' in head and ('"thread_id"' in head or '"os_thread_id"' in head):
        return 1000.0
    return 0.0


def _load(lines: List[str]) -> List[Any]:
    """Every JSON document in the text: one py-spy run prints one array, several runs several.

    Text before, between or after the documents (a shell prompt, a log line) is skipped.
    """
    text = "\n".join(lines)
    decoder = json.JSONDecoder()
    docs: List[Any] = []
    pos, n = 0, len(text)
    error: Optional[str] = None
    while pos < n:
        i = _next_start(text, pos)
        if i < 0:
            break
        try:
            doc, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError) as e:
            error = error or str(e)
            nl = text.find("\n", i)
            pos = n if nl < 0 else nl + 1  # skip this line; a document starts on its own line
            continue
        docs.append(doc)
        pos = end
    if not docs:
        raise InputError("py-spy --json text is not valid JSON%s" % (": %s" % error if error else ""))
    return docs


def _next_start(text: str, pos: int) -> int:
    """Index of the next '[' or '{' that starts a line (after blanks), or -1."""
    while True:
        cands = [i for i in (text.find("[", pos), text.find("{", pos)) if i >= 0]
        if not cands:
            return -1
        i = min(cands)
        line_start = text.rfind("\n", 0, i) + 1
        if not text[line_start:i].strip():
            return i
        pos = i + 1


def _int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: Any) -> Optional[str]:
    return v if isinstance(v, str) else None


def _frame(d: Dict[str, Any]) -> Frame:
    name, filename, line = _str(d.get("name")), _str(d.get("filename")), _int(d.get("line"))
    if filename and (filename.endswith(_PY_SUFFIXES) or filename.startswith("<")):
        return python_frame(name, filename, line)
    f = Frame(kind="native", function=unknown_function(name), file=filename if line else None, line=line or None)
    f.library = _str(d.get("module")) or (filename if not line else None)
    return f


def _thread(d: Dict[str, Any]) -> Thread:
    t = Thread(tid=_int(d.get("os_thread_id")), pthread_id=_int(d.get("thread_id")))
    name = _str(d.get("thread_name"))
    if name:
        t.name = t.python_name = name
    if d.get("owns_gil") is True:
        t.state.gil = "held"
    if d.get("active") is not None:
        t.notes.append("py-spy: %s" % ("active" if d.get("active") else "idle"))
    frames = d.get("frames") if isinstance(d.get("frames"), list) else []
    t.frames = [_frame(f) for f in frames if isinstance(f, dict)]
    kinds = {f.kind for f in t.frames}
    t.merge = "merged" if kinds == {"python", "native"} else ("python-only" if kinds == {"python"} else None)
    return t


def _thread_dicts(data: Any) -> List[Dict[str, Any]]:
    if isinstance(data, dict):
        if isinstance(data.get("threads"), list):
            return _thread_dicts(data["threads"])
        return [data] if "frames" in data else []
    if isinstance(data, list):
        out: List[Dict[str, Any]] = []
        for item in data:
            out.extend(_thread_dicts(item) if isinstance(item, (list, dict)) else [])
        return out
    return []


def parse_processes(lines: List[str], label: Optional[str]) -> List[Process]:
    """One Process per pid seen in the JSON (in order of first appearance)."""
    threads = _thread_dicts(_load(lines))
    procs: Dict[Any, Process] = {}
    for d in threads:
        pid = _int(d.get("pid"))
        proc = procs.get(pid)
        if proc is None:
            proc = procs[pid] = Process(source="text", pid=pid, label=label)
        proc.threads.append(_thread(d))
    return list(procs.values())


def parse(lines: List[str], proc: Process) -> None:
    """Single-process form: every thread goes to ``proc`` (the pid of the first thread wins)."""
    for p in parse_processes(lines, proc.label):
        proc.pid = proc.pid or p.pid
        proc.threads.extend(p.threads)
