"""``-o`` (issue 30): an extension that names no format is refused in one line (exit 2) naming the
known ones, and after writing, one line on stderr says where the report went and in which format,
also when stderr is no terminal (a script must learn where its report is)."""

from __future__ import annotations

import pytest

from hanganalyze import cli
from hanganalyze.errors import EXIT_INPUT

PASTE = """Thread 1 (Thread 0x7f (LWP 200)):
#0  __lll_lock_wait (futex=0x5) at lowlevellock.c:52
#1  0x00007f in __GI___pthread_mutex_lock (mutex=0x5) at pthread_mutex_lock.c:80
#2  0x00007f in Cache::insert (this=0x1) at cache.cc:40
"""


@pytest.fixture
def paste(tmp_path):
    p = tmp_path / "bt.txt"
    p.write_text(PASTE)
    return p


def test_unknown_extension_is_refused_before_any_work(paste, tmp_path, capsys):
    out = tmp_path / "report.pdf"
    rc = cli.run([str(paste), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == EXIT_INPUT and not out.exists()
    assert err.count("\n") == 1 and ".pdf" in err and ".html" in err and ".json" in err and ".md" in err


@pytest.mark.parametrize("name, fmt, first", [("r.md", "md", "#"), ("r.json", "json", "{"), ("r.html", "html", "<"),
                                              ("report", "text", "=")])
def test_wrote_says_where_and_what(paste, tmp_path, capsys, name, fmt, first):
    out = tmp_path / name
    rc = cli.run([str(paste), "-o", str(out)])
    cap = capsys.readouterr()
    assert rc != EXIT_INPUT and out.read_text().lstrip()[:1] == first
    assert cap.err == "hanganalyze: wrote %s (%s)\n" % (out, fmt)  # captured: stderr is no terminal
    assert cap.out == ""


def test_format_given_takes_any_name(paste, tmp_path, capsys):
    out = tmp_path / "report.pdf"
    cli.run([str(paste), "-f", "json", "-o", str(out)])
    assert out.read_text().startswith("{")
    assert capsys.readouterr().err == "hanganalyze: wrote %s (json)\n" % out
