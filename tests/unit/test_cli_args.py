"""The command line (typer): usage errors are one line with exit 2, help and version work,
options reach the analysis as typed values, and the default format follows the -o suffix."""

from __future__ import annotations

from pathlib import Path

import pytest

from hanganalyze import __version__, cli


def _run(capsys, argv):
    rc = cli.run(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["a", "b", "c", "--pid"], "--pid"),
        (["--no-such-option"], "No such option: --no-such-option"),
        (["core", "--format", "xml"], "--format"),
        (["core", "--timeout", "soon"], "--timeout"),
        (["--pid", "abc"], "--pid"),
        (["signatures", "frobnicate"], "No such command 'frobnicate'"),
        (["signatures"], "missing command"),
        (["signatures", "list", "--bogus"], "No such option: --bogus"),
    ],
)
def test_usage_errors_are_one_line(capsys, argv, needle):
    rc, out, err = _run(capsys, argv)
    assert rc == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hanganalyze: error: ") and needle in lines[0], err
    assert lines[0].endswith("(see hanganalyze --help)")


def test_help_and_version(capsys):
    try:
        rc = cli.run(["--help"])
    except SystemExit as e:  # argparse exits, click (standalone_mode=False) returns
        rc = e.code
    assert rc == 0
    out = capsys.readouterr().out
    for opt in ("--pid", "--exe", "--format", "--output", "--gdb", "--timeout", "--signatures", "--input-format",
                "--redact", "--version", "signatures list|validate"):
        assert opt in out
    rc, out, _ = _run(capsys, ["--version"])
    assert rc == 0 and out.splitlines()[0] == "hanganalyze %s" % __version__
    assert "signatures: %s (source checkout)" % (Path(cli.__file__).parents[2] / "signatures") in out
    rc, out, _ = _run(capsys, ["signatures", "--help"])
    assert rc == 0 and "validate" in out


def test_options_are_typed_and_repeatable(monkeypatch, capsys):
    seen = {}

    def fake_analyze(args):
        seen.update(vars(args))
        return 0

    monkeypatch.setattr(cli, "analyze", fake_analyze)
    rc = cli.run(["core.1", "-p", "12", "--timeout", "2.5", "--signatures", "a", "--signatures", "b", "-f", "md",
                  "--redact", "-o", "x.html", "--exe", "/bin/true", "--input-format", "gdb", "--gdb", "cuda-gdb"])
    assert rc == 0
    assert seen["targets"] == ["core.1"] and seen["pid"] == [12] and seen["timeout"] == 2.5
    assert seen["signatures"] == [Path("a"), Path("b")] and seen["fmt"] == "md" and seen["redact"] is True
    assert seen["output"] == Path("x.html") and seen["exe"] == Path("/bin/true")
    assert seen["input_format"] == "gdb" and seen["gdb"] == "cuda-gdb"
    rc = cli.run(["-"])  # stdin is a positional argument, not an option
    assert rc == 0 and seen["targets"] == ["-"]
    rc = cli.run(["a", "b", "-p", "1", "--pid", "2", "--job", "3", "--parallel", "4"])  # several inputs: one job
    assert rc == 0 and seen["targets"] == ["a", "b"] and seen["pid"] == [1, 2] and seen["job"] == 3
    assert seen["parallel"] == 4


@pytest.mark.parametrize("name, fmt", [(None, "text"), ("r.html", "html"), ("r.HTM", "html"), ("r.json", "json"),
                                       ("r.md", "md"), ("r.txt", "text")])
def test_default_format_follows_the_output_suffix(name, fmt):
    assert cli.default_format(Path(name) if name else None) == fmt


@pytest.mark.parametrize("argv", [
    ["--pid", "12", "--samples", "1", "-f", "json", "-o", "/dev/null"],
    ["--pid=12", "--samples=1", "--format=json", "--output=/dev/null", "--job=3", "--interval=0.25"],
    ["core.1", "-p", "12", "--timeout", "2.5", "--signatures", "a", "--signatures", "b", "-f", "md", "--redact",
     "-o", "x.html", "--exe", "/bin/true", "--input-format", "gdb", "--gdb", "cuda-gdb", "--engine", "direct"],
    ["-o", "-", "x", "--sysroot", "", "--solib-search-path", "a:b", "--solib-search-path", "c", "--debuginfod"],
    ["--coredumpctl", "--pid", " 1_2 ", "--parallel", "4", "--timeout", "1e3", "--version"],
])
def test_the_fast_parse_is_typers(monkeypatch, capsys, argv):
    """Plain command lines skip importing typer (start-up time, issue 21): same values, same output."""
    seen = []
    monkeypatch.setattr(cli, "analyze", lambda args: seen.append(vars(args)) or 0)
    assert cli._fast_args(cli._optional_value(argv, "--coredumpctl", "latest")) is not None
    fast = (cli.run(argv), seen[:], capsys.readouterr())
    seen.clear()
    monkeypatch.setattr(cli, "_fast_args", lambda argv: None)
    assert (cli.run(argv), seen[:], capsys.readouterr()) == fast
