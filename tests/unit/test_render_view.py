"""View helpers shared by every format: links, library versions (thread labels and frame lines:
test_frametext.py)."""

from __future__ import annotations

from hanganalyze.render.view import key_libraries, safe_url
from hanganalyze_gdbext.model import Library, Process, Thread


def test_only_http_links():
    assert safe_url("https://github.com/pytorch/pytorch/issues/1") == "https://github.com/pytorch/pytorch/issues/1"
    assert safe_url("HTTP://example.org/a") == "HTTP://example.org/a"
    for bad in ("javascript:alert(1)", "data:text/html,x", "file:///etc/passwd", "//evil.org/x",
                'https://a.org/"onclick="x', "https://a.org/<script>", " vbscript:x", None, 3):
        assert safe_url(bad) is None, bad


def test_key_library_versions():
    p = Process(source="core", libraries=[
        Library("/usr/lib/libnccl.so.2.21.5", version="2.21.5"),
        Library("/lib/x86_64-linux-gnu/libc.so.6", version="6"),
        Library("/usr/lib/libpython3.12.so.1.0", version="1.0"),
        Library("/usr/lib/libz.so.1", version="1"),
        Library("/site/torch/lib/libtorch_cuda.so"),
    ])
    assert key_libraries(p) == [("libnccl.so", "2.21.5"), ("libc.so.6", ""), ("libpython3.12.so.1.0", ""),
                                ("libtorch_cuda.so", "")]


def _graph_snapshot():
    from hanganalyze_gdbext.model import Snapshot, WaitGraph

    g = {"nodes": [{"id": "t1", "kind": "thread", "label": "worker <b>1</b>"}, {"id": "m", "kind": "resource",
                                                                              "label": "mutex_a"}],
         "edges": [{"src": "t1", "dst": "m", "kind": "waits", "label": None}], "cycles": [["t1", "m"]]}
    return Snapshot(processes=[Process(source="core", threads=[Thread(tid=1)], waitgraph=WaitGraph.from_dict(g))])


def test_waitgraph_svg_is_used_and_sanitised():
    from hanganalyze.render.html import render_html

    out = render_html(_graph_snapshot())
    assert "<svg" in out and "<b>1</b>" not in out and "worker &lt;b&gt;1&lt;/b&gt;" in out


def test_waitgraph_falls_back_to_an_edge_table(monkeypatch):
    import hanganalyze.render.waitsvg as waitsvg
    from hanganalyze.render.html import render_html

    def broken(_graph):
        raise RuntimeError("not ready")

    monkeypatch.setattr(waitsvg, "render_svg", broken)
    out = render_html(_graph_snapshot())
    assert "<svg" not in out
    assert '<table class="edges">' in out and "worker &lt;b&gt;1&lt;/b&gt;" in out and "mutex_a" in out
