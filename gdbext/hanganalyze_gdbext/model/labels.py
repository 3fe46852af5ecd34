"""Thread -> text: the one thread label of reports, findings, triage and wait-for graphs.

``thread_label(thread, ThreadStyle.X)``.  It is part of the shared model (standard library, Python
3.8) because gdb's ``hang-locks`` prints wait-for graphs with it too.  Each purpose is one style:

=======  ==========================================  ===============================================
style    for                                         e.g.
=======  ==========================================  ===============================================
REPORT   a report's thread header (``default_os_     ``Thread 812 "poster"``, ``Thread 5 "loader"
         name``: the name every thread inherits,     (os: pt_data_0)``, ``Thread``
         not repeated)
WHO      who a finding's evidence names              ``thread 812 (poster)``, ``thread poster``,
                                                     ``a thread``
TRIAGE   the triage's sentences                      ``thread poster LWP 812``, ``a thread``
WAIT     a wait-for graph's node (``tid``: an owner  ``poster (LWP 812)``, ``LWP 812``
         the snapshot may not hold)
=======  ==========================================  ===============================================

The spellings are the ones reports and findings were written with when each had its own function;
they differ more than their purposes ask (the same thread is ``thread 812 (poster)`` in evidence and
``thread poster LWP 812`` in the triage), and are kept so that no output changes.
"""

import enum
from typing import Optional

from . import Thread


class ThreadStyle(enum.Enum):
    """What the label is for (see the table in the module's docstring)."""

    REPORT = "report"
    WHO = "who"
    TRIAGE = "triage"
    WAIT = "wait"


def thread_label(thread: Optional[Thread], style: ThreadStyle, tid: Optional[int] = None,
                 default_os_name: Optional[str] = None) -> str:
    """``thread`` as ``style`` names it.  ``tid``: the LWP when ``thread`` is None (a wait-for
    graph's owner, an evidence line's or an event loop's thread that the snapshot does not hold);
    else ``thread.tid``.  ``default_os_name``
    (REPORT): the OS thread name not worth showing (the executable's, which threads inherit)."""
    if tid is None and thread is not None:
        tid = thread.tid
    name = thread.name if thread is not None else None
    if style is ThreadStyle.WAIT:
        return "%s (LWP %s)" % (name, tid) if name else "LWP %s" % tid
    if style is ThreadStyle.WHO:
        if tid is None:  # a paste without LWPs
            return "thread %s" % name if name else "a thread"
        return "thread %s%s" % (tid, " (%s)" % name if name else "")
    if style is ThreadStyle.TRIAGE:
        bits = [name] if name else []
        if tid is not None:
            bits.append("LWP %d" % tid)
        return "thread %s" % " ".join(bits) if bits else "a thread"
    os_name = thread.os_name if thread is not None else None
    shown = name or (thread.python_name if thread is not None else None) or os_name
    label = "Thread %s" % tid if tid is not None else "Thread"
    if shown:
        label += ' "%s"' % shown
    if os_name and os_name != shown and os_name != default_os_name:
        label += " (os: %s)" % os_name
    return label
