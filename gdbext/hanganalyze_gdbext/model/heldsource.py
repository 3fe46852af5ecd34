"""Which locks a Python frame holds, read from its source: ``with X:`` blocks and ``X.acquire()``.

Why: CPython records no owner for a plain ``threading.Lock`` (nor for the lock under a
``Condition``), so the most common Python deadlock -- two threads taking two Locks in opposite
order -- had waits with no held-by edge and no cycle.  The owner is still knowable: a thread whose
frame is inside ``with lock_a:`` holds ``lock_a``.  This module answers, for one frame (its file,
function, current line), which lock *expressions* it holds; the caller resolves them to objects
(``heldlocks.py``: memory of live processes and cores) or compares names (pasted stacks).

Strict on evidence, because a wrong owner invents a deadlock:

  * the source is parsed with ``ast`` (never compiled to code, never executed), at most
    ``MAX_SOURCE_BYTES``; a file that changed since (``firstlineno`` of the code object does not
    match the ``def``) or a function whose name does not match the frame's gives nothing;
  * ``with X:`` counts only when the current line lies in the block's body (a frame blocked on the
    ``with`` line itself is still acquiring);
  * ``X.acquire()`` counts only as a plain statement (blocking, no timeout) in a block that
    encloses the current line, before it, with no ``X.release()`` at or before the current line
    after it, in that function's source;
  * a lock whose ``.wait()`` / ``.wait_for()`` the current line calls (``Condition.wait`` releases
    it while waiting) is not held.

Standard library only, Python 3.8 syntax: it runs inside gdb too.
"""

import ast
import os
import stat
from typing import Dict, List, NamedTuple, Optional, Tuple

#: Source files larger than this are not read (a generated file is no place for a lock).
MAX_SOURCE_BYTES = 1 << 20
#: Pseudo-file systems a code object's file name may point into (a hostile core): never read.
_NOT_SOURCES = ("/proc/", "/sys/", "/dev/")
#: Parsed files kept per process run (each frame of each thread asks; files repeat).
MAX_CACHED = 64

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = _FUNCS + (ast.ClassDef, ast.Lambda)


class Held(NamedTuple):
    """A lock expression a frame holds: ``text`` as the code spells it (``self._lock``), ``expr`` its
    AST, ``how`` ("with" or "acquire") and ``line`` where it was taken."""

    text: str
    expr: ast.expr
    how: str
    line: int

    def describe(self, path: str) -> str:
        """"`with lock_a:` at /x/app.py:12" -- the evidence of an inferred held-by edge."""
        taken = "with %s:" % self.text if self.how == "with" else "%s.acquire()" % self.text
        return "`%s` at %s:%d" % (taken, path, self.line)


_cache: Dict[Tuple[str, int, int], Optional[ast.Module]] = {}


def parse_file(path: Optional[str]) -> Optional[ast.Module]:
    """The AST of a source file, or None: no such regular file, too large, not Python."""
    if not path or path.startswith("<") or path.startswith(_NOT_SOURCES):
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode) or not 0 < st.st_size <= MAX_SOURCE_BYTES:
        return None  # a FIFO or device would block, /proc files say size 0: a file name from a core is untrusted
    key = (path, st.st_mtime_ns, st.st_size)
    if key in _cache:
        return _cache[key]
    tree: Optional[ast.Module] = None
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
        if len(data) <= MAX_SOURCE_BYTES:
            tree = ast.parse(data, filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    if len(_cache) >= MAX_CACHED:
        _cache.clear()
    _cache[key] = tree
    return tree


def expr_text(e: Optional[ast.AST]) -> Optional[str]:
    """``a``, ``self.lock``, ``mod.LOCK``, ``locks[1]``; None for anything else (a call, a
    computed index): only what memory can resolve without running code."""
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        base = expr_text(e.value)
        return "%s.%s" % (base, e.attr) if base else None
    if isinstance(e, ast.Subscript):
        base = expr_text(e.value)
        idx = subscript_index(e)
        if idx is None:
            name = subscript_name(e)
            return "%s[%s]" % (base, name) if base is not None and name else None
        return "%s[%d]" % (base, idx) if base is not None else None
    return None


def subscript_name(e: ast.Subscript) -> Optional[str]:
    """The variable of ``x[i]`` (memory resolves it to the int it holds), else None."""
    s = e.slice
    s = getattr(s, "value", s) if type(s).__name__ == "Index" else s
    return s.id if isinstance(s, ast.Name) else None


def subscript_index(e: ast.Subscript) -> Optional[int]:
    """The constant non-negative int index of ``x[3]`` (3.8 wraps it in ``ast.Index``)."""
    s = e.slice
    s = getattr(s, "value", s) if type(s).__name__ == "Index" else s
    if isinstance(s, ast.Constant) and type(s.value) is int and s.value >= 0:
        return s.value
    return None


def _scope(tree: ast.Module, line: int, function: Optional[str],
           firstlineno: Optional[int]) -> Optional[List[ast.stmt]]:
    """The statements of the function the frame runs: the innermost def around ``line`` whose
    name is the frame's (``Worker.run`` -> ``run``) and whose first line is the code object's."""
    best: Optional[ast.AST] = None
    for node in ast.walk(tree):
        if isinstance(node, _SCOPES) and node.lineno <= line <= (node.end_lineno or 0):
            if best is None or node.lineno >= best.lineno:
                best = node
    name = (function or "").rsplit(".", 1)[-1]
    if best is None:
        return tree.body if name == "<module>" else None
    if not isinstance(best, _FUNCS) or best.name != name:
        return None
    first = best.decorator_list[0].lineno if best.decorator_list else best.lineno
    if firstlineno is not None and firstlineno != first:
        return None  # the file changed since the code was compiled
    return best.body


def _scope_node(tree: ast.Module, line: int, function: Optional[str],
                firstlineno: Optional[int]) -> Optional[ast.AST]:
    """The def (or the module) whose statements ``_scope`` returns."""
    body = _scope(tree, line, function, firstlineno)
    if body is None:
        return None
    if body is tree.body:
        return tree
    return next((n for n in ast.walk(tree) if isinstance(n, _FUNCS) and n.body is body), None)


def refers_to_global(path: Optional[str], line: Optional[int], function: Optional[str], text: str) -> bool:
    """Whether the root name of ``text`` (``lock_a`` of ``lock_a``, ``shared`` of ``shared.LOCK``)
    is a module global in the function at ``path:line``: not a parameter, not assigned there (or
    declared ``global``).  Two frames of one file spelling a global the same way name one object;
    ``self.lock`` in two frames may be two locks, so pastes (no addresses) match globals only."""
    root = text.split(".", 1)[0].split("[", 1)[0]
    tree = parse_file(path)
    node = _scope_node(tree, line or 0, function, None) if tree is not None and line else None
    if node is None:
        return False
    if isinstance(node, ast.Module):
        return True
    declared = set()
    local = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
    stack: List[ast.AST] = list(node.body)
    while stack:
        n = stack.pop()
        if isinstance(n, _SCOPES):
            continue  # a nested scope's names are its own
        if isinstance(n, ast.Global):
            declared.update(n.names)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            local.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            local.update((a.asname or a.name).split(".")[0] for a in n.names)
        stack.extend(ast.iter_child_nodes(n))
    return root in declared or root not in local


def _blocks(s: ast.stmt) -> List[List[ast.stmt]]:
    """The statement lists nested directly in a compound statement (not in nested scopes)."""
    if isinstance(s, _SCOPES):
        return []
    out = [getattr(s, f) for f in ("body", "orelse", "finalbody") if isinstance(getattr(s, f, None), list)]
    out += [h.body for h in getattr(s, "handlers", None) or []]
    out += [c.body for c in getattr(s, "cases", None) or []]
    return out


def _acquire_stmt(s: ast.stmt) -> Optional[ast.expr]:
    """X of a statement ``X.acquire()`` / ``X.acquire(True)`` (blocking, no timeout)."""
    if not isinstance(s, ast.Expr) or not isinstance(s.value, ast.Call):
        return None
    call = s.value
    if not isinstance(call.func, ast.Attribute) or call.func.attr != "acquire":
        return None
    ok = all(isinstance(a, ast.Constant) and a.value is True for a in call.args) and len(call.args) <= 1
    ok = ok and all(k.arg == "blocking" and isinstance(k.value, ast.Constant) and k.value.value is True
                    for k in call.keywords)
    return call.func.value if ok else None


def _calls(nodes: List[ast.stmt], attr: str) -> List[Tuple[str, int]]:
    """(receiver text, line) of every ``R.<attr>(...)`` call in these statements."""
    out: List[Tuple[str, int]] = []
    for top in nodes:
        for n in ast.walk(top):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attr:
                text = expr_text(n.func.value)
                if text:
                    out.append((text, n.lineno))
    return out


def held_at(path: Optional[str], line: Optional[int], function: Optional[str],
            firstlineno: Optional[int] = None) -> List[Held]:
    """The lock expressions a frame at ``path:line`` in ``function`` provably holds (see the module
    docstring for what "provably" means), outermost first."""
    if not line or line <= 0:
        return []
    tree = parse_file(path)
    body = _scope(tree, line, function, firstlineno) if tree is not None else None
    if not body:
        return []
    held: List[Held] = []
    current: Optional[ast.stmt] = None
    stmts: List[ast.stmt] = body
    while True:
        hit = next((i for i, s in enumerate(stmts) if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
        if hit is None:
            break
        for s in stmts[:hit]:
            x = _acquire_stmt(s)
            text = expr_text(x)
            if x is not None and text:
                held.append(Held(text, x, "acquire", s.lineno))
        current = stmts[hit]
        if isinstance(current, ast.With):
            if not current.body or line < current.body[0].lineno:
                break  # on the with line: still acquiring
            for item in current.items:
                text = expr_text(item.context_expr)
                if text:
                    held.append(Held(text, item.context_expr, "with", current.lineno))
        inner = next((b for b in _blocks(current) if b and b[0].lineno <= line <= (b[-1].end_lineno or 0)), None)
        if inner is None:
            break
        stmts = inner
    if not held:
        return []
    releases = _calls(body, "release")
    waits = set()
    if current is not None:
        waits = {text for text, ln in _calls([current], "wait") + _calls([current], "wait_for") if ln == line}
    out = []
    for h in held:
        if any(text == h.text and h.line < ln <= line for text, ln in releases):
            continue  # released (or being released) since it was taken
        if h.text in waits:
            continue  # Condition.wait() releases its lock while it waits
        out.append(h)
    return out


def acquiring_at(path: Optional[str], line: Optional[int], function: Optional[str] = None,
                 firstlineno: Optional[int] = None) -> Optional[str]:
    """The lock expression the statement at ``path:line`` is acquiring: ``X`` of a ``with X:``
    header with one item on that line, or of ``X.acquire()``; None otherwise.  Pastes carry no
    addresses: the awaited lock is matched to the held ones by this text."""
    if not line or line <= 0:
        return None
    tree = parse_file(path)
    body = _scope(tree, line, function, firstlineno) if tree is not None else None
    if not body:
        return None
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.With) and node.lineno == line and len(node.items) == 1:
            return expr_text(node.items[0].context_expr)
        if isinstance(node, ast.stmt) and node.lineno == line:
            x = _acquire_stmt(node)
            if x is not None:
                return expr_text(x)
    return None
