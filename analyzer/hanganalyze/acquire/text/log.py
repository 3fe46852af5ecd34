"""Log text (``--input-format log``, or auto-detected when no dump format recognises a frame):
every line becomes a message.

Auto-detection takes text as a log only when it holds lines that a hang or crash leaves in a
log (``KNOWN_LINES``: ProcessGroupNCCL's watchdog and heartbeat monitor, NCCL_DEBUG lines,
Horovod's stall report, XLA's stuck rendezvous, glog/abseil records, fatal errors): real
threads in public issues are often such logs with no stack, and refusing them left users with
nothing.  Text with neither frames nor such lines is still refused ("not a known format"), so
garbage never becomes an empty analysis.

Messages broken over several lines by a terminal or a paste (an opened ``WorkNCCL(`` closed on
the next line, a sentence that goes on in lower case) are joined (``join_broken``) so message
rules see the whole message.
"""

from __future__ import annotations

import re
from typing import List

from hanganalyze.loglines import EACH_KNOWN, KNOWN_LINES, known_lines  # noqa: F401 - known_lines: detect.py and __init__.py read it here
from hanganalyze_gdbext.model import Process

from .common import cap_messages

NAME = "log"

def _new_known(prev: str, nxt: str, glue: str) -> bool:
    """Whether ``prev + glue + nxt`` holds a known line that neither half holds."""
    both = prev + glue + nxt
    if not KNOWN_LINES.search(both):  # one pass of the whole alternation: most joins hold no known line
        return False
    return any(p.search(both) and not p.search(prev) and not p.search(nxt) for p in EACH_KNOWN)

#: A continuation line never starts a record of its own: a timestamp, a log level, a frame.
_RECORD_START = re.compile(r"^\s*(#\d|\[|\d{4}-\d\d-\d\d|[IWEF]\d{4} |Thread |File \"|frame #|Traceback)")
#: A sentence going on: two lower-case words ("ran for 600064 ..."), not a new ``what():`` record.
_GOES_ON = re.compile(r"^[a-z]+ [a-z]")
#: Or an object's repr the sentence names ("...could not acquire lock for" + "<_io.BufferedWriter name=...").
_REPR = re.compile(r"^<_?[A-Za-z]\w*\.\w")
#: The object a message goes on with after its colon ("...timeout:" + "WorkNCCL(SeqNum=...").
_OBJECT = re.compile(r"^[A-Z]\w*\(")
#: At most this many lines are joined into one message.
MAX_JOIN = 6


def score(lines: List[str]) -> float:
    """0: a log never outscores a dump format (``detect`` falls back to ``known_lines``)."""
    return 0.0


def _open(text: str) -> int:
    return text.count("(") - text.count(")") + text.count("[") - text.count("]")


def join_broken(lines: List[str]) -> List[str]:
    """Messages that a terminal or a paste broke, joined: a line whose brackets stay open takes
    the next ones until they close; a known log line ending mid-sentence takes the next line when
    it goes on in lower case ("... Timeout(ms)=600000)" + "ran for 600064 milliseconds ...") or with
    an object's repr ("...could not acquire lock for" + "<_io.BufferedWriter name='<stderr>'> ...") or
    with the object after its colon ("...timeout:" + "WorkNCCL(...)"); two lines that make a known
    line only together are joined, at a space or inside a word (a terminal's hard wrap)."""
    out: List[str] = []
    joined = 0
    for line in lines:
        s = line.strip()
        if out and s and joined < MAX_JOIN and not _RECORD_START.match(s):
            prev = out[-1]
            if _open(prev) > 0 or ((_GOES_ON.match(s) or _REPR.match(s)) and not prev.endswith((".", ":", "!", "?"))
                                   and KNOWN_LINES.search(prev)) or (prev.endswith(":") and _OBJECT.match(s)
                                                                     and KNOWN_LINES.search(prev)):
                out[-1] = prev + " " + s
                joined += 1
                continue
            # a known line that only the two halves make: broken at a space, or inside a word (a
            # terminal's hard wrap: "...collective operation ti" + "meout: WorkNCCL(...")
            if prev[-1:].isalnum() and s[:1].isalnum():
                for glue in (" ", ""):
                    if _new_known(prev, s, glue):
                        out[-1] = prev + glue + s
                        joined += 1
                        break
                else:
                    glue = None
                if glue is not None:
                    continue
        out.append(s)
        joined = 0
    return out


def parse(lines: List[str], proc: Process) -> None:
    proc.messages.extend(cap_messages([line for line in join_broken(lines) if line], proc.notes))
