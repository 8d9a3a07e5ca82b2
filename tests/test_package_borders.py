"""The borders between the three packages, read from the source with ``ast`` (issue 24 §5).

1. No module of one package imports a private name (a ``_x`` module or attribute) from another:
   ``audit`` and ``attacks`` use ``accountants`` through its public modules only.
2. The import graph of the project's modules has no cycle. Every import statement counts, the
   ones inside functions included (a lazy import hides a cycle from Python, not from a reader);
   imports under ``if TYPE_CHECKING:`` do not run and do not count.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("accountants", "attacks", "audit")


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that runs, at any depth (skips ``if TYPE_CHECKING:`` bodies)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]))
        else:
            yield from _imports(node)


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str | None]]:
    """(imported module, imported attribute or None) for each name of one import statement."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, None
        return
    if node.level:
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        yield (sub, None) if sub in MODULES else (base, alias.name)


def _edges() -> dict[str, set[tuple[str, str | None]]]:
    out: dict[str, set[tuple[str, str | None]]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        out[module] = {t for node in _imports(tree) for t in _targets(module, node)}
    return out


EDGES = _edges()


def _private(target: str, name: str | None) -> bool:
    parts = [*target.split("."), *([name] if name else [])]
    return any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts)


def test_the_scan_sees_the_packages():
    """The scan reads real modules and real edges (so the tests below cannot pass on nothing)."""
    assert {"accountants.api", "attacks.dpsgd", "audit.runs"} <= MODULES.keys()
    assert ("accountants.events", "DPSGD") in EDGES["accountants.api"]
    assert any(t.startswith("accountants") for t, _ in EDGES["audit.runs"])


def test_no_private_imports_across_packages():
    """A module of one package never imports ``_x`` from another package."""
    bad = sorted(
        f"{module} imports {target}{'.' + name if name else ''}"
        for module, targets in EDGES.items()
        for target, name in targets
        if target.split(".")[0] in PACKAGES
        and target.split(".")[0] != module.split(".")[0]
        and _private(target, name)
    )
    assert not bad, "private names imported across packages:\n" + "\n".join(bad)


def _graph() -> dict[str, set[str]]:
    return {m: {t for t, _ in targets if t in MODULES and t != m} for m, targets in EDGES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules (first == last), or None (iterative DFS)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    for root in sorted(graph):
        if root in state:
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state.get(child) == 1:
                return [*path[path.index(child) :], child]
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph[child]))))
    return None


def test_cycle_finder_finds_a_planted_cycle():
    """The checker itself: a planted cycle is found, an acyclic graph passes."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_import_graph_is_acyclic():
    """No module reaches itself through imports (issue 24: ``describe ⇄ events/mechanisms/sampling``
    and ``api ⇄ shuffle ⇄ tradeoff`` were the two cycles)."""
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])
