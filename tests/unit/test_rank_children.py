"""A rank's children are part of the rank (issue 31): which descendants of a ``--job`` are a rank's
children (``acquire/jobtree.py``), what each is (``acquire/children.py``), how they are kept under
their rank, and what a rank waiting for its DataLoader worker says (``analyze/childwait.py`` via
``rankstate``), up to the job verdict.  The real job is tests/integration/test_job_children.py."""

from __future__ import annotations

import json
from typing import List, Optional, Tuple

from hanganalyze import pipeline
from hanganalyze.acquire.children import attach_children, child_role
from hanganalyze.acquire.jobtree import MAX_CHILDREN, _rank_children
from hanganalyze.analyze.rankstate import rank_state
from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread

SITE = "/venv/lib/python3.11/site-packages/"
LIB = "/usr/lib/python3.11/"


def _py(func: str, file: str, line: int) -> Frame:
    return Frame(kind="python", function=func, file=file, line=line)


def _proc(pid: int, frames: List[Tuple[str, str, int]], rank: Optional[int] = None, **kw) -> Process:
    """A process whose main thread has these Python frames (innermost first)."""
    t = Thread(tid=pid, name="MainThread", python_frames=[_py(*f) for f in frames])
    return Process(source="text", pid=pid, rank=rank, threads=[t], **kw)


#: The rank's main thread waiting for a batch: the standard library's select, innermost.
LOADER_WAIT = [
    ("select", LIB + "selectors.py", 415),
    ("wait", LIB + "multiprocessing/connection.py", 947),
    ("_poll", LIB + "multiprocessing/connection.py", 440),
    ("poll", LIB + "multiprocessing/connection.py", 257),
    ("get", LIB + "multiprocessing/queues.py", 113),
    ("_try_get_data", SITE + "torch/utils/data/dataloader.py", 1133),
    ("_get_data", SITE + "torch/utils/data/dataloader.py", 1295),
    ("_next_data", SITE + "torch/utils/data/dataloader.py", 1329),
    ("__next__", SITE + "torch/utils/data/dataloader.py", 733),
    ("train", "/home/u/train.py", 82),
    ("main", "/home/u/train.py", 96),
]
WORKER_BUSY = [
    ("decode_sample", "/home/u/data.py", 14),
    ("__getitem__", "/home/u/data.py", 20),
    ("fetch", SITE + "torch/utils/data/_utils/fetch.py", 52),
    ("_worker_loop", SITE + "torch/utils/data/_utils/worker.py", 351),
    ("run", LIB + "multiprocessing/process.py", 108),
    ("_bootstrap", LIB + "multiprocessing/process.py", 314),
]
WORKER_IDLE = [
    ("poll", LIB + "multiprocessing/connection.py", 257),
    ("get", LIB + "multiprocessing/queues.py", 113),
    ("_worker_loop", SITE + "torch/utils/data/_utils/worker.py", 313),
    ("run", LIB + "multiprocessing/process.py", 108),
    ("_bootstrap", LIB + "multiprocessing/process.py", 314),
]
ALL_REDUCE = [
    ("all_reduce", SITE + "torch/distributed/distributed_c10d.py", 3252),
    ("wrapper", SITE + "torch/distributed/c10d_logger.py", 81),
    ("train_step", "/home/u/train.py", 73),
    ("train", "/home/u/train.py", 83),
    ("main", "/home/u/train.py", 96),
]


def _child(pid: int, frames, parent: int, rank: int = 1) -> Process:
    p = _proc(pid, frames, rank=rank)
    p.parent, p.role = parent, child_role(p)
    return p


def test_children_go_to_their_rank_and_are_capped():
    workers = {100, 200}
    parents = {101: 100, 102: 100, 201: 200, 301: 300, 1011: 101}  # 1011: a worker's own child
    parents.update({400 + i: 200 for i in range(MAX_CHILDREN + 2)})
    kept, extra = _rank_children(sorted(parents), parents, workers)
    assert kept[101] == kept[102] == kept[1011] == 100 and kept[201] == 200
    assert 301 in extra  # its rank is not a worker of the job: not attached to a wrong rank
    assert sum(1 for r in kept.values() if r == 200) == MAX_CHILDREN
    assert len([p for p in extra if p >= 400]) == 3  # 201 counts too: the first MAX_CHILDREN by pid


def test_role_from_frames_and_command_line():
    assert child_role(_proc(5, WORKER_IDLE)) == "dataloader-worker"
    assert child_role(_proc(5, [("_bootstrap", LIB + "multiprocessing/process.py", 314)])) == "mp-child"
    compile_frames = [("main", SITE + "torch/_inductor/compile_worker/__main__.py", 40)]
    assert child_role(_proc(5, compile_frames)) == "compile-worker"
    bare = Process(pid=6, argv=["python", "-m", "torch._inductor.compile_worker", "--workers=4"])
    assert child_role(bare) == "compile-worker"
    assert child_role(Process(pid=7, argv=["/bin/sh", "-c", "true"])) == "child"


def test_attach_children_moves_children_under_their_rank():
    r0, r1 = _proc(100, ALL_REDUCE, rank=0), _proc(200, LOADER_WAIT, rank=1)
    w1, orphan = _proc(201, WORKER_BUSY, rank=1), _proc(301, WORKER_IDLE, rank=1)
    out = attach_children([r0, r1, w1, orphan], [None, None, 200, 300])
    assert out == [r0, r1]  # a child whose rank was not read is not counted as a rank either
    assert r1.children == [w1] and (w1.parent, w1.role, w1.label) == (200, "dataloader-worker", "DataLoader worker 201")
    assert r0.children == []


def test_json_is_unchanged_without_children_and_reads_back_with_them():
    plain = _proc(100, ALL_REDUCE, rank=0)
    assert not {"parent", "role", "children"} & set(plain.to_dict())
    r1 = _proc(200, LOADER_WAIT, rank=1)
    r1.children.append(_child(201, WORKER_BUSY, 200))
    d = json.loads(json.dumps(r1.to_dict()))
    assert d["children"][0]["parent"] == 200 and d["children"][0]["role"] == "dataloader-worker"
    assert Process.from_dict(d) == r1


def test_rank_waiting_for_its_worker_is_at_the_users_line_with_the_workers_frame():
    r1 = _proc(200, LOADER_WAIT, rank=1)
    r1.children = [_child(201, WORKER_IDLE, 200), _child(202, WORKER_BUSY, 200)]
    st = rank_state(1, r1)
    assert (st.state, st.evidence, st.where) == ("elsewhere", "elsewhere", "train (train.py:82)")
    assert st.waits_for == "DataLoader worker 202, which is in decode_sample (data.py:14)"
    assert "waits_for" in st.to_dict()
    r1.children = [_child(201, WORKER_IDLE, 200)]
    assert rank_state(1, r1).waits_for.startswith("its DataLoader worker 201, none in user code")
    r1.children = []
    assert rank_state(1, r1).waits_for == "its DataLoader workers (not captured)"


def test_a_multiprocessing_wait_inside_the_loader_is_not_a_wait_for_peers():
    # caught inside queue.get (no selectors frame): the rank's own worker, not another process of the job
    r1 = _proc(200, LOADER_WAIT[4:], rank=1)
    st = rank_state(1, r1)
    assert (st.state, st.where, st.op) == ("elsewhere", "train (train.py:82)", None)


def test_user_code_inside_the_loader_wait_is_where_the_rank_is():
    # a user's collate_fn running in the main process: that is where it is, not a wait for a worker
    frames = [("my_collate", "/home/u/collate.py", 7)] + LOADER_WAIT[5:]
    st = rank_state(1, _proc(200, frames, rank=1))
    assert st.where == "my_collate (collate.py:7)" and st.waits_for is None


def test_job_names_the_rank_with_the_workers_frame_and_counts_no_worker_as_a_rank(db):
    r0, r1 = _proc(100, ALL_REDUCE, rank=0), _proc(200, LOADER_WAIT, rank=1)
    r0.children = [_child(101, WORKER_IDLE, 100, rank=0)]
    r1.children = [_child(201, WORKER_BUSY, 200)]
    snap = pipeline.analyze_many([Snapshot(processes=[r0]), Snapshot(processes=[r1])], db)
    assert [p.rank for p in snap.processes] == [0, 1] and snap.job.processes == 2
    assert not [w for w in snap.warnings if "more than once" in w]
    top = snap.findings[0]
    assert top.signature == "collective-straggler" and top.ranks == [1]
    assert "it is in train (train.py:82), waiting for DataLoader worker 201, which is in decode_sample (data.py:14)" \
        in top.summary
    assert any(e.rank == 1 and "decode_sample (data.py:14)" in e.text for e in top.evidence)
