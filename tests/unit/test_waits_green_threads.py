"""Green threads (eventlet, gevent): a green thread that blocks switches to the hub, so its stack ends
in the hub's ``switch`` under the primitive it waits in: a green semaphore or lock, a green Event,
a green socket's trampoline, another green thread's end.  The hub's own loop between events is
idle.  Round 29's eventlet-432 (a logging handler's lock that became a green semaphore) read as
"runs"; the primitives are read by their module's path, so a module of the same name elsewhere is
not one of them."""

from __future__ import annotations

from helpers import real_text, text_verdict

EV = "/usr/lib/python3/dist-packages/eventlet"


def _pyspy(frames):
    """A py-spy dump of one thread, innermost first: (function, file, line)."""
    rows = "".join("    %s (%s:%d)\n" % f for f in frames)
    return ("Process 4242: /usr/bin/python3 app.py\nPython v3.10.12 (/usr/bin/python3.10)\n\n"
            'Thread 4242 (idle): "MainThread"\n' + rows)


def test_a_green_semaphore_acquire_is_a_lock_wait(db):
    _snap, wait = text_verdict(real_text("eventlet/eventlet-432-1.txt"), db)
    assert wait == "lock"


def test_green_primitives_by_their_module(db):
    switch = ("switch", EV + "/hubs/hub.py", 313)
    app = ("handle", "/srv/app/views.py", 40)
    cases = {
        "lock": [switch, ("acquire", EV + "/semaphore.py", 120),
                 ("emit", "/usr/lib/python3.10/logging/__init__.py", 1100)],
        "network": [switch, ("trampoline", EV + "/hubs/__init__.py", 159), ("_recv_loop", EV + "/greenio/base.py", 344),
                    ("recv", EV + "/greenio/base.py", 363), app],
        "condition": [switch, ("wait", EV + "/event.py", 125), app],
        "join": [switch, ("wait", EV + "/event.py", 125), ("wait", EV + "/greenthread.py", 224), app],
        "sleep": [switch, ("sleep", EV + "/greenthread.py", 36), app],
        "idle": [("wait", EV + "/hubs/epolls.py", 62), ("run", EV + "/hubs/hub.py", 365)],
    }
    got = {want: text_verdict(_pyspy(frames), db)[1] for want, frames in cases.items()}
    assert got == {want: want for want in cases}


def test_modules_of_the_same_names_elsewhere_are_no_green_primitives(db):
    # a program's own event.py and semaphore.py helpers doing work, not eventlet's
    for frames in ([("wait", "/srv/app/event.py", 20), ("main", "/srv/app/run.py", 9)],
                   [("_do_acquire", "/srv/app/semaphore.py", 31), ("main", "/srv/app/run.py", 9)]):
        assert text_verdict(_pyspy(frames), db)[1] == "runs"
