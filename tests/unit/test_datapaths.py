"""Where the data is found (``datapaths.py``, issue 35): a source checkout reads ``signatures/`` in
place; a package inside an archive (a zipapp) is copied to real files once, into the cache, or into a
private temporary folder when there is no cache."""

from __future__ import annotations

import zipfile
from pathlib import Path

from hanganalyze import datapaths

ROOT = Path(__file__).resolve().parents[2]


def test_a_checkout_reads_its_signatures_in_place():
    src = datapaths.signature_source()
    assert src == datapaths.DataSource(ROOT / "signatures", "source checkout")
    assert datapaths.builtin_signatures() == ROOT / "signatures"
    assert datapaths.gdb_source_line() == "source %s" % (ROOT / "gdbext" / "hanganalyze_gdbext" / "load.py")
    text = datapaths.describe()
    assert "signatures: %s (source checkout)" % (ROOT / "signatures") in text and "gdbext: " in text


def _archive(tmp_path: Path) -> zipfile.ZipFile:
    z = tmp_path / "app.pyz"
    with zipfile.ZipFile(z, "w") as w:
        w.writestr("pkg/signatures/schema.json", "{}")
        w.writestr("pkg/signatures/lists/a.yaml", "a: 1\n")
        w.writestr("pkg/signatures/__pycache__/x.pyc", "no")
    return zipfile.ZipFile(z)


def test_an_archive_is_extracted_once_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HANGANALYZE_CACHE_DIR", str(tmp_path / "cache"))
    tree = zipfile.Path(_archive(tmp_path), "pkg/signatures/")
    first = datapaths._extract(tree, "pkg-signatures")
    assert first.name == "signatures" and first.parent.parent == tmp_path / "cache" / "extracted"
    assert (first / "lists" / "a.yaml").read_text() == "a: 1\n" and (first / "schema.json").is_file()
    assert not (first / "__pycache__").exists()
    (first / "lists" / "a.yaml").write_text("kept")  # the same archive: the folder is reused, not rewritten
    assert datapaths._extract(tree, "pkg-signatures") == first and (first / "lists" / "a.yaml").read_text() == "kept"


def test_no_cache_extracts_into_a_private_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HANGANALYZE_CACHE_DIR", "off")
    folder = datapaths._extract(zipfile.Path(_archive(tmp_path), "pkg/signatures/"), "pkg-signatures")
    assert (folder / "lists" / "a.yaml").is_file() and not str(folder).startswith(str(tmp_path))
