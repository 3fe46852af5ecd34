"""The HTML report of a job (a real 2-rank NCCL straggler with its flight-recorder dumps), opened
in headless Chromium: no console errors, the cross-rank finding first, the job section with its
rank classes, and a merged call tree whose branches open and close under a real mouse click."""

from __future__ import annotations

import base64

import pytest
from helpers import REPO, run_hanganalyze
from test_html_chromium import CHROMIUM, OUTPUT, chromium_page

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

INPUTS = [REPO / "tests" / "data" / "job" / "fstrag.rank0.pyspy.txt", REPO / "tests" / "data" / "job" /
          "fstrag.rank1.pyspy.txt", REPO / "tests" / "data" / "flight_recorder" / "straggler.fr.rank_0",
          REPO / "tests" / "data" / "flight_recorder" / "straggler.fr.rank_1"]


@pytest.fixture(scope="module")
def job_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("chromium_job") / "job.html"
    res = run_hanganalyze(INPUTS + ["-o", out], timeout=120)
    assert res.returncode == 3, res.stderr
    with chromium_page(out) as pg:
        yield pg


def test_job_report_in_chromium(job_page):
    pg = job_page
    assert pg.errors() == []
    first = pg.js("document.querySelector('article.finding').innerText")
    assert "collective-straggler" in first and "load_next_batch" in first and "rank 1" in first
    job = pg.js("document.getElementById('job').innerText")
    assert "Rank classes" in job and "in load_next_batch (fr_strag.py:6)" in job and "Merged call tree" in job
    # a branch of the tree (here every branch leads to the divergence, so it is open) closes under a
    # real click on its summary, and opens again
    sel = "#job details.ct details.ct > summary"
    assert pg.js("document.querySelectorAll(%r).length" % sel) >= 1
    pg.js("document.querySelector(%r).parentElement.id = 'probe'" % sel)
    assert pg.js("document.getElementById('probe').open") is True
    pg.click("#probe > summary")
    assert pg.js("document.getElementById('probe').open") is False
    pg.click("#probe > summary")
    assert pg.js("document.getElementById('probe').open") is True
    pg.js("document.getElementById('job').scrollIntoView()")
    shot = base64.b64decode(pg.call("Page.captureScreenshot", format="png")["data"])
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    OUTPUT.mkdir(exist_ok=True)
    (OUTPUT / "job-report.png").write_bytes(shot)


FIRST_SCREEN = (
    "(() => { const a = document.getElementById('answer').getBoundingClientRect();"
    " const t = document.querySelectorAll('#job details.ct-div[open]');"
    " const last = t.length ? t[t.length - 1].getBoundingClientRect() : null;"
    " return {answerTop: a.top + scrollY, answerBottom: a.bottom + scrollY,"
    " verdict: document.querySelector('.verdict').innerText,"
    " fault: [...document.querySelectorAll('table.ranks tr.at-fault')].map(r => r.innerText),"
    " rows: document.querySelectorAll('table.ranks tr').length,"
    " splits: t.length, splitTop: t.length ? t[0].getBoundingClientRect().top + scrollY : -1,"
    " trunkOpen: [...document.querySelectorAll('#job details.ct-trunk')].some(d => d.open),"
    " idleWg: [...document.querySelectorAll('.idle-wg details')].map(d => d.open),"
    " perRank: document.getElementById('summary') !== null}; })()"
)


def test_first_screen_of_a_job_is_the_answer(job_page):
    """Verdict and rank table above the fold; the tree open at the divergence, trunk folded."""
    pg = job_page
    pg.js("window.scrollTo(0, 0)")
    s = pg.js(FIRST_SCREEN)
    assert s["answerTop"] < 200 and s["answerBottom"] < 900, s
    assert s["verdict"].startswith("Verdict: rank 1 is in load_next_batch (fr_strag.py:6)"), s["verdict"]
    assert len(s["fault"]) == 1 and s["fault"][0].startswith("1"), s["fault"]
    assert s["rows"] == 3 and s["splits"] >= 1 and not s["trunkOpen"] and not s["perRank"], s
    # the folded trunk opens under a real click and shows the common frames
    pg.js("document.querySelector('#job details.ct-trunk').id = 'trunk'")
    pg.click("#trunk > summary")
    assert pg.js("document.getElementById('trunk').open") is True
    assert pg.js("document.querySelector('#trunk .ct-f').checkVisibility()") is True
    assert pg.errors() == []


@pytest.fixture(scope="module")
def gpu_page(tmp_path_factory):
    """A real 2-GPU NCCL straggler (tests/data/gpu_job, read live through cuda-gdb), re-rendered."""
    out = tmp_path_factory.mktemp("chromium_gpu") / "gpu.html"
    res = run_hanganalyze([REPO / "tests" / "data" / "gpu_job" / "straggler.job.json", "-o", out], timeout=120)
    assert res.returncode == 3, res.stderr
    with chromium_page(out) as pg:
        yield pg


def test_first_screen_of_a_gpu_job(gpu_page):
    pg = gpu_page
    pg.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)
    pg.js("window.scrollTo(0, 0)")
    s = pg.js(FIRST_SCREEN)
    assert s["verdict"].startswith("Verdict: rank 1 is in load_next_batch (nccl_job.py:80)"), s["verdict"]
    assert "stuck or slow: unknown (one sample)" in s["verdict"]
    assert len(s["fault"]) == 1 and "in load_next_batch (nccl_job.py:80)" in s["fault"][0]
    # the main thread's divergence and an NCCL proxy thread's; both on the first screen, trunk folded
    assert s["splits"] == 2 and 0 < s["splitTop"] < 1000 and not s["trunkOpen"], s
    assert s["idleWg"] == [False, False]  # the watchdogs' idle wait-for graphs are folded away
    text = pg.js("document.getElementById('job').innerText")
    assert "load_next_batch (nccl_job.py:80)" in text and "ranks diverge here" in text
    shot = base64.b64decode(pg.call("Page.captureScreenshot", format="png")["data"])
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    OUTPUT.mkdir(exist_ok=True)
    (OUTPUT / "gpu-job-first-screen.png").write_bytes(shot)
    assert pg.errors() == []
