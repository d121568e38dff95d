"""The package's shape, as docs/architecture.md describes it, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("autoresearch", "scripts")
MODE_NAMES = ("sweep", "narrow", "broad", "experiment", "security", "debug", "scenario", "predict")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module of ours that `name` imports, at the top or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def test_the_import_graph_has_no_cycle():
    found = modules()
    graph = {name: imports_of(name, path, set(found)) for name, path in found.items()}
    # A package imports its own __init__ first: not an edge of its own making.
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def mode_branches(tree: ast.AST) -> list[int]:
    """Lines that branch on a mode name: a comparison with one, or a table keyed by them."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            consts = [
                n.value
                for n in ast.walk(node)
                if isinstance(n, ast.Constant) and n.value in MODE_NAMES
            ]
            if consts:
                lines.append(node.lineno)
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            if sum(k in MODE_NAMES for k in keys) >= 2:
                lines.append(node.lineno)
    return lines


def test_only_the_modes_know_which_mode_a_session_is_in():
    offenders = []
    for name, path in modules().items():
        if name.startswith("autoresearch.modes"):
            continue
        text = path.read_text()
        for number in mode_branches(ast.parse(text)):
            line = text.splitlines()[number - 1].strip()
            offenders.append(f"{path.relative_to(ROOT)}:{number}: {line}")
    assert not offenders, "\n".join(offenders)
