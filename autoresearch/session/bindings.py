"""The names a change removes, read from the code on both sides of it, never from its title.

A pull request that says "remove unused import `sinks`" while its diff also removes
`logger` hides a change from its reviewer. Every Python file a set changes is parsed at the
base and at the set's tip; a name bound fewer times after than before (an import, a def, a
class, an assignment) is removed, and the tree at the tip is searched for it: a name still
written somewhere is not "dead", whatever the finding said.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from autoresearch.safety import git


@dataclass(frozen=True)
class Removed:
    """One name a change removes from one file, and where the tree still names it."""

    name: str
    path: str
    what: str  # "import", "function", "class", "assignment"
    still_named_in: tuple[str, ...]  # files at the tip that still hold the word

    @property
    def unreferenced(self) -> bool:
        return not self.still_named_in


def bound(source: str) -> Counter[tuple[str, str]] | None:
    """Every (name, what) the source binds, counted; None when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    names: Counter[tuple[str, str]] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    names[(alias.asname or alias.name, "import")] += 1
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names[(node.name, "function")] += 1
        elif isinstance(node, ast.ClassDef):
            names[(node.name, "class")] += 1
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names[(node.id, "assignment")] += 1
    return names


IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+\S+[ \t]+)?import[ \t]+\(?([^#)\n]+)", re.M)


NAME = re.compile(r"[A-Za-z_][\w.]*")


def imported(source: str) -> Counter[tuple[str, str]]:
    """The names the import lines of `source` bind, counted (one-line imports only)."""
    names: Counter[tuple[str, str]] = Counter()
    for match in IMPORT.finditer(source):
        for part in match.group(1).split(","):
            words = part.split()
            if words and NAME.fullmatch(words[-1]):
                names[(words[-1], "import")] += 1
    return names


def _source(repo: Path, commit: str, path: str) -> str:
    proc = git.raw(repo, "cat-file", "blob", f"{commit}:{path}")
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else ""


def removed_names(repo: Path, base: str, tip: str, files: list[str]) -> list[Removed]:
    """The names the change base..tip removes from its Python files, in file order."""
    out: list[Removed] = []
    for path in files:
        if not path.endswith(".py"):
            continue
        before, after = bound(_source(repo, base, path)), bound(_source(repo, tip, path))
        if before is None or after is None:
            # Code this Python cannot parse (another version's syntax): its import lines.
            before = imported(_source(repo, base, path))
            after = imported(_source(repo, tip, path))
        for (name, what), count in sorted(before.items()):
            if after[(name, what)] < count:
                out.append(Removed(name, path, what, named_in(repo, tip, name, path, what)))
    return out


def named_in(repo: Path, tip: str, name: str, path: str, what: str) -> tuple[str, ...]:
    """The files at `tip` that may still refer to `name` as `path` bound it: the file itself
    (the word anywhere in it), and for an import, def or class, every other file naming
    both the module and the name (`from pkg.mod import name`, `mod.name`). An assigned name
    is a local more often than not: its own file says whether it is still read."""
    found = set(_grep(repo, tip, ["-e", name], [path]))
    if what != "assignment":
        module = Path(path).parent.name if Path(path).name == "__init__.py" else Path(path).stem
        both = ["--all-match", "-e", module, "-e", name]
        found |= {
            other
            for other in _grep(repo, tip, both, [".", f":(exclude){path}"])
            if refers(_source(repo, tip, other), other, module, name)
        }
    return tuple(sorted(found))


def refers(source: str, path: str, module: str, name: str) -> bool:
    """Whether `source` (the file `path`), which holds both words, reaches `name` through
    `module`: imports it from the module (`from pkg.module import name`, also across
    lines) or reads `module.name`. A Python file naming both apart (its own
    `typing.Optional`, the module's word in a comment) does not. Text that is not Python,
    or Python this one cannot parse, may mean it in any words (a README's "m4 wraps text
    with textwrap"): it does."""
    if not path.endswith(".py"):
        return True
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return True
    nodes = list(ast.walk(tree))
    local = {module}  # what the module is called here (`import pkg.module as m`: m)
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.asname and alias.name.split(".")[-1] == module:
                    local.add(alias.asname)
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == module:
            if any(alias.name in (name, "*") for alias in node.names):
                return True
        elif isinstance(node, ast.Attribute) and node.attr == name:
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id in local) or (
                isinstance(owner, ast.Attribute) and owner.attr == module
            ):
                return True
    return False


def _grep(repo: Path, tip: str, patterns: list[str], paths: list[str]) -> list[str]:
    """The files at `tip` under `paths` holding the patterns as whole words."""
    proc = git.raw(repo, "grep", "-l", "-w", "-F", *patterns, tip, "--", *paths)
    if proc.returncode not in (0, 1):
        return []
    prefix = f"{tip}:"
    lines = proc.stdout.decode("utf-8", "replace").splitlines()
    return [line.removeprefix(prefix) for line in lines]
