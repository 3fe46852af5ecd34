"""The embedded NCCL version of a file is scanned once and then kept by the file's identity
(acquire/embedded_versions.py ``KeptVersions``): a warm run of a GPU rank stats its libraries instead
of reading their data sections again, and a file that changed is read again."""

from __future__ import annotations

import shutil

import pytest
from helpers import fixture_binary

from hanganalyze.acquire import embedded_versions as ev


def test_a_files_version_is_kept_and_read_again_when_the_file_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("HANGANALYZE_CACHE_DIR", str(tmp_path / "cache"))
    exe = tmp_path / "libtorch_like.so"
    shutil.copy(fixture_binary("sig_static_nccl"), exe)
    libs = ev.add_embedded_versions([], [str(exe)])
    assert [(lib.path, lib.version) for lib in libs] == [("%s (static libnccl.so)" % exe, "2.27.3")]
    assert (tmp_path / "cache" / ev.VERSIONS_FILE).is_file()

    scanned = []
    real = ev.version_in_file
    monkeypatch.setattr(ev, "version_in_file", lambda p, b: scanned.append(p) or real(p, b))
    again = ev.add_embedded_versions([], [str(exe)])
    assert scanned == [] and [lib.version for lib in again] == ["2.27.3"]

    data = exe.read_bytes().replace(b"NCCL version 2.27.3", b"NCCL version 2.27.4")
    exe.write_bytes(data)  # same size, new modification time
    changed = ev.add_embedded_versions([], [str(exe)])
    assert scanned == [str(exe)] and [lib.version for lib in changed] == ["2.27.4"]


def test_a_broken_table_is_scanned_over(tmp_path, monkeypatch):
    monkeypatch.setenv("HANGANALYZE_CACHE_DIR", str(tmp_path))
    (tmp_path / ev.VERSIONS_FILE).write_text("{not json")
    exe = tmp_path / "libtorch_like.so"
    shutil.copy(fixture_binary("sig_static_nccl"), exe)
    assert [lib.version for lib in ev.add_embedded_versions([], [str(exe)])] == ["2.27.3"]
    assert ev.KeptVersions().table  # written back whole


@pytest.mark.parametrize("value", ["off"])
def test_no_cache_folder_scans_every_time(tmp_path, monkeypatch, value):
    monkeypatch.setenv("HANGANALYZE_CACHE_DIR", value)
    exe = tmp_path / "libtorch_like.so"
    shutil.copy(fixture_binary("sig_static_nccl"), exe)
    assert [lib.version for lib in ev.add_embedded_versions([], [str(exe)])] == ["2.27.3"]
