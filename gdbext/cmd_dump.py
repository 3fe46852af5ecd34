"""``hang-dump [FILE]``: write the JSON snapshot of the debugged process (stdout without FILE)."""

import json

import gdb

from .collect import collect_snapshot
from .commands import command
from .native import quick_unwinder_sniffing


@command(
    "hang-dump",
    "Write a hanganalyze/1 JSON snapshot of every thread.\n"
    "Usage: hang-dump [--no-python] [--no-locks] [FILE]   (stdout when FILE is omitted)",
)
def hang_dump(argv, from_tty):
    with_python = "--no-python" not in argv
    with_locks = "--no-locks" not in argv
    rest = [a for a in argv if not a.startswith("--")]
    with quick_unwinder_sniffing():
        snap = collect_snapshot(with_python=with_python, with_locks=with_locks)
    data = json.dumps(snap.to_dict(), indent=None, separators=(",", ":"))
    if rest:
        with open(rest[0], "w") as f:
            f.write(data)
        gdb.write("hang-dump: wrote %d thread(s) to %s\n" % (len(snap.processes[0].threads), rest[0]))
    else:
        gdb.write(data + "\n")
