"""Fixes from open dev round 52 (manifest-blind52.yaml), each on the round's real paste and a near miss:
a py-spy dump abridged to thread names with ``__init__`` lost to Markdown; logging's module lock
entered from inside a library's request; Queue.join; a multi-node launcher's ``host >>`` tag around a
rank's traceback; ``perf top`` of a busy compiler."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.common import python_frame
from hanganalyze.errors import InputError


def test_abridged_pyspy_names_and_markdowns_init(db):
    text = real_text("logtail-python/logtail-python-37-1.txt")
    threads = parse_text(text).processes[0].threads
    assert [t.name for t in threads] == ["MainThread", "Thread-1 (FlushWorker)"]
    assert threads[1].frames[0].file == "logging/__init__.py"
    # the worker waits for logging's lock (inside urllib3's request, which is no network wait here)
    assert text_verdict(text, db)[1] == "lock"


def test_markdown_init_near_misses():
    assert python_frame("f", "pkg/initialize.py", 1).file == "pkg/initialize.py"
    assert python_frame("f", "init.py", 1).file == "init.py"  # a script of that name, no package
    assert python_frame("f", "pkg/__init__.py", 1).file == "pkg/__init__.py"


def test_a_line_ending_in_a_colon_is_no_thread_name():
    text = "Note:\nflush (logtail/flusher.py:83)\nrun (logtail/flusher.py:27)\n"
    threads = parse_text(text).processes[0].threads
    assert all(t.name != "Note" for t in threads)


def test_a_network_read_inside_the_request_stays_network(db):
    # near miss of logging's lock: the same request standing in the socket read
    text = ("Thread 0x7F (idle): \"Thread-1\"\n"
            "    readinto (socket.py:704)\n"
            "    _make_request (urllib3/connectionpool.py:556)\n"
            "    urlopen (urllib3/connectionpool.py:803)\n"
            "    send (requests/adapters.py:658)\n")
    assert text_verdict(text, db)[1] == "network"
    locked = text.replace("    readinto (socket.py:704)\n", "    _acquireLock (logging/__init__.py:226)\n"
                          "    isEnabledFor (logging/__init__.py:1734)\n")
    assert text_verdict(locked, db)[1] == "lock"


def test_queue_join(db):
    text = real_text("watchtower/watchtower-115-1.txt")
    assert "q.join()" in text
    assert text_verdict(text, db)[1] == "queue"
    # near miss: an Event's wait over the same condition is a condition
    near = text.replace('queue.py", line 89, in join', 'threading.py", line 607, in wait')
    assert text_verdict(near, db)[1] == "condition"


def test_a_launchers_host_tag_around_a_ranks_traceback(db):
    text = real_text("deepspeed/deepspeed-7044-1.txt")
    assert " worker-0 >> [rank0]:" in text
    snap, wait = text_verdict(text, db)
    assert wait == "collective" and snap.processes[0].threads


def test_a_repl_prompt_is_no_host_tag():
    # near miss: Python's prompt is not a host's tag
    with pytest.raises(InputError):
        parse_text(">>> import torch\n>>> torch.cuda.init()\n>>> x = 1\n")


def test_perf_top_of_a_busy_compiler(db):
    text = real_text("pytorch/pytorch-96662-1.txt")
    snap, wait = text_verdict(text, db)
    t = snap.processes[0].threads[0]
    assert t.frames[0].function == "mlir::multiRootTopologicalSort" and t.frames[0].library == "libtriton.so"
    assert wait == "runs" and any("58.03%" in n for n in t.notes)


def test_a_progress_bars_percent_is_no_profile():
    # near miss: tqdm's lines carry a share too
    with pytest.raises(InputError):
        parse_text(" 58%|#####     | 58/100 [00:10<00:07,  5.8it/s]\n 59%|#####     | 59/100 [00:10<00:07,  5.8it/s]\n")
