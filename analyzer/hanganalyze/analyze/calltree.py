"""The merged call tree of a whole job, and the equivalence classes of its ranks (as LLNL STAT does).

A hang of a 4,096-rank job is usually *one* rank (or a handful) that is somewhere else than all
the others: the straggler sits in ``load_next_batch`` while everybody else waits in
``all_reduce``.  Reading 4,096 reports cannot show that; one prefix tree of every thread's stack,
outermost frame at the root and each node labelled with the set of ranks that pass through it,
shows it at a glance: the tree branches exactly at the frame where the ranks diverge.

Everything here is a pure function of the processes (no snapshot, no findings, no I/O), so the
pipeline, the renderers and the tests can call it in any order.

Design choices:

* Frames are *normalized* before they enter the tree (``tree_frame_label``): addresses, C++
  parameter lists, template arguments and clone suffixes differ between builds, hosts and ASLR
  layouts of the same code, and would otherwise split the tree on noise.  Python frames keep their
  line, because a different line *is* a different place in the program (that is how the
  straggler of the test data shows: the same ``<module>`` at line 14 vs 15).
* CPython's own native frames (``_PyEval_EvalFrameDefault`` ...) are dropped: between two Python
  frames they only add noise, and their number varies with the CPython version.
* Speed: identical raw stacks are normalized once (a cache keyed by the raw frames without
  addresses), identical normalized stacks are inserted once with a rank bitset and a thread
  multiplicity, and rank sets are Python ``int`` bitsets over the dense positions of the keys while
  building (an OR of a 4,096-bit int is a few machine words) and become range strings only at the
  end, memoised per distinct set.
* Bounds: a stack deeper than ``MAX_DEPTH`` is elided in the middle and the tree is pruned to
  ``MAX_NODES`` nodes (smallest subtrees first), so the JSON, the HTML and any recursive consumer
  (jinja2 macros, ``json.dumps``) stay bounded even for hostile or pathological inputs.
"""

from __future__ import annotations

import heapq
import re
from operator import attrgetter
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from hanganalyze.analyze.framelists import is_interpreter_frame, is_runtime_frame
from hanganalyze.analyze.grouping import is_idle_stack
from hanganalyze.analyze.names import basename, library_base, normalize_native_name, short_function
from hanganalyze_gdbext.model import Frame, Process, Thread

#: Label of the synthetic root node.
ROOT_LABEL = "<job>"
#: A process without any thread (acquisition failed), or whose threads were all filtered out.
NO_THREADS_LABEL = "<no threads>"
#: A thread without any frame left after normalization.
NO_FRAMES_LABEL = "<no frames>"
#: Largest number of ranks ``expand_ranks`` agrees to produce: a rank set comes from JSON that a
#: stranger may have written, and ``"0-999999999999"`` must not eat the machine's memory.
MAX_EXPAND = 1 << 22
#: Frames per stack kept in the tree (outermost ``DEPTH_HEAD`` + innermost rest, a marker in
#: between).  Keeps every recursive consumer of the tree (jinja2 macros: ~4 Python frames per
#: level; ``json.dumps``) far below Python's recursion limit.
MAX_DEPTH = 96
DEPTH_HEAD = 16
#: Nodes kept in the tree; beyond it the smallest subtrees become ``… N more branches`` nodes (one
#: per branch point that lost children, so the result has at most about twice this many).
MAX_NODES = 10000
#: Longest label kept (characters); longer ones keep their head and tail around ``…``.
MAX_LABEL = 200
#: Longest raw function name normalized (the normalizer is linear, but a 10 MB name is no name).
MAX_RAW_NAME = 4096
#: Thread selections of ``build_call_tree``.
THREAD_MODES = ("all", "main", "active")

_RAW = attrgetter("kind", "function", "file", "line", "library", "marker")
#: Characters that would break the one-line-per-node layout or act on a terminal: C0/C1 controls,
#: DEL, bidi overrides and isolates, zero-width marks, line/paragraph separators, BOM.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_WHITESPACE_CONTROL = frozenset("\t\n\r\x0b\x0c\x85\u2028\u2029")
_RUN_OF_ONES = re.compile("1+")

# ------------------------------------------------------------------------------------------ ranks


def compress_ranks(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 5, 7, 8, 9]`` -> ``"0-3,5,7-9"``: the way MPI tools and STAT print rank sets.

    4,096 ranks that all do the same thing must take a few characters, not 20 KB.  Duplicates and
    order do not matter; one pass after the sort.  Negative numbers are refused, because ``-3``
    could not be told from a range."""
    items = sorted(set(ranks))
    if not items:
        return ""
    if items[0] < 0:
        raise ValueError("negative rank %d" % items[0])
    out: List[str] = []
    start = prev = items[0]
    for r in items[1:]:
        if r == prev + 1:
            prev = r
            continue
        out.append(str(start) if start == prev else "%d-%d" % (start, prev))
        start = prev = r
    out.append(str(start) if start == prev else "%d-%d" % (start, prev))
    return ",".join(out)


def expand_ranks(text: str, limit: int = MAX_EXPAND) -> List[int]:
    """The inverse of ``compress_ranks``: ``"0-3,5"`` -> ``[0, 1, 2, 3, 5]`` (sorted, unique).

    The text may come from a snapshot file written by anyone, so it is bounded: more than
    ``limit`` ranks in all, a descending range or anything but digits, ``-`` and ``,`` (spaces
    allowed) is a ValueError, never a memory blow-up."""
    if not isinstance(text, str):
        raise ValueError("rank set must be a string, not %s" % type(text).__name__)
    text = text.strip()
    if not text:
        return []
    spans: List[Tuple[int, int]] = []
    total = 0
    for part in text.split(","):
        part = part.strip()
        lo_s, sep, hi_s = part.partition("-")
        lo_s, hi_s = lo_s.strip(), hi_s.strip()
        if not lo_s.isdigit() or (sep and not hi_s.isdigit()) or len(lo_s) > 12 or len(hi_s) > 12:
            raise ValueError("bad rank range %r" % part[:40])
        lo = int(lo_s)
        hi = int(hi_s) if sep else lo
        if hi < lo:
            raise ValueError("descending rank range %r" % part[:40])
        total += hi - lo + 1
        if total > limit:
            raise ValueError("rank set %r has more than %d ranks" % (text[:40], limit))
        spans.append((lo, hi))
    out = set()
    for lo, hi in spans:
        out.update(range(lo, hi + 1))
    return sorted(out)


def default_keys(processes: Sequence[Process]) -> List[int]:
    """The job key of each process: its rank, else its index (then the renderers show ``p<index>``)."""
    return [p.rank if p.rank is not None else i for i, p in enumerate(processes)]


# ----------------------------------------------------------------------------------------- labels


def clean_label(text: str, limit: int = MAX_LABEL) -> str:
    """One line of printable text: a function name from a core is attacker-controlled and may hold
    newlines (which would forge extra tree lines), terminal escapes or bidi overrides.  Whitespace
    controls become spaces, other controls ``\\xNN``/``\\uNNNN``; runs of spaces collapse; a label
    longer than ``limit`` keeps its head and tail (the tail of a C++ name is the method)."""
    if _CONTROL.search(text):
        text = _CONTROL.sub(
            lambda m: " " if m.group(0) in _WHITESPACE_CONTROL
            else ("\\x%02x" if ord(m.group(0)) < 0x100 else "\\u%04x") % ord(m.group(0)),
            text,
        )
    if "  " in text or text[:1] == " " or text[-1:] == " ":
        text = " ".join(text.split())
    if len(text) > limit:
        keep = max(limit - 1, 2)
        head = keep // 2
        text = text[:head] + "…" + text[len(text) - (keep - head):]
    return text


def tree_frame_label(f: Frame) -> str:
    """The label of one frame in the tree.

    * Python: ``function (file.py:line)``, file as basename (the same code lives under another
      venv path on every host);
    * native: the normalized C++ name (no parameter list, template arguments, clone suffixes,
      addresses: those differ between builds of the same code), via ``names.normalize_native_name``;
    * unknown native: ``?? (libname.so)`` (the library without its version), so that a stripped
      frame still says where it is.
    """
    if f.kind == "python":
        where = basename(f.file) or f.module or ""
        if where and f.line is not None:
            where = "%s:%s" % (where, f.line)
        where = clean_label(where[:MAX_RAW_NAME], MAX_LABEL // 2)
        name = clean_label((f.function or "??")[:MAX_RAW_NAME], MAX_LABEL - len(where) - 3)
        return "%s (%s)" % (name, where) if where else name
    if f.marker:
        return clean_label("-- %s --" % (f.note or f.function or "gap"))
    raw = f.function
    if raw and raw.strip() and raw.strip() != "??":
        raw = raw[:MAX_RAW_NAME]
        name = normalize_native_name(raw)
        if not name or name == "??":  # "<lambda>" and such: all template / parameter list
            name = short_function(raw) or raw.strip()
        return clean_label(name)
    lib = library_base(f.library)
    return clean_label("?? (%s)" % lib) if lib else "??"


def main_thread(proc: Process) -> Optional[Thread]:
    """The thread whose tid is the pid, else the one named MainThread, else the first one."""
    if not proc.threads:
        return None
    if proc.pid is not None:
        for t in proc.threads:
            if t.tid == proc.pid:
                return t
    for t in proc.threads:
        if t.name == "MainThread" or t.python_name == "MainThread":
            return t
    return proc.threads[0]


class _Stacks:
    """Normalized stacks, interned: raw frames (no addresses) -> stack id -> tuple of label ids.

    Normalizing a frame costs a few regexes; a job repeats the same few stacks thousands of
    times.  Each distinct raw frame is normalized once, each distinct raw stack once, and equal
    normalized stacks share one id, so the rest of the work is on small ints."""

    def __init__(self) -> None:
        self.frame_ids: Dict[tuple, int] = {}  # raw frame -> label id, or -1 when dropped
        self.label_ids: Dict[Tuple[str, str], int] = {}
        self.labels: List[str] = []
        self.kinds: List[str] = []
        self.raw_stacks: Dict[tuple, list] = {}  # raw stack -> [stack id, idle (None: not yet known)]
        self.seq_ids: Dict[Tuple[int, ...], int] = {}
        self.seqs: List[Tuple[int, ...]] = []

    def label_id(self, label: str, kind: str) -> int:
        key = (label, kind)
        lid = self.label_ids.get(key)
        if lid is None:
            lid = self.label_ids[key] = len(self.labels)
            self.labels.append(label)
            self.kinds.append(kind)
        return lid

    @staticmethod
    def raw(t: Thread) -> tuple:
        return tuple(map(_RAW, t.frames + t.python_frames if t.python_frames else t.frames))

    def entry(self, t: Thread) -> list:
        """``[stack id, idle or None]`` of a thread: one raw key, one dict look-up."""
        raw = self.raw(t)
        e = self.raw_stacks.get(raw)
        if e is None:
            e = self.raw_stacks[raw] = [self._normalize(t, raw), None]
        return e

    def stack_id(self, t: Thread) -> int:
        return self.entry(t)[0]

    @staticmethod
    def is_idle(t: Thread, e: list) -> bool:
        if e[1] is None:
            e[1] = is_idle_stack(t)
        return e[1]

    def _normalize(self, t: Thread, raw: tuple) -> int:
        frames = t.all_frames()
        ids: List[int] = []
        for f, rf in zip(reversed(frames), reversed(raw)):  # outermost first
            lid = self.frame_ids.get(rf)
            if lid is None:
                if f.marker or (f.kind != "python" and is_interpreter_frame(f)):
                    lid = -1
                else:
                    lid = self.label_id(tree_frame_label(f), "python" if f.kind == "python" else "native")
                self.frame_ids[rf] = lid
            if lid >= 0 and (not ids or ids[-1] != lid):  # consecutive duplicates collapse
                ids.append(lid)
        if not ids:
            ids = [self.label_id(NO_FRAMES_LABEL, "native")]
        elif len(ids) > MAX_DEPTH:
            tail = MAX_DEPTH - DEPTH_HEAD - 1
            cut = len(ids) - DEPTH_HEAD - tail
            ids = ids[:DEPTH_HEAD] + [self.label_id("… %d frames …" % cut, "native")] + ids[-tail:]
        seq = tuple(ids)
        sid = self.seq_ids.get(seq)
        if sid is None:
            sid = self.seq_ids[seq] = len(self.seqs)
            self.seqs.append(seq)
        return sid


def _scan(proc: Process, mode: str, stacks: _Stacks, want_active: bool) -> Tuple[List[int], List[int]]:
    """One pass over a process: (stack ids of the threads selected by ``mode``, stack ids of its
    non-idle threads when ``want_active``).  The raw stack key is the costly part (one tuple per
    frame), so the tree and the classes share it when ``job_view`` builds both."""
    main = main_thread(proc)
    if mode == "main" and not want_active:
        return ([stacks.stack_id(main)] if main is not None else []), []
    selected: List[int] = []
    active: List[int] = []
    for t in proc.threads:
        e = stacks.entry(t)
        if mode == "all" and not want_active:
            selected.append(e[0])
            continue
        # grouping's idle rule: the main and the current thread are never idle
        busy = t is main or t.current or not stacks.is_idle(t, e)
        if busy:
            active.append(e[0])
        if mode == "all" or (mode == "active" and busy) or (mode == "main" and t is main):
            selected.append(e[0])
    return selected, active


# ------------------------------------------------------------------------------------------- tree

# internal trie node: [label id, rank bitset, thread count, {label id: child}]
_LID, _BITS, _THREADS, _KIDS = 0, 1, 2, 3


class _RankSets:
    """Bitset over dense key positions -> (``"0-3,5"``, count), memoised per distinct set."""

    def __init__(self, sorted_keys: List[int]) -> None:
        self.keys = sorted_keys
        self.memo: Dict[int, Tuple[str, int]] = {}

    def keys_of(self, bits: int) -> List[int]:
        s = bin(bits)[:1:-1]  # bit i at index i
        keys = self.keys
        out: List[int] = []
        for m in _RUN_OF_ONES.finditer(s):
            out.extend(keys[m.start():m.end()])
        return out

    def text(self, bits: int) -> Tuple[str, int]:
        hit = self.memo.get(bits)
        if hit is None:
            keys = self.keys_of(bits)
            hit = self.memo[bits] = (compress_ranks(keys), len(keys))
        return hit


def _prune(root: list, max_nodes: int) -> dict:
    """Which trie nodes to keep: grow from the root, biggest rank sets first, until ``max_nodes``.
    Returns ``{"kept": ids of kept nodes, "cut": {id of a kept node: its children that were cut}}``
    (each cut group becomes one ``… N more branches`` node)."""
    kept = {id(root)}
    heap: List[Tuple[int, int, int, int, list, list]] = []
    seq = 0

    def push(parent: list) -> None:
        nonlocal seq
        for child in parent[_KIDS].values():
            seq += 1
            heapq.heappush(heap, (-bin(child[_BITS]).count("1"), -child[_THREADS], seq, id(child), child, parent))

    push(root)
    while heap and len(kept) < max_nodes:
        item = heapq.heappop(heap)
        kept.add(id(item[4]))
        push(item[4])
    cut: Dict[int, List[list]] = {}
    for item in heap:
        cut.setdefault(id(item[5]), []).append(item[4])
    return {"kept": kept, "cut": cut}


def _count_nodes(root: list, stop: int) -> int:
    n, todo = 0, [root]
    while todo and n <= stop:
        node = todo.pop()
        n += 1
        todo.extend(node[_KIDS].values())
    return n


def _check(processes: Sequence[Process], keys: Sequence[int], threads: str) -> None:
    """Refuse bad arguments up front, with a message that names them (not a KeyError deep inside)."""
    if len(keys) != len(processes):
        raise ValueError("%d keys for %d processes" % (len(keys), len(processes)))
    bad = next((k for k in keys if not isinstance(k, int) or isinstance(k, bool) or k < 0), None)
    if bad is not None:
        raise ValueError("process key %r is not a rank (a non-negative int)" % (bad,))
    if threads not in THREAD_MODES:
        raise ValueError("threads must be one of %s, not %r" % (", ".join(THREAD_MODES), threads))


def build_call_tree(processes: Sequence[Process], keys: Sequence[int], threads: str = "all",
                    max_nodes: int = MAX_NODES) -> dict:
    """The prefix tree of every selected thread's stack across processes, outermost frame first.

    ``keys[i]`` is the rank of ``processes[i]`` (see ``default_keys``).  ``threads`` is ``"all"``,
    ``"main"`` (each process's main thread) or ``"active"`` (no idle thread, by grouping's rule).
    Each node is ``{"label", "kind", "ranks": "0-3,5", "count": ranks, "threads": n, "children"}``,
    children by count descending then label; the root is a synthetic ``"<job>"`` node (kind
    ``native``) holding every key; a process with no selected thread hangs a ``"<no threads>"``
    leaf under it, so that no rank silently vanishes.  A node that summarises pruned siblings has
    ``"elided"`` (the number of nodes it stands for) and no children."""
    return job_view(processes, keys, threads, max_nodes, classes=False)[0]


def job_view(processes: Sequence[Process], keys: Sequence[int], threads: str = "all",
             max_nodes: int = MAX_NODES, classes: bool = True) -> Tuple[dict, List[dict]]:
    """``(build_call_tree(...), rank_classes(...))`` from one pass over the frames (about half the
    time of the two calls: reading 2.4 million frames is most of the work)."""
    _check(processes, keys, threads)
    stacks = _Stacks()
    selected: List[List[int]] = []
    active: List[List[int]] = []
    for proc in processes:
        sel, act = _scan(proc, threads, stacks, classes)
        selected.append(sel)
        active.append(act)
    tree = _tree(selected, keys, stacks, max_nodes)
    return tree, (_classes(processes, keys, active) if classes else [])


def _tree(selected: List[List[int]], keys: Sequence[int], stacks: _Stacks, max_nodes: int) -> dict:
    sorted_keys = sorted(set(keys))
    position = {k: i for i, k in enumerate(sorted_keys)}
    # normalized stack id -> [rank bits, thread count]; a process contributes its bit once per stack
    agg: Dict[int, list] = {}
    no_threads = stacks.label_id(NO_THREADS_LABEL, "native")
    empty_bits = 0
    for sids, key in zip(selected, keys):
        bit = 1 << position[key]
        if not sids:
            empty_bits |= bit
            continue
        for sid in sids:
            entry = agg.get(sid)
            if entry is None:
                agg[sid] = [bit, 1]
            else:
                entry[0] |= bit
                entry[1] += 1
    all_bits = (1 << len(sorted_keys)) - 1
    root: list = [stacks.label_id(ROOT_LABEL, "native"), all_bits, 0, {}]
    items = [(stacks.seqs[sid], e[0], e[1]) for sid, e in agg.items()]
    if empty_bits:
        items.append(((no_threads,), empty_bits, 0))
    for seq, bits, n in items:
        root[_THREADS] += n
        node = root
        for lid in seq:
            kids = node[_KIDS]
            child = kids.get(lid)
            if child is None:
                child = kids[lid] = [lid, bits, n, {}]
            else:
                child[_BITS] |= bits
                child[_THREADS] += n
            node = child
    plan = _prune(root, max_nodes) if _count_nodes(root, max_nodes) > max_nodes else None
    return _to_dict(root, stacks, _RankSets(sorted_keys), plan)


def _to_dict(root: list, stacks: _Stacks, ranks: _RankSets, plan: Optional[dict]) -> dict:
    """Trie -> nested dicts, iteratively (a deep tree must not hit the recursion limit)."""
    labels, kinds = stacks.labels, stacks.kinds

    def make(node: list) -> dict:
        text, count = ranks.text(node[_BITS])
        return {"label": labels[node[_LID]], "kind": kinds[node[_LID]], "ranks": text, "count": count,
                "threads": node[_THREADS], "children": []}

    out = make(root)
    todo = [(root, out)]
    while todo:
        node, d = todo.pop()
        children = []
        for child in node[_KIDS].values():
            if plan is not None and id(child) not in plan["kept"]:
                continue
            cd = make(child)
            children.append(cd)
            todo.append((child, cd))
        cut = plan["cut"].get(id(node)) if plan is not None else None
        if cut:
            bits = 0
            n_threads = 0
            n_nodes = 0
            for c in cut:
                bits |= c[_BITS]
                n_threads += c[_THREADS]
                n_nodes += _count_nodes(c, 1 << 62)
            text, count = ranks.text(bits)
            label = "… %d more branch%s" % (len(cut), "es" if len(cut) != 1 else "")
            children.append({"label": label, "kind": "native", "ranks": text,
                             "count": count, "threads": n_threads, "children": [], "elided": n_nodes})
        children.sort(key=lambda c: ("elided" in c, -c["count"], c["label"], c["kind"]))
        d["children"] = children
    return out


# ---------------------------------------------------------------------------------------- classes


def _where(proc: Process) -> str:
    """Where a process is, in one phrase: its main thread's innermost Python frame
    (``function (file:line)``), else the innermost native frame outside libc/libstdc++/CPython."""
    from hanganalyze.render.view import frame_location  # lazy: render.view may import this module

    t = main_thread(proc)
    if t is None:
        return ""
    frames = [f for f in t.all_frames() if not f.marker]
    for f in frames:
        if f.kind == "python":
            loc = frame_location(f)
            return clean_label("%s (%s)" % (f.function or "??", loc) if loc else (f.function or "??"))
    for f in frames:
        if not (is_runtime_frame(f) or is_interpreter_frame(f)):
            return tree_frame_label(f)
    return tree_frame_label(frames[0]) if frames else ""


def rank_classes(processes: Sequence[Process], keys: Sequence[int]) -> List[dict]:
    """Equivalence classes of processes doing the same thing (STAT's "process equivalence classes").

    Two processes are equivalent when the multisets of their normalized non-idle thread stacks
    are equal (idle by grouping's rule; the main and current thread always count), so 4,095 ranks
    waiting in the same collective are one class and the straggler is another: one attaches to
    one rank per class, not to 4,096.  Each class is ``{"ranks", "keys", "processes", "size",
    "where"}``, largest first (then by first key)."""
    _check(processes, keys, "all")
    stacks = _Stacks()
    return _classes(processes, keys, [_scan(p, "active", stacks, True)[1] for p in processes])


def _classes(processes: Sequence[Process], keys: Sequence[int], active: List[List[int]]) -> List[dict]:
    by_sig: Dict[tuple, List[int]] = {}
    for i, sids in enumerate(active):
        counts: Dict[int, int] = {}
        for sid in sids:
            counts[sid] = counts.get(sid, 0) + 1
        sig: tuple = tuple(sorted(counts.items()))
        if processes[i].error:  # a process that could not be read is not "the same" as a healthy one
            sig = ("error",) + sig
        by_sig.setdefault(sig, []).append(i)
    classes = []
    for members in by_sig.values():
        ks = sorted(set(keys[i] for i in members))
        classes.append({"ranks": compress_ranks(ks), "keys": ks, "processes": members, "size": len(members),
                        "where": _where(processes[members[0]])})
    classes.sort(key=lambda c: (-c["size"], c["keys"][0] if c["keys"] else 0))
    return classes


# ------------------------------------------------------------------------------------------- text


def _short_ranks(text: str, limit: int) -> str:
    """A rank set cut at a comma to ``limit`` characters (``0,2,4,…``); the count stays exact."""
    if len(text) <= limit:
        return text
    cut = text.rfind(",", 0, max(limit - 2, 1))
    return (text[:cut] if cut > 0 else text[: max(limit - 2, 1)]) + ",…"


def _join_kept(labels: List[str], kept: List[int]) -> str:
    parts: List[str] = []
    prev = -1
    for i in kept:
        if i > prev + 1:
            parts.append("… %d frame%s …" % (i - prev - 1, "s" if i - prev - 1 != 1 else ""))
        parts.append(labels[i])
        prev = i
    if prev < len(labels) - 1:
        parts.append("… %d frames …" % (len(labels) - 1 - prev))
    return " > ".join(parts)


def _fit_chain(labels: List[str], python: List[bool], room: int) -> str:
    """``a > b > c`` in ``room`` characters.  A chain too long for the line keeps its outermost
    frame (where it came from), its innermost (where it is), then its Python frames innermost
    first (the user's code), then native frames from the inside out; every gap becomes
    ``… N frames …``."""
    full = " > ".join(labels)
    if len(full) <= room:
        return full
    n = len(labels)
    order = [0, n - 1] if n > 1 else [0]
    order += [i for i in range(n - 2, 0, -1) if python[i]]
    order += [i for i in range(n - 2, 0, -1) if not python[i]]
    kept: List[int] = []
    for i in order:
        cand = sorted(kept + [i])
        if len(kept) < 2 or len(_join_kept(labels, cand)) <= room:
            kept = cand
        if len(kept) >= 2 and len(_join_kept(labels, kept)) > room:
            break
    text = _join_kept(labels, kept)
    if len(text) > room:  # even the two ends do not fit: shorten them (never the gap marker)
        each = max((room - 20) // max(len(kept), 1), 8)
        short = list(labels)
        for i in kept:
            short[i] = clean_label(labels[i], each)
        text = _join_kept(short, kept)
        if len(text) > room:
            text = text[: max(room - 1, 0)] + "…"
    return text


class _Unit:
    """One text line: a chain of nodes with one child each and the same rank set."""

    __slots__ = ("nodes", "depth", "children", "parent", "order", "chosen", "open_kids")

    def __init__(self, node: dict, depth: int, parent: Optional[_Unit], order: int) -> None:
        nodes = [node]
        while len(node["children"]) == 1 and node["children"][0].get("ranks") == node.get("ranks") \
                and "elided" not in node["children"][0]:
            node = node["children"][0]
            nodes.append(node)
        self.nodes = nodes
        self.depth = depth
        self.parent = parent
        self.order = order
        self.children: Optional[List[_Unit]] = None
        self.chosen = False
        self.open_kids = 0  # children not chosen

    @property
    def head(self) -> dict:
        return self.nodes[0]

    def kids(self, counter: List[int]) -> List[_Unit]:
        if self.children is None:
            self.children = []
            for c in self.nodes[-1]["children"]:
                counter[0] += 1
                self.children.append(_Unit(c, self.depth + 1, self, counter[0]))
            self.open_kids = len(self.children)
        return self.children


def _num(node: dict, key: str) -> int:
    v = node.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def render_tree_lines(tree: dict, max_lines: int = 200, width: int = 160) -> List[str]:
    """The tree as compact text that fits a GitHub issue, even for 4,096 ranks.

    One line per chain of nodes that share a rank set (``a > b > c``), so lines appear only where
    ranks diverge: ``[0-2,4 (4)] train_step (train.py:12) > all_reduce (…) > …wait``.  Deeper
    lines are indented two spaces per branch level.  Over ``max_lines``, lines are kept biggest
    rank set first and the rest of each branch point is one ``… N more branches (ranks …)`` line.
    ``max_lines`` below 2 counts as 2 (the root line and one "more" line).  Labels are cleaned again
    here: the tree may come from a snapshot file, not from this module."""
    max_lines = max(int(max_lines), 2)
    width = max(int(width), 40)
    counter = [0]
    root = _Unit(tree, 0, None, 0)
    root.chosen = True
    lines_used = 1
    heap: List[Tuple[int, int, int, _Unit]] = []

    def offer(u: _Unit) -> None:
        for k in u.kids(counter):
            heapq.heappush(heap, (-_num(k.head, "count"), -_num(k.head, "threads"), k.order, k))

    offer(root)
    if root.open_kids:
        lines_used += 1  # the "more branches" line while none of root's children is shown
    while heap:
        _, _, _, u = heap[0]
        parent = u.parent
        assert parent is not None
        u.kids(counter)
        delta = 1 - (1 if parent.open_kids == 1 else 0) + (1 if u.open_kids else 0)
        if lines_used + delta > max_lines:
            break
        heapq.heappop(heap)
        u.chosen = True
        parent.open_kids -= 1
        lines_used += delta
        offer(u)

    out: List[str] = []
    todo: List[Tuple[str, object]] = [("unit", root)]
    while todo:
        what, item = todo.pop()
        if what == "more":
            out.append(item)  # type: ignore[arg-type]
            continue
        u = item  # type: ignore[assignment]
        assert isinstance(u, _Unit)
        indent = "  " * min(u.depth, 24)
        head = u.head
        count, threads = _num(head, "count"), _num(head, "threads")
        tag = "%d" % count if threads in (0, count) else "%d, %d thr" % (count, threads)
        ranks = _short_ranks(clean_label(str(head.get("ranks", "")), 10 ** 6), max(width // 3, 12))
        prefix = "%s[%s (%s)] " % (indent, ranks, tag)
        labels = [clean_label(str(n.get("label", "?"))) for n in u.nodes]
        python = [n.get("kind") == "python" for n in u.nodes]
        out.append(prefix + _fit_chain(labels, python, max(width - len(prefix), 20)))
        kids = u.children or []
        shown = [k for k in kids if k.chosen]
        hidden = [k for k in kids if not k.chosen]
        later: List[Tuple[str, object]] = [("unit", k) for k in shown]
        if hidden:
            keys: set = set()
            for k in hidden:
                try:
                    keys.update(expand_ranks(str(k.head.get("ranks", ""))))
                except ValueError:
                    pass
            text = "%s… %d more branch%s (ranks %s)" % (
                "  " * min(u.depth + 1, 24), len(hidden), "es" if len(hidden) != 1 else "",
                _short_ranks(compress_ranks(keys), max(width // 2, 12)))
            later.append(("more", text[:width]))
        todo.extend(reversed(later))
    return out
