"""``--coredumpctl [PID|latest|MATCH]``: the core systemd-coredump stored, found with coredumpctl.

systemd-coredump keeps cores compressed under /var/lib/systemd/coredump/ and records each crash
in the journal: pid, signal, time, executable, command line, host, where the core went.  We ask
``coredumpctl`` itself (never the journal files or the folder directly: it knows the storage
modes, the journal's access rights and the matches):

1. ``coredumpctl --json=short list MATCH``: the crashes, as JSON (time in microseconds, pid,
   uid, sig, exe, corefile: "present", "missing", "journal", ...); the newest one is taken;
2. ``coredumpctl -1 info MATCH COREDUMP_PID=pid``: the rest of its record (command line, host,
   storage path) as text, ``Key: value`` lines;
3. the stored file itself when we can read it (``.zst``: decompressed by ``compressed.py`` to a
   sparse temporary file), else ``coredumpctl -1 dump -o FILE`` into a private temporary folder,
   removed when the run ends.

MATCH is coredumpctl's: a pid, a command name, an executable path, or FIELD=VALUE.  The record
goes into the report (``Process.coredump``); its signal is the kernel's, so it is the process's
signal when the core's notes have none.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import CoreDump
from hanganalyze_gdbext.model.signals import signal_name

Progress = Optional[Callable[[str], None]]

#: Bytes of coredumpctl's output we read (a list of thousands of crashes is a few MB).
_MAX_OUTPUT = 64 << 20
#: ``corefile`` values of ``coredumpctl list`` that have a core to read.
_HAS_CORE = ("present", "journal", "truncated")
#: ``  Key: value`` in ``coredumpctl info`` (the key is right-aligned; continuation lines of the
#: message are indented further and have no key).
_INFO_LINE = re.compile(r"^\s{0,20}([A-Z][A-Za-z ]{1,30}): (.*)$")
_STORAGE = re.compile(r"^(.*?)(?: \((present|missing|inaccessible|error|truncated)\))?$")
_ENV = {"SYSTEMD_COLORS": "0", "SYSTEMD_PAGER": "cat", "PAGER": "cat", "SYSTEMD_LESS": "", "LC_ALL": "C.UTF-8"}


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _time_text(usec: Any) -> Optional[str]:
    """Microseconds since the epoch -> ``2026-11-23 14:07:15 UTC``."""
    if not isinstance(usec, int) or isinstance(usec, bool) or usec <= 0:
        return None
    try:
        return datetime.fromtimestamp(usec / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return None


def parse_list(text: str) -> List[Dict[str, Any]]:
    """The entries of ``coredumpctl --json=short list``, each checked; oldest first as printed."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise InputError("coredumpctl printed no JSON list (is it older than systemd 250, without --json?)") from None
    if not isinstance(data, list):
        raise InputError("coredumpctl printed JSON that is not a list of core dumps")
    out = []
    for e in data:
        if not isinstance(e, dict):
            continue
        pid = e.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool):
            continue
        out.append(e)
    return out


def newest(entries: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The entry with the largest time (coredumpctl lists oldest first; ties: the last listed)."""
    best = None
    for e in entries:
        t = e.get("time")
        t = t if isinstance(t, int) and not isinstance(t, bool) else -1
        if best is None or t >= best[0]:
            best = (t, e)
    return best[1] if best else None


def parse_info(text: str) -> Dict[str, str]:
    """``Key: value`` lines of ``coredumpctl info`` (first record only; the message is skipped)."""
    out: Dict[str, str] = {}
    in_message = False
    for line in text.splitlines():
        m = _INFO_LINE.match(line)
        if not m:
            continue
        key, value = m.group(1).strip(), m.group(2).strip()
        if key == "PID" and "PID" in out:
            break  # a second record
        if key == "Message":
            in_message = True  # its text (stack traces, "ELF object binary architecture: ...") is not ours
        elif not in_message:
            out.setdefault(key, value)
    return out


def record(entry: Dict[str, Any], info: Dict[str, str]) -> Dict[str, Any]:
    """The metadata kept in the report (``Process.coredump``): strings and ints only."""
    meta: Dict[str, Any] = {"from": "coredumpctl", "pid": entry.get("pid")}
    sig = signal_name(entry.get("sig"))
    if sig is None:
        m = re.match(r"(\d+)", info.get("Signal", ""))
        sig = signal_name(m.group(1)) if m else None
    meta["signal"] = sig
    meta["time"] = _time_text(entry.get("time")) or info.get("Timestamp")
    exe = entry.get("exe") if isinstance(entry.get("exe"), str) else None
    meta["executable"] = exe or info.get("Executable")
    meta["cmdline"] = info.get("Command Line")
    meta["hostname"] = info.get("Hostname")
    uid = entry.get("uid")
    meta["uid"] = uid if isinstance(uid, int) and not isinstance(uid, bool) else None
    storage = info.get("Storage")
    if storage:
        m = _STORAGE.match(storage)
        meta["storage"] = m.group(1) if m else storage
    corefile = entry.get("corefile")
    meta["corefile"] = corefile if isinstance(corefile, str) else None
    return {k: v for k, v in meta.items() if v is not None and v != ""}


@dataclass
class StoredCore:
    """The core found through coredumpctl: the file to analyze and its journal record."""

    path: Path
    meta: Dict[str, Any]
    tmpdir: Optional[str] = None
    _applied: List[int] = field(default_factory=list)

    def describe(self) -> str:
        bits = ["pid %s" % self.meta.get("pid")]
        if self.meta.get("signal"):
            bits.append(str(self.meta["signal"]))
        if self.meta.get("time"):
            bits.append(str(self.meta["time"]))
        if self.meta.get("hostname"):
            bits.append("on %s" % self.meta["hostname"])
        return ", ".join(bits)

    def apply(self, snap) -> None:
        """Put the record in the snapshot's process, and the signal where the core has none."""
        for proc in snap.processes:
            if proc.source != "core":
                continue
            proc.coredump = CoreDump(**{"from_" if k == "from" else k: v for k, v in self.meta.items()})
            sig = self.meta.get("signal")
            if sig and proc.signal is None:
                proc.signal = sig
                proc.notes.append("signal %s from systemd-coredump's record (the core's notes have none)" % sig)
            elif sig and proc.signal and proc.signal != sig:
                proc.notes.append("systemd-coredump recorded %s, the core's notes say %s" % (sig, proc.signal))
            if not proc.argv and self.meta.get("cmdline"):
                proc.argv = str(self.meta["cmdline"]).split()
            exe = self.meta.get("executable")
            if exe and proc.executable and exe != proc.executable:
                proc.notes.append("systemd-coredump recorded the executable %s, the core maps %s"
                                  % (exe, proc.executable))
            proc.notes.append("core found by coredumpctl: %s (%s)" % (self.describe(), self.meta.get("storage")
                                                                      or self.path))

    def wrap(self, acquire_one):
        """``acquire_one`` of the CLI, adding the record to the snapshot of this core."""
        target = os.path.realpath(str(self.path))

        def one(inp):
            snap = acquire_one(inp)
            if inp.path not in (None, "-") and os.path.realpath(str(inp.path)) == target:
                self.apply(snap)
            return snap

        return one

    def cleanup(self) -> None:
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None


def _run(argv: List[str], timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(_ENV)
    try:
        res = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise InputError("coredumpctl did not answer within %g s (%s)" % (timeout, " ".join(argv[1:]))) from None
    except OSError as e:
        raise InputError("cannot run coredumpctl: %s" % (e.strerror or e)) from None
    if len(res.stdout) > _MAX_OUTPUT:
        raise InputError("coredumpctl printed more than %d MiB: give a narrower match" % (_MAX_OUTPUT >> 20))
    return res


def find_stored_core(selector: str, timeout: float = 120.0, progress: Progress = None,
                     coredumpctl: str = "coredumpctl") -> StoredCore:
    """The newest core matching ``selector`` ("latest": any), ready to analyze.  One-line
    InputError when coredumpctl is missing, finds nothing, or has no core file for the crash."""
    exe = shutil.which(coredumpctl)
    if exe is None:
        raise InputError("--coredumpctl: coredumpctl is not installed (apt-get install systemd-coredump); "
                         "or give the core file itself")
    selector = (selector or "latest").strip()
    if any(c in selector for c in "\n\r\0"):
        raise InputError("--coredumpctl %r: not a pid, command name, path or FIELD=VALUE" % selector)
    matches = [] if selector in ("", "latest") else [selector]
    what = "" if not matches else " matching %s" % selector
    if progress:
        progress("asking coredumpctl for the newest core dump%s" % what)
    base = [exe, "--no-pager", "--quiet"]
    res = _run(base + ["--json=short", "--", "list"] + matches, timeout)
    err = res.stderr.decode("utf-8", "replace")
    if res.returncode != 0 or not res.stdout.strip():
        why = _one_line(err)
        if "No coredumps found" in err or not why:
            raise InputError("coredumpctl found no core dump%s" % what)
        if "No journal files" in err:
            raise InputError("coredumpctl found no journal files (is systemd-journald running, and may you read "
                             "the system journal?)")
        raise InputError("coredumpctl failed: %s" % why)
    entry = newest(parse_list(res.stdout.decode("utf-8", "replace")))
    if entry is None:
        raise InputError("coredumpctl found no core dump%s" % what)
    pid = entry["pid"]
    one = base + ["-1", "--", "info"] + matches + ["COREDUMP_PID=%d" % pid]
    res = _run(one, timeout)
    info = parse_info(res.stdout.decode("utf-8", "replace")) if res.returncode == 0 else {}
    meta = record(entry, info)
    stored = StoredCore(path=Path("."), meta=meta)
    corefile = meta.get("corefile")
    if corefile not in _HAS_CORE:
        raise InputError(
            "the newest core dump%s (%s) has no core file (coredumpctl: %s): systemd-coredump removed it or did not "
            "keep it (Storage=, ProcessSizeMax=, MaxUse= in coredump.conf)" % (what, stored.describe(), corefile))
    storage = meta.get("storage")
    if corefile != "journal" and isinstance(storage, str) and storage.startswith("/") \
            and os.path.isfile(storage) and os.access(storage, os.R_OK):
        stored.path = Path(storage)
        return stored
    # in the journal, or a file we may not read directly: coredumpctl writes it out for us
    stored.tmpdir = tempfile.mkdtemp(prefix="hanganalyze-coredump-")
    try:
        out = os.path.join(stored.tmpdir, "core.%d" % pid)
        if progress:
            progress("coredumpctl dump of pid %d" % pid)
        res = _run(base + ["-1", "-o", out, "--", "dump"] + matches + ["COREDUMP_PID=%d" % pid], timeout)
        if res.returncode != 0 or not os.path.isfile(out) or os.path.getsize(out) == 0:
            why = _one_line(res.stderr.decode("utf-8", "replace")) or "no file written"
            if "No space left" in why:
                why += " (set TMPDIR to a larger disk)"
            raise InputError("coredumpctl could not dump the core of pid %d: %s" % (pid, why))
        stored.path = Path(out)
        stored.meta["dumped"] = True
        return stored
    except BaseException:
        stored.cleanup()
        raise
