"""The package's import graph has no cycle: a module never needs, even lazily, one that needs it."""

from __future__ import annotations

import ast
from pathlib import Path

import evaltrail

SRC = Path(evaltrail.__file__).resolve().parent.parent


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__) for every module of evaltrail."""
    out = {}
    for path in sorted((SRC / "evaltrail").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _targets(name: str, is_package: bool, node: ast.Import | ast.ImportFrom, known) -> set[str]:
    """The evaltrail modules an import statement loads (its deepest known module per name)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        here = name.split(".") if is_package else name.split(".")[:-1]
        base = here[: len(here) - node.level + 1] if node.level else []
        prefix = ".".join(base + ([node.module] if node.module else []))
        names = [f"{prefix}.{a.name}" if prefix else a.name for a in node.names]
    out = set()
    for target in names:
        while target not in known and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in known and target != name:
            out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the evaltrail modules it imports anywhere in its body (function-level too)."""
    known = _modules()
    graph = {}
    for name, (path, is_package) in known.items():
        nodes = ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        imports = [n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))]
        graph[name] = set().union(*(_targets(name, is_package, n, known) for n in imports))
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path [a, b, ..., a], or None (depth-first search, iterative)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_find_cycle_finds_one_and_only_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"p": {"p.x"}, "p.x": {"p"}}) == ["p", "p.x", "p"]


def test_the_graph_sees_relative_and_lazy_imports():
    graph = import_graph()
    assert "evaltrail.metrics.registry" in graph["evaltrail.metrics.accuracy"]  # from .registry import
    assert "evaltrail.adapters" in graph["evaltrail.metrics.scoring"]  # inside score_cell


def test_no_import_cycle_in_src():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
