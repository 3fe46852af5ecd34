"""``hang-dump [FILE]``: write the JSON snapshot of the debugged process (stdout without FILE)."""

import json

import gdb

from .collect import collect_snapshot
from .commands import command, parser
from .native import quick_unwinder_sniffing


def require_process(cmd: str) -> None:
    """A snapshot of no process (no core loaded, nothing attached) would be an empty report that
    looks complete: refuse with one line instead."""
    inf = gdb.selected_inferior()
    if inf is None or not inf.pid or not inf.threads():
        raise gdb.GdbError("%s: no process: load a core (core-file CORE) or attach (attach PID) first" % cmd)


def write_file(cmd: str, path: str, data: str) -> None:
    """Write `path` (one error line when it cannot be written).  An existing ELF file there is the
    core or a binary named by mistake (``hang-dump core.1234``): it is never overwritten."""
    try:
        with open(path, "rb") as f:
            if f.read(4) == b"\x7fELF":
                raise gdb.GdbError("%s: %s is an ELF file (a core or a binary?): not overwritten" % (cmd, path))
    except OSError:
        pass  # does not exist yet (or unreadable: the write below says why)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(data)
    except OSError as e:
        raise gdb.GdbError("%s: cannot write %s: %s" % (cmd, path, e.strerror or e)) from None


_DUMP = parser("hang-dump", "hang-dump [--no-python] [--no-locks] [FILE]",
               "Write a hanganalyze/1 JSON snapshot of every thread (to stdout when FILE is omitted).")
_DUMP.add_argument("--no-python", action="store_true", help="native frames only: no Python frames")
_DUMP.add_argument("--no-locks", action="store_true", help="do not read what the threads wait on")
_DUMP.add_argument("file", nargs="?", metavar="FILE", help="where to write the JSON")


@command(_DUMP)
def hang_dump(args, from_tty):
    require_process("hang-dump")
    with quick_unwinder_sniffing():
        snap = collect_snapshot(with_python=not args.no_python, with_locks=not args.no_locks)
    data = json.dumps(snap.to_dict(), indent=None, separators=(",", ":"))
    if args.file:
        write_file("hang-dump", args.file, data)
        gdb.write("hang-dump: wrote %d thread(s) to %s\n" % (len(snap.processes[0].threads), args.file))
    else:
        gdb.write(data + "\n")
