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
    # a closed branch of the tree opens under a real click on its summary, and closes again
    sel = "#job details.ct:not([open]) > summary"
    assert pg.js("document.querySelectorAll(%r).length" % sel) >= 1
    pg.js("document.querySelector(%r).parentElement.id = 'probe'" % sel)
    pg.click("#probe > summary")
    assert pg.js("document.getElementById('probe').open") is True
    pg.click("#probe > summary")
    assert pg.js("document.getElementById('probe').open") is False
    pg.js("document.getElementById('job').scrollIntoView()")
    shot = base64.b64decode(pg.call("Page.captureScreenshot", format="png")["data"])
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    OUTPUT.mkdir(exist_ok=True)
    (OUTPUT / "job-report.png").write_bytes(shot)
