"""Native unwinding: every thread's frames as gdb sees them, plus what the merge needs (SP, CFA).

Speed matters (200-thread cores): we ask gdb only for pc, name, type and sp per frame, look up
the shared library by address range (one ``info sharedlibrary`` parse per run instead of one
``solib_name`` call per frame), and resolve file:line once per distinct pc.
"""

import bisect
from typing import Dict, List, Optional, Tuple

import gdb

from .model import UNREADABLE_MARKER, Frame

MAX_FRAMES = 1024


class NativeFrame:
    """A native frame plus the unwinder facts that never reach the JSON (stack pointer, gdb type).

    ``gdb_frame`` is gdb's own frame object, for readers that need registers or variables of
    this frame (locks): cheap to use while its thread is still selected, right after ``unwind``
    (gdb finds it in its frame cache).  After another thread was selected, gdb has dropped that
    cache and every use re-unwinds the thread from its innermost frame, so such readers should
    run per thread, before the next thread is unwound.
    """

    __slots__ = ("frame", "sp", "cfa", "gdb_type", "pc", "gdb_frame")

    def __init__(
        self,
        frame: Frame,
        sp: Optional[int],
        cfa: Optional[int],
        gdb_type: int,
        pc: int,
        gdb_frame: Optional["gdb.Frame"] = None,
    ):
        self.frame = frame
        self.sp = sp
        self.cfa = cfa  # SP of the caller (= this frame's upper bound on the stack), when known
        self.gdb_type = gdb_type
        self.pc = pc
        self.gdb_frame = gdb_frame


class LibraryMap:
    """Address -> shared-object path, built once from gdb's solib list."""

    def __init__(self) -> None:
        self._starts: List[int] = []
        self._ends: List[int] = []
        self._names: List[str] = []
        self._exe: Optional[str] = None
        self.refresh()

    def refresh(self) -> None:
        rows = []
        try:
            out = gdb.execute("info sharedlibrary", to_string=True)
        except (gdb.error, UnicodeDecodeError):
            # gdb 13 decodes to_string output as strict UTF-8: one library name in the core that is
            # not UTF-8 fails the whole listing; lookup() then asks gdb.solib_name per pc.
            out = ""
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0].startswith("0x") and parts[1].startswith("0x"):
                try:
                    lo, hi = int(parts[0], 16), int(parts[1], 16)
                except ValueError:
                    continue
                rows.append((lo, hi, parts[-1]))
        rows.sort()
        self._starts = [r[0] for r in rows]
        self._ends = [r[1] for r in rows]
        self._names = [r[2] for r in rows]
        try:
            self._exe = gdb.current_progspace().filename
        except Exception:  # noqa: BLE001
            self._exe = None
        self._cache: Dict[int, Optional[str]] = {}
        self.sal_cache: SalCache = {}

    def lookup(self, pc: int) -> Optional[str]:
        if pc in self._cache:
            return self._cache[pc]
        i = bisect.bisect_right(self._starts, pc) - 1
        name: Optional[str] = None
        if i >= 0 and pc < self._ends[i]:
            name = self._names[i]
        else:
            # .text ranges of `info sharedlibrary` miss .plt/.init etc.; ask gdb for the rest.
            try:
                name = gdb.solib_name(pc)
            except Exception:  # noqa: BLE001
                name = None
            if name is None:
                name = self._exe
        self._cache[pc] = name
        return name


#: (pc, function) -> (file, line), kept per run by the run's LibraryMap (``sal_cache``): another core
#: or process in the same gdb session maps other code at the same addresses.  The function is part of
#: the key because an inlined frame and the frame it is inlined into share one pc but not one source
#: line (the outer one's is the call site).
SalCache = Dict[Tuple[int, Optional[str]], Tuple[Optional[str], Optional[int]]]


def _sal(frame: "gdb.Frame", pc: int, name: Optional[str], cache: SalCache) -> Tuple[Optional[str], Optional[int]]:
    key = (pc, name)
    hit = cache.get(key)
    if hit is not None:
        return hit
    file_, line = None, None
    try:
        sal = frame.find_sal()
        if sal is not None and sal.symtab is not None and sal.line:
            file_ = sal.symtab.filename
            line = sal.line
    except gdb.error:
        pass
    cache[key] = (file_, line)
    return file_, line


def _no_python_unwinders() -> bool:
    """True when no Python frame unwinder is registered (globally, per progspace, per objfile)."""
    if getattr(gdb, "frame_unwinders", None):
        return False
    try:
        if gdb.current_progspace().frame_unwinders:
            return False
        return not any(o.frame_unwinders for o in gdb.objfiles())
    except (AttributeError, gdb.error):
        return False


class quick_unwinder_sniffing:
    """Context manager: while no Python frame unwinder is registered, answer gdb's per-frame
    question "does a Python unwinder claim this frame?" with None at once.

    gdb asks it for every frame it unwinds, by calling ``gdb._execute_unwinders``, which lists
    every objfile each time (~6 % of a 200-thread ``hang-dump``).  With no unwinder anywhere its
    answer is always None, so answering None directly changes nothing; when one is registered,
    or gdb has no such function (another gdb version), nothing is replaced.  Restored on exit.
    """

    def __enter__(self) -> "quick_unwinder_sniffing":
        self._saved = getattr(gdb, "_execute_unwinders", None)
        if self._saved is None or not _no_python_unwinders():
            self._saved = None
            return self
        gdb._execute_unwinders = _unclaimed
        return self

    def __exit__(self, *exc) -> None:
        if self._saved is not None:
            gdb._execute_unwinders = self._saved


def _unclaimed(pending_frame) -> None:
    return None


def unwind(libs: LibraryMap, max_frames: int = MAX_FRAMES) -> List[NativeFrame]:
    """Unwind the selected thread, innermost first.  A broken unwind ends the list, never raises."""
    out: List[NativeFrame] = []
    try:
        f = gdb.newest_frame()
    except gdb.error:
        return out
    while f is not None and len(out) < max_frames:
        try:
            pc = f.pc()
            ftype = f.type()
        except gdb.error:
            break
        try:
            name = f.name()
        except gdb.error:
            name = None
        sp = None
        if ftype != gdb.INLINE_FRAME:  # an inline frame shares the SP of the frame it is inlined into
            try:
                sp = int(f.read_register("sp"))
            except (gdb.error, ValueError):
                sp = None
        file_, line = _sal(f, pc, name, libs.sal_cache)
        fr = Frame(
            kind="native",
            function=name,
            file=file_,
            line=line,
            library=libs.lookup(pc),
            address=pc,
            inlined=(ftype == gdb.INLINE_FRAME),
        )
        out.append(NativeFrame(fr, sp, None, ftype, pc, f))
        try:
            f = f.older()
        except gdb.error:
            break
    # Inline frames take the SP of the real frame they sit in (the next older non-inline frame),
    # read once for all of them: register reads are a third of the unwind's cost.
    owner_sp: Optional[int] = None
    for nf in reversed(out):
        if nf.gdb_type == gdb.INLINE_FRAME:
            nf.sp = owner_sp
        else:
            owner_sp = nf.sp
    # The caller's SP bounds each frame's stack area from above: the merge anchors Python frames
    # by stack address inside [sp, cfa).
    for i in range(len(out) - 1):
        out[i].cfa = out[i + 1].sp
    return out


def _unreadable_at(frame: "gdb.Frame") -> Optional[str]:
    """gdb's "Cannot access memory at address 0x..." for the first unreadable stack word at or
    above the frame's SP (the word itself, then each page start up to 16 KiB above: the caller's
    frame lies there), if any."""
    try:
        sp = int(frame.read_register("sp"))
    except (gdb.error, ValueError, RuntimeError):
        return None
    inf = gdb.selected_inferior()
    for addr in [sp] + [(sp & ~0xFFF) + k * 0x1000 for k in range(1, 5)]:
        try:
            inf.read_memory(addr, 8)
        except gdb.MemoryError as e:
            return str(e)
        except (gdb.error, ValueError, RuntimeError):
            return None
    return None


def stop_marker(natives: List[NativeFrame]) -> Optional[Frame]:
    """A marker frame when gdb stopped the unwind because it could not read the stack (a core cut
    short, a stack page not dumped), else None.  Call right after ``unwind``, before another
    thread is selected.  Its note names the address (the analyzer says more for truncated cores).
    """
    if not natives or natives[-1].gdb_frame is None:
        return None
    last = natives[-1].gdb_frame
    try:
        if last.unwind_stop_reason() != gdb.FRAME_UNWIND_MEMORY_ERROR:
            return None
    except (gdb.error, AttributeError, RuntimeError):
        return None
    why = _unreadable_at(last) or "Cannot access memory"
    return Frame(kind="native", function=UNREADABLE_MARKER, marker=True,
                 note="unwind stopped: %s" % why)
