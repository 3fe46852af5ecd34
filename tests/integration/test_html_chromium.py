"""The HTML report of a real core, opened in headless Chromium over the DevTools protocol.

Checks what a user sees: the page loads with no console errors or blocked requests (the CSP
forbids every fetch, so an external asset would show up as an error), the findings are visible,
thread groups collapse and expand under a real mouse click, the filter box filters, and printing
expands every group.  A screenshot goes to ``test-output/report.png``.

The DevTools client is a minimal WebSocket client on the standard library (no new dependency).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import FIXTURES, REPO, gcore, pyenv_pythons, run_hanganalyze, start_hung  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OUTPUT = REPO / "test-output"
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"),
    pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed"),
]
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--remote-debugging-port=0", "--remote-allow-origins=*", "--window-size=1280,900",
]


class WebSocket:
    """Just enough RFC 6455 for DevTools: masked text frames out, (fragmented) text frames in."""

    def __init__(self, url: str, timeout: float = 30.0):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        assert m, url
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (m.group(3), m.group(1), m.group(2), key)
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("websocket handshake failed")
            head += chunk
        assert b" 101 " in head.split(b"\r\n", 1)[0], head

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("websocket closed")
            buf += chunk
        return buf

    def send(self, text: str) -> None:
        data = text.encode()
        header = bytes([0x81])
        n = len(data)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self) -> str:
        parts = []
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            payload = self._exact(n)
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("websocket closed by browser")
            if opcode in (0x9, 0xA):  # ping/pong: ignore
                continue
            parts.append(payload)
            if b0 & 0x80:
                return b"".join(parts).decode("utf-8")


class Page:
    """One Chromium tab driven over DevTools; remembers console errors and exceptions."""

    def __init__(self, ws: WebSocket):
        self.ws = ws
        self.next_id = 0
        self.events = []

    def call(self, method: str, **params):
        self.next_id += 1
        my = self.next_id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                if "error" in msg:
                    raise AssertionError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 30.0):
        for e in self.events:
            if e["method"] == method:
                return e
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    return msg
        raise AssertionError("no %s within %ss" % (method, timeout))

    def js(self, expr: str):
        res = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise AssertionError("JS failed: %s" % res["exceptionDetails"])
        return res["result"].get("value")

    def click(self, selector: str) -> None:
        box = self.js(
            "(() => { const e = document.querySelector(%s); e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect(); return [r.left + 12, r.top + r.height / 2]; })()"
            % json.dumps(selector)
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def errors(self):
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(p["exceptionDetails"].get("text"))
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(str(p.get("args")))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text"))
        return out


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> Path:
    """`hanganalyze CORE -o report.html` on a real core of a Python RLock deadlock."""
    pythons = pyenv_pythons()
    py = pythons.get("3.12") or next(iter(pythons.values()), None)
    if py is None:
        pytest.skip("no pyenv Python")
    work = tmp_path_factory.mktemp("chromium")
    h = start_hung([py, FIXTURES / "wf_python.py", "abba", "chain"], ready="READY", settle=0.5)
    try:
        core = gcore(h.pid, work)
    finally:
        h.kill()
    out = work / "report.html"
    res = run_hanganalyze([core, "-o", out], timeout=300)
    core.unlink()
    assert res.returncode in (0, 3, 5, 6), res.stderr.decode("utf-8", "replace")
    OUTPUT.mkdir(exist_ok=True)
    shutil.copy(out, OUTPUT / "report.html")
    return out


@contextlib.contextmanager
def chromium_page(html: Path):
    """A headless Chromium tab showing ``html``, driven over DevTools (used by the job report test too)."""
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    proc = subprocess.Popen(
        [CHROMIUM, *FLAGS, "--user-data-dir=%s" % profile, "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        port = None
        deadline = time.monotonic() + 60
        assert proc.stderr is not None
        while time.monotonic() < deadline and port is None:
            line = proc.stderr.readline().decode("utf-8", "replace")
            if not line and proc.poll() is not None:
                break
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                port = int(m.group(1))
        assert port, "chromium did not start its DevTools endpoint"
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/json/list")
        targets = json.loads(conn.getresponse().read())
        tab = next(t for t in targets if t.get("type") == "page")
        pg = Page(WebSocket(tab["webSocketDebuggerUrl"]))
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            pg.call(domain)
        pg.call("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)
        pg.call("Page.navigate", url=html.resolve().as_uri())
        pg.wait_event("Page.loadEventFired")
        yield pg
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def page(report_html):
    with chromium_page(report_html) as pg:
        yield pg


def test_loads_without_console_errors(page):
    assert page.js("document.title").startswith("hanganalyze:")
    assert page.js("document.querySelectorAll('details.group').length") >= 3
    assert page.errors() == []


def test_findings_visible_first(page):
    state = page.js(
        "(() => { const f = document.getElementById('findings'); const r = f.getBoundingClientRect();"
        " const t = document.getElementById('threads').getBoundingClientRect();"
        " return {h: r.height, top: r.top + scrollY, threadsTop: t.top + scrollY,"
        " vis: getComputedStyle(f).visibility, disp: getComputedStyle(f).display,"
        " n: f.querySelectorAll('article.finding').length,"
        " text: f.innerText}; })()"
    )
    assert state["h"] > 50 and state["vis"] == "visible" and state["disp"] != "none"
    assert state["n"] >= 1 and "Deadlock" in state["text"]
    assert state["top"] < state["threadsTop"]


def test_screenshot(page):
    page.js("window.scrollTo(0, 0)")
    shot = page.call("Page.captureScreenshot", format="png")
    data = base64.b64decode(shot["data"])
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20000
    OUTPUT.mkdir(exist_ok=True)
    (OUTPUT / "report.png").write_bytes(data)


def test_collapsing_with_a_real_click(page):
    sel = "details.group.in-finding"
    state = (
        "(() => { const d = document.querySelector('%s'); const s = d.querySelector('.stack');"
        " return {open: d.open, h: d.getBoundingClientRect().height, stack: s.checkVisibility()}; })()" % sel
    )
    before = page.js(state)
    assert before["open"] is True and before["stack"] is True
    page.click(sel + " > summary")
    closed = page.js(state)
    assert closed["open"] is False and closed["stack"] is False
    assert closed["h"] < before["h"] - 100  # the stack's lines are gone from the layout
    page.click(sel + " > summary")
    again = page.js(state)
    assert again["open"] is True and again["stack"] is True and again["h"] == before["h"]


def test_filter_box(page):
    total = page.js("document.querySelectorAll('details.group').length")
    page.click("#filter")
    page.call("Input.insertText", text="reconciler")
    shown = page.js("document.querySelectorAll('details.group:not(.hidden)').length")
    assert 1 <= shown < total
    page.js("(() => { const f = document.getElementById('filter'); f.value = '';"
            " f.dispatchEvent(new Event('input')); })()")
    assert page.js("document.querySelectorAll('details.group:not(.hidden)').length") == total


def test_print_expands_every_group(page):
    page.js("document.querySelectorAll('details.group').forEach(d => d.open = false)")
    # listeners run in registration order: this one sees the state after the report's own handler
    page.js("window.addEventListener('beforeprint', () => { window.__allOpen ="
            " [...document.querySelectorAll('details.group')].every(d => d.open); })")
    pdf = page.call("Page.printToPDF")
    assert base64.b64decode(pdf["data"])[:4] == b"%PDF"
    assert page.js("window.__allOpen") is True
    # afterprint restored the closed state
    assert page.js("[...document.querySelectorAll('details.group')].every(d => !d.open)")
    # and the print stylesheet alone shows the stacks of closed groups (no script needed)
    visible = "[...document.querySelectorAll('details.group .stack')].every(s => s.checkVisibility())"
    assert page.js(visible) is False
    page.call("Emulation.setEmulatedMedia", media="print")
    try:
        assert page.js(visible) is True
    finally:
        page.call("Emulation.setEmulatedMedia", media="")
    assert page.errors() == []
