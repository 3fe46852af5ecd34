"""Refuse YAML documents whose aliases expand to something huge, loop, or nest absurdly deep.

YAML anchors are allowed in signature files (shared pieces under ``common:``), and PyYAML builds
an alias as a reference to the same object, so *loading* an alias bomb ("billion laughs": nine
lists of nine aliases, nine levels deep) is cheap.  Everything that walks the result afterwards
is not: the schema validator visits 9^9 strings and the run hangs.  A recursive alias
(``&a [*a]``) makes a cyclic structure that recursive walkers never leave, and deep nesting
ends in RecursionError.  So the composed node graph is measured first, iteratively (no
recursion), counting each node as many times as aliases make a walker visit it.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import yaml

#: Nodes a walker may visit after alias expansion: the built-in files have a few thousand each.
MAX_EXPANDED_NODES = 200_000
#: Deepest nesting accepted (the signature schema needs about 12 levels).
MAX_DEPTH = 100


def _children(node: yaml.Node) -> List[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for kv in node.value for n in kv]
    return []


def check_node(node: Optional[yaml.Node], max_nodes: int = MAX_EXPANDED_NODES,
               max_depth: int = MAX_DEPTH) -> Optional[str]:
    """Why the document under `node` is unsafe to walk, or None.  `node` is what
    ``yaml.SafeLoader(text).get_single_node()`` returns (before construction)."""
    if node is None:
        return None
    size: Dict[int, int] = {}  # id(node) -> expanded size, once known
    on_path: Dict[int, bool] = {}
    stack: List[Tuple[yaml.Node, int, bool]] = [(node, 1, False)]
    while stack:
        n, depth, done = stack.pop()
        key = id(n)
        if done:
            on_path.pop(key, None)
            size[key] = 1 + sum(size[id(c)] for c in _children(n))
            if size[key] > max_nodes:
                return "aliases expand to more than %d nodes (an alias bomb?)" % max_nodes
            continue
        if key in size:
            continue
        if key in on_path:
            line = n.start_mark.line + 1 if n.start_mark else 0
            return "line %d: an alias refers to a node that contains it (recursive alias)" % line
        if depth > max_depth:
            line = n.start_mark.line + 1 if n.start_mark else 0
            return "line %d: nested more than %d levels deep" % (line, max_depth)
        on_path[key] = True
        stack.append((n, depth, True))
        for c in _children(n):
            if id(c) in on_path:
                line = c.start_mark.line + 1 if c.start_mark else 0
                return "line %d: an alias refers to a node that contains it (recursive alias)" % line
            if id(c) not in size:
                stack.append((c, depth + 1, False))
    return None
