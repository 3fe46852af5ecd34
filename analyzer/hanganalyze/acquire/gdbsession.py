"""One gdb process driven through its machine interface (MI): started ``gdb -nx`` with auto-load
off and our settings, commands sent and awaited one named step at a time, each with its own
deadline, and the ``hang-dump`` file gdbext writes read back into a Snapshot.

Why MI and not ``gdb -batch``: every step gets its own deadline and its own error ("gdb timed
out after 120 s while loading the core"), gdb's chatter stays off the user's terminal, and a
hung or crashed gdb is killed and reaped instead of hanging the tool.  ``GdbSession.wait`` is the
one place that decides a gdb command timed out.

The two flows that use a session: ``gdbcore.py`` (a core file) and ``gdblive.py`` (a live pid).
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from pygdbmi.gdbmiparser import parse_response

import hanganalyze_gdbext as ext
from hanganalyze import datapaths
from hanganalyze.deadline import Deadline, check_timeout
from hanganalyze.errors import GdbError, InputError
from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.signals import signal_name

Progress = Optional[Callable[[str], None]]

#: Settings given with -iex, i.e. before gdb reads the executable or the core.
GDB_SETTINGS = (
    "set auto-load off",  # never run scripts found next to binaries (untrusted cores)
    "set debuginfod enabled off",  # no network, no prompts
    "set confirm off",
    "set pagination off",
    "set width 0",
    "set print frame-arguments none",  # argument printing is slow and can read bad memory
    "set print thread-events off",
    "set may-call-functions off",  # gdb itself refuses any inferior call, whatever code asks for one
)

#: gdb warnings worth showing the user (others are noise about missing debug info etc.).
_USEFUL_WARNING = re.compile(
    r"(can't open file|could not load shared library|does not match|libthread_db|core file may not match"
    r"|exec file is newer|unable to find dynamic linker)",
    re.I,
)
_MAX_GDB_WARNINGS = 8


def load_py() -> Path:
    """gdbext's entry script, wherever hanganalyze is installed (source tree, site-packages, or a
    zipapp's copy in the cache: gdb reads files only), as ``hanganalyze gdb-path`` prints it."""
    try:
        return datapaths.gdbext_source().folder / datapaths.GDBEXT_ENTRY
    except datapaths.DataNotFound:
        return Path(ext.__file__).resolve().parent / datapaths.GDBEXT_ENTRY



#: File names gdb's MI and CLI argument parsing take as they are.
_GDB_SAFE_PATH = re.compile(r"[\w./+-]+", re.ASCII)


def gdb_safe_path(path: str, folder: str, name: str) -> str:
    """``path``, or a symlink to it named ``name`` in our private ``folder`` when gdb would mangle it
    (its argument parsing turns a newline into 'n' and treats quotes and backslashes as escapes)."""
    if _GDB_SAFE_PATH.fullmatch(path):
        return path
    link = os.path.join(folder, name)
    os.symlink(os.path.abspath(path), link)
    return link


def mi_quote(s: str) -> str:
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _which_gdb(gdb: str) -> str:
    found = shutil.which(gdb)
    if found is None:
        if os.sep in gdb:
            raise InputError("--gdb %s: no such executable" % gdb)
        raise InputError("%s not found on PATH: install gdb (13 or newer) or pass --gdb PATH" % gdb)
    return found


#: MI lines the driver parses (with pygdbmi): stream output (~ & @) and results ("12^done,...").
#: Async notifications (=thread-created, *stopped...) are skipped unparsed: a 200-thread core
#: emits hundreds, and parsing each in Python cost more than gdb took to print them.
_PARSED_HEADS = frozenset(b"~&@0123456789^")


class GdbSession:
    """One gdb process in MI mode; each command is a named step with a deadline.

    Commands can be sent ahead (``send``) and their results awaited later (``wait``): gdb runs
    them in order while we do other work (reading the core's notes), and each result still
    carries its step's name and its own deadline, counted from when the previous one arrived.
    The MI output is read here, line by line, without blocking; pygdbmi's parser turns the lines
    that matter, result records (by token) and stream records (kept for error messages), into
    dicts.  Every ``=thread-created`` notification of a 200-thread core is skipped unparsed.
    """

    def __init__(self, gdb: str, timeout: float, progress: Progress = None, options=None) -> None:
        self.timeout = check_timeout(timeout)
        self.progress = progress
        self.path = _which_gdb(gdb)
        self.messages: List[str] = []  # gdb's console/log output, kept for error messages
        self._token = 0
        self._results: Dict[int, Tuple[str, Any]] = {}
        self._out = b""
        self._write_error: Optional[str] = None
        self._closed: set = set()  # gdb's output streams that reached end of file
        self.responsive = True  # False after a timeout: close() then kills without asking
        argv = [self.path, "--interpreter=mi3", "-nx", "-q"]
        # --sysroot, --solib-search-path, --debuginfod (sysroot.GdbOptions): before any file is read
        extra = options.settings() if options is not None else []
        for s in GDB_SETTINGS:
            if s.startswith("set debuginfod enabled") and any(e.startswith("set debuginfod") for e in extra):
                continue
            argv += ["-iex", s]
        for s in extra:
            argv += ["-iex", s]
        try:
            # Its own session (process group): killing the group also kills what gdb started (a
            # wrapper script, a remote stub), and the user's Ctrl-C reaches only us.
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                start_new_session=True,
            )
        except (OSError, ValueError) as e:
            raise GdbError("cannot start %s: %s" % (self.path, e)) from None
        for stream in (self.proc.stdout, self.proc.stderr):
            os.set_blocking(stream.fileno(), False)
        self._started = self.send("-gdb-version")

    def started(self) -> None:
        """Wait until gdb answered its first command (it runs, and speaks MI)."""
        try:
            self.wait("starting gdb", self._started)
        except BaseException:
            self.close(graceful=False)
            raise

    # -- commands ------------------------------------------------------------------------
    def send(self, command: str) -> int:
        """Queue one MI command; returns its token.  A write error is reported by ``wait``."""
        self._token += 1
        if self._write_error is None:
            try:
                self.proc.stdin.write(("%d%s\n" % (self._token, command)).encode("utf-8", "surrogateescape"))
            except (OSError, ValueError) as e:
                self._write_error = "cannot write to gdb: %s" % e
        return self._token

    def wait(self, step: str, token: int, timeout: Optional[float] = None) -> Tuple[str, Any]:
        """Wait for the result record of ``token``; GdbError names `step` on failure."""
        if self.progress:
            self.progress(step)
        limit = self.timeout if timeout is None else timeout
        deadline = Deadline(limit)
        while token not in self._results:
            if self.proc.poll() is not None:
                self._drain()
                if token in self._results:
                    break
                self._raise_dead(step, self._write_error)
            left = deadline.left()
            if left <= 0:
                self.responsive = False
                raise GdbError("%s timed out after %g s while %s" % (os.path.basename(self.path), limit, step))
            if self.proc.stdout in self._closed:
                # No result can come any more: let it exit (for its status), else say so.
                try:
                    self.proc.wait(timeout=min(2.0, left))
                except subprocess.TimeoutExpired:
                    pass
                self._raise_dead(step, "it closed its output")
            streams = [f for f in (self.proc.stdout, self.proc.stderr) if f not in self._closed]
            try:
                ready, _, _ = select.select(streams, [], [], min(0.5, left))
            except (OSError, ValueError) as e:
                self._raise_dead(step, str(e))
            if ready:
                self._drain()
        kind, payload = self._results.pop(token)
        if kind == "error":
            msg = payload.get("msg") if isinstance(payload, dict) else None
            raise GdbError("gdb failed while %s: %s" % (step, msg or "error"))
        return kind, payload

    def mi(self, step: str, command: str, timeout: Optional[float] = None) -> Tuple[str, Any]:
        """Run one MI command and wait for its result record; GdbError names `step` on failure."""
        return self.wait(step, self.send(command), timeout)

    def _drain(self) -> None:
        """Read whatever gdb has written (never blocks) and file its records."""
        for stream, is_out in ((self.proc.stdout, True), (self.proc.stderr, False)):
            while stream not in self._closed:
                try:
                    chunk = os.read(stream.fileno(), 1 << 16)
                except BlockingIOError:
                    break
                except OSError:
                    chunk = b""
                if not chunk:
                    self._closed.add(stream)  # end of file: never select it again (it would spin)
                    break
                if not is_out:
                    self.messages.append(chunk.decode("utf-8", "replace"))
                    continue
                self._out += chunk
                *lines, self._out = self._out.split(b"\n")
                for line in lines:
                    self._record(line.rstrip(b"\r"))

    def _record(self, line: bytes) -> None:
        if not line or line[0] not in _PARSED_HEADS:
            return
        try:
            rec = parse_response(line.decode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - a line pygdbmi cannot parse is noise, not a result
            return
        rtype = rec.get("type")
        if rtype in ("console", "log", "target", "output"):
            if isinstance(rec.get("payload"), str):
                self.messages.append(rec["payload"])
        elif rtype == "result" and rec.get("token") is not None:
            self._results[int(rec["token"])] = (rec.get("message") or "", rec.get("payload"))

    def console(self, step: str, command: str, timeout: Optional[float] = None) -> Tuple[str, Any]:
        return self.wait(step, self.send_console(command), timeout)

    def send_console(self, command: str) -> int:
        return self.send("-interpreter-exec console %s" % mi_quote(command))

    def _raise_dead(self, step: str, why: Optional[str]) -> None:
        code = self.proc.poll()
        self._drain()
        last = [ln.strip() for m in self.messages for ln in m.splitlines() if ln.strip()]
        tail = (": " + last[-1]) if last else ""
        if code is None:
            raise GdbError("gdb stopped answering while %s (%s)%s" % (step, why, tail))
        if code < 0:
            raise GdbError("gdb died of %s while %s%s" % (signal_name(-code), step, tail))
        raise GdbError("gdb exited with status %d while %s%s" % (code, step, tail))

    def warnings(self) -> List[str]:
        out: List[str] = []
        for m in self.messages:
            for line in m.splitlines():
                line = line.strip()
                if line.lower().startswith("warning:") and _USEFUL_WARNING.search(line):
                    text = "gdb: " + line
                    if text not in out:
                        out.append(text)
        return out[:_MAX_GDB_WARNINGS]

    def kill(self) -> None:
        """SIGKILL gdb's process group without waiting for it; close() reaps it."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # not reaped yet: the pid is still ours
            except OSError:
                pass

    def close(self, graceful: bool = True) -> None:
        """Ask gdb to quit (when it still answers), then make sure: kill its process group and
        reap it (no zombie, no orphaned helper, ever)."""
        proc = self.proc
        if proc is None:
            return
        self.proc = None  # type: ignore[assignment]
        if graceful and proc.poll() is None:
            try:
                self.proc_stdin_write(proc, b"-gdb-exit\n")
            except (OSError, ValueError):
                pass
            try:
                proc.wait(timeout=3)
            except Exception:  # noqa: BLE001
                pass
        if proc.poll() is None:
            # Still alive, so not reaped: its pid (== its process group id, it leads its own
            # session) cannot have been reused, and the group holds only gdb and its helpers.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
        try:
            proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            pass
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass

    @staticmethod
    def proc_stdin_write(proc: subprocess.Popen[bytes], data: bytes) -> None:
        if proc.stdin is not None:
            proc.stdin.write(data)

    def send_gdbext(self) -> int:
        """Queue ``source`` of gdbext (it needs no target: sent first, it loads while we work)."""
        script = load_py()
        if not script.is_file():
            raise GdbError("gdbext not found at %s (broken installation?)" % script)
        return self.send_console("source %s" % script)

    def send_dump(self, tmp: str) -> Tuple[int, str]:
        """Queue ``hang-dump FILE`` into the folder `tmp`; returns its token and the file."""
        out = os.path.join(tmp, "snapshot.json")
        return self.send_console("hang-dump %s" % shlex.quote(out)), out


def read_dump(path: str) -> Snapshot:
    """The snapshot hang-dump wrote."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise GdbError("hang-dump produced no snapshot: %s" % e) from None
    try:
        return Snapshot.from_dict(data)
    except (KeyError, TypeError, ValueError) as e:
        raise GdbError("hang-dump wrote an invalid snapshot: %s" % e) from None

