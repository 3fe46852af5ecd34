"""GUI toolkits used off the thread that owns them (signatures/gui_threads.yaml): Tk, Qt, AppKit and
Xlib each print one line naming the mistake before they abort.  Each class matches its real pastes
(corpus dumps, by manifest path) and stays silent on near misses: the same paste without the
toolkit's line, and a neighbouring line of the same toolkit that names another cause (a display that
is missing, a type not registered for queued signals, a nested event loop, a plain unknown selector,
an X server that went away).  The frames clause of the Tk abort is tested on a real core
(tests/integration/test_gui_thread_cores.py)."""

from __future__ import annotations

import re

import pytest
from helpers import crash_said, real_text, text_or_log_findings, text_verdict

SERIOUS = {"crash", "deadlock", "hang", "error"}

#: Signatures this module tests with a real paste and a near miss (test_signature_coverage.py).
COVERED = ["tkinter-used-off-its-thread", "tkinter-called-off-its-thread", "qt-qthread-destroyed-while-running",
           "qt-object-used-off-its-thread",
           "macos-appkit-off-main-thread", "macos-nsapplication-not-its-class", "x11-client-used-from-threads"]

#: (corpus paste, its class, regex of the lines a near miss drops)
CASES = [
    ("matplotlib/matplotlib-12085-1.txt", "tkinter-used-off-its-thread", r"Tcl_AsyncDelete"),
    ("pysimplegui/pysimplegui-271-1.txt", "tkinter-used-off-its-thread", r"Tcl_AsyncDelete"),
    ("matplotlib/matplotlib-12085-1.txt", "tkinter-called-off-its-thread", r"main loop"),
    ("matplotlib/matplotlib-27713-1.txt", "tkinter-called-off-its-thread", r"main loop"),
    ("silx/silx-1909-1.txt", "qt-qthread-destroyed-while-running", r"QThread: Destroyed"),
    ("pyqtconsole/pyqtconsole-43-1.txt", "qt-qthread-destroyed-while-running", r"QThread: Destroyed"),
    ("securedrop-client/securedrop-client-1880-1.txt", "qt-qthread-destroyed-while-running", r"QThread: Destroyed"),
    ("gns3-gui/gns3-gui-559-1.txt", "qt-object-used-off-its-thread", r"different thread|Cannot queue"),
    ("matplotlib/matplotlib-14304-1.txt", "macos-appkit-off-main-thread", r"Main Thread"),
    ("human-in-the-loop-mcp-server/human-in-the-loop-mcp-server-3-1.txt", "macos-appkit-off-main-thread",
     r"main thread"),
    ("embedding-inspector/embedding-inspector-26-1.txt", "macos-appkit-off-main-thread", r"Main Thread"),
    ("cefpython/cefpython-306-1.txt", "macos-nsapplication-not-its-class", r"unrecognized selector"),
    ("whisper-local/whisper-local-14-1.txt", "macos-nsapplication-not-its-class", r"unrecognized selector"),
    ("spe2py/spe2py-2-1.txt", "macos-nsapplication-not-its-class", r"unrecognized selector"),
    ("kicost/kicost-309-1.txt", "x11-client-used-from-threads", r"\[xcb\]|xcb_io|sequence lost"),
    ("detectron2/detectron2-2115-1.txt", "x11-client-used-from-threads", r"\[xcb\]|xcb_io|sequence lost"),
]


def ids(text: str, db) -> list:
    return [f.signature for f in text_or_log_findings(text, db)]


@pytest.mark.parametrize("path,sig,key", CASES)
def test_gui_thread_class_matches_its_real_paste(db, path, sig, key):
    assert sig in ids(real_text(path), db)


@pytest.mark.parametrize("path,sig,key", CASES)
def test_gui_thread_class_near_miss_without_its_lines(db, path, sig, key):
    text = real_text(path)
    kept = "\n".join(line for line in text.splitlines() if not re.search(key, line)) + "\n"
    assert kept != text
    assert sig not in ids(kept, db)


#: The classes that are warnings or exceptions of a process that goes on (severity info), not its end
GOES_ON = {"qt-object-used-off-its-thread", "tkinter-called-off-its-thread"}


@pytest.mark.parametrize("path,sig,key", [c for c in CASES if c[1] not in GOES_ON])
def test_a_toolkit_abort_is_a_crash_and_names_no_other_class(db, path, sig, key):
    """The toolkit's own abort: the triage says crashed, and no other GUI crash class is named."""
    snap, wait = text_verdict(real_text(path), db)
    assert wait == "crashed"
    gui = {f.signature for f in snap.findings if f.signature in COVERED and f.signature not in GOES_ON}
    assert gui == {sig}, gui


def test_a_refused_tkinter_call_alone_is_no_crash(db):
    """"main thread is not in main loop" in a finaliser ("Exception ignored in") ends nothing: the
    class is named (info), the triage does not say crashed (open round 37's near miss)."""
    text = real_text("openclga/openclga-23-1.txt").replace(
        "Tcl_AsyncDelete: async handler deleted by the wrong thread", "")
    snap, wait = text_verdict(text, db)
    assert "tkinter-called-off-its-thread" in [f.signature for f in snap.findings]
    assert not crash_said(text, db)  # the exception raised, CPython ignored it: nothing ended
    assert next(f for f in snap.findings if f.signature == "tkinter-called-off-its-thread").severity == "info"


#: Lines of the same toolkits that name another cause: none of these classes may answer them.
NEIGHBOURS = [
    # Tk without a display: no thread involved
    "_tkinter.TclError: no display name and no $DISPLAY environment variable\n",
    # a type not registered for queued connections (the user's own class): a registration problem
    "QObject::connect: Cannot queue arguments of type 'MyRecord'\n"
    "(Make sure 'MyRecord' is registered using qRegisterMetaType().)\n",
    # QThread's wait called from the thread itself, not a destroyed running thread
    "QThread::wait: Thread tried to wait on itself\n",
    # AppKit's assertion on a nested event loop (debugpy-254), not a thread's
    "*** Terminating app due to uncaught exception 'NSInternalInconsistencyException', reason: 'NSApp with "
    "wrong _running count'\n",
    # an unknown selector on another class: a plain programming error
    "*** Terminating app due to uncaught exception 'NSInvalidArgumentException', reason: '-[NSView "
    "setFoo:]: unrecognized selector sent to instance 0x600000c1c000'\n",
    # the X server went away: not a threading problem
    "XIO:  fatal IO error 11 (Resource temporarily unavailable) on X server \":0\"\n",
]


@pytest.mark.parametrize("text", NEIGHBOURS)
def test_neighbouring_toolkit_lines_name_none_of_these_classes(db, text):
    assert not set(ids(text, db)) & set(COVERED)


def test_tcsh_abort_line_is_a_crash(db):
    """tcsh's and csh's line for a process SIGABRT ended is "Abort" (open round 64's IPython session
    after a tkinter __del__): the process crashed."""
    assert text_verdict(real_text("fdp/fdp-63-1.txt"), db)[1] == "crashed"
    # near miss: the same session without that line names no crash
    near = "\n".join(x for x in real_text("fdp/fdp-63-1.txt").splitlines() if x != "Abort") + "\n"
    assert not crash_said(near, db)
