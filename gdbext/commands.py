"""Command registration, in the style of pwndbg: each feature module declares its commands with
``@command(...)``; ``register_all`` imports the feature modules and hands the commands to gdb.

Errors inside a command are reported as one ``gdb.GdbError`` line, never a Python traceback;
``hang-traceback on`` also prints the traceback behind that line (for bug reports), as pwndbg's
debug switch does.
"""

import importlib
import shlex
import traceback
from typing import Callable, Dict, List, Tuple

import gdb  # noqa: F401  (only ever imported inside gdb)

#: Feature modules that declare commands, imported in this order.
COMMAND_MODULES = ("cmd_dump", "cmd_bt", "cmd_locks", "cmd_analyze")

_COMMANDS: Dict[str, Tuple[Callable[[List[str], bool], None], str]] = {}
#: ``hang-traceback on``: print the traceback behind a command's one-line error.
SHOW_TRACEBACK = [False]


def command(name: str, doc: str):
    """Declare a gdb command; the function receives (argv, from_tty)."""

    def deco(fn):
        _COMMANDS[name] = (fn, doc)
        return fn

    return deco


class _GdbCommand(gdb.Command):
    def __init__(self, name, fn, doc):
        self.__doc__ = doc
        super().__init__(name, gdb.COMMAND_STACK)
        self._fn = fn
        self._name = name

    def invoke(self, arg, from_tty):
        try:
            argv = shlex.split(arg)
        except ValueError as e:
            raise gdb.GdbError("%s: %s" % (self._name, e)) from None
        try:
            self._fn(argv, from_tty)
        except gdb.GdbError:
            raise
        except Exception as e:  # noqa: BLE001 - a command must never dump a traceback on the user
            if SHOW_TRACEBACK[0]:
                gdb.write(traceback.format_exc(), gdb.STDERR)
            raise gdb.GdbError("hanganalyze: %s: %s" % (type(e).__name__, e)) from None


@command(
    "hang-traceback",
    "Show the Python traceback behind a hanganalyze command's one-line error (on) or not (off, the\n"
    "default).\nUsage: hang-traceback on|off",
)
def hang_traceback(argv, from_tty):
    if len(argv) != 1 or argv[0] not in ("on", "off"):
        raise gdb.GdbError("usage: hang-traceback on|off")
    SHOW_TRACEBACK[0] = argv[0] == "on"
    gdb.write("hanganalyze tracebacks %s\n" % ("shown" if SHOW_TRACEBACK[0] else "hidden"))


def register_all() -> None:
    pkg = __name__.rsplit(".", 1)[0]
    for mod in COMMAND_MODULES:
        importlib.import_module("%s.%s" % (pkg, mod))
    for name, (fn, doc) in sorted(_COMMANDS.items()):
        _GdbCommand(name, fn, doc)
