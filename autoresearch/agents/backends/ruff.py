"""The `ruff` backend: a mechanical team that needs no model and no key.

Red reports `ruff check` diagnostics under the target's own config (plus
`agent.ruff.select`), Green applies for one finding at a time the fix the target's
own `ruff check --fix` would when that fix keeps behaviour, Refactor runs `ruff format`
on the files Green changed that were already as `ruff format` writes them at the session's
base (a target that does not use the formatter gets no whole-file rewrite). It works only
through the toolbox, so every change is sandboxed, test-gated and committed by the harness
exactly as a model's would be.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autoresearch.agents.backends.base import (
    NOTHING_TO_TOUCH,
    StageBrief,
    StageFailed,
    StageRun,
    Toolbox,
    ToolResult,
    Usage,
)
from autoresearch.engine import findings
from autoresearch.safety import child_env, git, worktree_files
from autoresearch.session import bindings, lintconfig

LOCATION = re.compile(r"^(?P<path>.+?):(?P<line>\d+)")
CODE = re.compile(r"^(?P<code>[A-Z]+[0-9]+)\b")
LINE_BREAK = re.compile(r"\r\n|\r|\n")
# RUF100's message: "Unused `noqa` directive (unused: `F401`; non-enabled: `E501`, `A003`)"
NOQA_GROUP = re.compile(r"(unused|non-enabled|unknown|duplicated): ((?:`[^`]+`(?:, )?)+)")
NOQA_CODE = re.compile(r"[A-Z]+[0-9]+")
TEST_FILE = re.compile(r"(?:^|/)(?:test_[^/]*|[^/]*_test)\.py$")  # pytest's default files
MOVED_STEPS = 5  # further fixes of one rule its first fix may set off (an if-chain's branches)
SNIPPET = 60  # characters of the flagged line a finding's title quotes
CRITICAL = re.compile(r"^(E9|F63|F7|F82)")
# B009/B010 (`getattr(x, "a")`) only spell an attribute access the long way: medium.
HIGH = re.compile(r"^(B(?!009|010)\d|E711|E712|E721|E722|F811|PLE|S\d)")
MEDIUM = re.compile(r"^(F|SIM|C4|PERF|RET|B009|B010)")
# Modules whose import changes the running interpreter (line editing, the site hooks, a
# codec registry): an "unused" import of one is there for what importing it does.
SIDE_EFFECT_MODULES = frozenset(
    {"readline", "rlcompleter", "site", "sitecustomize", "usercustomize", "antigravity", "this"}
)
IMPORT_RULES = frozenset({"F401"})  # rules whose fix removes an import
# Rules whose fix writes syntax of a newer Python (pyupgrade, future annotations).
NEWER_SYNTAX = ("UP", "FA")
# ... but these write what every Python 3 runs: `class A:`, `super()`, no coding line, no
# __future__ import, OSError, "" for u"", no extra parentheses.
ANY_PYTHON3 = frozenset({"UP004", "UP008", "UP009", "UP010", "UP024", "UP025", "UP034"})
OLDER_PYTHON = "older-python"  # a fix's applicability: the target supports a Python below py37
# A comment that says an import is there for others to import from this module.
FOR_OTHERS = re.compile(
    r"backward|compat|re-?export|\bexpos|\bdeprecat|public|\bAPI\b|for (?:callers|users)",
    re.IGNORECASE,
)
GONE = "ruff no longer reports it"  # a finding whose diagnostic is not there any more
DOCTEST_LINE = re.compile(r"^\s*(?:>>>|\.\.\.)\s(.*)$", re.MULTILINE)
UNUSED_NAME_DOTTED = re.compile(r"^`([\w.]+)`")  # F401's "`pkg.mod.name` imported but unused"
UNUSED_NAME = re.compile(r"`(?P<name>[A-Za-z_][A-Za-z_0-9]*)`")
IMPACT = {
    "critical": "The code fails at run time or cannot be imported.",
    "high": "Likely incorrect behaviour or errors hidden from the caller.",
    "medium": "Dead or misleading code that hides real problems and slows readers down.",
    "low": "Inconsistent style that makes the code harder to read and review.",
}


# `-P`: `python -m ruff` in the worktree would otherwise import a `ruff` package the agent
# wrote there, on the host, outside the jail. The environment is the allowlist's.
RUFF = (sys.executable, "-P", "-m", "ruff")


def ruff(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*RUFF, *args],
        cwd=str(cwd),
        capture_output=True,
        text=True,
        env=child_env.for_tool(),
    )


def diagnostics(
    worktree: Path, *paths: str, extend: list[str] | None = None
) -> list[dict[str, Any]]:
    """ruff's findings under the target's own config, never fixed in place (`--no-fix`,
    whatever that config says): reporting must not change a file. A ruff that fails is an
    error, not "no findings". `extend` adds rules to the target's selection (a finding may
    come from a count run with other rules than the project's); it never replaces it, so
    what ruff calls enabled stays what the target enables."""
    rules = ["--extend-select", ",".join(extend)] if extend else []
    floor = lintconfig.python_floor(Path(worktree))
    if floor:  # the oldest Python the target declares where ruff does not read it
        rules += ["--target-version", f"py3{max(floor[1], lintconfig.RUFF_FLOOR)}"]
    proc = ruff(
        "check",
        "--output-format=json",
        "--no-cache",
        "--no-fix",
        "--exit-zero",
        *rules,
        *(paths or (".",)),
        cwd=worktree,
    )
    try:
        found = json.loads(proc.stdout or "")
    except json.JSONDecodeError:
        found = None
    if proc.returncode != 0 or not isinstance(found, list):
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [
            f"exit {proc.returncode}"
        ]
        raise StageFailed(
            f"ruff check failed in {worktree} ({detail[0]}); check agent.ruff.select and "
            "the target's ruff config"
        )
    if floor and floor[1] < lintconfig.RUFF_FLOOR:
        for diag in found:
            code = diag.get("code") or ""
            if code.startswith(NEWER_SYNTAX) and code not in ANY_PYTHON3 and diag.get("fix"):
                # No target-version says 3.5 or 3.6: what these fixes write may not run there.
                diag["fix"] = {**diag["fix"], "applicability": OLDER_PYTHON, "floor": floor}
    return target_rules_only(worktree, readable_only(worktree, found))


def target_rules_only(worktree: Path, diags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop what the target's own flake8 settings ignore (lintconfig): a rule the target
    ignores on purpose is not a finding, and so never fixed."""
    config = lintconfig.read(Path(worktree))
    if config.flake8 is None:
        return diags
    root = Path(worktree).resolve()
    kept = []
    for diag in diags:
        name = Path(diag.get("filename") or "").resolve()
        path = name.relative_to(root).as_posix() if name.is_relative_to(root) else name.name
        if not config.drops(diag.get("code") or "", path, diag.get("message") or ""):
            kept.append(diag)
    return kept


def readable_only(worktree: Path, diags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ruff follows links: drop what it says about a file the worktree reader refuses (a link
    out of the worktree), whose messages would carry names from outside into the findings."""
    root = Path(worktree).resolve()
    kept = []
    for diag in diags:
        name = Path(diag.get("filename") or "")
        for base in (Path(worktree).absolute(), root):
            if name.is_relative_to(base):
                rel = name.relative_to(base).as_posix()
                if worktree_files.why_unreadable(worktree, rel) is None:
                    kept.append(diag)
                break
    return kept


def unused_imports(worktree: Path, path: str) -> list[dict[str, Any]]:
    return [d for d in diagnostics(worktree, path, extend=["F401"]) if d.get("code") == "F401"]


def titles_of(diags: list[dict[str, Any]], text: str) -> list[str]:
    """Each diagnostic of one file as a finding's title: the rule and message, the source
    line it is on and, when several alike share that line's text, which of them.

    This is a diagnostic's identity across cycles: it survives lines moving above it (a
    removed import), keeps twins apart (two `f""` on one line, the same call on two lines)
    and changes when its own line does (a twin on it was fixed)."""
    lines = LINE_BREAK.split(text.removeprefix("\ufeff"))
    keys = []
    for d in diags:
        row, column = d["location"]["row"], d["location"]["column"]
        line = lines[row - 1] if 0 < row <= len(lines) else ""
        keys.append((f"{d.get('code') or 'syntax'} {d['message']}", snippet(line, column)))
    total = Counter(keys)
    seen: Counter[tuple[str, str]] = Counter()
    order = sorted(
        range(len(diags)),
        key=lambda i: (diags[i]["location"]["row"], diags[i]["location"]["column"]),
    )
    titles = [""] * len(diags)
    for i in order:
        base, where = keys[i]
        seen[keys[i]] += 1
        titles[i] = base + (f" in `{where}`" if where else "")
        if total[keys[i]] > 1:
            titles[i] += f" ({seen[keys[i]]} of {total[keys[i]]})"
    return titles


def tried_before(tried: str, title: str, path: str) -> bool:
    """Whether the tried list names this diagnostic of `path`: by the title Red reports,
    or by the one sanitize passed on, which the list holds where the two differ."""
    if f" {title} ({path}:" in tried:
        return True
    return f" {findings.sanitized_title(title)} ({path}:" in tried


def snippet(line: str, column: int, width: int = SNIPPET) -> str:
    """The line without its indentation, cut to `width` characters around `column`."""
    text = line.strip()
    if len(text) <= width:
        return text
    at = column - 1 - (len(line) - len(line.lstrip()))
    start = max(0, min(at - width // 3, len(text) - width))
    cut = text[start : start + width]
    return ("…" if start else "") + cut + ("…" if start + width < len(text) else "")


def within_slots(reports: list[tuple], limit: int | None) -> list[tuple]:
    """Red's reports `(unfixable, path, diag, title)`, the fixable first; of those with no
    safe fix that outrank a fixable one, only as many as the cycle's fix slots
    (`max_findings`) leave over.

    Sanitize ranks by severity before report order, so a critical Green must skip would
    take the slot of a medium it can fix. One held back now is reported in a later cycle
    (it is not tried yet). One that does not outrank every fixable one sorts after them
    and goes now, to Green's spare slots or to ideas.md."""
    ordered = sorted(reports, key=lambda r: r[0])
    rank = {level: i for i, level in enumerate(("critical", "high", "medium", "low"))}

    def level(report: tuple) -> int:
        return rank[severity_of(report[2].get("code") or "syntax")]

    fixes = [level(r) for r in ordered if not r[0] and level(r) < rank["low"]]
    if not limit or not fixes:
        return ordered
    room, least = limit - len(fixes), max(fixes)
    kept = []
    for report in ordered:
        if report[0] and level(report) < least:
            if room <= 0:
                continue
            room -= 1
        kept.append(report)
    return kept


def severity_of(code: str) -> str:
    for level, pattern in (("critical", CRITICAL), ("high", HIGH), ("medium", MEDIUM)):
        if pattern.match(code):
            return level
    return "low"


def apply_edits(text: str, edits: list[dict[str, Any]]) -> str:
    """Apply ruff's fix edits (1-based rows, columns in characters) from the end backwards.

    Everything outside the edits comes back exactly: line endings, a byte-order mark (ruff
    counts columns after it), a missing final newline. Rows are ruff's, which only \n, \r\n
    and \r end (str.splitlines also splits at a form feed and would shift every row below).
    """
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    text = text[len(bom) :]
    starts = [0] + [m.end() for m in LINE_BREAK.finditer(text)]

    def offset(loc: dict[str, int]) -> int:
        row = loc["row"] - 1
        base = starts[row] if row < len(starts) else len(text)
        return min(base + loc["column"] - 1, len(text))

    for edit in sorted(edits, key=lambda e: offset(e["location"]), reverse=True):
        start, end = offset(edit["location"]), offset(edit["end_location"])
        text = text[:start] + (edit.get("content") or "") + text[end:]
    return bom + text


def no_new_leading_blank(before: str, after: str) -> str:
    """`after` without the blank lines a fix left at the top of the file: removing a file's
    first import leaves the blank line that followed it first, which the file never had."""
    bom = "\ufeff" if after.startswith("\ufeff") else ""
    body = after[len(bom) :]
    if before.removeprefix("\ufeff")[:1] in ("\n", "\r") or body[:1] not in ("\n", "\r"):
        return after
    return bom + body.lstrip("\r\n")


def fix_edits(
    diag: dict[str, Any],
    text: str,
    path: str,
    tests_editable: bool = False,
    importers: Importers | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """The edits that fix `diag` in `text` (the file `path`), or none and why not: what the
    target's own `ruff check --fix` would apply (its `unfixable` and safe-fix tables are
    already in the diagnostic), and only where that keeps what the code does: never a fix
    ruff calls unsafe, whatever the target enables, nor the removal of an import that is
    there for what importing it does (`kept_import`), nor, unless `tests_editable`
    (allow_test_edits), an edit to a test's code (`in_test`)."""
    code = diag.get("code") or "syntax"
    fix = diag.get("fix") or {}
    edits = fix.get("edits") or []
    if code in IMPORT_RULES:
        # First: an import kept on purpose is no problem left for a person, which "no
        # automatic fix" (ruff offers none in a package's __init__.py) would suggest.
        why = kept_import(diag, text, path)
        if why:
            return [], why
    if not edits:
        return [], f"ruff has no automatic fix for {code}"
    applicability = fix.get("applicability", "safe")
    if applicability == OLDER_PYTHON:
        where, minor = fix["floor"]
        return [], (
            f"the target supports Python 3.{minor} ({where}), older than ruff can check "
            f"(3.{lintconfig.RUFF_FLOOR}): its {code} fix may write what 3.{minor} cannot run"
        )
    if applicability == "display-only":
        return [], f"ruff only shows its fix for {code}; it never applies it"
    if applicability != "safe":
        return [], (
            f"ruff's fix for {code} is unsafe (it may change what the code does); the ruff "
            "backend applies only fixes that keep behaviour"
        )
    if code == "F401" and importers is not None:
        why = importers.why_kept(diag, text, path)
        if why:
            return [], why
    if code == "F841":
        why = kept_binding(diag, text)
        if why:
            return [], why
    if code == "SIM300":
        why = kept_ladder(diag, text)
        if why:
            return [], why
    if not tests_editable:
        why = in_test(diag, text, path)
        if why:
            return [], why
    if code == "RUF100":
        return noqa_edits(diag, text, edits)
    return edits, ""


def in_test(diag: dict[str, Any], text: str, path: str) -> str:
    """Why the diagnostic lies in a test's code, or "": a function pytest collects by
    default (`test*`, at the top or in a class, of a `test_*.py` or `*_test.py` file). The
    test gate keeps no edit to an existing test's code unless `allow_test_edits: true`, so
    a fix there would be tested, bisected and taken out, and would hold a fix slot."""
    if not TEST_FILE.search(path):
        return ""
    try:
        tree = ast.parse(text.removeprefix("\ufeff"))
    except (SyntaxError, ValueError):
        return ""
    row = diag["location"]["row"]
    members = [n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body]
    for node in [*tree.body, *members]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first <= row <= (node.end_lineno or node.lineno):
                return (
                    f"the line is in test `{node.name}`: the test gate keeps no edit to an "
                    "existing test's code unless allow_test_edits: true"
                )
    return ""


class Importers:
    """Who imports a name from a module of the worktree, read once per stage on first need
    (the files ruff would check): a name another module imports from here is no unused
    import, whatever this file does with it (a re-export without `__all__`)."""

    def __init__(self, worktree: Path) -> None:
        self.worktree = worktree
        self._texts: dict[str, str] | None = None

    def _files(self) -> dict[str, str]:
        if self._texts is None:
            listed = ruff("check", "--show-files", "--no-cache", cwd=self.worktree).stdout
            root = self.worktree.resolve()
            self._texts = {}
            for line in listed.splitlines():
                try:
                    rel = Path(line.strip()).resolve().relative_to(root).as_posix()
                    if rel.endswith((".py", ".pyi")):
                        self._texts[rel] = read_source(self.worktree, rel)
                except (ValueError, *UNREADABLE):
                    continue
        return self._texts

    def why_kept(self, diag: dict[str, Any], text: str, path: str) -> str:
        named = UNUSED_NAME_DOTTED.search(diag.get("message") or "")
        if named is None:
            return ""
        name = named.group(1).split(".")[-1]
        renamed = re.search(rf"\b{re.escape(name)}\s+as\s+(\w+)", text)
        name = renamed.group(1) if renamed else name
        module = Path(path).stem
        users = sorted(
            other
            for other, source in self._files().items()
            if other != path
            and name in source
            and module in source
            and bindings.refers(source, other, module, name)
        )
        if not users:
            return ""
        shown = ", ".join(users[:3]) + (f" and {len(users) - 3} more" if len(users) > 3 else "")
        return (
            f"`{name}` is imported from {path} by {shown}: removing it breaks them "
            "(a re-export); it is kept"
        )


def kept_ladder(diag: dict[str, Any], text: str) -> str:
    """Why a constant-first comparison SIM300 flags is kept, or "": it is a rung of a range
    ladder, the same expression between two bounds elsewhere in the same function
    (`60 <= s < 3600` ... `3600 <= s`). Flipped, the last rung no longer reads as the rest."""
    try:
        tree = ast.parse(text.removeprefix("\ufeff"))
    except (SyntaxError, ValueError):
        return ""
    row = diag["location"]["row"]
    functions = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.lineno <= row <= (node.end_lineno or node.lineno)
    ]
    scope = min(functions, key=lambda n: (n.end_lineno or n.lineno) - n.lineno, default=tree)
    compares = [node for node in ast.walk(scope) if isinstance(node, ast.Compare)]
    flagged = [
        node
        for node in compares
        if node.lineno == row and isinstance(node.left, ast.Constant) and len(node.ops) == 1
    ]
    if not flagged:
        return ""
    subject = ast.unparse(flagged[0].comparators[0])
    for node in compares:
        if len(node.ops) == 2 and ast.unparse(node.comparators[0]) == subject:
            return (
                f"`{ast.unparse(flagged[0])}` is a rung of the range ladder "
                f"`{ast.unparse(node)}` (line {node.lineno}): the constant-first order is the "
                "ladder's, not a yoda condition; it is kept"
            )
    return ""


def kept_binding(diag: dict[str, Any], text: str) -> str:
    """Why a local the rule calls unused is kept, or "": its name is read elsewhere in the
    same function. ruff judges each binding alone, and an `except ... as exc` whose `exc` a
    nested handler raises looks unused to it; without the binding that read fails."""
    name = UNUSED_NAME.search(diag.get("message") or "")
    try:
        tree = ast.parse(text.removeprefix("\ufeff"))
    except (SyntaxError, ValueError):
        return "the file does not parse, so the name's uses cannot be read; it is kept"
    if name is None:
        return ""
    row = diag["location"]["row"]
    functions = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        and node.lineno <= row <= (node.end_lineno or node.lineno)
    ]
    scope = min(functions, key=lambda n: (n.end_lineno or n.lineno) - n.lineno, default=tree)
    reads = [
        node
        for node in ast.walk(scope)
        if isinstance(node, ast.Name) and node.id == name["name"] and isinstance(node.ctx, ast.Load)
    ]
    if reads:
        return (
            f"`{name['name']}` is read elsewhere in the same function (line {reads[0].lineno}): "
            "whether this binding is unused depends on the paths through it; it is kept"
        )
    return ""


def public_names(tree: ast.Module) -> set[str]:
    """The names a module's own `__all__` lists (assigned or extended at module level)."""
    names: set[str] = set()
    for stmt in tree.body:
        targets = (
            stmt.targets
            if isinstance(stmt, ast.Assign)
            else [stmt.target]
            if isinstance(stmt, (ast.AugAssign, ast.AnnAssign))
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = getattr(stmt, "value", None)
            if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
                names |= {
                    e.value
                    for e in value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }
    return names


def kept_import(diag: dict[str, Any], text: str, path: str) -> str:
    """Why the import `diag` flags stays although nothing reads its name, or "".

    An import inside a `try:` (or its handlers) is a feature probe: whether it fails is
    what the code reads (`HAVE_READLINE = False`), so removing it makes the probe always
    succeed. Importing a module with side effects is the point of the line. A package's
    `__init__.py` and a compatibility module (`compat.py`, `_compat.py`, `compatibility.py`)
    import what they re-export. A file that does not parse is left alone."""
    if Path(path).name == "__init__.py":
        return (
            f"{path} is a package's __init__.py: what it imports is what the package "
            "re-exports, so an import there is kept"
        )
    if "compat" in Path(path).stem.lower():
        return (
            f"{path} is a compatibility module: the names it imports are there for others "
            "to import from it (a re-export), so an import there is kept"
        )
    try:
        tree = ast.parse(text.removeprefix("\ufeff"))
    except (SyntaxError, ValueError):
        return "the file does not parse, so the import's role cannot be read; it is kept"
    row = diag["location"]["row"]
    stack: list[ast.AST] = []

    def find(node: ast.AST) -> ast.AST | None:
        for child in ast.iter_child_nodes(node):
            start, end = getattr(child, "lineno", None), getattr(child, "end_lineno", None)
            if start is not None and end is not None and not start <= row <= end:
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                return child
            stack.append(child)
            found = find(child)
            if found is not None:
                return found
            stack.pop()
        return None

    node = find(tree)
    if node is None:
        return ""
    modules = (
        [alias.name for alias in node.names]
        if isinstance(node, ast.Import)
        else [node.module or ""]
    )
    if any(isinstance(outer, (ast.Try, getattr(ast, "TryStar", ast.Try))) for outer in stack):
        return (
            f"the import on line {node.lineno} is inside a try: block, a feature probe: "
            "whether it fails is what the code reads (a flag, a fallback), so removing it "
            "changes behaviour; it is kept"
        )
    exported = public_names(tree)
    for alias in node.names:
        bound = alias.asname or alias.name.split(".")[0]
        if bound in exported or (alias.asname and alias.asname == alias.name.split(".")[-1]):
            return (
                f"`{bound}` is re-exported (named in `__all__`, or imported `as` itself); "
                "it is kept"
            )
    said = _comment_for_others(text, node.lineno, row)
    if said:
        return (
            f"the import's comment says `{said}`: it is there for others to import from "
            f"{path} (a re-export); it is kept"
        )
    functions = [f for f in stack if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if functions and all(
        isinstance(stmt, (ast.Import, ast.ImportFrom))
        or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))
        for stmt in functions[-1].body
    ):
        return (
            f"`{functions[-1].name}` does nothing but import: importing (or failing to, as "
            "`assertRaises(ImportError, ...)` checks) is its purpose; it is kept"
        )
    if isinstance(node, ast.ImportFrom) and node.module:
        # `from pkg import sub` also sets `pkg.sub`: code reading `pkg.sub` needs it.
        for alias in node.names:
            dotted = f"{node.module}.{alias.name}"
            if re.search(rf"(?<![\w.]){re.escape(dotted)}\b", text):
                return (
                    f"the code reads `{dotted}`, which this import of `{alias.name}` "
                    "makes reachable (importing a submodule sets it on its package); it is kept"
                )
    # A doctest runs in the module's globals: a name only its examples use is used.
    examples = "\n".join(m.group(1) for m in DOCTEST_LINE.finditer(text))
    for alias in node.names:
        bound = alias.asname or alias.name.split(".")[0]
        if examples and re.search(rf"(?<![\w.]){re.escape(bound)}\b", examples):
            return (
                f"`{bound}` is used by the module's doctests (`>>>` examples run in its "
                "namespace); it is kept"
            )
    for module in modules:
        if module.split(".")[0] in SIDE_EFFECT_MODULES:
            return (
                f"importing `{module}` has side effects (it changes the interpreter as it "
                "loads), which is why it is imported; it is kept"
            )
    return ""


def _comment_for_others(text: str, first: int, row: int) -> str:
    """The comment block just above line `first` (an import statement's), or the comment
    ending line `row` (the flagged name's), where it says the import is there for others
    ("for backward compatibility", "re-exported", "public API"); "" where none does."""
    lines = LINE_BREAK.split(text.removeprefix("\ufeff"))
    above: list[str] = []
    at = first - 2
    while at >= 0 and lines[at].lstrip().startswith("#"):
        above.insert(0, lines[at].strip().lstrip("#").strip())
        at -= 1
    # An import line holds no string, so its first `#` starts its comment.
    trailing = lines[row - 1].partition("#")[2].strip() if row <= len(lines) else ""
    for comment in (" ".join(above), trailing):
        if FOR_OTHERS.search(comment):
            return comment[:120]
    return ""


def noqa_edits(
    diag: dict[str, Any], text: str, edits: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str]:
    """RUF100's fix without removing another linter's suppression.

    ruff drops every code of a `# noqa` it does not itself need, also those of rules the
    target's ruff does not enable ("non-enabled", e.g. E501 left to flake8) or does not know
    ("unknown", a plugin's code). Only the codes it calls unused (an enabled rule that
    reports nothing there) or duplicated go; a blanket `# noqa` silences every linter and
    stays."""
    message = diag["message"]
    if "blanket" in message:
        return [], "a blanket `noqa` also silences the target's other linters; it stays"
    listed = {label: NOQA_CODE.findall(codes) for label, codes in NOQA_GROUP.findall(message)}
    others = listed.get("non-enabled", []) + listed.get("unknown", [])
    if not others:
        return edits, ""  # every code is one the target's ruff enables: ruff's own fix
    start, end = diag["location"], diag["end_location"]
    lines = LINE_BREAK.split(text.removeprefix("\ufeff"))
    if start["row"] != end["row"] or start["row"] > len(lines):
        return [], f"cannot read the `noqa` directive on line {start['row']}"
    directive = lines[start["row"] - 1][start["column"] - 1 : end["column"] - 1]
    head, colon, codes = directive.partition(":")
    if not colon or head.lstrip("#").strip().lower() != "noqa":
        return [], f"cannot read the `noqa` directive on line {start['row']}"
    drop, seen, kept = set(listed.get("unused", [])), set(), []
    for item in NOQA_CODE.findall(codes):
        if item not in seen and item not in drop:
            kept.append(item)
        seen.add(item)
    if kept == NOQA_CODE.findall(codes):
        return [], (
            f"the `noqa` is for rules the target's ruff does not enable ({', '.join(others)}): "
            "another linter's suppression; it stays"
        )
    content = "# noqa: " + ", ".join(kept)
    return [{"content": content, "location": start, "end_location": end}], ""


def used_noqa(title: str) -> str:
    """Why a RUF100 finding about codes "non-enabled" where it was counted is not reported
    under the target's own ruff, or "": a count command's narrow `--select` calls a `noqa`
    unused that the target's ruff needs (isodate's `# noqa: E402`, a rule among ruff's
    defaults). "ruff no longer reports it" read as though the error had gone."""
    if not title.startswith("RUF100 "):
        return ""
    listed = dict(NOQA_GROUP.findall(title))
    codes = NOQA_CODE.findall(listed.get("non-enabled", ""))
    if not codes:
        return ""
    return (
        f"the `noqa` is for {', '.join(codes)}, which the target's own ruff enables and "
        "needs there; only the error command's narrower rule selection calls it unused: it "
        "stays"
    )


# What `read_source` raises for a file the backend leaves alone.
UNREADABLE = (UnicodeDecodeError, worktree_files.Refused)


def read_source(worktree: Path, path: str) -> str:
    """A file's exact text (the backend's one read of a worktree file), through the worktree
    reader (no link out, no FIFO, a size cap). UTF-8, ruff's only encoding, decoded
    strictly: a file that is not is refused, never rewritten lossily."""
    return worktree_files.read_bytes(worktree, path).decode("utf-8")


def write_source(toolbox: Toolbox, path: str, text: str) -> ToolResult:
    """The backend's one write: through the toolbox, which writes the text's UTF-8 bytes
    as they are (no newline translation)."""
    return toolbox.call("write_file", {"path": path, "content": text})


def formatted(worktree: Path, path: str, text: str) -> str | None:
    """`ruff format` of the file's text under the target's config, or None when it fails.
    Bytes in and out: text-mode pipes would turn \r\n into \n."""
    proc = subprocess.run(
        [*RUFF, "format", "--stdin-filename", path, "-"],
        cwd=str(worktree),
        env=child_env.for_tool(),
        input=text.encode("utf-8"),
        capture_output=True,
    )
    if proc.returncode != 0:
        return None
    try:
        return proc.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None


def issue_of(diag: dict[str, Any], code: str) -> str:
    """What the rule says about this line, without repeating the title."""
    name = (diag.get("url") or "").rstrip("/").rsplit("/", 1)[-1]
    rule = f"ruff rule {code}" + (f" ({name})" if name else "")
    applicability = (diag.get("fix") or {}).get("applicability")
    fixable = {
        "safe": "ruff has an automatic fix",
        "unsafe": "ruff's fix is unsafe (it may change behaviour)",
        "display-only": "ruff only suggests a fix",
    }.get(applicability, "ruff has no automatic fix")
    return f"Flagged by {rule}; {fixable}."


class RuffBackend:
    name = "ruff"

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        # agent.ruff.select: rules Red reports on top of the target's own ruff config.
        self.extra_rules = list((settings or {}).get("select") or [])

    def still_reported(self, worktree: Path, keys: list[str]) -> set[str]:
        """Which of these findings (`title (path:line)`) ruff still reports on the tree as
        it is now; a line number may have moved."""
        wanted: dict[str, list[tuple[str, str]]] = {}
        for key in keys:
            title, _, rest = key.rpartition(" (")
            path = rest.rstrip(")").rsplit(":", 1)[0]
            wanted.setdefault(path, []).append((key, title))
        present: set[str] = set()
        for path, items in wanted.items():
            now = self._titles(worktree, path)
            present |= {key for key, title in items if title in now}
        return present

    def _titles(self, worktree: Path, path: str) -> set[str]:
        """The titles of the file's diagnostics now (a file that is gone has none)."""
        try:
            text = read_source(worktree, path)
        except (OSError, *UNREADABLE):
            return set()
        return set(titles_of(diagnostics(worktree, path, extend=self.extra_rules), text))

    def run(self, brief: StageBrief, toolbox: Toolbox, progress: Callable[[str], None]) -> StageRun:
        plays = {
            "red": self._red,
            "green": self._green,
            "fix": self._green,  # one error, in the shape of a Green finding
            "auditor": self._security,
            "ship": self._ship,
        }
        if brief.team not in plays and brief.team != "refactor":
            return StageRun(Usage(), 0, "error", f"the ruff backend has no {brief.team} team")
        worktree = Path(brief.data["worktree"])
        if brief.team == "refactor":
            files = self._formattable(worktree, brief, progress)
            if not files:
                # Not a Refactor that looked and found nothing to simplify: the sweep's stop
                # rule does not count it (modes.sweep).
                why = "no changed file is one the target keeps formatted"
                return StageRun(Usage(), 0, NOTHING_TO_TOUCH, why)
            return StageRun(Usage(), self._refactor(worktree, files, toolbox, progress), "finished")
        turns = plays[brief.team](worktree, brief, toolbox, progress)
        return StageRun(Usage(), turns, "finished")

    def _red(self, worktree, brief, toolbox, progress) -> int:
        # The tried list's lines read `F-001 <title> (<path>:<line>) (fixed)`: a title is a
        # diagnostic's exact identity, so one in it was fixed or given up on, and its twins
        # and other diagnostics of its rule in the file are new.
        tried = "\n".join(brief.data.get("tried", []))
        tests_editable = bool(brief.data.get("allow_test_edits"))
        by_file: dict[str, list[dict[str, Any]]] = {}
        for diag in diagnostics(worktree, extend=self.extra_rules):
            path = Path(diag["filename"]).resolve().relative_to(worktree.resolve()).as_posix()
            by_file.setdefault(path, []).append(diag)
        # What Green can fix keeping behaviour is reported first: among findings of one
        # severity the cycle's fix slots go in report order (findings.sanitize), and a slot
        # spent on a diagnostic without a safe fix is one kept fix less.
        reports = []
        importers = Importers(worktree)
        for path, diags in by_file.items():
            try:
                text = read_source(worktree, path)
            except UNREADABLE:
                text = ""
            for diag, title in zip(diags, titles_of(diags, text), strict=True):
                if not tried_before(tried, title, path):
                    edits = (
                        fix_edits(diag, text, path, tests_editable, importers)[0] if text else []
                    )
                    # A file the session protects or keeps out of scope Green may not write.
                    box = toolbox.sandbox
                    fixable = bool(edits) and not box.is_protected(path) and box.in_scope(path)
                    reports.append((not fixable, path, diag, title))
        turns = 0
        for _, path, diag, title in within_slots(reports, brief.data.get("max_findings")):
            code = diag.get("code") or "syntax"
            turns += 1
            result = toolbox.call(
                "report_finding",
                {
                    "severity": severity_of(code),
                    "title": title,
                    "location": f"{path}:{diag['location']['row']}",
                    "issue": issue_of(diag, code),
                    "impact": IMPACT[severity_of(code)],
                },
            )
            progress(f"turn {turns}: report_finding {title} -> {result.content}")
        return turns

    def _ship(self, worktree, brief, toolbox, progress) -> int:
        """Ship's gates are commands the harness runs: keyless, the checklist, its score and
        the shipping commands are the product. A failing gate is left for a person, never
        'fixed' by loosening what it checks."""
        gate = brief.data.get("gate") or ""
        reason = f"the ruff backend changes no code to make a gate pass; {gate} needs a person"
        result = toolbox.call("skip_finding", {"finding_id": gate, "reason": reason})
        progress(f"turn 1: skip_finding {gate} -> {result.content}")
        return 1

    def _security(self, worktree, brief, toolbox, progress) -> int:
        """ruff's `S` rules as the security auditor: the diagnostics of this iteration's vector."""
        from autoresearch.agents.backends.ruff_security import (
            IGNORED,
            in_test_code,
            matches,
            rule_for,
            short_literal,
        )

        vector = brief.data.get("vector") or {}
        files = brief.data.get("files")  # diff_base: only the changed files
        reported = set(brief.data.get("reported") or [])
        proc = ruff(
            "check", "--no-cache", "--no-fix", "--exit-zero", "--output-format=json",
            "--select", "S", "--ignore", ",".join(IGNORED), *(files or ["."]), cwd=worktree,
        )  # fmt: skip
        try:
            diags = json.loads(proc.stdout or "[]")
        except json.JSONDecodeError:
            diags = []
        turns = 0
        for diag in diags:
            code = diag.get("code") or ""
            rule = rule_for(code)
            if not matches(rule, vector):
                continue
            path = Path(diag["filename"]).resolve().relative_to(worktree.resolve()).as_posix()
            rule = in_test_code(rule, path)
            row = diag["location"]["row"]
            title = f"{code} {diag['message']}"
            if f"{title} ({path}:{row})" in reported:
                continue
            try:
                lines = LINE_BREAK.split(read_source(worktree, path))
            except UNREADABLE:
                lines = []
            evidence = lines[row - 1].strip() if 0 < row <= len(lines) else diag["message"]
            end = diag.get("end_location") or {}
            if 0 < row <= len(lines) and end.get("row") == row:
                start_col = diag["location"]["column"]
                rule = short_literal(rule, lines[row - 1][start_col - 1 : end["column"] - 1])
            turns += 1
            result = toolbox.call(
                "report_vulnerability",
                {
                    "title": title,
                    "owasp": rule.owasp,
                    "stride": rule.stride,
                    "cwe": rule.cwe,
                    "location": f"{path}:{row}",
                    "scenario": rule.scenario,
                    "evidence": evidence,
                    "confidence": "likely",
                    "severity": rule.severity,
                    "mitigation": rule.mitigation,
                },
            )
            progress(f"turn {turns}: report_vulnerability {title} -> {result.content}")
        return turns

    def _green(self, worktree, brief, toolbox, progress) -> int:
        turns = 0
        batch = brief.data.get("findings", [])
        fixed_in: dict[str, str] = {}  # a file this stage fixed, by the last finding fixed
        importers = Importers(worktree)
        for finding in batch:
            turns += 1
            fid = finding["id"]
            others = {f["title"] for f in batch if f is not finding}
            action, args = self._fix_one(
                worktree,
                finding,
                toolbox,
                others,
                tidy=brief.tidy,
                tests_editable=bool(brief.data.get("allow_test_edits")),
                importers=importers,
            )
            where = LOCATION.match(finding.get("location") or "")
            if where and action == "finish_fix":
                fixed_in[where["path"]] = fid
            elif where and args.get("reason") == GONE and where["path"] in fixed_in:
                # One fix can settle several findings: ruff's fix of an import statement
                # removes every unused name in it.
                args["reason"] = (
                    f"settled by {fixed_in[where['path']]}'s fix in {where['path']} this "
                    "stage: ruff no longer reports it"
                )
            result = toolbox.call(action, args)
            progress(f"turn {turns}: {action} {fid} -> {result.content.splitlines()[0]}")
        return turns

    def _fix_one(
        self,
        worktree,
        finding,
        toolbox,
        others: set[str],
        tidy=False,
        tests_editable=False,
        importers: Importers | None = None,
    ) -> tuple[str, dict[str, str]]:
        """The tool call that settles `finding`: its exact diagnostic fixed, or a skip with
        why. `others`: the titles of the batch's other findings, which are theirs to fix."""
        fid = finding["id"]
        where, code = LOCATION.match(finding["location"]), CODE.match(finding["title"])
        if not where or not code:
            return "skip_finding", {"finding_id": fid, "reason": "not a ruff finding"}
        path, line = where["path"], int(where["line"])
        read = toolbox.call("read_file", {"path": path})
        if read.is_error:
            return "skip_finding", {"finding_id": fid, "reason": read.content}
        try:
            original = read_source(worktree, path)
        except UnicodeDecodeError:
            return "skip_finding", {"finding_id": fid, "reason": f"{path} is not UTF-8"}
        except worktree_files.Refused as err:
            return "skip_finding", {"finding_id": fid, "reason": str(err)}
        found = [
            d
            for d in diagnostics(worktree, path, extend=[code["code"]])
            if d.get("code") == code["code"]
        ]
        titles = titles_of(found, original)
        title = finding["title"]
        pairs = list(zip(found, titles, strict=True))
        # Sanitize may have cut the title (ruff's "; consider removing, …" is advice).
        candidates = [d for d, t in pairs if title in (t, findings.sanitized_title(t))] or [
            # The same rule and message whose line changed since Red saw it (a twin on it
            # was fixed), or a title without the line (a count run's).
            d
            for d, t in pairs
            if t not in others
            and (
                title == (base := f"{code['code']} {d['message']}")
                or title.startswith(base + " in `")
            )
        ]
        if not candidates:
            return "skip_finding", {"finding_id": fid, "reason": used_noqa(title) or GONE}
        diag = min(candidates, key=lambda d: abs(d["location"]["row"] - line))
        edits, why_not = fix_edits(diag, original, path, tests_editable, importers)
        if not edits:
            return "skip_finding", {"finding_id": fid, "reason": why_not}
        unused_before = {d["message"] for d in unused_imports(worktree, path)} if tidy else set()
        written = write_source(
            toolbox, path, no_new_leading_blank(original, apply_edits(original, edits))
        )
        if written.is_error:
            return "skip_finding", {"finding_id": fid, "reason": written.content}
        summary = (diag.get("fix") or {}).get("message") or diag["message"]
        self._settle_moved(worktree, path, diag, titles, toolbox, tests_editable, importers)
        if tidy:
            self._drop_imports_left_unused(worktree, path, unused_before, toolbox, importers)
        return "finish_fix", {"finding_id": fid, "summary": summary}

    def _settle_moved(
        self, worktree, path, fixed, before: list[str], toolbox, tests_editable, importers
    ) -> None:
        """Fix, as `ruff check --fix` does in its next passes, what the fix of `fixed` made
        of its own rule in the same file: an `elif` after a return made an `if` leaves the
        `else` below it superfluous, so the count stays and the error only moves (isodate:
        4 of 7 RET505 blocked so). Each step fixes the new diagnostic nearest the fixed line,
        under the same rules as the first; it stops once the rule's count has fallen, or at
        a new diagnostic it may not fix (the decide then judges what is there)."""
        code, row = fixed.get("code"), fixed["location"]["row"]
        for _ in range(MOVED_STEPS):
            try:
                text = read_source(worktree, path)
            except UNREADABLE:
                return
            now = [d for d in diagnostics(worktree, path, extend=[code]) if d.get("code") == code]
            if len(now) < len(before):
                return
            fresh = Counter(titles_of(now, text)) - Counter(before)
            moved = [d for d, t in zip(now, titles_of(now, text), strict=True) if t in fresh]
            if not moved:
                return
            diag = min(moved, key=lambda d: abs(d["location"]["row"] - row))
            edits, _ = fix_edits(diag, text, path, tests_editable, importers)
            if not edits:
                return
            new = no_new_leading_blank(text, apply_edits(text, edits))
            if write_source(toolbox, path, new).is_error:
                return

    def _drop_imports_left_unused(
        self, worktree, path, before: set[str], toolbox, importers: Importers | None = None
    ) -> None:
        """Apply ruff's F401 fix to each import the change left unused, one at a time (two
        names of one import line have overlapping edits)."""
        for _ in range(10):
            try:
                text = read_source(worktree, path)
            except UNREADABLE:
                return
            fresh = [
                edits
                for d in unused_imports(worktree, path)
                if d["message"] not in before
                for edits in [fix_edits(d, text, path, importers=importers)[0]]
                if edits
            ]
            if not fresh:
                return
            new = no_new_leading_blank(text, apply_edits(text, fresh[0]))
            if write_source(toolbox, path, new).is_error:
                return

    def _formattable(self, worktree, brief, progress) -> list[tuple[str, str]]:
        """(path, source) of each changed file the target keeps formatted: one that was
        already as `ruff format` writes it at the session's base (`base_commit`), or new
        since. Any other file would come back rewritten whole (quotes, wrapping), a diff
        no maintainer of a target without the formatter merges: it is left as it is."""
        files = []
        base = brief.data.get("base_commit") or ""
        for path in brief.data.get("changed_files", []):
            if not path.endswith(".py"):
                continue
            try:
                source = read_source(worktree, path)
            except UnicodeDecodeError:
                continue  # ruff reads UTF-8 only; Green cannot have fixed it either
            except worktree_files.Refused as err:
                if not isinstance(err, worktree_files.Missing):
                    progress(f"{path}: not read: {err}")
                continue
            why_not = unformatted_at_base(worktree, base, path)
            if why_not:
                progress(f"{path}: not formatted: {why_not}")
                continue
            files.append((path, source))
        return files

    def _refactor(self, worktree, files: list[tuple[str, str]], toolbox, progress) -> int:
        """`ruff format` on each of `files` (`_formattable`), one commit each."""
        turns = 0
        for path, source in files:
            new = formatted(worktree, path, source)
            if new is None or new == source:
                continue
            turns += 1
            written = write_source(toolbox, path, new)
            if written.is_error:
                progress(f"turn {turns}: write_file {path} refused: {written.content}")
                continue
            result = toolbox.call("finish_refactor", {"summary": f"format {path} with ruff format"})
            progress(f"turn {turns}: finish_refactor {path} -> {result.content.splitlines()[0]}")
        return turns


def unformatted_at_base(worktree: Path, base: str, path: str) -> str:
    """Why `path` is not one the target keeps as `ruff format` writes it, or "" when it is
    (as it was at `base`, or a file added since)."""
    if not base:
        return "the session's base is not known, so whether the target formats it is not"
    shown = git.raw(worktree, "show", f"{base}:{path}")
    if shown.returncode != 0:
        return ""  # new since the base: nothing of the target's style to keep
    try:
        before = shown.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return "it was not UTF-8 at the session's base"
    if formatted(worktree, path, before) != before:
        return (
            "it was not as `ruff format` writes it at the session's base: the target does "
            "not use the formatter there, and a rewrite of the whole file is not a fix"
        )
    return ""
