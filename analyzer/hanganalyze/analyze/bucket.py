"""Stable bucket id: the same bug gets the same short id on every machine, run and Python version.

Bug trackers use it to spot duplicates ("b2-3f9a0c1d2e4b" already reported in #123).  The id is
``b2-`` + 12 hex digits of a SHA-256 over a normalized key; the ``b2`` prefix is the algorithm
version, so a change to the key is a new prefix instead of a silent regrouping (b1 kept the
standard library's version-dependent Python frames, see below).

The key (algorithm b2):

* With findings: the top finding's signature id, plus the normalized top frames of the threads
  responsible for it (its evidence threads, else ``Finding.threads``).  A finding spanning several
  threads (a lock-order cycle) contributes the *sorted set* of their stacks, at most
  ``MAX_THREADS``, so the id does not depend on which thread got the smaller tid.
* Without findings: if a process died of a fatal signal, ``signal`` + the current (signalled)
  thread's top frames; otherwise ``None`` - a hang without any finding carries no evidence of
  *which* bug it is, and a bucket from an arbitrary thread would merge unrelated reports.

Frame normalization drops whatever varies for the same bug:

* addresses, line numbers, C++ parameter lists, template arguments, ABI tags, compiler clone
  suffixes (``.isra.0``, ``.cold``, ``.constprop.1``, ``.part.2``, ``.lto_priv.0``, ``[clone ...]``);
* paths: Python files keep only their basename (``/home/u/venv/lib/python3.12/threading.py`` and
  ``.../python3.10/threading.py`` are the same frame), Python function names keep only the last
  component (``Worker.run`` from 3.11's ``co_qualname`` equals 3.10's ``run``); libraries keep
  the basename without the version (``libnccl.so.2.21.5`` -> ``libnccl.so``);
* standard-library Python frames that exist in some CPython versions only for the same state
  (``threading.py:_wait_for_tstate_lock``: 3.8-3.12's join helper; 3.13+ joins in C), listed in
  ``signatures/lists/version_dependent_python.yaml``;
* interpreter internals (frames in libpython / the python executable, or named ``_Py*``/``Py*``)
  and C runtime internals (libc, libpthread, ld.so, libstdc++, libgcc_s) are skipped, because they
  change with every CPython and glibc release; they are used only when nothing else remains.

Name normalization lives in ``names.py``; which libraries are interpreter or C runtime is data
(``signatures/lists/``), read by ``framelists.py``.
"""

from __future__ import annotations

import hashlib
import re
from typing import List, Optional

from hanganalyze.analyze.framelists import in_python_frames, is_interpreter_frame, is_runtime_frame
from hanganalyze.frametext import FrameStyle, frame_text
from hanganalyze_gdbext.model import Finding, Snapshot, Thread
from hanganalyze_gdbext.model.signals import FATAL_SIGNALS  # a no-finding core is bucketed only for these

VERSION = "b2"
#: Frames per thread that enter the key.
TOP_FRAMES = 5
#: Threads per finding that enter the key.
MAX_THREADS = 3



def bucket_text(finding: Finding) -> Optional[str]:
    """The bucket key's body for a triage finding on top: its wait and blame frame."""
    info = finding.triage
    if info is None or not info.blame:
        return None
    blame = re.sub(r":\d+\)", ")", info.blame)  # no line numbers: the same bug moves
    return "triage:%s|%s" % (info.wait, blame)

def stack_tokens(thread: Thread, top: int = TOP_FRAMES) -> List[str]:
    """The normalized top frames of a thread, most significant (innermost relevant) first."""
    frames = [f for f in thread.all_frames()
              if not f.marker and not in_python_frames(f, "version_dependent_python")]
    relevant = [f for f in frames if f.kind == "python" or not (is_interpreter_frame(f) or is_runtime_frame(f))]
    if not relevant:
        relevant = [f for f in frames if f.kind == "python" or not is_interpreter_frame(f)] or frames
    tokens: List[str] = []
    for f in relevant:
        tok = frame_text(f, FrameStyle.BUCKET)
        if tokens and tokens[-1] == tok:  # recursion / inlined duplicates
            continue
        tokens.append(tok)
        if len(tokens) >= top:
            break
    return tokens


def bucket_key(snapshot: Snapshot) -> Optional[str]:
    """The text that is hashed (exposed for tests and for ``--explain`` style debugging)."""
    if snapshot.findings:
        top = snapshot.findings[0]
        if not (0 <= top.process < len(snapshot.processes)):
            return "%s|finding:%s" % (VERSION, top.signature)
        label = "finding:%s" % top.signature
        if top.signature == "triage":  # no known bug: the wait and the blame frame (analyze/triage.py)

            text = bucket_text(top)
            if text:
                return "%s|%s" % (VERSION, text)
            # no blame frame (a log, unnamed frames only): the wait, then the stacks as for a finding,
            # so a GPU wait and a collective's log line never share a bucket
            label = "triage:%s" % (top.triage.wait if top.triage is not None else None)
        proc = snapshot.processes[top.process]
        tids = [e.thread for e in top.evidence if e.thread is not None]
        if not tids:
            tids = list(top.threads)
        stacks = set()
        for tid in tids:
            t = proc.thread_by_tid(tid)
            if t is not None:
                stacks.add(" > ".join(stack_tokens(t)))
        parts = sorted(stacks)[:MAX_THREADS]
        return "%s|%s|%s" % (VERSION, label, " || ".join(parts))
    for proc in snapshot.processes:
        if proc.signal in FATAL_SIGNALS:
            cur = next((t for t in proc.threads if t.current), None)
            if cur is not None:
                return "%s|signal:%s|%s" % (VERSION, proc.signal, " > ".join(stack_tokens(cur)))
    return None


def bucket_id(snapshot: Snapshot) -> Optional[str]:
    """``b2-<12 hex>`` for the top finding (or the crash), ``None`` when there is nothing to bucket."""
    key = bucket_key(snapshot)
    if key is None:
        return None
    return "%s-%s" % (VERSION, hashlib.sha256(key.encode("utf-8")).hexdigest()[:12])
