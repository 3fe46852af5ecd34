"""Command registration, in the style of pwndbg: each feature module declares its commands with
``@command(...)``; ``register_all`` imports the feature modules and hands the commands to gdb.

Errors inside a command are reported as one ``gdb.GdbError`` line, never a Python traceback.
"""

import importlib
import shlex
from typing import Callable, Dict, List, Tuple

import gdb  # noqa: F401  (only ever imported inside gdb)

#: Feature modules that declare commands, imported in this order.
COMMAND_MODULES = ("cmd_dump", "cmd_bt", "cmd_locks", "cmd_analyze")

_COMMANDS: Dict[str, Tuple[Callable[[List[str], bool], None], str]] = {}


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
            raise gdb.GdbError("hanganalyze: %s: %s" % (type(e).__name__, e)) from None


def register_all() -> None:
    pkg = __name__.rsplit(".", 1)[0]
    for mod in COMMAND_MODULES:
        try:
            importlib.import_module("%s.%s" % (pkg, mod))
        except ImportError as e:
            if getattr(e, "name", None) != "%s.%s" % (pkg, mod):
                raise
    for name, (fn, doc) in sorted(_COMMANDS.items()):
        _GdbCommand(name, fn, doc)
