"""The merged call tree across ranks and the rank classes (analyze/calltree.py).

The processes come from a real 2-rank NCCL straggler (tests/data/job/README.md): rank 1 sleeps in
``load_next_batch`` while rank 0 waits in ``train_step`` -> ``.item()`` -> ``cudaStreamSynchronize``.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import List, Optional

import pytest

from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze import calltree as ct
from hanganalyze.frametext import MAX_LABEL
from hanganalyze.render.html import environment
from hanganalyze.render.treetext import render_tree_lines
from hanganalyze_gdbext.model import Frame, Process, Thread

DATA = Path(__file__).resolve().parents[1] / "data" / "job"
LIBPY = "/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e]")


def real(rank: int) -> Process:
    snap = parse_text((DATA / ("fstrag.rank%d.pyspy.txt" % rank)).read_text())
    assert len(snap.processes) == 1
    return snap.processes[0]


def clone(proc: Process, rank: int) -> Process:
    """A new process with the frames of ``proc`` (shared Frame objects) and its own pid/tids."""
    pid = 100000 + rank * 16
    threads = [Thread(tid=pid + i, name=t.name, frames=list(t.frames)) for i, t in enumerate(proc.threads)]
    return Process(source=proc.source, pid=pid, rank=rank, threads=threads)


def job(world: int = 4096, straggler: int = 17) -> List[Process]:
    p0, p1 = real(0), real(1)
    return [clone(p1 if r == straggler else p0, r) for r in range(world)]


def find(node: dict, label: str) -> Optional[dict]:
    todo = [node]
    while todo:
        n = todo.pop()
        if n["label"] == label:
            return n
        todo.extend(n["children"])
    return None


def depth(node: dict) -> int:
    best, todo = 0, [(node, 1)]
    while todo:
        n, d = todo.pop()
        best = max(best, d)
        todo.extend((c, d + 1) for c in n["children"])
    return best


def nodes(node: dict) -> int:
    n, todo = 0, [node]
    while todo:
        x = todo.pop()
        n += 1
        todo.extend(x["children"])
    return n


def py(name: str, file: str, line: int) -> Frame:
    return Frame(kind="python", function=name, file=file, line=line)


def nat(name: Optional[str], lib: str = "/opt/lib/libx.so.1", address: Optional[int] = None) -> Frame:
    return Frame(kind="native", function=name, library=lib, address=address)


def render_html(tree: dict) -> str:
    tpl = environment().from_string('{% from "calltree.html.j2" import call_tree %}{{ call_tree(tree) }}')
    return tpl.render(tree=tree)


# ------------------------------------------------------------------------------------------ ranks


def test_compress_ranks():
    assert ct.compress_ranks([0, 1, 2, 3, 5, 7, 8, 9]) == "0-3,5,7-9"
    assert ct.compress_ranks([3]) == "3"
    assert ct.compress_ranks([]) == ""
    assert ct.compress_ranks([9, 1, 0, 1, 2, 9]) == "0-2,9"
    assert ct.compress_ranks(range(4096)) == "0-4095"
    assert ct.compress_ranks(r for r in range(16) if r != 6) == "0-5,7-15"
    with pytest.raises(ValueError):
        ct.compress_ranks([2, -1])


def test_expand_ranks_round_trip():
    rng = random.Random(7)
    for _ in range(300):
        ranks = rng.sample(range(200), rng.randint(0, 60))
        text = ct.compress_ranks(ranks)
        assert ct.expand_ranks(text) == sorted(set(ranks))
        assert ct.compress_ranks(ct.expand_ranks(text)) == text
    assert ct.expand_ranks(" 0 - 2 , 5 ") == [0, 1, 2, 5]
    assert ct.expand_ranks("") == []


@pytest.mark.parametrize("bad", ["0-99999999999", "0-4194304", "5-3", "a", "1--2", "1-", "-1", ",", "1,,2",
                                 "0x10", "1;2", "9" * 40])
def test_expand_ranks_refuses(bad):
    with pytest.raises(ValueError):
        ct.expand_ranks(bad)


def test_expand_ranks_bound_is_total():
    with pytest.raises(ValueError):
        ct.expand_ranks(",".join("%d-%d" % (i * 1000, i * 1000 + 999) for i in range(20)), limit=10000)
    assert len(ct.expand_ranks("0-9999", limit=10000)) == 10000


# ----------------------------------------------------------------------------------------- labels


def test_interpreter_frames_dropped_and_duplicates_collapse():
    frames = [
        nat("pthread_cond_wait", LIBC), nat(None, "/usr/lib/libcuda.so.1", 1), nat(None, "/usr/lib/libcuda.so.1", 2),
        nat("cudaStreamSynchronize", "/usr/lib/libcudart.so.13"),
        py("inner", "/a/m.py", 3), nat("_PyEval_EvalFrameDefault", LIBPY), nat("PyObject_Call", LIBPY),
        py("outer", "/a/m.py", 9), nat("_PyEval_EvalFrameDefault", LIBPY),
        nat("main", "/usr/bin/python3.12"), nat("__libc_start_main", LIBC),
    ]
    p = Process(source="core", pid=1, rank=0, threads=[Thread(tid=1, frames=frames)])
    tree = ct.build_call_tree([p], [0])
    chain = []
    node = tree
    while node["children"]:
        assert len(node["children"]) == 1
        node = node["children"][0]
        chain.append(node["label"])
    assert chain == ["__libc_start_main", "outer (m.py:9)", "inner (m.py:3)", "cudaStreamSynchronize",
                     "?? (libcuda.so)", "pthread_cond_wait"]
    assert [n["kind"] for n in [find(tree, "outer (m.py:9)"), find(tree, "pthread_cond_wait")]] == ["python", "native"]


# ------------------------------------------------------------------------------------------- tree


def test_straggler_tree_splits_at_module_line():
    tree = ct.build_call_tree([real(0), real(1)], [0, 1])
    assert tree["label"] == "<job>" and tree["ranks"] == "0-1" and tree["count"] == 2 and tree["threads"] == 2
    (libc,) = tree["children"]
    assert libc["label"] == "?? (libc.so)" and libc["ranks"] == "0-1"
    split = {c["label"]: c for c in libc["children"]}
    assert set(split) == {"<module> (fr_strag.py:15)", "<module> (fr_strag.py:14)"}
    r0, r1 = split["<module> (fr_strag.py:15)"], split["<module> (fr_strag.py:14)"]
    assert (r0["ranks"], r0["count"], r0["kind"]) == ("0", 1, "python")
    assert (r1["ranks"], r1["count"]) == ("1", 1)
    assert [c["label"] for c in r1["children"]] == ["load_next_batch (fr_strag.py:6)"]
    assert r1["children"][0]["children"][0]["label"] == "clock_nanosleep"
    assert r0["children"][0]["label"] == "train_step (fr_strag.py:9)"
    sync = find(r0, "cudaStreamSynchronize")
    assert sync is not None and sync["ranks"] == "0"
    (leaf,) = find(r0, "cuStreamSynchronize")["children"]  # 5 ?? frames -> one
    assert leaf["label"] == "?? (libcuda.so)" and leaf["children"] == []
    assert find(tree, "c10::impl::wrap_kernel_functor_unboxed_::call") is not None  # templates gone
    lines = render_tree_lines(tree)
    assert lines[0] == "[0-1 (2)] <job> > ?? (libc.so)"
    assert lines[1] == "  [1 (1)] <module> (fr_strag.py:14) > load_next_batch (fr_strag.py:6) > clock_nanosleep"
    assert lines[2].startswith("  [0 (1)] <module> (fr_strag.py:15) > train_step (fr_strag.py:9) > ")
    assert lines[2].endswith(" > ?? (libcuda.so)") and len(lines) == 3


def test_4096_ranks_two_classes():
    procs = job()
    keys = ct.default_keys(procs)
    classes = ct.rank_classes(procs, keys)
    assert [(c["ranks"], c["size"]) for c in classes] == [("0-16,18-4095", 4095), ("17", 1)]
    assert classes[0]["where"] == "train_step (fr_strag.py:9)"
    assert classes[1]["where"] == "load_next_batch (fr_strag.py:6)"
    assert classes[1]["keys"] == [17] and classes[1]["processes"] == [17]
    tree, classes2 = ct.job_view(procs, keys)
    assert classes2 == classes and tree == ct.build_call_tree(procs, keys)
    assert tree["count"] == 4096 and tree["ranks"] == "0-4095"
    text_lines = render_tree_lines(tree)
    text = "\n".join(text_lines)
    assert len(text_lines) < 40 and len(text) < 10000
    assert "[0-16,18-4095 (4095)] <module> (fr_strag.py:15)" in text
    assert "[17 (1)] <module> (fr_strag.py:14) > load_next_batch (fr_strag.py:6) > clock_nanosleep" in text
    assert render_tree_lines(tree) == text_lines  # deterministic
    json.dumps(tree)


def test_rankless_processes_keyed_by_index_and_empty_process_kept():
    a, b = real(0), real(1)
    a.rank = b.rank = None
    dead = Process(source="live", pid=5, error="gdb timed out")
    keys = ct.default_keys([a, b, dead])
    assert keys == [0, 1, 2]
    tree = ct.build_call_tree([a, b, dead], keys)
    assert tree["ranks"] == "0-2"
    none = find(tree, ct.NO_THREADS_LABEL)
    assert none is not None and none["ranks"] == "2" and none["threads"] == 0
    classes = ct.rank_classes([a, b, dead], keys)
    assert sorted(c["ranks"] for c in classes) == ["0", "1", "2"]


def test_thread_modes():
    work = [py("step", "/a/train.py", 5), nat("ncclKernelWait", "/usr/lib/libnccl.so.2")]
    idle = [nat("epoll_wait", LIBC), nat("uv_run", "/usr/lib/libuv.so.1")]
    procs = []
    for r in range(4):
        threads = [Thread(tid=10 * r + 1, name="MainThread", frames=list(work)),
                   Thread(tid=10 * r + 2, name="loop", frames=list(idle))]
        procs.append(Process(source="core", pid=10 * r + 1, rank=r, threads=threads))
    keys = ct.default_keys(procs)
    full = ct.build_call_tree(procs, keys, "all")
    assert full["threads"] == 8 and find(full, "epoll_wait")["ranks"] == "0-3"
    active = ct.build_call_tree(procs, keys, "active")
    assert active["threads"] == 4 and find(active, "epoll_wait") is None
    main = ct.build_call_tree(procs, keys, "main")
    assert main["threads"] == 4 and find(main, "step (train.py:5)")["count"] == 4
    # an idle-only difference does not split a class
    procs[2].threads[1].frames = [nat("epoll_wait", LIBC)]
    assert [c["ranks"] for c in ct.rank_classes(procs, keys)] == ["0-3"]
    with pytest.raises(ValueError):
        ct.build_call_tree(procs, keys, "some")
    with pytest.raises(ValueError):
        ct.build_call_tree(procs, keys[:2])


def test_children_sorted_and_multithread_counts():
    procs = []
    for r in range(6):
        leaf = "wait_a" if r < 4 else "wait_b"
        frames = [nat(leaf), nat("common")]
        threads = [Thread(tid=100 * r + i, frames=list(frames)) for i in range(3)]
        procs.append(Process(source="core", pid=100 * r, rank=r, threads=threads))
    tree = ct.build_call_tree(procs, ct.default_keys(procs))
    (common,) = tree["children"]
    assert (common["count"], common["threads"]) == (6, 18)
    assert [(c["label"], c["ranks"], c["count"], c["threads"]) for c in common["children"]] == [
        ("wait_a", "0-3", 4, 12), ("wait_b", "4-5", 2, 6)]
    assert render_tree_lines(tree)[1] == "  [0-3 (4, 12 thr)] wait_a"


# ------------------------------------------------------------------------------------------ bounds


def many_branches(n: int) -> List[Process]:
    return [Process(source="core", pid=r + 1, rank=r, threads=[Thread(tid=r + 1, frames=[
        py("leaf_%d" % (r % 97), "/a/m.py", r), py("mid_%d" % (r % 7), "/a/m.py", 1), py("main", "/a/m.py", 1)])])
        for r in range(n)]


def test_render_cuts_smallest_branches():
    tree = ct.build_call_tree(many_branches(500), list(range(500)))
    lines = render_tree_lines(tree, max_lines=20)
    assert len(lines) <= 20
    assert any("more branches (ranks " in line for line in lines)
    assert lines == render_tree_lines(tree, max_lines=20)
    # nothing vanishes: every one of the 500 leaves is a line of its own or counted in a "more" line
    leaves = sum(1 for line in lines if line.startswith("    [") and "leaf_" in line)
    cut = sum(int(m.group(1)) for m in (re.search(r"… (\d+) more branch", line) for line in lines) if m)
    assert leaves + cut == 500
    assert lines[1].startswith("  [0,7,14,") and lines[2] == "    [0 (1)] leaf_0 (m.py:0)"
    assert len(render_tree_lines(tree, max_lines=1)) == 2  # the root line and one "more" line at least
    full = render_tree_lines(tree, max_lines=10000)
    assert not any("more branch" in line for line in full)


def test_tree_pruned_to_max_nodes():
    procs = many_branches(2000)
    tree = ct.build_call_tree(procs, list(range(2000)), max_nodes=100)
    assert nodes(tree) <= 100 + 60
    elided = [n for n in _all(tree) if "elided" in n]
    assert elided and all(n["children"] == [] for n in elided)
    covered = set()
    for n in _all(tree):
        if not n["children"] and n["label"] != "<job>":
            covered.update(ct.expand_ranks(n["ranks"]))
    assert covered == set(range(2000))
    assert render_html(tree).count("more branches") == len(elided)


def _all(tree: dict) -> List[dict]:
    out, todo = [], [tree]
    while todo:
        n = todo.pop()
        out.append(n)
        todo.extend(n["children"])
    return out


def test_deep_and_mutually_recursive_stacks_are_bounded():
    frames = [py("f" if i % 2 else "g", "/a/rec.py", 3) for i in range(5000)]
    procs = [Process(source="core", pid=1, rank=0, threads=[Thread(tid=1, frames=frames)]),
             Process(source="core", pid=2, rank=1, threads=[Thread(tid=2, frames=frames[1:])])]
    tree = ct.build_call_tree(procs, [0, 1])
    assert depth(tree) <= ct.MAX_DEPTH + 1
    assert any(n["label"].startswith("… ") and n["label"].endswith(" frames …") for n in _all(tree))
    json.dumps(tree)
    html = render_html(tree)
    assert html.count("<details") >= 2
    assert all(len(line) <= 160 for line in render_tree_lines(tree))


def test_caterpillar_tree_renders_in_html():
    """Every rank leaves the common path one frame deeper: one branch point per level, the worst
    case for the macro's recursion (one call per branch point)."""
    common = [py("c%d" % i, "/a/deep.py", i) for i in range(200)]
    procs = []
    for r in range(150):
        outer_first = common[:r] + [py("d%d" % r, "/a/deep.py", r)]
        procs.append(Process(source="core", pid=r + 1, rank=r,
                             threads=[Thread(tid=r + 1, frames=list(reversed(outer_first)))]))
    tree = ct.build_call_tree(procs, list(range(150)))
    assert depth(tree) <= ct.MAX_DEPTH + 1
    html = render_html(tree)
    assert html.count("<details") > ct.MAX_DEPTH - 10
    json.dumps(tree)
    assert len(render_tree_lines(tree)) <= 200


def test_bad_keys_refused():
    with pytest.raises(ValueError):
        ct.build_call_tree([real(0)], [-1])
    with pytest.raises(ValueError):
        ct.rank_classes([real(0)], ["0"])  # type: ignore[list-item]


# ----------------------------------------------------------------------------------------- hostile


HOSTILE = [
    "evil\nfake_line [0-4095 (4096)] <job>",
    "\x1b[31mred\x1b[0m\r\x00nul\x7f",
    "bidi\u202eoverride\u2028sep\u2029par\x85nel\ttab",
    "x" * 100000,
    "ns::" + "<" * 5000 + "deep" + ">" * 5000 + "::f(int)",
    "<script>alert(1)</script>",
    "",
]


def test_hostile_labels_one_line_per_node():
    procs = []
    for r, name in enumerate(HOSTILE):
        frames = [nat(name, "/lib/\nlib\x1bevil.so.1"), py(name, "/tmp/a\nb/ev\x1bil.py", r),
                  nat(None, "/lib/\n\x1b[2Jx.so"), nat("start_thread", LIBC)]
        procs.append(Process(source="core", pid=r + 1, rank=r, threads=[Thread(tid=r + 1, frames=frames)]))
    tree = ct.build_call_tree(procs, ct.default_keys(procs))
    for n in _all(tree):
        assert not CONTROL.search(n["label"]), repr(n["label"])
        assert len(n["label"]) <= MAX_LABEL
    lines = render_tree_lines(tree)
    start = render_tree_lines(ct.build_call_tree(procs[:1], [0]))
    assert start[0].startswith("[0 (1)] <job> > start_thread > ?? (")
    # one root line + one line per rank (every rank differs at the Python frame's line)
    assert len(lines) == 1 + len(HOSTILE)
    for line in lines:
        assert not CONTROL.search(line), repr(line)
        assert len(line) <= 160
    assert sum("fake_line" in line for line in lines) == 1
    assert not any(line.lstrip().startswith("[0-4095") for line in lines)
    html = render_html(tree)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert not CONTROL.search(html.replace("\n", ""))
    classes = ct.rank_classes(procs, ct.default_keys(procs))
    assert all(not CONTROL.search(c["where"]) for c in classes)


def test_render_cleans_labels_of_foreign_trees():
    tree = {"label": "<job>", "kind": "native", "ranks": "0-1", "count": 2, "threads": 2, "children": [
        {"label": "a\nb\x1b[0m", "kind": "python", "ranks": "0\n1", "count": 2, "threads": 2, "children": []}]}
    lines = render_tree_lines(tree)
    assert len(lines) == 2 and not any(CONTROL.search(line) for line in lines)


# -------------------------------------------------------------------------------------------- html


def test_html_macro():
    tree = ct.build_call_tree(job(64, 17), list(range(64)))
    html = render_html(tree)
    assert html.count("<details") == 3
    assert html.count("<details class=\"ct\" open>") == 1  # open down to the first branch point
    assert '<span class="ct-ranks" title="63 ranks, 63 threads">0-16,18-63</span>' in html
    assert '<div class="ct-f py">train_step (fr_strag.py:9)</div>' in html
    assert "&lt;module&gt; (fr_strag.py:14)" in html
    assert "|safe" not in (Path(ct.__file__).resolve().parents[1] / "render" / "templates" /
                           "calltree.html.j2").read_text()
