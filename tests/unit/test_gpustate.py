"""GPU state inputs (issue 34): nvidia-smi -q, the nvidia-smi table and kernel-log Xid lines read
from real pasted samples (tests/data/gpustate/README.md), joined to ranks by pid, the gpu-* rules
(each on a real sample, and a near miss that must not fire) and the report's GPU parts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import pytest
from tests.helpers import run_hanganalyze

from hanganalyze import pipeline
from hanganalyze.acquire import gpustate
from hanganalyze.acquire.inputs import _from_text
from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze import gpurules
from hanganalyze.analyze.gpujoin import BY_LOCAL_RANK, BY_PID, gpus_of, xid_table
from hanganalyze.render.gpuview import gpu_cell, gpu_lines
from hanganalyze.render.markdown import render_markdown
from hanganalyze.render.text import render_text
from hanganalyze_gdbext.model import DistIdentity, Finding, Snapshot
from hanganalyze_gdbext.model.gpustate import GpuProcess, GpuState, bus_key

DATA = Path(__file__).resolve().parent.parent / "data" / "gpustate"
JOB = Path(__file__).resolve().parent.parent / "data" / "job"


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _state(name: str) -> GpuState:
    return gpustate.read_text(_text(name))


# ---- recognised as an input of its own, and nothing else claimed -------------------------------

def test_every_sample_is_claimed_and_near_misses_are_not():
    names = sorted(p.name for p in DATA.glob("*.txt"))
    assert len(names) >= 15
    for name in names:
        claimed = not name.startswith("near_miss") or name.startswith("near_miss_err")  # ERR! tables are GPU state
        assert gpustate.looks_like(_text(name)) is claimed, name


@pytest.mark.parametrize("path", [JOB / "fstrag.rank0.pyspy.txt", JOB / "fstrag.rank1.pyspy.txt"])
def test_stack_dumps_are_not_gpu_state(path):
    text = path.read_text(encoding="utf-8")
    assert not gpustate.looks_like(text)
    # a stack dump with an nvidia-smi table pasted under it stays the stack dump's
    assert not gpustate.looks_like(text + "\n" + _text("smi_table_nccl_1967_idle.txt"))


def test_garbage_is_not_claimed():
    for text in ("", "hello\nworld\n", "Xid is a word\n", "| a | b |\n| c | d |\n",
                 "    Name : value\n    Other : thing\n"):
        assert not gpustate.looks_like(text), text


def test_input_registry_reads_gpu_state_as_its_own_input():
    snap = _from_text(_text("xid_nvsentinel_155_xid79.txt"), None)
    assert snap.processes == [] and snap.gpu is not None and snap.gpu.xids[0].xid == 79
    # a stack text is still a stack
    snap = _from_text((JOB / "fstrag.rank0.pyspy.txt").read_text(), None)
    assert snap.gpu is None and snap.processes[0].pid == 1088


# ---- the parsers' fields ---------------------------------------------------------------------

def test_smi_q_header_block():
    st = _state("smi_q_nvidia_docker_954.txt")
    assert st.sources == ["nvidia-smi -q"]
    (g,) = st.gpus
    assert (g.index, g.bus_id, g.product) == (0, "00000000:01:00.0", "GeForce GTX 1080")


def test_smi_q_excerpts():
    (g,) = _state("smi_q_k8s_vgpu_25_clocks.txt").gpus
    assert (g.util_gpu, g.util_mem, g.mem_used_mib, g.mem_total_mib) == (0, 0, 0, 12066)
    assert g.throttle == ["Idle"]  # the one reason "Active"
    (g,) = _state("smi_q_k8s_vgpu_25_pci.txt").gpus
    assert g.bus_id == "00000000:82:00.0" and g.index is None  # an excerpt: no index proven


def test_smi_q_processes_ecc_remap_from_a_full_block():
    # the -q layout of a driver >= 470 (keys as nvidia-smi writes them), to check the sections
    text = """==============NVSMI LOG==============

Attached GPUs                             : 1
GPU 00000000:3B:00.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    PCI
        Bus Id                            : 00000000:3B:00.0
        Tx Throughput                     : 0 KB/s
        Replays Since Reset               : 3
    Clocks Event Reasons
        Idle                              : Not Active
        SW Power Cap                      : Active
    FB Memory Usage
        Total                             : 81920 MiB
        Used                              : 40000 MiB
    Utilization
        Gpu                               : 100 %
        Memory                            : 40 %
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 0
            DRAM Correctable              : 5
            DRAM Uncorrectable            : 2
        Aggregate
            DRAM Uncorrectable            : 7
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 2
        Pending                           : Yes
        Remapping Failure Occurred        : No
    Processes
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : 4242
            Type                          : C
            Name                          : python
            Used GPU Memory               : 39000 MiB
"""
    (g,) = gpustate.read_text(text).gpus
    assert (g.index, g.util_gpu, g.mem_used_mib, g.pcie_replays) == (0, 100, 40000, 3)
    assert g.throttle == ["SW Power Cap"]
    assert (g.ecc_uncorrected_volatile, g.ecc_uncorrected_aggregate) == (2, 7)
    assert (g.remap_pending, g.remap_failure) == (True, False)
    assert [(p.pid, p.name, p.used_mib, p.type) for p in g.processes] == [(4242, "python", 39000, "C")]


def test_smi_tables():
    st = _state("smi_table_nccl_1967_idle.txt")
    assert [(g.index, g.bus_id, g.util_gpu, g.mem_used_mib, g.mem_total_mib) for g in st.gpus] == [
        (0, "00000000:18:00.0", 0, 4, 81559), (1, "00000000:2A:00.0", 0, 112, 81559)]
    st = _state("smi_table_dcgm_83_busy.txt")
    by = {g.index: g for g in st.gpus}
    assert (by[6].util_gpu, by[7].util_gpu) == (91, 100)
    assert [(p.pid, p.name, p.used_mib) for p in by[0].processes] == [(3518784, "python3", 452)]
    st = _state("smi_table_nvitop_152_procs.txt")
    on = {g.index: sorted(p.pid for p in g.processes) for g in st.gpus}
    assert on == {0: [10734, 58661], 1: [10734], 2: [18243, 22720]}
    st = _state("smi_table_cbio_39_na.txt")  # driver 325: MB, utilization N/A
    assert [(g.index, g.util_gpu, g.mem_used_mib) for g in st.gpus] == [(0, None, 14), (1, None, 14), (2, None, 14)]
    (g,) = _state("smi_table_diamorphine_13.txt").gpus
    assert (g.product, g.util_gpu, g.mem_used_mib) == ("Tesla V100-DGXS...", 0, 449)


def test_err_in_one_reading_is_not_a_lost_gpu():
    (g,) = _state("near_miss_err_power_azhpc_77.txt").gpus
    assert (g.index, g.lost, g.err_fields, g.util_gpu, g.mem_used_mib) == (1, None, ["power"], 0, 593)
    st = _state("near_miss_err_fan_exporter_393.txt")
    by = {g.index: g for g in st.gpus}
    assert (by[14].lost, by[14].err_fields, by[14].util_gpu) == (None, ["fan"], 93) and by[13].err_fields == []
    assert gpurules.gpu_fallen_off_bus(Snapshot(gpu=st)) == []
    assert any("ERR! in the fan reading" in ln for ln in gpu_lines(Snapshot(gpu=st)))
    # ERR! where the memory or utilization is read: the GPU cannot be read
    row = "| N/A   29C    P0   70W / 250W |      ERR!            |     ERR!     Default |"
    lost = gpustate.read_text(_text("near_miss_err_power_azhpc_77.txt").replace(
        "| N/A   29C    P0   ERR! / 250W |    593MiB / 16160MiB |      0%      Default |", row))
    assert lost.gpus[0].lost == "ERR!"
    assert gpurules.gpu_fallen_off_bus(Snapshot(gpu=lost))[0].signature == "gpu-fallen-off-bus"


def test_lost_gpus():
    (g,) = _state("smi_lost_darknet_86.txt").gpus
    assert (g.bus_id, g.lost) == ("0000:03:00.0", "GPU is lost")
    (g,) = _state("smi_lost_returnn_1486.txt").gpus  # after a shell prompt line
    assert (bus_key(g.bus_id), g.lost) == ("0000:03:00", "Unknown Error")


def test_xid_lines_in_each_log_format():
    st = _state("xid_vllm_5901_dmesg.txt")
    assert [e.xid for e in st.xids] == [13] * 6 and st.xids[0].time == "93297.027938"
    assert st.xids[0].pid is None and st.xids[0].bus_id == "0000:43:00"
    st = _state("xid_gpud_46_dmesg_T.txt")  # dmesg -T, a non-Xid line before
    assert [e.xid for e in st.xids] == [13, 13, 13, 109]
    last = st.xids[-1]
    assert (last.pid, last.name, last.time) == (1797828, "pt_main_thread", "Fri Aug 30 11:43:14 2024")
    assert st.xids[-1].text.startswith("Ch 00000008, errorString CTX SWITCH TIMEOUT")
    st = _state("xid_ogkm_1150_journal.txt")
    assert {e.pid for e in st.xids} == {1818990, 1818992, 1818989, 1818987} and len(st.xids) == 7
    st = _state("xid_dxvk_1027_dmesg.txt")
    assert [e.xid for e in st.xids] == [31, 13, 13, 13, 13, 32]
    st = _state("xid_nvsentinel_155_fallen.txt")  # no Xid line: the driver's message is Xid 79
    assert [(e.xid, bus_key(e.bus_id)) for e in st.xids] == [(79, "0000:b3:00")]


def test_bus_keys_join_smi_and_xid_spellings():
    assert bus_key("00000000:3B:00.0") == bus_key("0000:3b:00") == "0000:3b:00"
    assert bus_key("0019:01:00") == "0019:01:00" and bus_key(None) is None and bus_key("junk") is None


def test_xid_table_rows():
    t = xid_table()
    assert t[79].klass == "lost" and t[48].klass == "ecc" and t[13].klass == "app"
    for x in (13, 31, 43, 45, 48, 63, 64, 74, 79, 92, 94, 95, 119):
        assert t[x].meaning and t[x].action, x


def test_merge_keeps_samples():
    one = _state("smi_table_nccl_1967_idle.txt")
    two = _state("smi_table_nccl_1967_idle.txt")
    two.gpus[0].util_gpu = 97
    m = gpustate.merge([one, two])
    assert m.samples == 2 and m.gpus[0].util_samples == [0, 97] and m.gpus[0].util_gpu == 97
    assert m.gpus[1].util_samples == [0, 0]


# ---- rules: real sample matches, near miss does not ----------------------------------------------

def _ids(snap: Snapshot) -> List[str]:
    return [f.signature for f in snap.findings]


def _analyzed(snap: Snapshot) -> Snapshot:
    return pipeline.analyze(snap, pipeline.load_signature_db())


def test_fallen_off_bus_from_xid79_and_lost_gpu():
    snap = _analyzed(_from_text(_text("xid_nvsentinel_155_xid79.txt"), None))
    f = snap.findings[0]
    assert f.signature == "gpu-fallen-off-bus" and f.severity == "crash" and "0000:44:00" in f.summary
    snap = _analyzed(_from_text(_text("smi_lost_darknet_86.txt"), None))
    assert _ids(snap)[0] == "gpu-fallen-off-bus" and "GPU is lost" in snap.findings[0].summary


def test_fallen_off_bus_near_miss():
    # AER lines and a healthy table: no GPU is lost
    assert gpurules.gpu_fallen_off_bus(Snapshot(gpu=_state("smi_table_nccl_1967_idle.txt"))) == []
    assert gpurules.gpu_fallen_off_bus(Snapshot(gpu=_state("xid_vllm_5901_dmesg.txt"))) == []


def test_ecc_errors_from_xid94_and_near_miss():
    found = gpurules.gpu_ecc_errors(Snapshot(gpu=_state("xid_gpud_1174_kmsg.txt")))
    assert len(found) == 1 and "0000:9b:00" in found[0].summary and "Contained ECC" in found[0].summary
    assert gpurules.gpu_ecc_errors(Snapshot(gpu=_state("xid_vllm_5901_dmesg.txt"))) == []


def test_other_xids_with_meaning_and_action():
    found = gpurules.gpu_xid(Snapshot(gpu=_state("xid_dxvk_1027_dmesg.txt")))
    (f,) = found
    assert f.title == "Xid 31, 13, 32 on the GPU at PCI 0000:01:00"
    assert "Xid 13 x4" in f.summary and "page fault" in f.summary and len(f.fix) == 3
    assert gpurules.gpu_xid(Snapshot(gpu=_state("xid_nvsentinel_155_xid79.txt"))) == []  # 79 is its own rule


def _rank_stack(name: str, pid: int):
    """A real rank's stack (tests/data/job) with its pid rewritten to ``pid``: the GPU samples and
    the stacks were not captured together, so the join is made here."""
    text = (JOB / name).read_text(encoding="utf-8")
    old = text.split(":", 1)[0].split()[1]  # "Process 1088: ..."
    proc = parse_text(text.replace(old, str(pid)), None).processes[0]
    return proc


def test_xid_names_the_rank_by_pid():
    proc = _rank_stack("fstrag.rank0.pyspy.txt", 1818990)
    proc.rank = 0
    snap = Snapshot(processes=[proc], gpu=_state("xid_ogkm_1150_journal.txt"))
    by_bus = {f.title: f for f in gpurules.gpu_xid(snap)}
    f = next(f for k, f in by_bus.items() if "dc:00" in k)
    assert f.ranks == [0] and "rank 0 ran on it" in f.summary and "caused by previous Xid 149" in f.evidence[-1].text
    others = [f for k, f in by_bus.items() if "dc:00" not in k]
    assert others and all(f.ranks == [] for f in others)


def test_busy_host_waits_real_table_and_rank():
    snap = Snapshot(processes=[_rank_stack("fstrag.rank0.pyspy.txt", 3518784)],
                    gpu=_state("smi_table_dcgm_83_busy.txt"))
    # near miss: the table puts the pid on GPU 0, whose row (utilization) is not in the paste
    assert gpus_of(snap)[0][0].how == BY_PID and gpus_of(snap)[0][0].gpu.util_gpu is None
    assert gpurules.gpu_busy_host_waits(snap) == []
    # the pid on GPU 7 (100 %): the host waits in the device sync while its GPU is busy
    g7 = next(g for g in snap.gpu.gpus if g.index == 7)
    g7.processes = [GpuProcess(pid=3518784, name="python3", used_mib=452)]
    snap.gpu.gpus = [g for g in snap.gpu.gpus if g.index != 0]
    (f,) = gpurules.gpu_busy_host_waits(snap)
    assert f.severity == "info" and "GPU 7" in f.summary and "one instant" in f.summary and f.confidence == 0.5
    # several samples that agree: said so, more confidence
    g7.util_samples = [100, 99, 100]
    (f,) = gpurules.gpu_busy_host_waits(snap)
    assert "in each of 3 nvidia-smi samples" in f.summary and "one instant" not in f.summary and f.confidence == 0.8


def test_busy_host_waits_needs_a_waiting_host():
    proc = _rank_stack("fstrag.rank1.pyspy.txt", 3518784)  # rank 1 sleeps in load_next_batch: not a wait
    gpu = _state("smi_table_dcgm_83_busy.txt")
    next(g for g in gpu.gpus if g.index == 7).processes = [GpuProcess(pid=3518784)]
    gpu.gpus = [g for g in gpu.gpus if g.index != 0]
    assert gpurules.gpu_busy_host_waits(Snapshot(processes=[proc], gpu=gpu)) == []


def _two_ranks(idle_util, busy_util, join_second=True, samples=3):
    """Rank 0 waits in the collective on a busy GPU, rank 1 sleeps elsewhere; ``samples`` readings of
    each GPU's utilization, all alike (NVML's history or several nvidia-smi samples)."""
    r0 = _rank_stack("fstrag.rank0.pyspy.txt", 1088)  # waits in the device sync after all_reduce
    r1 = _rank_stack("fstrag.rank1.pyspy.txt", 1089)  # sleeps in load_next_batch: never reached it
    r0.rank, r1.rank = 0, 1
    busy = _state("smi_table_dcgm_83_busy.txt")
    idle = _state("smi_table_nccl_1967_idle.txt")
    g_busy = next(g for g in busy.gpus if g.index == 7)
    g_idle = idle.gpus[0]
    g_busy.util_gpu, g_idle.util_gpu = busy_util, idle_util
    g_busy.processes = [GpuProcess(pid=1088)]
    g_idle.processes = [GpuProcess(pid=1089)] if join_second else []
    g_busy.util_samples, g_idle.util_samples = [busy_util] * samples, [idle_util] * samples
    return Snapshot(processes=[r0, r1], gpu=GpuState(gpus=[g_busy, g_idle], samples=samples))


def test_idle_peers_busy_names_the_idle_rank():
    snap = _two_ranks(0, 100)
    (f,) = gpurules.gpu_idle_peers_busy(snap)
    assert f.ranks == [1] and f.severity == "hang" and "rank 1" in f.summary and "never launched" in f.summary


def test_idle_peers_busy_never_without_evidence_for_every_rank():
    assert gpurules.gpu_idle_peers_busy(_two_ranks(0, 100, join_second=False)) == []  # rank 1's GPU unknown
    assert gpurules.gpu_idle_peers_busy(_two_ranks(50, 100)) == []  # in between: not idle
    assert gpurules.gpu_idle_peers_busy(_two_ranks(0, 30)) == []  # no busy peer
    # one reading is one instant: a healthy loop's GPU reads idle between kernels (1 of 5 runs, 2x H200)
    assert gpurules.gpu_idle_peers_busy(_two_ranks(0, 100, samples=1)) == []
    moving = _two_ranks(0, 100)  # NCCL RAS counts move: the communicator runs, whatever one moment showed
    moving.findings = [Finding(signature="nccl-ras-progressing", severity="info", title="", summary="", process=0)]
    assert gpurules.gpu_idle_peers_busy(moving) == [] and gpurules.gpu_busy_host_waits(moving) == []
    snap = _two_ranks(0, 100, join_second=False)
    snap.processes[1].dist = DistIdentity(local_rank=0)  # LOCAL_RANK is a guess: shown, never blamed
    snap.gpu.gpus[1].index = 0
    assert gpus_of(snap)[1][0].how == BY_LOCAL_RANK and gpu_cell(gpus_of(snap)[1]).startswith("0?")
    assert gpurules.gpu_idle_peers_busy(snap) == []


def test_no_gpu_state_no_gpu_finding_and_no_gpu_key():
    snap = _analyzed(Snapshot(processes=[_rank_stack("fstrag.rank0.pyspy.txt", 1088)]))
    assert not any(i.startswith("gpu-") for i in _ids(snap))
    assert "gpu" not in snap.to_dict() and "GPUS" not in render_text(snap)


# ---- the report ---------------------------------------------------------------------------------

def test_report_gpu_column_and_section(tmp_path):
    """End to end through the CLI: two real rank stacks (pids rewritten to the table's) and a real
    nvidia-smi table: the rank table gains the GPU column, the GPU section lists the GPUs."""
    for name in ("fstrag.rank0.pyspy.txt", "fstrag.rank1.pyspy.txt"):  # pids 1088 and 1089
        (tmp_path / name).write_text((JOB / name).read_text())
    table = _text("smi_table_nvitop_152_procs.txt").replace("10734", "1088")
    (tmp_path / "smi.txt").write_text(table)
    res = run_hanganalyze([tmp_path / "fstrag.rank0.pyspy.txt", tmp_path / "fstrag.rank1.pyspy.txt",
                           tmp_path / "smi.txt"])
    out = res.stdout.decode()
    assert res.returncode in (1, 3), res.stderr
    head = next(ln for ln in out.splitlines() if ln.strip().startswith("rank") and "gpu" in ln)
    assert head.index("gpu") < head.index("where")
    row0 = next(ln for ln in out.splitlines() if " 1088 " in ln and "device-sync" in ln)
    row1 = next(ln for ln in out.splitlines() if " 1089 " in ln)
    assert "0 +1 util ?" in row0 and "foo_bar" in row0  # two GPUs (most memory first), utilization unknown
    assert " ? " in row1  # rank 1's GPU is not known: unknown, never idle
    assert "GPUS" in out and "ranks here: rank 0" in out
    assert "gpu-idle-peers-busy" not in out and "gpu-busy-host-waits" not in out  # no utilization: no accusation
    res = run_hanganalyze([tmp_path / "fstrag.rank0.pyspy.txt", tmp_path / "smi.txt", "--format", "json"])
    doc = json.loads(res.stdout)
    assert doc["gpu"]["sources"] == ["nvidia-smi"] and doc["gpu"]["gpus"][0]["processes"][0]["pid"] == 1088


def test_markdown_and_lines():
    snap = _analyzed(_two_ranks(0, 100))
    md = render_markdown(snap)
    assert "| gpu |" in md and "### GPUs" in md
    lines = gpu_lines(snap)
    assert lines[0].startswith("from ") and any("ranks here: rank 1" in ln for ln in lines)
    assert "gpu-idle-peers-busy" in _ids(snap)


# ---- NVML (optional): only the absent-library path can run here ----------------------------------

def test_nvml_absent_is_one_note_not_an_error(monkeypatch):
    import builtins

    from hanganalyze.acquire import nvml

    real = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    state, note = nvml.read_nvml()
    assert state is None and note is not None and "nvidia-ml-py is not installed" in note and "\n" not in note


def test_nvml_driver_missing_is_one_note(monkeypatch):
    import sys
    import types

    from hanganalyze.acquire import nvml

    fake = types.ModuleType("pynvml")

    def init():
        raise RuntimeError("NVML Shared Library Not Found")

    fake.nvmlInit = init  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    state, note = nvml.read_nvml()
    assert state is None and note == "GPU state: not read (NVML: NVML Shared Library Not Found)"


def _fake_pynvml():
    import types

    nv = types.ModuleType("pynvml")
    ns = types.SimpleNamespace

    class GpuIsLost(Exception):
        pass

    def handle(i):
        if i == 1:
            raise GpuIsLost("GPU is lost")
        return "h0"

    def not_supported(*_a):
        raise RuntimeError("Not Supported")

    nv.nvmlInit = lambda: None
    nv.nvmlShutdown = lambda: None
    nv.nvmlDeviceGetCount = lambda: 2
    nv.nvmlDeviceGetHandleByIndex = handle
    nv.nvmlDeviceGetPciInfo = lambda h: ns(busId=b"00000000:3B:00.0")
    nv.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    nv.nvmlDeviceGetUtilizationRates = lambda h: ns(gpu=100, memory=30)
    nv.nvmlDeviceGetMemoryInfo = lambda h: ns(used=2048 * 1024 * 1024, total=143771 * 1024 * 1024)
    nv.nvmlDeviceGetComputeRunningProcesses = lambda h: [ns(pid=4242, usedGpuMemory=1024 * 1024 * 1024)]
    nv.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: 0x4
    nv.nvmlDeviceGetTotalEccErrors = not_supported
    nv.nvmlDeviceGetPcieReplayCounter = lambda h: 0
    return nv


def test_nvml_records_and_the_live_job_path(monkeypatch):
    import sys

    from hanganalyze.acquire import many, nvml
    from hanganalyze_gdbext.model import Process

    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    state, note = nvml.read_nvml()
    assert note is None and state.sources == ["NVML"]
    g0, g1 = state.gpus
    assert (g0.index, g0.bus_id, g0.product, g0.util_gpu, g0.mem_used_mib) == (0, "00000000:3B:00.0", "NVIDIA H200",
                                                                              100, 2048)
    assert [(p.pid, p.used_mib) for p in g0.processes] == [(4242, 1024)] and g0.throttle == ["SW Power Cap"]
    assert g0.ecc_uncorrected_volatile is None  # not supported: unknown, not 0
    assert (g1.index, g1.lost) == (1, "GPU is lost")
    # a live --job (inputs from a launcher) with no saved GPU state reads NVML once
    inputs = [many.Input(pid=4242, launcher_pid=1), many.Input(pid=4243, launcher_pid=1)]
    snap = many.acquire_all(inputs, lambda inp: Snapshot(processes=[Process(source="live", pid=inp.pid)]), 2)
    assert snap.gpu is not None and snap.gpu.gpus[0].processes[0].pid == 4242
    # files only: no NVML
    files = [many.Input(path="a"), many.Input(path="b")]
    assert many.acquire_all(files, lambda inp: Snapshot(processes=[Process(source="text")]), 2).gpu is None


def test_ras_nvml_dev_joins_a_rank_to_its_gpu():
    from hanganalyze.analyze.gpujoin import BY_RAS
    from hanganalyze_gdbext.model.ncclras import RasCommunicator, RasQuery, RasRank, RasSeries

    r0 = _rank_stack("fstrag.rank0.pyspy.txt", 1088)
    r1 = _rank_stack("fstrag.rank1.pyspy.txt", 1089)
    r0.rank, r1.rank = 0, 1
    st = _state("smi_table_nccl_1967_idle.txt")  # GPUs 0 and 1, no process table
    st.gpus[0].util_gpu = 100  # rank 0's GPU runs the collective (the readings set here, three each)
    st.gpus[0].util_samples, st.gpus[1].util_samples = [100] * 3, [0] * 3
    ras = RasSeries(queries=[RasQuery(communicators=[RasCommunicator(ranks=[
        RasRank(rank=0, pid=1088, cuda_dev=0, nvml_dev=0), RasRank(rank=1, pid=1089, cuda_dev=0, nvml_dev=1)])])])
    snap = Snapshot(processes=[r0, r1], gpu=st, nccl_ras=ras)
    joined = gpus_of(snap)
    assert [(j[0].how, j[0].gpu.index) for j in joined] == [(BY_RAS, 0), (BY_RAS, 1)]
    (f,) = gpurules.gpu_idle_peers_busy(snap)
    assert f.ranks == [1] and "GPU 1 (00000000:2A:00.0) idle (0%" in f.summary


def test_cli_busy_gpu_under_a_waiting_rank(tmp_path):
    """End to end: the real A100 table (DCGM#83) with its process row placed on GPU 7 (100 %) and
    the real rank-0 stack given that pid (the two were not captured together), beside rank 1's
    stack: the finding, the GPU column, and rank 1 unknown (no GPU of it in the table)."""
    r0 = (JOB / "fstrag.rank0.pyspy.txt").read_text().replace("1088", "3518784")
    (tmp_path / "fstrag.rank0.pyspy.txt").write_text(r0)
    (tmp_path / "fstrag.rank1.pyspy.txt").write_text((JOB / "fstrag.rank1.pyspy.txt").read_text())
    table = _text("smi_table_dcgm_83_busy.txt").replace("|    0   N/A  N/A   3518784", "|    7   N/A  N/A   3518784")
    (tmp_path / "smi.txt").write_text(table)
    res = run_hanganalyze([tmp_path / "fstrag.rank0.pyspy.txt", tmp_path / "fstrag.rank1.pyspy.txt",
                           tmp_path / "smi.txt"])
    out = res.stdout.decode()
    assert res.returncode == 3, res.stderr
    assert "(info, signature gpu-busy-host-waits)" in out and "rank 0 waits in the device sync" in out
    row0 = next(ln for ln in out.splitlines() if " 3518784 " in ln and "device-sync" in ln)
    row1 = next(ln for ln in out.splitlines() if " 1089 " in ln)
    assert "7 100% python3" in row0 and " ? " in row1
    assert "gpu-idle-peers-busy" not in out  # rank 1's GPU is unknown: never called idle


def test_repeated_outputs_are_samples():
    q = _text("smi_q_nvidia_docker_954.txt")
    st = gpustate.read_text(q + "\n" + q)  # nvidia-smi -q -l 1: two samples of one GPU
    assert st.samples == 2 and len(st.gpus) == 1
    t = _text("smi_table_nccl_1967_idle.txt")
    st = gpustate.read_text(t + t.replace("|      0%      Default |", "|     99%      Default |"))
    assert st.samples == 2 and [g.util_samples for g in st.gpus] == [[0, 99], [0, 99]]
    assert "99% (0-99% over 2 samples)" in gpu_lines(Snapshot(gpu=st))[1]


def test_html_gpu_section_and_column_escaped():
    from hanganalyze.render.html import render_html

    snap = _analyzed(_two_ranks(0, 100))
    snap.gpu.notes.append("<script>x</script>")
    html = render_html(snap)
    assert '<section id="gpus"' in html and "<th>gpu</th>" in html
    assert "<script>x</script>" not in html and "&lt;script&gt;" in html
    plain = render_html(_analyzed(Snapshot(processes=[_rank_stack("fstrag.rank0.pyspy.txt", 1088)])))
    assert 'id="gpus"' not in plain and "<th>gpu</th>" not in plain


def test_redact_covers_gpu_state():
    from hanganalyze.analyze.redact import redact

    st = _state("smi_table_nvitop_152_procs.txt")
    st.gpus[0].processes[0].name = "/home/alice/venv/bin/python"
    out = redact(Snapshot(processes=[_rank_stack("fstrag.rank0.pyspy.txt", 10734)], gpu=st), hostnames=[], users=[])
    assert "alice" not in json.dumps(out.to_dict()) and out.gpu.gpus[0].processes[0].pid == 10734


def test_xid_lines_pasted_beside_a_stack():
    """A bug report's paste: the rank's stack, then its dmesg Xid lines (both real; the stack's pid
    is the Xid line's here).  The stack stays a py-spy dump; the Xid joins the rank by pid."""
    stack = (JOB / "fstrag.rank0.pyspy.txt").read_text().replace("1088", "1797828")
    snap = _from_text(stack + "\n" + _text("xid_gpud_46_dmesg_T.txt"), None)
    assert snap.processes[0].pid == 1797828 and len(snap.processes[0].threads) == 1
    assert [e.xid for e in snap.gpu.xids] == [13, 13, 13, 109]
    (f,) = gpurules.gpu_xid(snap)
    assert f.processes == [0] and "pid 1797828 ran on it" in f.summary and "Xid 109" in f.summary
    assert _from_text(stack, None).gpu is None  # no NVRM line: nothing added


def test_nvml_utilization_history_is_the_last_two_seconds():
    """nvmlDeviceGetSamples' buffer (timestamps in microseconds): the readings of the last 2 s, in
    time order; an older one is left out; a binding or GPU without the call gives none."""
    from types import SimpleNamespace as NS

    from hanganalyze.acquire import nvml

    def sample(t, v):
        return NS(timeStamp=t, sampleValue=NS(uiVal=v))

    nv = NS(NVML_GPU_UTILIZATION_SAMPLES=1,
            nvmlDeviceGetSamples=lambda h, kind, last: (0, [sample(9_000_000, 100), sample(5_000_000, 0),
                                                            sample(8_000_000, 90), sample(7_500_000, 95)]))
    assert nvml._recent_util(nv, None) == [95, 90, 100]

    def unsupported(h, kind, last):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    assert nvml._recent_util(NS(NVML_GPU_UTILIZATION_SAMPLES=1, nvmlDeviceGetSamples=unsupported), None) == []
    assert nvml._recent_util(NS(), None) == []


def test_nvml_is_read_beside_the_stacks_not_after_them(monkeypatch):
    """The GPU columns must not add NVML's ~0.1 s to a --job run: the read runs while the ranks are
    sampled.  Each rank's read waits for NVML's read to have started: one after the other, it would not."""
    import threading

    from hanganalyze.acquire import many, nvml
    from hanganalyze_gdbext.model import Process
    from hanganalyze_gdbext.model.gpustate import GpuState

    started = threading.Event()

    def fake_read():
        started.set()
        return GpuState(gpus=[], sources=["NVML"], samples=1), None

    monkeypatch.setattr(nvml, "read_nvml", fake_read)
    seen = []

    def one(inp):
        seen.append(started.wait(5.0))
        return Snapshot(processes=[Process(source="live", pid=inp.pid)])

    inputs = [many.Input(pid=4242, launcher_pid=1), many.Input(pid=4243, launcher_pid=1)]
    snap = many.acquire_all(inputs, one, 2)
    assert seen == [True, True] and snap.gpu is not None and snap.gpu.sources == ["NVML"]


def test_nvml_that_raises_is_one_note(monkeypatch):
    from hanganalyze.acquire import many, nvml
    from hanganalyze_gdbext.model import Process

    def broken():
        raise RuntimeError("driver\nexploded")

    monkeypatch.setattr(nvml, "read_nvml", broken)
    inputs = [many.Input(pid=1, launcher_pid=9), many.Input(pid=2, launcher_pid=9)]
    snap = many.acquire_all(inputs, lambda inp: Snapshot(processes=[Process(source="live", pid=inp.pid)]), 2)
    assert snap.gpu is None and "GPU state: not read (NVML: driver exploded)" in snap.warnings
