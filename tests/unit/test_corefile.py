"""corefile.py on cores built byte by byte (no gdb): notes, argv from the stack, build-ids,
signal decisions and the one-line errors for files that are not complete cores."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from hanganalyze.corefile import (
    AT_ENTRY,
    AT_EXECFN,
    build_id_from_notes,
    check_executable,
    human_size,
    is_library,
    read_core,
)
from hanganalyze.errors import InputError
from hanganalyze.names import library_version as soname_version

NT_PRSTATUS, NT_PRPSINFO, NT_AUXV, NT_FILE, NT_SIGINFO = 1, 3, 6, 0x46494C45, 0x53494749
EXE_BASE = 0x400000
STACK = 0x7FFD0000
BUILD_ID = bytes(range(1, 21))


def _note(name: bytes, ntype: int, desc: bytes) -> bytes:
    name += b"\0"
    pad = lambda b: b + b"\0" * (-len(b) % 4)  # noqa: E731
    return struct.pack("<III", len(name), len(desc), ntype) + pad(name) + pad(desc)


def _prstatus(tid: int, cursig: int) -> bytes:
    d = bytearray(336)
    struct.pack_into("<h", d, 12, cursig)
    struct.pack_into("<i", d, 32, tid)
    return bytes(d)


def _prpsinfo(pid: int, psargs: bytes) -> bytes:
    return struct.pack("<4B4xQIIiiii16s80s", 0, ord("R"), 0, 0, 0, 0, 0, pid, 1, pid, pid, b"prog", psargs)


def _elf_page_with_build_id() -> bytes:
    """First page of a mapped ELF: header, one PT_NOTE program header, the build-id note."""
    note = _note(b"GNU", 3, BUILD_ID)
    note_off = 64 + 56
    hdr = b"\x7fELF\x02\x01\x01" + b"\0" * 9
    hdr += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, 1, 64, 0, 0)
    ph = struct.pack("<IIQQQQQQ", 4, 4, note_off, note_off, note_off, len(note), len(note), 4)
    page = hdr + ph + note
    return page + b"\0" * (4096 - len(page))


def _stack(argv, env, auxv_pairs):
    """An initial process stack at STACK: argc, argv[], 0, envp[], 0, auxv, then the strings."""
    strings = b""
    str_base = STACK + 0x800
    ptrs = []
    for s in list(argv) + list(env) + ["/opt/app/bin/prog"]:
        ptrs.append(str_base + len(strings))
        strings += s.encode() + b"\0"
    argv_p, env_p, execfn = ptrs[: len(argv)], ptrs[len(argv) : -1], ptrs[-1]
    auxv = [(k, v) for k, v in auxv_pairs] + [(AT_EXECFN, execfn), (0, 0)]
    auxv_bytes = b"".join(struct.pack("<QQ", k, v) for k, v in auxv)
    words = [len(argv)] + argv_p + [0] + env_p + [0]
    head = struct.pack("<%dQ" % len(words), *words) + auxv_bytes
    mem = head + b"\0" * (0x800 - len(head)) + strings
    return mem + b"\0" * (0x1000 - len(mem)), auxv_bytes


def build_core(
    path: Path,
    argv=("prog", "--flag", "two words"),
    cursig=6,
    tids=(100, 101, 102),
    exe_path="/nonexistent/app/prog",
    gcore=False,
    truncate_by=0,
    sparse_gib=0,
) -> Path:
    stack, auxv_bytes = _stack(argv, ["HOME=/root"], [(AT_ENTRY, EXE_BASE + 0x100)])
    notes = b""
    for i, tid in enumerate(tids):
        notes += _note(b"CORE", NT_PRSTATUS, _prstatus(tid, cursig if i == 0 else 0))
        if i == 0:
            notes += _note(b"CORE", NT_PRPSINFO, _prpsinfo(tid, b" ".join(a.encode() for a in argv)))
            siginfo = struct.pack("<iii", 19 if gcore else cursig, 0, 0) + b"\0" * 116
            notes += _note(b"CORE", NT_SIGINFO, siginfo)
            notes += _note(b"CORE", NT_AUXV, auxv_bytes)
    files = [
        (EXE_BASE, EXE_BASE + 0x1000, 0, exe_path),
        (0x7F0000000000, 0x7F0000001000, 0, "/usr/lib/libnccl.so.2.26.5"),
    ]
    nt_file = struct.pack("<QQ", len(files), 4096)
    nt_file += b"".join(struct.pack("<QQQ", a, b, c) for a, b, c, _ in files)
    nt_file += b"".join(p.encode() + b"\0" for *_, p in files)
    notes += _note(b"CORE", NT_FILE, nt_file)
    if gcore:
        notes += _note(b"GDB", 0xFF000000, b"<target/>")
    segs = [(4, 0, notes, 0, 1), (1, 5, _elf_page_with_build_id(), EXE_BASE, 4096), (1, 6, stack, STACK, 4096)]
    phnum = len(segs) + (1 if sparse_gib else 0)
    data_off = 64 + 56 * phnum
    body = b""
    phdrs = b""
    for p_type, flags, blob, vaddr, align in segs:
        off = data_off + len(body)
        memsz = 0 if p_type == 4 else len(blob)
        phdrs += struct.pack("<IIQQQQQQ", p_type, flags, off, vaddr, 0, len(blob), memsz, align)
        body += blob
    big = sparse_gib << 30
    if sparse_gib:  # a huge device-memory-like mapping stored as a hole in the file
        off = data_off + len(body)
        phdrs += struct.pack("<IIQQQQQQ", 1, 6, off, 0x200000000000, 0, big, big, 4096)
    ehdr = b"\x7fELF\x02\x01\x01" + b"\0" * 9
    ehdr += struct.pack("<HHIQQQIHHHHHH", 4, 62, 1, 0, 64, 0, 0, 64, 56, phnum, 64, 0, 0)
    data = ehdr + phdrs + body
    path.write_bytes(data[: len(data) - truncate_by] if truncate_by else data)
    if sparse_gib:
        with open(path, "r+b") as f:
            f.truncate(len(data) + big)
    return path


def test_notes_give_pid_threads_signal_argv_and_build_ids(tmp_path):
    info = read_core(build_core(tmp_path / "core"))
    assert info.pid == 100
    assert info.tids == [100, 101, 102] and info.nthreads == 3
    assert info.signal == "SIGABRT"
    # argv comes from the stack, so an argument with a space survives (psargs would split it)
    assert info.argv == ["prog", "--flag", "two words"]
    assert info.executable == "/nonexistent/app/prog"  # the mapping that holds AT_ENTRY
    exe = info.file("/nonexistent/app/prog")
    assert exe is not None and exe.build_id == BUILD_ID.hex() and not exe.on_disk
    assert info.file("/usr/lib/libnccl.so.2.26.5").build_id is None  # its first page was not dumped


def test_huge_sparse_core_is_read_without_reading_its_memory(tmp_path):
    """GPU cores are hundreds of GB and sparse: only headers, notes and a few pages are read."""
    import resource
    import time

    core = build_core(tmp_path / "core", sparse_gib=512)
    assert core.stat().st_size > 512 << 30
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    info = read_core(core)
    assert time.monotonic() - t0 < 5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0 < 64 * 1024  # KiB: < 64 MiB more
    assert info.argv == ["prog", "--flag", "two words"] and info.nthreads == 3


def test_gcore_of_running_process_has_no_signal(tmp_path):
    info = read_core(build_core(tmp_path / "core", cursig=0, gcore=True))
    assert info.written_by_gdb
    assert info.raw_signo == 19 and info.signal is None


def test_missing_executable_is_one_clear_error(tmp_path):
    info = read_core(build_core(tmp_path / "core"))
    with pytest.raises(InputError, match=r"executable of core .*/nonexistent/app/prog, is gone.*--exe"):
        check_executable(info, None)


def test_exe_override_with_other_build_id_warns(tmp_path):
    info = read_core(build_core(tmp_path / "core"))
    other = Path("/bin/true")
    chosen, warnings = check_executable(info, other)
    assert chosen == str(other)
    assert any("build-id" in w and BUILD_ID.hex() in w for w in warnings), warnings
    # the executable the core ran is named; it is not here, so --exe stays and is doubted
    assert any(w.startswith("the core was made by /nonexistent/app/prog (build-id %s); --exe names /bin/true"
                            % BUILD_ID.hex()) and w.endswith("(/nonexistent/app/prog is not on this machine)")
               for w in warnings), warnings


def test_core_cut_inside_its_memory_is_read(tmp_path):
    """The notes are there: the core is read, and says how much of its memory is missing."""
    full = build_core(tmp_path / "full").stat().st_size
    info = read_core(build_core(tmp_path / "core", truncate_by=100))
    assert info.truncated and (info.file_size, info.expected_size) == (full - 100, full)
    assert info.nthreads == 3 and info.signal == "SIGABRT"
    assert info.argv == ["prog", "--flag", "two", "words"]  # the stack page is cut: psargs, split
    assert info.missing(STACK + 4096 - 1) and not info.missing(STACK) and not info.missing(EXE_BASE)
    assert info.missing_ranges() == [(STACK + 4096 - 100, STACK + 4096)]
    assert info.truncation_warning() == (
        "core truncated: %s of %s present (%d%%); memory beyond that is missing"
        % (human_size(full - 100), human_size(full), 100 * (full - 100) // full))
    assert not read_core(tmp_path / "full").truncated


@pytest.mark.parametrize("cut, where", [(40, "inside its ELF header"), (64 + 56, "inside its program headers"),
                                        (64 + 56 * 3 + 20, "inside its notes")])
def test_core_cut_inside_its_headers_or_notes_is_incomplete(tmp_path, cut, where):
    data = build_core(tmp_path / "full").read_bytes()
    p = tmp_path / "core"
    p.write_bytes(data[:cut])
    with pytest.raises(InputError, match=r"is incomplete: cut %s \(.*still being written, or the disk filled up\)"
                       % where):
        read_core(p)


def test_human_size():
    assert [human_size(n) for n in (999, 1000, 1_234_567, 4 * 10**9, 322 * 10**9, 2 * 10**12)] == [
        "999 B", "1.0 kB", "1.2 MB", "4.0 GB", "322.0 GB", "2.0 TB"]


@pytest.mark.parametrize(
    "path, kind",
    [("/bin/true", "an ELF executable"), ("/usr/lib/x86_64-linux-gnu/libc.so.6", "an ELF shared object")],
)
def test_other_elf_files_are_not_cores(path, kind):
    if not Path(path).exists():
        pytest.skip("%s not on this system" % path)
    with pytest.raises(InputError, match="is %s, not a core" % kind):
        read_core(path)


def test_not_elf_and_garbage_header(tmp_path):
    p = tmp_path / "x"
    p.write_bytes(b"\x00\x01binary" * 100)
    with pytest.raises(InputError, match="not an ELF core"):
        read_core(p)
    p.write_bytes(b"\x7fELF" + b"\xff" * 10)
    with pytest.raises(InputError):
        read_core(p)


def test_build_id_note_parser_skips_other_notes():
    notes = _note(b"GNU", 1, b"\0" * 16) + _note(b"GNU", 3, BUILD_ID)
    assert build_id_from_notes(notes) == BUILD_ID.hex()
    assert build_id_from_notes(_note(b"XYZ", 3, BUILD_ID)) is None


@pytest.mark.parametrize(
    "name, version",
    [
        ("/usr/lib/libnccl.so.2.26.5", "2.26.5"),
        ("libstdc++.so.6.0.30", "6.0.30"),
        ("libfoo-1.2.3.so", "1.2.3"),
        ("libtorch_cuda.so", None),
    ],
)
def test_soname_version(name, version):
    assert soname_version(name) == version
    assert is_library(name)


def test_not_libraries():
    assert not is_library("/usr/bin/python3.11")
    assert not is_library("/data/model.safetensors")


def test_frame_libraries_take_the_mapped_spelling(tmp_path):
    """gdb names libc by the loader's path (/lib/...), the mappings by /usr/lib/...: one spelling."""
    from hanganalyze.acquire.procfacts import libraries_from_files, normalize_frame_libraries
    from hanganalyze.corefile import MappedFile
    from hanganalyze_gdbext.model import Frame, Process, Thread

    real = tmp_path / "usr" / "lib"
    real.mkdir(parents=True)
    (real / "libx.so.1.2").write_bytes(b"\x7fELF")
    (tmp_path / "lib").symlink_to(real)
    mapped = str(real / "libx.so.1.2")
    proc = Process(source="core")
    proc.threads.append(
        Thread(
            tid=1,
            frames=[
                Frame(kind="native", function="f", library=str(tmp_path / "lib" / "libx.so.1.2")),
                Frame(kind="native", function="g", library="/elsewhere/liby.so"),
                Frame(kind="python", function="h", file="x.py"),
            ],
        )
    )
    files = [MappedFile(path=mapped, base=0x1000, build_id="ab" * 20), MappedFile(path="/usr/bin/app", base=0)]
    normalize_frame_libraries(proc, files)
    assert [f.library for f in proc.threads[0].frames] == [mapped, "/elsewhere/liby.so", None]
    libs = libraries_from_files(files)
    assert [(lib.path, lib.build_id, lib.version) for lib in libs] == [(mapped, "ab" * 20, "1.2")]
