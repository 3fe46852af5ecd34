"""Command registration, in the style of pwndbg: each feature module builds an argparse parser
with ``parser(...)`` and declares its command with ``@command(that_parser)``; ``register_all``
imports the feature modules and hands the commands to gdb.

The command function receives the parsed arguments (an ``argparse.Namespace``) and ``from_tty``.
``NAME -h`` / ``NAME --help`` prints the usage and the options.  Bad arguments, and any error
inside a command, end in one ``gdb.GdbError`` line (``NAME: what is wrong (usage: ...)``), never
a Python traceback; ``hang-traceback on`` also prints the traceback behind an unexpected error
(for bug reports), as pwndbg's debug switch does.
"""

import argparse
import importlib
import re
import shlex
import traceback
from typing import Callable, Dict, Optional, Tuple

import gdb  # noqa: F401  (only ever imported inside gdb)

#: Feature modules that declare commands, imported in this order.
COMMAND_MODULES = ("cmd_dump", "cmd_bt", "cmd_locks", "cmd_analyze", "cmd_tasks")

_COMMANDS: Dict[str, Tuple[Callable, str, Optional[argparse.ArgumentParser]]] = {}
#: ``hang-traceback on``: print the traceback behind a command's one-line error.
SHOW_TRACEBACK = [False]

#: argparse's "argument -o/--output: expected one argument" (all the option's names).
_NEEDS_VALUE = re.compile(r"^argument (\S+): expected one argument$")


class CommandError(Exception):
    """A user error, shown as ``NAME: message``.  Argument ``type=`` functions raise it to word
    their own refusal (argparse would reword a ValueError as "invalid ... value")."""


class _HelpShown(Exception):
    """``-h``: the help was printed, the command does nothing else."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that writes through gdb and raises instead of exiting gdb."""

    def print_usage(self, file=None):
        gdb.write(self.format_usage())

    def print_help(self, file=None):
        gdb.write(self.format_help())

    def exit(self, status=0, message=None):
        if message:
            gdb.write(message)
        raise _HelpShown()

    def error(self, message):
        m = _NEEDS_VALUE.match(message)
        if m:
            names = m.group(1).split("/")
            message = "%s needs a value" % next((n for n in names if n.startswith("--")), names[0])
        raise CommandError("%s (%s)" % (message, self.format_usage().strip()))


def parser(name: str, usage: str, description: str) -> argparse.ArgumentParser:
    """The argument parser of command ``name``: ``usage`` is the synopsis after ``usage: ``
    (``"hang-bt [-a]"``), ``description`` its help text (first line: gdb's one-line summary)."""
    return _Parser(prog=name, usage=usage, description=description, allow_abbrev=False,
                   formatter_class=argparse.RawDescriptionHelpFormatter)


def command(p: argparse.ArgumentParser):
    """Declare the gdb command that ``p`` (from ``parser``) describes; the function receives
    (args, from_tty)."""

    def deco(fn):
        _COMMANDS[p.prog] = (fn, _doc(p), p)
        return fn

    return deco


def _doc(p: argparse.ArgumentParser) -> str:
    """gdb's ``help NAME``: the description (its first line is the summary gdb lists), then the
    usage and options as ``NAME -h`` prints them."""
    description, p.description = p.description, None
    try:
        return "%s\n\n%s" % ((description or "").strip(), p.format_help().strip())
    finally:
        p.description = description


class _GdbCommand(gdb.Command):
    """One gdb command.  Without a parser ``fn`` receives (argv list, from_tty)."""

    def __init__(self, name, fn, doc, parser=None):
        self.__doc__ = doc
        super().__init__(name, gdb.COMMAND_STACK)
        self._fn = fn
        self._name = name
        self._parser = parser

    def invoke(self, arg, from_tty):
        try:
            args = shlex.split(arg)
            if self._parser is not None:
                args = self._parser.parse_args(args)
        except _HelpShown:
            return
        except (ValueError, CommandError) as e:  # shlex: unbalanced quotes
            raise gdb.GdbError("%s: %s" % (self._name, e)) from None
        try:
            self._fn(args, from_tty)
        except gdb.GdbError:
            raise
        except CommandError as e:
            raise gdb.GdbError("%s: %s" % (self._name, e)) from None
        except Exception as e:  # noqa: BLE001 - a command must never dump a traceback on the user
            if SHOW_TRACEBACK[0]:
                gdb.write(traceback.format_exc(), gdb.STDERR)
            raise gdb.GdbError("hanganalyze: %s: %s" % (type(e).__name__, e)) from None


def on_off(p: argparse.ArgumentParser, help_text: str) -> None:
    """The one ``on|off`` argument of a switch command (``args.state``)."""
    p.add_argument("state", choices=("on", "off"), help=help_text)


_TRACEBACK = parser(
    "hang-traceback", "hang-traceback on|off",
    "Show the Python traceback behind a hanganalyze command's one-line error (on) or not (off, the\n"
    "default).",
)
on_off(_TRACEBACK, "on: print the traceback before the error line")


@command(_TRACEBACK)
def hang_traceback(args, from_tty):
    SHOW_TRACEBACK[0] = args.state == "on"
    gdb.write("hanganalyze tracebacks %s\n" % ("shown" if SHOW_TRACEBACK[0] else "hidden"))


def register_all() -> None:
    pkg = __name__.rsplit(".", 1)[0]
    for mod in COMMAND_MODULES:
        importlib.import_module("%s.%s" % (pkg, mod))
    for name, (fn, doc, p) in sorted(_COMMANDS.items()):
        _GdbCommand(name, fn, doc, p)
