"""One sample of a live process imports only what it uses (issue 21's per-rank cost): with a warm
cache, no typer/click (the plain command line has its own parser), no yaml (the data files' parse
is cached), no jsonschema, no jinja2 (no HTML), no text parsers and no other renderer."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_NEEDED = ("typer", "click", "yaml", "jsonschema", "jinja2", "hanganalyze.acquire.text",
              "hanganalyze.render.html", "hanganalyze.render.markdown", "hanganalyze.render.text",
              "concurrent.futures", "argparse")


def test_one_live_sample_imports_only_what_it_uses(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; print('R', flush=True); time.sleep(120)"],
                             stdout=subprocess.PIPE)
    try:
        child.stdout.readline()
        env = dict(os.environ, HANGANALYZE_CACHE_DIR=str(tmp_path / "cache"),
                   PYTHONPATH="%s:%s" % (ROOT / "analyzer", ROOT / "gdbext"))
        cmd = [sys.executable, "-X", "importtime", "-m", "hanganalyze", "--pid", str(child.pid), "--samples", "1",
               "-f", "json", "-o", str(tmp_path / "out.json")]
        for _ in range(2):  # the first run fills the cache
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            assert res.returncode in (0, 3, 5, 6), res.stderr[-2000:]
            time.sleep(0.1)
        imported = {line.rsplit("|", 1)[1].strip() for line in res.stderr.splitlines()
                    if line.startswith("import time:")}
        assert "hanganalyze.render.jsonout" in imported
        assert not [m for m in imported if m in NOT_NEEDED or m.startswith(tuple(n + "." for n in NOT_NEEDED))]
    finally:
        child.kill()
        child.wait()
