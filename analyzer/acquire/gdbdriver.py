"""Drive gdb through its machine interface (MI) with gdbext loaded, and turn its
``hang-dump`` into a Snapshot completed with what the core's notes (or /proc) say.

Why MI and not ``gdb -batch``: every step gets its own deadline and its own error ("gdb timed
out after 120 s while loading the core"), gdb's chatter stays off the user's terminal, and a
hung or crashed gdb is killed and reaped instead of hanging the tool.

Live processes are only read (memory and registers, never inferior calls) and are always
detached in a ``finally``; if gdb had to be killed while the target was stopped, the target gets
SIGCONT so that it is left in the state we found it in.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import re
import select
import shlex
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from hanganalyze.acquire.corefile import CoreInfo, MappedFile, build_id_of_file, check_executable
from hanganalyze.acquire.embedded_versions import add_embedded_versions, mentions_nccl
from hanganalyze.acquire.ranks import identity_from_environ, read_proc_environ
from hanganalyze.errors import GdbError, InputError
from hanganalyze.gdbext.model import Library, Process, Snapshot
from pygdbmi.gdbmiparser import parse_response

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

_SOVERSION = re.compile(r"\.so\.(\d+(?:\.\d+)*)$")
_DASH_VERSION = re.compile(r"-(\d+(?:\.\d+)+)\.so$")


def load_py() -> Path:
    """gdbext's entry script, wherever hanganalyze is installed (source tree or site-packages)."""
    import hanganalyze.gdbext as ext

    return Path(ext.__file__).resolve().parent / "load.py"


def soname_version(path: str) -> Optional[str]:
    """Version from a library file name: ``libnccl.so.2.26.5`` -> "2.26.5", ``libfoo-1.2.so`` -> "1.2"."""
    name = os.path.basename(path)
    m = _SOVERSION.search(name) or _DASH_VERSION.search(name)
    return m.group(1) if m else None


def is_library(path: str) -> bool:
    name = os.path.basename(path)
    return ".so" in name and (name.endswith(".so") or ".so." in name)


def libraries_from_files(files: List[MappedFile]) -> List[Library]:
    out = []
    for f in files:
        if is_library(f.path):
            out.append(Library(path=f.path, build_id=f.build_id or f.disk_build_id, version=soname_version(f.path)))
    return out


def normalize_frame_libraries(proc: Process, files: List[MappedFile]) -> None:
    """Name each frame's library as the process mapped it (NT_FILE or /proc/PID/maps).

    gdb reports libraries by the path the dynamic linker used (``/lib/x86_64-linux-gnu/libc.so.6``)
    while the mappings say ``/usr/lib/...`` on merged-/usr systems; one spelling per file keeps the
    frames, the library list and the signatures' library patterns in agreement.
    """
    by_real: Dict[str, str] = {}
    for f in files:
        try:
            by_real.setdefault(os.path.realpath(f.path), f.path)
            if f.found and f.found != f.path:  # under --sysroot: gdb names the copy, we the original
                by_real.setdefault(os.path.realpath(f.found), f.path)
        except (OSError, ValueError):
            continue
    cache: Dict[str, str] = {}
    for t in proc.threads:
        for fr in list(t.frames) + list(t.python_frames):
            lib = fr.library
            if not lib or fr.kind != "native":
                continue
            if lib not in cache:
                try:
                    cache[lib] = by_real.get(os.path.realpath(lib), lib)
                except (OSError, ValueError):
                    cache[lib] = lib
            fr.library = cache[lib]


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


def _mi_quote(s: str) -> str:
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
        try:
            usable = float(timeout) > 0 and math.isfinite(float(timeout))
        except (TypeError, ValueError):
            usable = False
        if not usable:  # NaN would make every deadline comparison false: an endless wait
            raise InputError("--timeout must be a positive number of seconds (got %s)" % timeout)
        self.timeout = float(timeout)
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
        deadline = time.monotonic() + limit
        while token not in self._results:
            if self.proc.poll() is not None:
                self._drain()
                if token in self._results:
                    break
                self._raise_dead(step, self._write_error)
            left = deadline - time.monotonic()
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
        return self.send("-interpreter-exec console %s" % _mi_quote(command))

    def _raise_dead(self, step: str, why: Optional[str]) -> None:
        code = self.proc.poll()
        self._drain()
        last = [ln.strip() for m in self.messages for ln in m.splitlines() if ln.strip()]
        tail = (": " + last[-1]) if last else ""
        if code is None:
            raise GdbError("gdb stopped answering while %s (%s)%s" % (step, why, tail))
        if code < 0:
            raise GdbError("gdb died of %s while %s%s" % (_signame(-code), step, tail))
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


def _signame(signo: int) -> str:
    try:
        return signal.Signals(signo).name
    except ValueError:
        return "signal %d" % signo


# ----------------------------------------------------------------------------------- cores


def snapshot_from_core(
    core,
    info: Optional[CoreInfo] = None,
    exe=None,
    gdb: str = "gdb",
    timeout: float = 120.0,
    progress: Progress = None,
    gdb_busy: Optional[Callable[[], None]] = None,
    options=None,
) -> Snapshot:
    """Snapshot of a core: gdb unwinds, the notes give argv, signal, build-ids.
    ``options`` (sysroot.GdbOptions): --sysroot, --solib-search-path, --debuginfod.

    gdb starts first and loads gdbext while the core's notes are read here (``info`` is read
    here when not given); then the executable, the core and ``hang-dump`` are queued at once,
    and ``gdb_busy`` is called: the caller's chance to work while we only wait for gdb.
    """
    from hanganalyze.acquire.corefile import library_warnings, read_core
    from hanganalyze.acquire.sysroot import GdbOptions, reconcile_with_gdb

    core = Path(core)
    options = options or GdbOptions()
    session = GdbSession(gdb, timeout, progress, options)
    try:
        with tempfile.TemporaryDirectory(prefix="hanganalyze-") as tmp:
            t_ext = session.send_gdbext()
            if info is None:
                if progress:
                    progress("reading core notes of %s" % core)
                info = read_core(core, locate=options.locate if options.elsewhere else None)
            exe_path, warnings = check_executable(info, Path(exe) if exe is not None else None,
                                                  locate=options.locate if options.elsewhere else None,
                                                  where=options.where(), libraries=False)
            gdb_exe = gdb_safe_path(exe_path, tmp, "exe")
            t_exe = session.send("-file-exec-and-symbols %s" % _mi_quote(gdb_exe))
            t_mem = _send_missing_memory(session, info, tmp) if info.truncated else None
            # core-file takes the rest of the line as the file name (spaces included, no quoting)
            t_core = session.send_console("core-file %s" % gdb_safe_path(str(core.resolve()), tmp, "core"))
            added: Dict[str, str] = {}  # libraries added by hand: gdb's name -> the mapped path
            if info.truncated:
                # gdb learns the shared libraries from the dynamic linker's list in the process's
                # memory, most often beyond the end of a truncated core: the notes say where each
                # library was mapped, so the missing ones are added there, before the dump.
                if gdb_busy is not None:
                    gdb_busy()
                    gdb_busy = None
                _wait_loaded(session, exe_path, t_ext, t_exe, t_core, t_mem)
                added = _add_unlisted_libraries(session, info, tmp)
            # the files gdb really used for the libraries (their build-ids go in the mapped-file table)
            t_libs = session.send("-file-list-shared-libraries")
            t_dump, out = session.send_dump(tmp)
            if gdb_busy is not None:
                gdb_busy()
            if not info.truncated:
                _wait_loaded(session, exe_path, t_ext, t_exe, t_core)
            try:
                reconcile_with_gdb(info, session.wait("listing shared libraries", t_libs)[1])
            except GdbError:
                if not session.responsive or session.proc.poll() is not None:
                    raise
            session.wait("collecting threads (hang-dump)", t_dump)
            gdb_warnings = session.warnings()
            # A core has no target to detach from: once the snapshot is written, gdb's orderly
            # exit (freeing a multi-GB core's caches) is time the user waits for nothing.  It
            # is killed now and reaped in close() below, after its file is read.
            session.kill()
            snap = read_dump(out)
    finally:
        session.close(graceful=False)
    if not snap.processes:
        raise GdbError("hang-dump found no process in %s" % core)
    proc = snap.processes[0]
    renamed = {link: path for link, path in added.items() if link != path}
    if gdb_exe != exe_path:  # gdb named the executable's frames after our symlink
        renamed[gdb_exe] = exe_path
    if renamed:
        for t in proc.threads:
            for fr in list(t.frames) + list(t.python_frames):
                if fr.library in renamed:
                    fr.library = renamed[fr.library]
    if info.truncated:
        gdb_warnings = _truncated_core_facts(proc, info, gdb_warnings, len(added))
    _complete_from_core(proc, info, exe_path)
    _name_unknown_libraries(proc, info)
    from hanganalyze.acquire.sysroot import debuginfod_note, mapped_file_table, missing_library_warning

    proc.mapped_files = mapped_file_table(info)
    first = [info.truncation_warning()] if info.truncated else []
    warnings += library_warnings(info)
    missing = missing_library_warning(info, options)
    if missing:
        warnings.append(missing)
    note = debuginfod_note(options)
    if note:
        proc.notes.append(note)
    snap.warnings = first + warnings + gdb_warnings + snap.warnings
    if len(proc.threads) != info.nthreads:
        snap.warnings.append("gdb saw %d thread(s), the core has %d" % (len(proc.threads), info.nthreads))
    return snap


def _wait_loaded(session: GdbSession, exe_path: str, t_ext: int, t_exe: int, t_core: int,
                 t_mem: Optional[int] = None) -> None:
    session.started()
    session.wait("loading gdbext", t_ext)
    session.wait("loading the executable %s" % exe_path, t_exe)
    if t_mem is not None:
        session.wait("marking the memory beyond the end of the truncated core", t_mem)
    session.wait("loading the core", t_core)


def _send_missing_memory(session: GdbSession, info: CoreInfo, tmp: str) -> int:
    """Make gdb refuse to read what a truncated core lacks.  Without this, gdb reads a missing
    page of a mapped file (a library's .data, the dynamic linker's list, a mutex in the
    executable) from the file on disk: its contents at start-up, not what the process had.
    Write-only memory regions (``mem LO HI wo``) turn every such read into "Cannot access
    memory", as for any stack page the core does not have.  Sent as one script."""
    script = os.path.join(tmp, "missing-memory.gdb")
    with open(script, "w") as f:
        f.write("set mem inaccessible-by-default off\n")  # the rest stays readable (default: on)
        for lo, hi in info.missing_ranges():
            f.write("mem %#x %#x wo\n" % (lo, hi))
    return session.send_console("source %s" % script)


def _load_vaddr(path: str) -> Optional[int]:
    """The link-time address of a shared object's first PT_LOAD, page-aligned (0 for ordinary
    libraries), from its program headers; None when it is no 64-bit ELF file."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:
                return None
            e = "<" if head[5] == 1 else ">"
            phoff = struct.unpack_from(e + "Q", head, 32)[0]
            phentsize, phnum = struct.unpack_from(e + "HH", head, 54)
            if phentsize < 56 or phnum > 4096:
                return None
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
    except OSError:
        return None
    for k in range(len(table) // phentsize):
        p_type, _flags, p_offset, p_vaddr = struct.unpack_from(e + "IIQQ", table, k * phentsize)
        if p_type == 1:  # PT_LOAD
            return (p_vaddr - p_offset) & ~0xFFF
    return None


def _add_unlisted_libraries(session: GdbSession, info: CoreInfo, tmp: str) -> Dict[str, str]:
    """``add-symbol-file`` every library the core's NT_FILE note maps that gdb did not find in the
    dynamic linker's list (beyond the end of a truncated core), at the address it was mapped.
    Returns {name given to gdb: mapped path}.  A library gdb refuses is skipped."""
    try:
        _, payload = session.mi("listing shared libraries", "-file-list-shared-libraries")
        rows = (payload or {}).get("shared-libraries") or []
    except GdbError:
        if not session.responsive or session.proc.poll() is not None:
            raise
        rows = []
    listed = set()
    for row in rows:
        if isinstance(row, dict):
            for key in ("host-name", "target-name", "id"):
                if isinstance(row.get(key), str):
                    listed.add(os.path.realpath(row[key]))
    starts: Dict[str, int] = {}
    for m in info.mappings:
        if m.offset == 0 and m.path not in starts:
            starts[m.path] = m.start
    sent: List[Tuple[int, str, str]] = []
    for f in info.files:
        path = f.found or f.path  # the file on this machine (under --sysroot: the copy)
        if not (f.on_disk and is_library(f.path) and f.path in starts) or os.path.realpath(path) in listed:
            continue
        link_vaddr = _load_vaddr(path)
        if link_vaddr is None:
            continue
        name = gdb_safe_path(path, tmp, "lib%d" % len(sent))
        cmd = "add-symbol-file %s -o %#x" % (name, starts[f.path] - link_vaddr)
        sent.append((session.send_console(cmd), name, f.path))
    added: Dict[str, str] = {}
    for token, name, mapped in sent:
        try:
            session.wait("adding the symbols of %s" % mapped, token)
        except GdbError:
            if not session.responsive or session.proc.poll() is not None:
                raise
            continue
        added[name] = mapped
    return added


#: Our marker note for an unwind that stopped on unreadable memory (gdbext/native.py), and the
#: address in gdb's message.
_UNREADABLE = re.compile(r"Cannot access memory at address (0x[0-9a-fA-F]+)")


def _libraries_by_mapping(proc: Process, info: CoreInfo) -> None:
    """Name each native frame's library after the file the core's notes map at its address: gdb
    names files it found in the dynamic linker's list only, not those added by hand."""
    maps = sorted((m.start, m.end, m.path) for m in info.mappings)
    starts = [m[0] for m in maps]
    for t in proc.threads:
        for fr in list(t.frames) + list(t.python_frames):
            if fr.kind != "native" or fr.address is None or fr.marker:
                continue
            i = bisect.bisect_right(starts, fr.address) - 1
            if i >= 0 and fr.address < maps[i][1]:
                fr.library = maps[i][2].replace(" (deleted)", "")


def _name_unknown_libraries(proc: Process, info: CoreInfo) -> None:
    """Name each native frame's library after the file the core's notes map at its address.

    gdb knows only the libraries it found: a frame in a library missing on this machine is
    ``?? ()`` with no library (gdbext then names the executable), so signatures that match
    ``{function: "??", library: ...}`` would not see it.  An address in no mapped file (a garbage
    return address past such a frame, the vdso, JIT code) names no library.
    """
    if not info.mappings:
        return
    maps = sorted((m.start, m.end, m.path) for m in info.mappings)
    starts = [m[0] for m in maps]
    for t in proc.threads:
        for fr in list(t.frames) + list(t.python_frames):
            if fr.kind != "native" or fr.marker or not isinstance(fr.address, int) or isinstance(fr.address, bool):
                continue
            i = bisect.bisect_right(starts, fr.address) - 1
            if i >= 0 and fr.address < maps[i][1]:
                fr.library = maps[i][2].replace(" (deleted)", "")
            elif fr.library == proc.executable:
                fr.library = None


def _truncated_core_facts(proc: Process, info: CoreInfo, gdb_warnings: List[str], added: int) -> List[str]:
    """Say per thread where its stack ran past the end of a truncated core, and which reads failed
    for that reason; returns gdb's warnings less those the truncation explains."""

    def beyond(text: Optional[str]) -> bool:
        m = _UNREADABLE.search(text or "")
        return m is not None and info.missing(int(m.group(1), 16))

    for t in proc.threads:
        for fr in list(t.frames) + list(t.python_frames):
            if not (fr.marker and beyond(fr.note)):
                continue
            old = fr.note
            m = _UNREADABLE.search(old or "")
            if fr.kind == "native":
                fr.note = "stack beyond the end of the truncated core (cannot read %s)" % m.group(1)
            else:
                fr.note = "%s: beyond the end of the truncated core" % old
            t.notes = [fr.note if n == old else n for n in t.notes]
        t.notes = [n + " (beyond the end of the truncated core)" if beyond(n) and "truncated core" not in n else n
                   for n in t.notes]
        res = (t.waits or {}).get("resource")
        if isinstance(res, str) and res.startswith("0x") and info.missing(int(res, 16)):
            t.waits["detail"] = "%s [its memory is beyond the end of the truncated core]" % t.waits.get("detail", "")
    proc.notes = [n + " (beyond the end of the truncated core)" if beyond(n) else n for n in proc.notes]
    if added:
        _libraries_by_mapping(proc, info)
        proc.notes.append("the core's list of shared libraries is beyond its end: %d libraries were loaded at "
                          "the addresses its notes give" % added)
        # gdb's thread debugging needs that list too: its complaint says nothing more
        gdb_warnings = [w for w in gdb_warnings if "libthread_db" not in w]
    mf = info.file(info.executable)
    if mf is not None and mf.build_id is None and info.missing(mf.base):
        # gdb compares the executable with the build-id in the core's memory, which is not there
        gdb_warnings = [w for w in gdb_warnings if "core file may not match" not in w]
        proc.notes.append("the executable's build-id could not be checked: its first page is beyond the end "
                          "of the truncated core")
    return gdb_warnings


def _complete_from_core(proc: Process, info: CoreInfo, exe_path: str) -> None:
    proc.source = "core"
    proc.pid = info.pid or proc.pid
    proc.executable = (info.executable or exe_path).replace(" (deleted)", "")
    proc.argv = info.argv or proc.argv
    # The notes decide: gdb's $_siginfo says SIGSTOP for gcore'd cores of running processes.
    proc.signal = info.signal
    if info.signal is None and info.written_by_gdb:
        proc.notes.append("core written by gdb (gcore) of a running process: no fatal signal")
    if not proc.libraries:
        proc.libraries = libraries_from_files(info.files)
    # NCCL linked into the executable or a framework library: its embedded version string
    if mentions_nccl(proc):
        add_embedded_versions(proc.libraries, [f.path for f in info.files], exe_path or proc.executable,
                              core=info.path, mappings=[(m.start, m.end, m.path) for m in info.mappings])
    normalize_frame_libraries(proc, info.files)
    proc.rank, proc.dist = identity_from_environ(info.environ, "core environment")


# ------------------------------------------------------------------------------------ live


def _proc_status(pid: int) -> Dict[str, str]:
    out: Dict[str, str] = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = v.strip()
    except OSError:
        pass
    return out


def _state_letter(pid: int) -> Optional[str]:
    st = _proc_status(pid).get("State")
    return st[:1] if st else None


#: Largest pid Linux can give (pid_t is 32-bit signed; the kernel's limit is 2**22).
_PID_MAX = 2**31 - 1


def _check_pid(pid: int) -> None:
    if pid <= 0 or pid > _PID_MAX:
        raise InputError("--pid %d: not a process id" % pid)
    if pid == os.getpid() or _proc_status(pid).get("Tgid") == str(os.getpid()):
        # gdb would stop this very process while it waits for gdb: nothing could end the wait
        raise InputError("--pid %d is hanganalyze itself" % pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise InputError("no process with pid %d" % pid) from None
    except PermissionError:
        raise InputError("not allowed to inspect pid %d (run as its user or root)" % pid) from None
    status = _proc_status(pid)
    if status.get("State", "").startswith("Z"):
        raise InputError("pid %d is a zombie (it has exited; analyze its core instead)" % pid)
    tracer = status.get("TracerPid", "0")
    if tracer not in ("", "0"):
        raise InputError("pid %d is already traced by pid %s (a debugger?); detach it first" % (pid, tracer))


def _live_files(pid: int) -> List[MappedFile]:
    files: Dict[str, MappedFile] = {}
    try:
        with open("/proc/%d/maps" % pid) as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) < 6 or not parts[5].startswith("/"):
                    continue
                path = parts[5].strip()
                lo = int(parts[0].split("-")[0], 16)
                mf = files.get(path)
                if mf is None:
                    files[path] = MappedFile(path=path, base=lo, on_disk=os.path.isfile(path))
                else:
                    mf.base = min(mf.base, lo)
    except OSError:
        return []
    out = list(files.values())
    for mf in out:
        if mf.on_disk and is_library(mf.path):
            mf.disk_build_id = build_id_of_file(mf.path)
    return out


def live_argv(pid: int) -> Optional[List[str]]:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    parts = raw.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    return [p.decode("utf-8", "surrogateescape") for p in parts] or None


def snapshot_from_pid(
    pid: int,
    gdb: str = "gdb",
    timeout: float = 120.0,
    progress: Progress = None,
    gdb_busy: Optional[Callable[[], None]] = None,
    options=None,
) -> Snapshot:
    """Snapshot of a live process: attach, read, detach.  The process is never left stopped."""
    _check_pid(pid)
    state_before = _state_letter(pid)
    argv = live_argv(pid)
    environ = read_proc_environ(pid)
    try:
        exe = os.readlink("/proc/%d/exe" % pid)
    except OSError:
        exe = None
    session = GdbSession(gdb, timeout, progress, options)
    attached = False
    try:
        t_ext = session.send_gdbext()
        session.started()
        session.wait("loading gdbext", t_ext)
        try:
            session.mi("attaching to pid %d" % pid, "-target-attach %d" % pid)
        except GdbError as e:
            if _state_letter(pid) in (None, "Z", "X"):
                raise InputError("pid %d exited before it could be attached" % pid) from None
            if "not permitted" in str(e):
                raise InputError(
                    "not allowed to attach to pid %d (ptrace: Operation not permitted): run as its user or root, "
                    "and check /proc/sys/kernel/yama/ptrace_scope and container capabilities (CAP_SYS_PTRACE)" % pid
                ) from None
            raise
        attached = True
        with tempfile.TemporaryDirectory(prefix="hanganalyze-") as tmp:
            t_dump, out = session.send_dump(tmp)
            if gdb_busy is not None:
                gdb_busy()
            session.wait("collecting threads (hang-dump)", t_dump)
            snap = read_dump(out)
        gdb_warnings = session.warnings()
    finally:
        try:
            if attached:
                session.mi("detaching from pid %d" % pid, "-target-detach", timeout=min(session.timeout, 30.0))
        except GdbError:
            pass  # killing gdb below detaches too (the kernel unlinks ptrace)
        finally:
            session.close(graceful=session.responsive)
            _resume_if_left_stopped(pid, state_before)
    proc = snap.processes[0] if snap.processes else None
    if proc is None:
        raise GdbError("hang-dump found no process in pid %d" % pid)
    proc.source = "live"
    proc.pid = pid
    proc.executable = (exe or proc.executable or "").replace(" (deleted)", "") or None
    proc.argv = argv or proc.argv
    proc.signal = None
    proc.rank, proc.dist = identity_from_environ(environ, "environ")
    files = _live_files(pid)
    if not proc.libraries:
        proc.libraries = libraries_from_files(files)
    if mentions_nccl(proc):
        add_embedded_versions(proc.libraries, [f.path for f in files], proc.executable)
    normalize_frame_libraries(proc, files)
    snap.warnings = gdb_warnings + snap.warnings
    return snap


def _resume_if_left_stopped(pid: int, state_before: Optional[str]) -> None:
    """If gdb died while the target sat in a ptrace/group stop, the target may stay stopped ('T'):
    send SIGCONT, unless it was already stopped before we came."""
    if state_before in ("T", "t"):
        return
    for _ in range(20):
        st = _state_letter(pid)
        if st not in ("T", "t"):
            return
        if _proc_status(pid).get("TracerPid", "0") == "0":
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                return
        time.sleep(0.05)


# The process facts the direct reader completes its snapshots with (analyzer/direct/acquire.py).
check_pid = _check_pid
live_files = _live_files
complete_from_core = _complete_from_core
truncated_core_facts = _truncated_core_facts
name_unknown_libraries = _name_unknown_libraries
