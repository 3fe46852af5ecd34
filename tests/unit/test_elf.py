"""hanganalyze.elf, the one ELF reader, against pyelftools (an independent reader) on real files,
and on notes built byte by byte."""

from __future__ import annotations

import os
import struct
import sys

import pytest

from hanganalyze import elf

FILES = [p for p in (sys.executable, "/usr/lib/x86_64-linux-gnu/libc.so.6", "/bin/true") if os.path.isfile(p)]


@pytest.mark.parametrize("path", FILES)
def test_headers_sections_and_build_id_agree_with_pyelftools(path):
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as fh:
        ref = ELFFile(fh)
        read = elf.file_reader(fh.fileno())
        hdr = elf.parse_header(read(0, 64))
        assert (hdr.bits, hdr.little, hdr.phnum, hdr.shnum) == (ref.elfclass, ref.little_endian,
                                                               ref.num_segments(), ref.num_sections())
        phdrs = elf.read_phdrs(hdr, read)
        assert [(p.offset, p.vaddr, p.filesz, p.memsz) for p in phdrs] == [
            (s["p_offset"], s["p_vaddr"], s["p_filesz"], s["p_memsz"]) for s in ref.iter_segments()]
        assert [(s.name, s.offset, s.size) for s in elf.read_shdrs(hdr, read)] == [
            (s.name, s["sh_offset"], s["sh_size"]) for s in ref.iter_sections()]
        want = None
        for sec in ref.iter_sections():
            if sec["sh_type"] == "SHT_NOTE":
                for note in sec.iter_notes():
                    if note["n_type"] == "NT_GNU_BUILD_ID":
                        want = want or note["n_desc"]
        first = next(s for s in ref.iter_segments() if s["p_type"] == "PT_LOAD")
    assert elf.build_id_of_file(path) == want
    assert elf.load_vaddr(path) == (first["p_vaddr"] - first["p_offset"]) & ~0xFFF


def test_magic_and_bad_headers(tmp_path):
    assert elf.is_elf(b"\x7fELF\x02") and not elf.is_elf(b"\x7fEL") and not elf.is_elf(b"MZ\x90\x00")
    p = tmp_path / "x"
    p.write_bytes(b"\x7fELF" + b"\xff" * 60)
    assert elf.is_elf_file(p) and not elf.is_elf_file(tmp_path / "absent")
    with pytest.raises(elf.ElfError, match="class"):
        elf.parse_header(p.read_bytes())
    assert elf.build_id_of_file(str(p)) is None and elf.load_vaddr(str(p)) is None


def _note(name: bytes, ntype: int, desc: bytes) -> bytes:
    name += b"\0"
    pad = lambda b: b + b"\0" * (-len(b) % 4)  # noqa: E731
    return struct.pack("<III", len(name), len(desc), ntype) + pad(name) + pad(desc)


def test_core_notes_decode():
    st = bytearray(336)
    struct.pack_into("<h", st, 12, 6)
    struct.pack_into("<i", st, 32, 4242)
    struct.pack_into("<Q", st, 112 + 16 * 8, 0xDEADBEEF)  # rip is register 16
    files = struct.pack("<QQ", 1, 4096) + struct.pack("<QQQ", 0x1000, 0x3000, 2) + b"/lib/x.so\0"
    data = _note(b"CORE", elf.NT_PRSTATUS, bytes(st)) + _note(b"CORE", elf.NT_FILE, files)
    notes = list(elf.iter_notes(data))
    assert [(n, t) for n, t, _ in notes] == [(b"CORE", elf.NT_PRSTATUS), (b"CORE", elf.NT_FILE)]
    pr = elf.prstatus(notes[0][2])
    assert pr is not None and (pr.tid, pr.cursig, pr.regs[16]) == (4242, 6, 0xDEADBEEF)
    assert elf.nt_file(notes[1][2]) == [(0x1000, 0x3000, 8192, "/lib/x.so")]
    with pytest.raises(ValueError, match="runs past"):
        list(elf.iter_notes(data[:-8]))
    assert list(elf.iter_notes(data[:-8], strict=False))[:1] == notes[:1]


def test_load_map_reads_only_what_the_file_holds():
    m = elf.LoadMap([(0x2000, 0x2000, 100, 0x1000), (0x1000, 0x1000, 0, 0x1000)])
    assert m.segment(0x3800) == (0x2000, 0x2000, 100, 0x1000)
    assert m.file_offset(0x2010, 16) == 116
    assert m.file_offset(0x2FF8, 16) is None  # past filesz: memory the file does not hold
    assert m.segment(0x5000) is None and m.file_offset(0x10, 1) is None and m.file_offset(0x1010, 1) == 0x10
