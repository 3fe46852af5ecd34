"""The ``hanganalyze`` command line: options -> an acquire request (``acquire/request.py``) ->
``pipeline.report`` (acquire, analyze, redact) -> a rendered report (``render/``, ``output.py``).

Kept thin on purpose (as pystack's ``__main__``): every step lives in its own module, and this
file only turns options into calls and errors into one-line messages with documented exit codes.

The options are declared with typer (pinned below 0.20: from 0.20 on, typer imports pydantic and
rich to parse a command line, a start-up cost per run that is a real part of what a whole core's
analysis takes (``BENCHMARKS.md``); 0.19 parses without them).  Typer runs with
``standalone_mode=False`` so that every usage error becomes one line and an exit code here.

Importing typer and click is still a fifth of a one-sample run (issue 21), so a command line made
only of the analysis's own options in their plain spellings (``--opt VALUE``, ``--opt=VALUE``,
``-p VALUE``, flags, targets) is parsed by ``_fast_args`` without them, into the very Namespace
typer's command builds; anything else (``--help``, a bad value, an unknown or abbreviated option,
``--``) goes to typer, so its help and its error messages stay the only ones.
"""

from __future__ import annotations

import re
import sys
from enum import Enum
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from hanganalyze import __version__, datapaths
from hanganalyze.errors import (
    EXIT_CRASH,
    EXIT_DEADLOCK,
    EXIT_HANG,
    EXIT_INPUT,
    EXIT_OK,
    EXIT_TOOL,
    HangAnalyzeError,
    UsageError,
)
from hanganalyze.output import (
    OUTPUT_SUFFIXES,  # noqa: F401  (the command line knows these extensions)
    check_output,
    check_output_suffix,
    default_format,
    write_output,
    wrote,
)

if TYPE_CHECKING:
    import argparse
    import inspect

#: Exit code per verdict, the most serious first (README "Exit codes", ``--help``): a finding's
#: severity decides; a triage finding (no known bug) counts by its wait: a process whose threads
#: wait and made no progress is hung, one that crashed crashed, a running or idle one is not hung.
EXIT_BY_SEVERITY = (("crash", EXIT_CRASH), ("deadlock", EXIT_DEADLOCK), ("hang", EXIT_HANG), ("error", EXIT_HANG))
#: Triage waits that are no hang: it runs (or progressed over the samples), or waits for work.
NOT_HUNG_WAITS = ("runs", "idle")
EXIT_HELP = ("Exit codes: 0 no hang, deadlock or crash (or the process progressed); 3 hang; 5 deadlock; "
             "6 crash; 2 usage or input error; 4 the analysis failed.")


def progress(msg: str) -> None:
    """Progress goes to stderr, and only to a terminal: pipes and CI logs stay clean."""
    if sys.stderr.isatty():
        sys.stderr.write("hanganalyze: %s\n" % msg)
        sys.stderr.flush()


def fail(msg: str, code: int) -> int:
    """Print the one-line error; return the exit code for the caller to return."""
    sys.stderr.write("hanganalyze: error: %s\n" % " ".join(str(msg).split()))
    return code


class OutputFormat(str, Enum):
    html = "html"
    md = "md"
    json = "json"
    text = "text"
    node = "node"  # a node summary, mergeable at cluster scale (render/node.py)


class Option(NamedTuple):
    """One option of the analysis command, declared once: the typer command (``--help``, usage
    errors), the fast parse (``_fast_args``) and the acquire request (``acquire_request``) are all
    built from ``OPTIONS``.

    ``key`` is the name the analysis reads (``args.KEY``); ``kind`` says how a value is read:
    ``int``, ``float``, ``str``, ``path``, ``format`` (one of OutputFormat) or ``flag`` (no value);
    ``repeat`` collects every occurrence in a list (default: empty); ``request`` names the
    AcquireRequest field it fills (None: the report's own options, not the acquisition's)."""

    key: str
    flags: Tuple[str, ...]
    kind: str
    default: Any
    help: str
    repeat: bool = False
    request: Optional[str] = None
    metavar: Optional[str] = None

    def fresh_default(self) -> Any:
        """The value when the option is not given (a new list for a repeatable one)."""
        return [] if self.repeat else self.default


TARGETS_HELP = ("Core files, text files of gdb/py-spy/pystack/faulthandler output ('-' = stdin), hanganalyze JSON "
                "snapshots, PyTorch flight-recorder dumps, or a folder of them. Several make one job report.")

#: The analysis command's options, in the order ``--help`` lists them.
OPTIONS: Tuple[Option, ...] = (
    Option("pid", ("--pid", "-p"), "int", None, "Analyze a live process (read-only, then detached); repeatable.",
           repeat=True, request="pids"),
    Option("job", ("--job",), "int", None,
           "Analyze every worker of this launcher (torchrun, mpirun, srun, multiprocessing).", request="job"),
    Option("parallel", ("--parallel",), "int", None,
           "Inputs acquired at once (default: one gdb per CPU, within free memory).", request="parallel"),
    Option("samples", ("--samples",), "int", None,
           "Reads of each live process, to tell stuck from slow (default 3; 1: one snapshot, as a core gives; "
           "1 by default with --engine gdb).", request="samples"),
    Option("interval", ("--interval",), "float", None,
           "Seconds between the samples (default 0.5, jittered: 3 samples in ~1 s).", request="interval"),
    Option("max_window", ("--max-window",), "float", None,
           "Sampling may last this long before a thread is called stuck (default 6).", request="max_window",
           metavar="SECONDS"),
    Option("gpu_kernels", ("--gpu-kernels",), "flag", False,
           "--pid/--job: GPU kernels by cuda-gdb (slow; its attach runs in ranks).", request="gpu_kernels"),
    Option("exe", ("--exe",), "path", None, "Executable of the core (default: found from the core).", request="exe"),
    Option("fmt", ("--format", "-f"), "format", None,
           "Output format (default: html with -o x.html, json/md likewise, else text)."),
    Option("output", ("--output", "-o"), "path", None,
           "Write the report to this file (.html, .json, .md; .txt, .log or none: text; another extension needs "
           "--format)."),
    Option("gdb", ("--gdb",), "str", "gdb", "gdb to use (e.g. cuda-gdb); naming one selects --engine gdb.",
           request="gdb"),
    Option("engine", ("--engine",), "str", "auto",
           "How processes and cores are read: direct (ptrace/core + .eh_frame, no gdb: fast), gdb, or auto "
           "(direct unless --gdb/--sysroot/--debuginfod ask for gdb, or it cannot read it).", request="engine"),
    Option("timeout", ("--timeout",), "float", 120.0, "Seconds allowed for each gdb step.", request="timeout"),
    Option("signatures", ("--signatures",), "path", None, "Extra signature folder (repeatable).", repeat=True),
    Option("input_format", ("--input-format",), "str", None,
           "Force the text format: auto, gdb, pybt, pyspy, pyspy-json, pystack, faulthandler, traceback, lldb, "
           "pytest-timeout, abseil, cxxframes (PyTorch C++ frame #N lists), log (any text as log lines), "
           "snapshot-json (a hang-dump JSON file).", request="input_format"),
    Option("redact", ("--redact",), "flag", False,
           "Also replace user names, hosts and IPs (secret-shaped values are scrubbed by default)."),
    Option("no_redact", ("--no-redact",), "flag", False,
           "Keep tokens, keys, passwords (scrubbed by default; the report says so)."),
    Option("sysroot", ("--sysroot",), "str", None,
           "Folder holding the core's machine's files (gdb's set sysroot): a copied tree, an unpacked container "
           "image.", request="sysroot"),
    Option("solib_search_path", ("--solib-search-path",), "str", None,
           "Folders (':'-separated, repeatable) to look for the core's shared libraries in (gdb's set "
           "solib-search-path).", repeat=True, request="solib_search_path"),
    Option("debuginfod", ("--debuginfod",), "flag", False,
           "Let gdb fetch missing debug info from the DEBUGINFOD_URLS servers (off by default: no network).",
           request="debuginfod"),
    Option("coredumpctl", ("--coredumpctl",), "str", None,
           "Analyze a core stored by systemd-coredump, found with coredumpctl: the newest one, or the newest "
           "matching a pid, a command name, an executable path or FIELD=VALUE (default: latest).",
           request="coredumpctl", metavar="[PID|latest|MATCH]"),
    Option("version", ("--version",), "flag", False, "Print the version and exit."),
)
OPTION = {o.key: o for o in OPTIONS}
#: ``hanganalyze watch``'s own options (``watch.py``); it shares --job, -o, --samples, --interval.
WATCH_OPTIONS: Tuple[Option, ...] = (
    Option("stall", ("--stall",), "float", 120.0, "Seconds without progress that make a hang (shorter than "
           "PyTorch's 10-minute collective timeout, long enough for a checkpoint or an evaluation)."),
    Option("poll", ("--poll",), "float", 1.0, "Seconds between two reads of the ranks' /proc counters."),
    Option("then", ("--then",), "str", "keep", "After a capture: keep (leave the job alone) or kill it."),
    Option("node_summary", ("--node-summary",), "path", None, "Also write a node summary (Slurm, per node)."),
)
WATCH_USAGE = "hanganalyze watch [OPTIONS] (--job PID | -- COMMAND...)"
WATCH_HELP = ("Run a job's launcher (or watch a running one) and capture every rank when it hangs, before its "
              "watchdog kills it. Exit 3: a hang captured; else the job's own exit code.")
#: Each spelling of an option (``--pid``, ``-p``) -> the option.
_SPELLINGS = {flag: o for o in OPTIONS for flag in o.flags}
_FORMATS = tuple(f.value for f in OutputFormat)
#: The Python type typer reads each kind of value as.
_KIND_TYPES = {"int": int, "float": float, "str": str, "path": Path, "format": OutputFormat, "flag": bool}


def _typer_parameter(typer, o: Option) -> inspect.Parameter:
    """The typer parameter of one option (its type tells typer how to read and check a value)."""
    import inspect  # here: typer imports it anyway; a plain command line never does (start-up time)

    kind = _KIND_TYPES[o.kind]
    if o.repeat:
        annotation: Any = List[kind]
    elif o.default is None:
        annotation = Optional[kind]
    else:
        annotation = kind
    info = typer.Option(o.fresh_default(), *o.flags, help=o.help, metavar=o.metavar)
    return inspect.Parameter(o.key, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)


def _typer_command(typer, app, body: Callable[..., int], options: Sequence[Option], targets: bool = False,
                   **command: Any) -> None:
    """Register ``body`` (called with every option by key) as a command of ``app`` taking ``options``."""
    import inspect  # here: typer imports it anyway; a plain command line never does (start-up time)

    params = [_typer_parameter(typer, o) for o in options]
    if targets:
        params.insert(0, inspect.Parameter(
            "targets", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[List[str]],
            default=typer.Argument(None, metavar="[TARGET]...", help=TARGETS_HELP)))

    def _command(**values: Any) -> int:
        return body(values)

    _command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    app.command(**command)(_command)


#: How ``--help`` names each kind of value.
_METAVARS = {"int": "INTEGER", "float": "FLOAT", "str": "TEXT", "path": "PATH", "format": "[%s]" % "|".join(_FORMATS)}
ANALYZE_HELP = "Analyze a core, a live process or pasted text and report the known bugs it matches."
ANALYZE_EPILOG = ("Also: hanganalyze watch (capture a job when it hangs), gdb-path (the line gdb or cuda-gdb "
                  "sources), signatures list|validate; each with --help.\n\n" + EXIT_HELP)


def plain_help(usage: str, about: str, options: Sequence[Option], targets: bool = False, epilog: str = "",
               width: Optional[int] = None) -> str:
    """``--help`` as plain text from ``OPTIONS``, at most 80 columns (less on a narrower terminal)
    and no word split: typer's rich boxes were ~108 lines at 80 columns, with values cut mid-word
    (issue 30).  Each option: its spellings and value on one line, its text indented below."""
    import shutil  # here: only --help wraps text (start-up time)
    import textwrap  # here: likewise

    width = width or max(40, min(80, shutil.get_terminal_size((80, 24)).columns))

    def wrap(text: str, indent: str) -> List[str]:
        return textwrap.wrap(text, width - 1, initial_indent=indent, subsequent_indent=indent,
                             break_long_words=False, break_on_hyphens=False)

    lines = ["usage: %s" % usage, ""] + wrap(about, "") + [""]
    if targets:
        lines += ["arguments:", "  [TARGET]..."] + wrap(TARGETS_HELP, "        ") + [""]
    lines.append("options:")
    for o in tuple(options) + (Option("help", ("--help", "-h"), "flag", False, "Show this message and exit."),):
        spell = ", ".join(sorted(o.flags, key=len))
        value = o.metavar or _METAVARS.get(o.kind, "")
        text = o.help
        if o.default not in (None, False) and not o.repeat:
            text += " [default:\xa0%s]" % o.default  # kept on one line: the space is put back below
        lines += wrap("%s %s" % (spell, value) if value else spell, "  ") + wrap(text, "        ")
    for para in epilog.split("\n\n") if epilog else ():
        lines += [""] + wrap(para, "")
    return "\n".join(lines).replace("\xa0", " ") + "\n"


def _help_asked(argv: Sequence[str]) -> bool:
    """``-h``/``--help`` before any ``--``."""
    for a in argv:
        if a == "--":
            return False
        if a in ("-h", "--help"):
            return True
    return False


def _analyze_app():
    """The analysis command (typer): help, usage errors, and what ``_fast_args`` leaves to it."""
    import typer  # here: only --help, an error or an unusual spelling needs typer (start-up time)

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    _typer_command(typer, app, _run_analysis, OPTIONS, targets=True, name="hanganalyze",
                   help=ANALYZE_HELP, epilog=ANALYZE_EPILOG)
    return app


def _run_analysis(values: Dict[str, Any]) -> int:
    """The analysis command's body, once its options are parsed (by typer or ``_fast_args``)."""
    values = dict(values)
    values["targets"] = list(values.get("targets") or [])
    for o in OPTIONS:
        v = values.get(o.key, o.fresh_default())
        values[o.key] = list(v or []) if o.repeat else (v.value if isinstance(v, Enum) else v)
    if values.pop("version"):
        sys.stdout.write("hanganalyze %s\n%s\n" % (__version__, datapaths.describe()))  # where its data came from
        return EXIT_OK
    return analyze(SimpleNamespace(**values))


def _fast_value(o: Option, value: str) -> Any:
    """One option's value as typer would read it; ValueError where typer must say why."""
    if o.kind == "int":
        return int(value)
    if o.kind == "float":
        return float(value)
    if o.kind == "format" and value not in _FORMATS:
        raise ValueError(value)
    if o.kind == "path":
        if not value:
            raise ValueError(value)
        return Path(value)
    return value


def _fast_args(argv: List[str]) -> Optional[Dict[str, Any]]:
    """The analysis options of a plain command line, as typer would pass them; None for anything
    typer must see (help, errors, spellings this does not read)."""
    values: Dict[str, Any] = {o.key: o.fresh_default() for o in OPTIONS}
    values["targets"] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "-" or not arg.startswith("-"):
            values["targets"].append(arg)
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        o = _SPELLINGS.get(name)
        if o is None:
            return None
        if o.kind == "flag":
            if eq:
                return None
            values[o.key] = True
            continue
        if not eq:
            if i == len(argv):
                return None
            value = argv[i]
            i += 1
        try:
            v = _fast_value(o, value)
        except ValueError:
            return None
        if o.repeat:
            values[o.key].append(v)
        else:
            values[o.key] = v
    return values


SIGNATURE_COMMANDS = {
    "list": "List every rule in run order: signatures (built-in, --signatures folders) and code rules.",
    "validate": "Validate signature files against the schema; exit 2 with file:line on the first error.",
}


def _signatures_app(command: str):
    import typer  # here: only the signatures sub-commands need typer (start-up time)

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    _typer_command(typer, app, lambda values: signatures_command(command, list(values["signatures"])),
                   [OPTION["signatures"]], name=command, help=SIGNATURE_COMMANDS[command])
    return app


def _invoke(app, argv: List[str], prog: str) -> int:
    """Run a typer app without letting click print usage blocks or exit: errors become UsageError."""
    import click  # here: typer's errors, only when typer runs (start-up time)

    try:
        rc = app(args=argv, prog_name=prog, standalone_mode=False)
    except click.exceptions.UsageError as e:
        raise UsageError(e.format_message()) from None
    except click.exceptions.Abort:
        raise KeyboardInterrupt from None
    return EXIT_OK if rc is None else int(rc)


_NO_SUCH_OPTION = re.compile(r"No such option '([^']*)'\.?")


def _usage_message(message: str) -> str:
    """click's wording, on one line and the same whichever click version typer brings."""
    message = " ".join(message.split()).replace("Got unexpected extra argument", "unexpected extra argument")
    return _NO_SUCH_OPTION.sub(r"No such option: \1", message)


def acquire_request(args: argparse.Namespace):
    """The command line's options as the request the acquire step reads (``acquire/request.py``):
    each option that names an AcquireRequest field fills it."""
    from hanganalyze.acquire.request import AcquireRequest  # here: --help and --version load no analysis

    fields = {o.request: getattr(args, o.key, o.fresh_default()) for o in OPTIONS if o.request}
    return AcquireRequest(targets=list(args.targets), **{k: list(v) if isinstance(v, list) else v
                                                         for k, v in fields.items()})


def analyze(args: argparse.Namespace) -> int:
    """Analyze cores, live processes or pasted text and report the known bugs they match."""
    from hanganalyze import pipeline  # here: --help and --version load no analysis (start-up time)

    try:
        check_output_suffix(args.output, args.fmt)
    except UsageError as e:
        return fail(str(e), EXIT_INPUT)
    if args.redact and args.no_redact:
        return fail("--redact and --no-redact contradict each other: give one", EXIT_INPUT)
    fmt = args.fmt or default_format(args.output)
    request = acquire_request(args)
    try:
        with request:  # removes a core --coredumpctl dumped to a temporary file
            request.prepare(progress, lambda target: check_output(args.output, target))
            snapshot = pipeline.report(request, args.signatures, redact=args.redact, progress=progress,
                                       node_summary=fmt == "node", keep_secrets=args.no_redact)
            from hanganalyze.render import render  # here: --help and --version load no model (start-up time)

            write_output(render(snapshot, fmt), args.output)
    except HangAnalyzeError as e:
        return fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_TOOL)
    if args.output is not None:
        wrote(args.output, fmt)
    return verdict_exit_code(snapshot)


#: NCCL RAS findings whose processes' collective counts moved (``analyze/rasrules.py``).
RAS_MOVING = ("nccl-ras-progressing", "nccl-ras-slow-rank")


def _triage_severity(snapshot: Any, f: Any) -> Optional[str]:
    """The severity a triage finding stands for: "crash" for a crashed thread, "hang" for a wait in a
    process none of whose threads progressed over the samples, None otherwise."""
    wait = f.triage.wait if f.triage is not None else None
    if wait == "crashed":
        return "crash"
    if wait is None or wait in NOT_HUNG_WAITS:
        return None
    procs = f.processes or ([f.process] if f.process is not None else [])
    moving = {i for g in snapshot.findings if g.signature in RAS_MOVING for i in g.processes}
    for i in (i for i in procs if i not in moving):  # NCCL RAS saw its counts move: not hung
        p = snapshot.processes[i] if 0 <= i < len(snapshot.processes) else None
        if p is not None and not any(t.progress is not None and t.progress.state == "progressing"
                                     for t in p.threads):
            return "hang"
    return None


def verdict_exit_code(snapshot: Any) -> int:
    """The exit code of an analyzed snapshot (``EXIT_BY_SEVERITY``), the same for one process, a
    core, a job and a text: the most serious severity of the findings; the triage's only when no
    finding has one (a deadlocked process killed by SIGABRT for its core is a deadlock, not a
    crash); a failed input of a job, or a live process read without a stack (no ptrace: /proc only), with
    nothing serious in the others is ``EXIT_TOOL``; else 0."""
    found = {f.severity for f in snapshot.findings}
    triaged = {_triage_severity(snapshot, f) for f in snapshot.findings if f.signature == "triage"}
    for severities in (found, triaged):
        for severity, code in EXIT_BY_SEVERITY:
            if severity in severities:
                return code
    if any(p.error or p.no_stacks for p in snapshot.processes):
        return EXIT_TOOL  # a rank could not be analyzed (or, no ptrace, only /proc) and nothing serious elsewhere
    return EXIT_OK


def signatures_command(command: str, dirs: List[Path]) -> int:
    """``signatures list``: one line per rule in the order they run, the signatures at the place of
    the signature database and the code rules marked; ``signatures validate``: the signature files
    and the rule list checked, a count, or exit 2."""
    from hanganalyze import pipeline  # here: --help and --version load no analysis (start-up time)
    from hanganalyze.analyze.rules import validate_rules  # here: likewise

    try:
        db = pipeline.load_signature_db(dirs, use_cache=False)
        rules = validate_rules([s.id for s in db.signatures])
    except HangAnalyzeError as e:
        return fail(str(e), e.exit_code)
    if command == "list":
        from hanganalyze.render.text import clean  # user YAML may hold terminal escape sequences

        for rule in rules.rules:
            if not rule.code:
                for sig in db.signatures:
                    sys.stdout.write("%-45s %-9s %s\n" % (clean(sig.id), clean(sig.severity), clean(sig.title)))
                continue
            sys.stdout.write("%-45s %-9s %s [code rule]\n" % (rule.id, rule.severity, rule.title))
    else:
        sys.stdout.write("%d signatures valid\n" % len(db.signatures))
    return EXIT_OK


def gdb_path_command(argv: List[str]) -> int:
    """``hanganalyze gdb-path``: the ``source`` line that loads this installation's gdbext into gdb or
    cuda-gdb (``-x`` takes the file alone: ``--file``), wherever pip, pipx or a zipapp put it."""
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write("usage: hanganalyze gdb-path [--file]\n\n  Print the line to type in gdb/cuda-gdb (or put "
                         "in ~/.gdbinit) that loads the hang-* commands;\n  --file: only the script's path "
                         "(gdb -x FILE).\n")
        return EXIT_OK
    if argv not in ([], ["--file"]):
        raise UsageError("gdb-path takes only --file, not %s" % " ".join(argv))
    try:
        line = datapaths.gdb_source_line()
    except datapaths.DataNotFound as e:
        return fail(str(e), EXIT_TOOL)
    sys.stdout.write("%s\n" % (line.split(" ", 1)[1] if argv else line))
    return EXIT_OK


def _optional_value(argv: List[str], option: str, default: str) -> List[str]:
    """``--coredumpctl`` with no value (last, or followed by another option) means ``default``."""
    out = []
    for i, a in enumerate(argv):
        out.append(a)
        if a == "--":
            out.extend(argv[i + 1:])
            break
        if a == option and (i + 1 == len(argv) or (argv[i + 1].startswith("-") and argv[i + 1] != "-")):
            out.append(default)
    return out


def watch_command(argv: List[str]) -> int:
    """``hanganalyze watch [OPTIONS] -- COMMAND...`` or ``--job PID`` (``watch.py``)."""
    import typer  # here: only watch (start-up time)

    from hanganalyze.watch import WatchOptions, watch  # here: likewise

    split = argv.index("--") if "--" in argv else len(argv)
    options = [OPTION[k] for k in ("job", "output", "fmt", "samples", "interval", "signatures")] + list(WATCH_OPTIONS)
    if _help_asked(argv):
        sys.stdout.write(plain_help(WATCH_USAGE, WATCH_HELP, options, epilog=EXIT_HELP))
        return EXIT_OK

    def body(v: Dict[str, Any]) -> int:
        check_output_suffix(v["output"], v["fmt"] and v["fmt"].value)
        fmt = v["fmt"].value if v["fmt"] else default_format(v["output"] or Path("x.html"))
        return watch(WatchOptions(command=argv[split + 1:], job=v["job"], stall=v["stall"], poll=v["poll"],
                                  then=v["then"], output=v["output"], fmt=fmt, node_summary=v["node_summary"],
                                  samples=v["samples"], interval=v["interval"], signature_dirs=v["signatures"]),
                     progress)

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    _typer_command(typer, app, body, options, name="watch", help=WATCH_HELP)
    return _invoke(app, argv[:split], "hanganalyze watch")


def run(argv: Sequence[str]) -> int:
    """The whole command line; returns the exit code."""
    argv = _optional_value(list(argv), "--coredumpctl", "latest")
    try:
        if argv and argv[0] == "gdb-path":
            return gdb_path_command(argv[1:])
        if argv and argv[0] == "watch":
            return watch_command(argv[1:])
        if argv and argv[0] == "signatures":
            if len(argv) < 2:
                raise UsageError("missing command (signatures list|validate)")
            if argv[1] in ("-h", "--help"):
                sys.stdout.write(
                    "usage: hanganalyze signatures {list,validate} [--signatures DIR]\n\n"
                    "  list      %s\n  validate  %s\n" % (SIGNATURE_COMMANDS["list"], SIGNATURE_COMMANDS["validate"])
                )
                return EXIT_OK
            if argv[1] not in SIGNATURE_COMMANDS:
                raise UsageError("No such command '%s' (signatures list|validate)" % argv[1])
            if _help_asked(argv[2:]):
                sys.stdout.write(plain_help("hanganalyze signatures %s [OPTIONS]" % argv[1],
                                            SIGNATURE_COMMANDS[argv[1]], [OPTION["signatures"]]))
                return EXIT_OK
            return _invoke(_signatures_app(argv[1]), argv[2:], "hanganalyze signatures %s" % argv[1])
        if _help_asked(argv):
            sys.stdout.write(plain_help("hanganalyze [OPTIONS] [TARGET]...", ANALYZE_HELP, OPTIONS, targets=True,
                                        epilog=ANALYZE_EPILOG))
            return EXIT_OK
        fast = _fast_args(argv)
        if fast is not None:
            return _run_analysis(fast)
        return _invoke(_analyze_app(), argv, "hanganalyze")
    except UsageError as e:
        msg = _usage_message(str(e))
        sys.stderr.write("hanganalyze: error: %s (see hanganalyze --help)\n" % msg)
        return EXIT_INPUT


def main() -> None:
    """Entry point: ``hanganalyze signatures ...`` is the only sub-command; anything else is analysis."""
    try:
        rc = run(sys.argv[1:])
    except KeyboardInterrupt:
        sys.stderr.write("hanganalyze: error: interrupted\n")
        rc = EXIT_TOOL
    except BrokenPipeError:  # `hanganalyze ... | head`: the reader left, nothing to report
        try:
            sys.stdout = None  # type: ignore[assignment] - no flush of the dead pipe at exit
        finally:
            rc = EXIT_OK
    sys.exit(rc)
