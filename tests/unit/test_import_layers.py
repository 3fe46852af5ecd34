"""The import layers of pyproject.toml's [tool.importlinter] contracts hold (docs/design.md):
model at the bottom, the walker and gdbext over it, the shared modules, direct, acquire, analyze,
render, pipeline, the CLI on top; no cycles between packages, nor between the modules of one package.

Two more checks read every import statement with ``ast`` (those inside functions too): no cycle
between any two modules (across packages as well, which import-linter's sibling contract does not
look at), printing the cycles found, and no import inside a function without a comment on its line
saying why (start-up time of the CLI, an optional dependency, a gdb-only module)."""

from __future__ import annotations

import ast
import io
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The import folders and the top packages under them that the checks read.
PACKAGES = ((ROOT / "analyzer", "hanganalyze"), (ROOT / "gdbext", "hanganalyze_gdbext"))


def _lint_imports() -> list:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.skip("import-linter is not installed (pip install -e .[test])")
    return [exe, "--config", str(ROOT / "pyproject.toml"), "--no-cache"]


def test_import_contracts_are_kept():
    env = {"PYTHONPATH": "%s:%s" % (ROOT / "analyzer", ROOT / "gdbext"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(_lint_imports(), cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def _modules() -> Dict[str, Path]:
    """Every module of both packages by dotted name (a package by its ``__init__``'s)."""
    found = {}
    for base, top in PACKAGES:
        for path in sorted((base / top).rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imports(name: str, path: Path, modules: Dict[str, Path]) -> Iterator[Tuple[ast.stmt, str]]:
    """(statement, module imported) for every import statement of one module, at any depth, to
    modules of the two packages: ``from pkg import sub`` names the submodule where one exists."""
    package = name if _is_package(path) else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield node, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = "%s.%s" % (source, alias.name)
                if sub in modules:
                    yield node, sub
                elif source in modules:
                    yield node, source


def import_graph() -> Dict[str, Set[str]]:
    """Module -> the modules it imports. A package's ``__init__`` importing its own submodules (to
    re-export them) is left out: that is how a package shows its parts, not a dependency back."""
    modules = _modules()
    graph: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, set())
        for _node, target in _imports(name, path, modules):
            if target == name or (_is_package(path) and target.startswith(name + ".")):
                continue
            edges.add(target)
    return graph


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted: every
    import cycle lies inside one of them."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(start: str) -> None:
        # Iterative, so that a long chain of imports cannot reach the recursion limit.
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(found)


def test_cycle_finder_finds_a_cycle():
    """The finder itself: a three-module loop is reported, a chain is not."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_sees_imports_inside_functions():
    """An import inside a function is an edge like any other (it hides a dependency otherwise)."""
    graph = import_graph()
    assert "hanganalyze.cli" in graph and graph["hanganalyze.cli"]
    assert any(target.startswith("hanganalyze_gdbext.model") for target in graph["hanganalyze.pipeline"])


def test_no_import_cycle_between_modules():
    found = cycles(import_graph())
    assert not found, "import cycles between modules:\n" + "\n".join(" <-> ".join(c) for c in found)


#: Modules whose imports inside functions are left to the helpers rewriting them (issue 29: the
#: finding registry rewrites pipeline.py and rules.py, the node-summary format replaces summary.py,
#: job.py's analyze_job moves): module -> how many of them still say nothing.  Only ever lowered.
LEFT_FOR_THE_REWRITE = {
    "hanganalyze.analyze.job": 1,
    "hanganalyze.analyze.rules": 3,
}


def _comment_lines(source: str) -> Set[int]:
    return {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT}


def imports_without_reason() -> Dict[str, List[str]]:
    """Module -> ``line: statement`` of each import inside a function with no comment on its line
    (its first or last line, for one wrapped in parentheses)."""
    found: Dict[str, List[str]] = {}
    for name, path in _modules().items():
        source = path.read_text()
        commented = _comment_lines(source)
        functions = [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        seen: Set[int] = set()
        for fn in functions:
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno not in seen:
                    seen.add(node.lineno)
                    if node.lineno not in commented and node.end_lineno not in commented:
                        found.setdefault(name, []).append("%d: %s" % (node.lineno, ast.unparse(node)))
    return found


def test_the_counter_sees_an_import_without_reason(tmp_path, monkeypatch):
    """The counter itself: an import inside a function counts unless a comment on its line says why."""
    (tmp_path / "mod.py").write_text("import os\n\n\ndef f():\n    import re\n    import json  # why\n")
    monkeypatch.setattr(sys.modules[__name__], "_modules", lambda: {"mod": tmp_path / "mod.py"})
    assert imports_without_reason() == {"mod": ["5: import re"]}


def test_imports_inside_functions_say_why():
    """Imports belong at the top of a module; one inside a function says why on its line (start-up
    time of a live read, an optional dependency, a gdb-only module)."""
    found = imports_without_reason()
    over = {m: lines for m, lines in found.items() if len(lines) > LEFT_FOR_THE_REWRITE.get(m, 0)}
    assert not over, "imports inside functions without a comment saying why:\n" + "\n".join(
        "%s:%s" % (m, line) for m, lines in sorted(over.items()) for line in lines)
