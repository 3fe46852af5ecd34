"""The direct reader unwinds through a library without unwind tables (issue 21.3), as on real GPU
jobs where the main thread spins inside stripped libcuda.so: the validated frame-pointer chain
(fixture built with frame pointers) or stack scan (built without) finds the callers up to main,
each marked, and the thread says nothing stopped early.  Live (--pid) and gcore'd cores."""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import fixture_binary, gcore, run_hanganalyze, start_hung  # noqa: E402

from hanganalyze.direct.stackscan import Heuristics, Regions, call_before  # noqa: E402
from hanganalyze.direct.unwind import ModuleMap, unwind  # noqa: E402

CASES = [("fp", "spin"), ("fp", "read"), ("nofp", "spin"), ("nofp", "read")]
HOW = {"fp": "fp", "nofp": "scan"}


def _exe(build: str) -> Path:
    return fixture_binary("nocfi_%s/nocfi_main" % build)


def _main_thread(args) -> dict:
    res = run_hanganalyze(list(args) + ["--format", "json"], timeout=120)
    assert res.returncode in (0, 3, 5, 6), res.stderr
    proc = json.loads(res.stdout)["processes"][0]
    return next(t for t in proc["threads"] if t["tid"] == proc["pid"])


@pytest.fixture(scope="module", params=CASES, ids=["-".join(c) for c in CASES])
def hung(request, tmp_path_factory):
    build, mode = request.param
    h = start_hung([str(_exe(build)), mode])
    try:
        yield build, mode, h, gcore(h.pid, tmp_path_factory.mktemp("nocfi"))
    finally:
        h.kill()


def _check(thread: dict, build: str, mode: str) -> None:
    frames = [f for f in thread["frames"] if not f.get("marker")]
    names = [f.get("function") for f in frames]
    assert names[-2:] == ["enter_library", "main"], names
    assert "nocfi_wait" in names, names
    lib = [f for f in frames if (f.get("library") or "").endswith("libnocfi.so")]
    # innermost library frame, two unnamed hidden functions, then the exported entry point
    assert len(lib) == 4, names
    if mode == "read":
        assert frames[0]["library"] and "libc" in frames[0]["library"], frames[0]
    # the first library frame was found by CFI (libc's) or is the innermost; its callers by the heuristic
    marked = [f.get("unwind") for f in lib[1:]] + [frames[-2].get("unwind")]
    assert marked == [HOW[build]] * 4, (marked, names)
    assert frames[-1].get("unwind") is None  # main: found by the executable's CFI again
    assert not thread.get("unwind_stop"), thread.get("unwind_stop")


def test_live(hung):
    build, mode, h, _core = hung
    _check(_main_thread(["--pid", str(h.pid)]), build, mode)


def test_core(hung):
    build, mode, h, core = hung
    _check(_main_thread([str(core), "--exe", str(_exe(build))]), build, mode)


def test_text_marks_heuristic_frames(hung):
    build, _mode, _h, core = hung
    res = run_hanganalyze([str(core), "--exe", str(_exe(build)), "--format", "text"], timeout=120)
    out = res.stdout.decode() if isinstance(res.stdout, bytes) else res.stdout
    want = "(heuristic: %s)" % ("frame pointer" if build == "fp" else "stack scan")
    assert sum(want in line for line in out.splitlines()) == 4, out
    assert "unwind stopped early" not in out


# ------------------------------------------------------------------------------ validation


def _objdump_calls(lib: Path):
    """(return addresses after calls, addresses after other instructions) of the library's code."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True,
                         check=True).stdout
    insns = []
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0].strip().endswith(":"):
            insns.append((int(parts[0].strip()[:-1], 16), parts[1].split()[0] if parts[1].split() else ""))
    after_call, after_other = [], []
    for (_addr, op), (nxt, _) in zip(insns, insns[1:]):
        (after_call if op.startswith("call") else after_other).append(nxt)
    return after_call, after_other


def test_call_decoder_on_real_code():
    lib = _exe("nofp").parent / "libnocfi.so"
    for path in (lib, _exe("nofp"), Path("/usr/lib/x86_64-linux-gnu/libc.so.6")):
        if not path.exists():
            continue
        data = path.read_bytes()
        img_map = ModuleMap([(0x10000000, 0x10000000 + len(data) + 0x10000, 0, str(path))])
        mod = img_map.modules[0]
        calls, others = _objdump_calls(path)

        def code(a, mod=mod):
            return mod.image.read_vaddr(a - 9, 9)

        calls = [a for a in calls if code(a)]  # not the first bytes of a section
        others = [a for a in others if code(a)]
        assert calls and all(call_before(code(a)) for a in calls), path
        wrong = sum(1 for a in others if call_before(code(a)))
        assert wrong <= len(others) // 50, (path, wrong, len(others))


def test_garbage_stack_gives_no_frames():
    """Random words, code addresses not after a call, and a frame pointer outside the stack:
    the heuristics find nothing, and the unwind says why it stopped."""
    lib = _exe("nofp").parent / "libnocfi.so"
    base = 0x7F0000000000
    modules = ModuleMap([(base, base + 0x5000, 0, str(lib))])
    img = modules.modules[0].image
    _calls, others = _objdump_calls(lib)
    text = [base + a for a in others if img.read_vaddr(a - 9, 9) and not call_before(img.read_vaddr(a - 9, 9))]
    rng = random.Random(21)
    stack_lo, stack_hi = 0x7FFD00000000, 0x7FFD00010000
    words = [rng.getrandbits(64) for _ in range(4096)]
    words[::7] = [rng.choice(text) for _ in words[::7]]  # code pointers that are not return addresses
    words[1::11] = [stack_lo + rng.randrange(0, 0x10000, 8) for _ in words[1::11]]  # stack pointers
    stack = b"".join(struct.pack("<Q", w) for w in words[: (stack_hi - stack_lo) // 8])
    regions = Regions([(base, base + 0x2000, False), (base + 0x1000, base + 0x2000, True),
                       (stack_lo, stack_hi, False)])

    def read(addr, size):
        if base <= addr and addr + size <= base + 0x5000:
            return img.read_vaddr(addr - base, size)
        if stack_lo <= addr and addr + size <= stack_hi:
            return stack[addr - stack_lo: addr - stack_lo + size]
        return None

    pc = text[len(text) // 2]
    for rbp in (0, stack_hi + 0x100, stack_lo + 0x800, stack_lo + 0x804, rng.getrandbits(64)):
        regs = [None] * 17
        regs[16], regs[7], regs[6] = pc, stack_lo + 0x200, rbp
        heur = Heuristics(read, regions, modules.find, modules.executable)
        assert heur.step(regs) == (None, None), hex(rbp)
        frames = unwind(regs, modules, read, regions=regions)
        assert len(frames) == 1 and frames[0].how is None, [hex(f.pc) for f in frames]
        assert "no CFI for pc" in (frames[0].gave_up or "") and "libnocfi.so" in frames[0].gave_up
    assert os.path.exists(lib)
