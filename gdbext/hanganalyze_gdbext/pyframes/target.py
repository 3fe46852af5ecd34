"""What the CPython walker and the lock reader need from whoever holds the process.

Two readers provide it: gdb's inferior (``gdbtarget.GdbTarget``, inside gdb, live or core) and
the analyzer's direct reader of cores and ``/proc`` (``hanganalyze.direct``), which answers a
live PyTorch rank in a fraction of the time gdb needs to load 1 GB of libraries.  Keeping one
small interface means one walker and one lock reader serve both, so the fast path can never
disagree with the gdb path about what a frame or a lock owner is.

Standard library only, no ``gdb`` import: the analyzer imports this module directly.
"""

from typing import Dict, List, Optional


class ProcessTarget:
    """Read-only view of one stopped process (or core).  Every method may be slow on the first
    call and is expected to cache; none may call into the inferior.

    Subclasses override what they can answer; the defaults say "not known", which the walkers
    treat as missing facts (a note), never as an error."""

    #: "core" or "live"
    kind = "live"

    def read_memory(self, addr: int, size: int) -> bytes:
        """``size`` bytes at ``addr``; raises any exception when (part of) the range is unreadable."""
        raise NotImplementedError

    def symbol_address(self, name: str) -> Optional[int]:
        """Relocated address of an ELF symbol (data or function, ``.symtab`` or ``.dynsym``)."""
        return None

    def section_address(self, section: str) -> Optional[int]:
        """Relocated start of the first loaded object's section of that name (e.g. ``.PyRuntime``)."""
        return None

    def sections(self, names) -> List[tuple]:
        """``(start, end, object path, section)`` for the named sections of every loaded object."""
        return []

    def object_files(self) -> List[str]:
        """Paths of the executable (first) and every mapped shared object."""
        return []

    def thread_handles(self) -> Dict[int, int]:
        """``{lwp: pthread_t}`` for every thread whose pthread_t is known."""
        return {}

    def lwp_of_handle(self, handle: int) -> Optional[int]:
        """LWP of a pthread_t that ``thread_handles`` did not list (libthread_db's lookup)."""
        return None

    def lwps(self) -> List[int]:
        """Every thread of the process."""
        return list(self.thread_handles())

    def symbol_at(self, addr: int) -> Optional[str]:
        """``"name"`` or ``"name+off"`` of the ELF symbol covering a data address."""
        return None

    def dwarf_offset(self, expr: str) -> Optional[int]:
        """Value of a C offset expression from CPython's DWARF (``&((T*)0)->field``), None without
        DWARF types.  Only gdb answers this; other readers trust ``_Py_DebugOffsets`` / tables."""
        return None

    def python_has_dwarf(self) -> Optional[bool]:
        """Whether CPython's DWARF is there (None: ask ``has_type``, as gdb does)."""
        return None

    def has_type(self, name: str) -> bool:
        """Whether DWARF describes this type (gdb only)."""
        return False


class FrameView:
    """One native frame as the lock reader sees it: registers as unwound at that frame, and
    debug-info arguments where DWARF has them.  Every method answers None when it cannot tell."""

    def reg(self, name: str) -> Optional[int]:
        """Register ``name`` ("rdi", "rbx", "sp"...) as unwound at this frame."""
        return None

    def arg(self, names) -> Optional[int]:
        """The first of these arguments/locals that DWARF describes: its value, or its address for
        a struct."""
        return None

    def var_field(self, var: str, field: str) -> Optional[int]:
        """``var->field`` from DWARF (e.g. ``self->ident`` of ``ThreadHandle_join``)."""
        return None
