"""The learn lens's validation of a Markdown doc against the worktree, its score, the marker that
tells a generated doc from one a person wrote, and the staleness measure of `learn.mode: check`.

Checks, one per reference (fenced code is not read, except Mermaid blocks):
- path: an inline-code path (`src/app.py`, `docs/x.md:12`, `Makefile`) exists in the worktree
  (from its root or the doc's folder; a bare file name, or a path's tail like `lens/loop.py`,
  anywhere in it), or the program's code (not its tests) names it: a file the program makes,
  such as a session's `goal-progress.md`, exists in no checkout (`NNN`, `cK` stand for any
  value);
- symbol: an inline-code dotted name whose first part is a module of the worktree
  (`pkg.mod.func`, `pkg.mod.Class.method`) resolves, through `ast`, to a module, function,
  class, attribute or imported name;
- config-key: a dotted name whose first part is a top-level key of the given config is a key;
- link: a relative Markdown link resolves to a file, and its `#anchor` to a heading there;
- size: the doc has at most `max_lines` lines;
- mermaid: each Mermaid block names a diagram type, balances its brackets and quotes, and
  closes each `subgraph`/`loop`/`alt`/… with an `end`.
Anything else in backticks (commands, stdlib names, placeholders like `<name>`) is not checked.
Score = checks passed / checks made (1.0 for a doc with nothing to check).
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from autoresearch.safety import worktree_files
from autoresearch.safety.worktree_files import Refused

from ..lens.suppressions import is_test_file

MARKER = "generated-by: autoresearch"
MAX_LINES = 800
FRESH_DAYS = 7
STALE_DAYS = 30
FILE_EXTENSIONS = {
    "py", "md", "rst", "txt", "yaml", "yml", "toml", "json", "cfg", "ini", "sh", "js", "ts",
    "tsx", "jsx", "go", "rs", "rb", "java", "kt", "smk", "tsv", "csv", "lock", "html", "css",
    "sql", "c", "h", "cpp", "hpp", "mk",
}  # fmt: skip
FILE_NAMES = {"Makefile", "Dockerfile", "Snakefile", "Justfile", "Procfile", "Gemfile"}
MERMAID_TYPES = (
    "graph", "flowchart", "sequenceDiagram", "classDiagram", "stateDiagram", "stateDiagram-v2",
    "erDiagram", "gantt", "pie", "journey", "gitGraph", "mindmap", "timeline", "quadrantChart",
    "requirementDiagram", "C4Context", "C4Container", "C4Component", "sankey-beta", "xychart-beta",
    "block-beta",
)  # fmt: skip
_NOT_PROJECT = {"node_modules", "__pycache__", "venv", "site-packages", "dist", "build", "target"}
_BLOCK_OPENERS = {
    "flowchart": re.compile(r"^subgraph\b"),
    "graph": re.compile(r"^subgraph\b"),
    "sequenceDiagram": re.compile(r"^(?:loop|alt|opt|par|critical|break|rect|box)\b"),
}


@dataclass(frozen=True)
class Check:
    kind: str  # path | symbol | config-key | link | size | mermaid
    subject: str
    ok: bool
    reason: str = ""  # why it failed, one line
    line: int | None = None  # line of the doc


@dataclass
class DocReport:
    doc: str
    checks: list[Check] = field(default_factory=list)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def score(self) -> float:
        return score([self])


def score(reports: Iterable[DocReport]) -> float:
    """Share of checks passed over all the docs; 1.0 when there was nothing to check."""
    checks = [c for r in reports for c in r.checks]
    return sum(c.ok for c in checks) / len(checks) if checks else 1.0


# --- the marker ---

_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)


def is_generated(text: str) -> bool:
    """Whether the doc carries the marker; a doc without it was written by a person and is only
    ever reported on, never edited."""
    match = _FRONT_MATTER.match(text)
    return bool(match) and any(line.strip() == MARKER for line in match.group(1).splitlines())


def with_marker(text: str) -> str:
    """The doc with the marker in its front matter (added to existing front matter if any)."""
    if is_generated(text):
        return text
    match = _FRONT_MATTER.match(text)
    if match:
        return f"---\n{match.group(1)}\n{MARKER}\n---\n{text[match.end() :]}"
    return f"---\n{MARKER}\n---\n\n{text}"


# --- the checks ---


def check_doc(
    doc: str,
    text: str,
    worktree: Path,
    config_keys: Collection[str] | None = None,
    max_lines: int = MAX_LINES,
    ignore: Collection[str] = (),
) -> DocReport:
    """Every check of one doc. `doc` is its worktree-relative path; `config_keys` the dotted keys
    of the target's configuration (see `config_keys_of`), None to skip config keys; `ignore`
    glob patterns of paths a doc may name that are made at run time (`sessions/*`)."""
    resolver = _Resolver(Path(worktree))
    report = DocReport(doc)
    lines = text.splitlines()
    small = len(lines) <= max_lines
    reason = "" if small else f"{len(lines)} lines, more than the limit of {max_lines}"
    report.checks.append(Check("size", doc, small, reason))
    prose, mermaid = _split_fences(lines)
    for number, block in mermaid:
        problem = mermaid_problem(block)
        report.checks.append(
            Check("mermaid", f"block at line {number}", not problem, problem, number)
        )
    top_keys = {k.split(".")[0] for k in config_keys} if config_keys is not None else set()
    for number, line in prose:
        for span in re.findall(r"`([^`\n]+)`", line):
            check = _check_span(span.strip(), doc, resolver, config_keys, top_keys, ignore)
            if check is not None:
                report.checks.append(replace(check, line=number))
        for target in _links(re.sub(r"`[^`\n]*`", "", line)):
            check = _check_link(target, doc, text, resolver)
            if check is not None:
                report.checks.append(replace(check, line=number))
    return report


def _split_fences(lines: list[str]) -> tuple[list[tuple[int, str]], list[tuple[int, list[str]]]]:
    """(prose lines, Mermaid blocks), each with its 1-based line number."""
    prose: list[tuple[int, str]] = []
    mermaid: list[tuple[int, list[str]]] = []
    fence: str | None = None
    block: list[str] | None = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if fence is None:
            match = re.match(r"^(`{3,}|~{3,})\s*(\w[\w-]*)?", stripped)
            if match:
                fence = match.group(1)
                if (match.group(2) or "").lower() == "mermaid":
                    block = []
                    mermaid.append((number, block))
                continue
            prose.append((number, line))
        elif stripped.startswith(fence) and stripped.strip("`~") == "":
            fence, block = None, None
        elif block is not None:
            block.append(line)
    return prose, mermaid


_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?$")
# Not a name to check: a placeholder, a glob, a URL, an absolute or home path.
_NOT_A_NAME = re.compile(r"[<>*?{}$\[\]|]|://|^[~/]")


def _check_span(
    span: str,
    doc: str,
    resolver: _Resolver,
    config_keys: Collection[str] | None,
    top_keys: set[str],
    ignore: Collection[str],
) -> Check | None:
    if not span or " " in span or _NOT_A_NAME.search(span):
        return None
    if _looks_like_path(span):
        path, _, line = span.partition(":")
        if any(fnmatch.fnmatch(path.rstrip("/"), p) for p in ignore):
            return None
        problem = resolver.path_problem(
            path.rstrip("/"), doc, int(line) if line.isdigit() else None
        )
        return Check("path", span, problem is None, problem or "")
    if _DOTTED.match(span):
        name = span.removesuffix("()")
        parts = name.split(".")
        if resolver.module_file(parts[:1]) is not None:
            problem = resolver.symbol_problem(parts)
            return Check("symbol", name, problem is None, problem or "")
        if config_keys is not None and parts[0] in top_keys:
            ok = name in config_keys
            return Check("config-key", name, ok, "" if ok else f"no config key {name}")
    return None


def _looks_like_path(span: str) -> bool:
    path = span.split(":", 1)[0]
    name = PurePosixPath(path.rstrip("/")).name
    if "/" in path:
        return True
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    if name == f".{suffix}":
        return False  # `.json`: a kind of file, not a file
    return name in FILE_NAMES or (suffix in FILE_EXTENSIONS and name.count(".") == 1)


_LINK = re.compile(
    r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|^\s*\[[^\]]+\]:\s*(\S+)"
)


def _links(line: str) -> list[str]:
    return [a or b for a, b in _LINK.findall(line)]


def _check_link(target: str, doc: str, text: str, resolver: _Resolver) -> Check | None:
    if re.match(r"^[a-zA-Z][\w+.-]*:", target):  # http:, https:, mailto:, ...
        return None
    path, _, anchor = target.partition("#")
    if not path:
        ok = anchor in heading_slugs(text)
        return Check("link", target, ok, "" if ok else f"no heading #{anchor} in {doc}")
    base = PurePosixPath(doc).parent
    relative = path.lstrip("/") if path.startswith("/") else str(base / path)
    file = resolver.inside(relative)
    if file is None or not file.exists():
        return Check("link", target, False, f"link target {path} does not exist")
    if anchor and file.suffix == ".md" and file.is_file():
        linked = resolver.read(file)
        if isinstance(linked, Refused):
            return Check("link", target, False, f"{path}: not read: {linked}")
        if anchor not in heading_slugs(linked):
            return Check("link", target, False, f"no heading #{anchor} in {path}")
    return Check("link", target, True)


def heading_slugs(text: str) -> set[str]:
    """GitHub-style anchors of the Markdown headings (lower case, punctuation dropped, spaces to
    hyphens; repeats get -1, -2, …)."""
    slugs: set[str] = set()
    seen: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        slugs.add(slug if n == 0 else f"{slug}-{n}")
    return slugs


def mermaid_problem(block: list[str]) -> str | None:
    """Why a Mermaid block would not parse, or None: a minimal syntax check, not a parser."""
    lines = [ln.strip() for ln in block if ln.strip() and not ln.strip().startswith("%%")]
    if not lines:
        return "empty Mermaid block"
    kind = lines[0].split()[0].rstrip(":;")
    if kind not in MERMAID_TYPES:
        return f"unknown Mermaid diagram type {kind!r}"
    body = "\n".join(lines[1:])
    if not body:
        return f"the {kind} diagram has nothing in it"
    unbalanced = _unbalanced(body)
    if unbalanced:
        return unbalanced
    opener = _BLOCK_OPENERS.get(kind)
    if opener is not None:
        opened = sum(1 for ln in lines[1:] if opener.match(ln))
        ended = sum(1 for ln in lines[1:] if ln == "end")
        if opened != ended:
            return f"{opened} blocks opened but {ended} closed with `end`"
    return None


def _unbalanced(text: str) -> str | None:
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return f"unbalanced {ch!r}"
    if quoted:
        return "unbalanced '\"'"
    if stack:
        return f"unclosed {stack[-1]!r}"
    return None


# --- what the worktree holds ---


class _Resolver:
    """Answers path and symbol questions about one worktree, caching what it reads."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._trees: dict[Path, ast.Module | None] = {}
        self._project: tuple[set[str], set[str], set[str]] | None = None

    def inside(self, relative: str) -> Path | None:
        path = (self.root / relative).resolve()
        return path if path.is_relative_to(self.root) else None

    def path_problem(self, path: str, doc: str, line: int | None) -> str | None:
        candidates = [self.inside(path), self.inside(str(PurePosixPath(doc).parent / path))]
        found = next((c for c in candidates if c is not None and c.exists()), None)
        if found is None and "/" not in path and path in self._walk()[0]:
            return None
        if found is None and (self._is_path_tail(path) or self._code_names(path)):
            return None
        if found is None:
            return f"no file {path} in the worktree, and no code names it"
        if line is not None and found.is_file():
            text = self.read(found)
            if isinstance(text, Refused):
                return f"{path}: not read: {text}"
            count = len(text.splitlines())
            if not 1 <= line <= count:
                return f"{path} has {count} lines, not line {line}"
        return None

    def read(self, path: Path) -> str | Refused:
        """A file's text through the worktree reader, or why it was refused."""
        try:
            return worktree_files.read_text(self.root, path.relative_to(self.root).as_posix())
        except Refused as err:
            return err

    def _is_path_tail(self, path: str) -> bool:
        """`modes/lens/loop.py` for autoresearch/modes/lens/loop.py: a path inside a package
        the doc's context names (a file's or folder's, as written, without `./`)."""
        tail = "/" + path.removeprefix("./")
        return any(p.endswith(tail) for p in self._walk()[1])

    def _code_names(self, path: str) -> bool:
        """Whether the program's code names the path's last part in a string (a path
        component of one: "sessions/{name}/goal-progress.md"): a file the program makes,
        which a doc describes but no checkout holds, or its end (f"{lens}-results.tsv"
        makes `security-results.tsv`). Placeholders (`NNN`, `cK`, `hN`) stand
        for any value: `iterations/NNN/` names `iterations`, `iteration-NNNN.json` needs
        `iteration-` and `.json` in the code."""
        parts = [p for p in PurePosixPath(path).parts if not PLACEHOLDER.fullmatch(p)]
        if not parts:
            return True  # `002/`: only a stand-in, nothing to look for
        if parts[-1].startswith("."):
            return False
        name, strings = parts[-1], self._walk()[2]
        pieces = [p for p in PLACEHOLDER.split(name) if p]
        if len(pieces) > 1 or pieces != [name]:
            return all(any(piece in s for s in strings) for piece in pieces)
        component = re.compile(rf"(?:^|/){re.escape(name)}(?:/|$)")
        # f"{lens}-results.tsv": the code's end of the name, from a separator on.
        return any(
            component.search(s) or (_NAME_END.fullmatch(s) and name.endswith(s)) for s in strings
        )

    def _walk(self) -> tuple[set[str], set[str], set[str]]:
        """The project's file names, its relative file and folder paths, and the strings
        of its code outside the tests (hidden folders and installed packages are not the
        project)."""
        if self._project is None:
            names: set[str] = set()
            paths: set[str] = set()
            code: list[Path] = []
            for folder, dirs, files in os.walk(self.root):
                dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _NOT_PROJECT]
                here = Path(folder).relative_to(self.root).as_posix()
                prefix = "" if here == "." else here + "/"
                paths.add("/" + here)
                paths.update("/" + prefix + f for f in files)
                names.update(files)
                # A test's strings are its fixtures, not what the program makes.
                code += [
                    Path(folder) / f
                    for f in files
                    if (f.endswith((".py", ".smk")) or f == "Snakefile")
                    and not is_test_file(prefix + f)
                ]
            self._project = (names, paths, _code_strings(self.root, code))
        return self._project

    def module_file(self, parts: list[str]) -> Path | None:
        for base in (self.root, self.root / "src"):
            stem = base.joinpath(*parts)
            for candidate in (stem.with_suffix(".py"), stem / "__init__.py"):
                if candidate.is_file():
                    return candidate
        return None

    def symbol_problem(self, parts: list[str]) -> str | None:
        for k in range(len(parts), 0, -1):
            module = self.module_file(parts[:k])
            if module is None:
                continue
            rest = parts[k:]
            if not rest:
                return None
            tree = self._tree(module)
            if tree is None:
                return f"cannot parse {module.relative_to(self.root)}"
            return _attribute_problem(tree, rest, ".".join(parts[:k]))
        return f"no module {parts[0]}"

    def _tree(self, path: Path) -> ast.Module | None:
        if path not in self._trees:
            text = self.read(path)
            try:
                self._trees[path] = None if isinstance(text, Refused) else ast.parse(text)
            except SyntaxError:
                self._trees[path] = None
        return self._trees[path]


def _code_strings(root: Path, files: list[Path]) -> set[str]:
    strings: set[str] = set()
    for path in files:
        try:
            text = worktree_files.read_text(root, path.relative_to(root).as_posix())
        except (Refused, ValueError, OSError):
            continue  # gone, a link out, a FIFO, a file too large: it names nothing
        strings |= _strings_of(path.suffix == ".py", text)
    return strings


# Keyed by the file's text itself, never by its path, size or time: an agent that rewrites a
# file within one clock tick must not be judged by the strings of the old version. A pure
# function of its arguments, so the jobs of one process may share it.
@functools.lru_cache(maxsize=1024)
def _strings_of(python: bool, text: str) -> frozenset[str]:
    if python:
        try:
            return frozenset(_strings(ast.parse(text)))
        except SyntaxError:
            return frozenset()
    # Snakemake's syntax is not Python's: its quoted strings will do
    return frozenset(m.group(2) for m in _QUOTED.finditer(text))


_NAME_END = re.compile(r"[-_][\w.-]*\w\.\w+")
_QUOTED = re.compile(r"([\"'])([^\"'\n]{1,199})\1")
# `NNN`, `NNNN`, `cK`, `hN`, `002`: a doc's stand-in (or an example) for a number or an id.
PLACEHOLDER = re.compile(r"(?<![A-Za-z])(?:[a-z]?(?:N+|K)|\d+)(?![A-Za-z])")


def _strings(tree: ast.Module) -> set[str]:
    """Every string constant of a module, f-strings' literal parts included."""
    return {
        n.value.strip()
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < 200
    }


def _attribute_problem(tree: ast.Module, rest: list[str], module: str) -> str | None:
    defined = _defined(tree.body)
    owner = module
    for i, name in enumerate(rest):
        if name not in defined:
            return f"no {name} in {owner}"
        node = defined[name]
        if isinstance(node, ast.ClassDef):
            defined = _defined(node.body) | _self_attributes(node)
        elif i < len(rest) - 1:
            # An imported name or a value: what lies behind it is not this module's to check.
            return None
        owner = f"{owner}.{name}"
    return None


def _defined(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """Names a module or class body defines, including in its top-level if/try blocks."""
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                elements = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
                for n in elements:
                    if isinstance(n, ast.Name):
                        names[n.id] = node
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, ast.If | ast.Try | ast.With):
            inner = node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
            for handler in getattr(node, "handlers", []):
                inner += handler.body
            names.update(_defined(inner))
    return names


def _self_attributes(cls: ast.ClassDef) -> dict[str, ast.AST]:
    """Attributes the class's methods set on `self` (`self.x = ...`)."""
    found: dict[str, ast.AST] = {}
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Attribute) and getattr(t.value, "id", None) == "self":
                    found[t.attr] = node
    return found


# --- config keys ---


def config_keys_of(config: Mapping[str, Any], prefix: str = "") -> set[str]:
    """Every dotted key of a loaded YAML/TOML/JSON config, tables included (`agent`,
    `agent.backend`); keys of mappings inside lists count under the list's key."""
    keys: set[str] = set()
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        keys.add(dotted)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, Mapping):
                keys |= config_keys_of(item, f"{dotted}.")
    return keys


# --- staleness ---


def referenced_files(text: str, worktree: Path) -> list[str]:
    """Worktree-relative files a doc names (paths and modules of its symbols): the code it
    describes, whose last commit date `staleness_days` compares with the doc's."""
    resolver = _Resolver(Path(worktree))
    prose, _ = _split_fences(text.splitlines())
    files: list[str] = []
    for _, line in prose:
        for span in re.findall(r"`([^`\n]+)`", line):
            span = span.strip()
            path: Path | None = None
            if " " in span or _NOT_A_NAME.search(span):
                continue
            if _looks_like_path(span):
                path = resolver.inside(span.split(":", 1)[0].rstrip("/"))
            elif _DOTTED.match(span):
                parts = span.removesuffix("()").split(".")
                path = next(
                    (m for k in range(len(parts), 0, -1) if (m := resolver.module_file(parts[:k]))),
                    None,
                )
            if path is not None and path.is_file():
                relative = path.relative_to(resolver.root).as_posix()
                if relative not in files:
                    files.append(relative)
    return files


def staleness_days(doc_changed: datetime, code_changed: Iterable[datetime]) -> float:
    """Days from the doc's last commit to the latest commit of the code it describes; 0 when the
    doc is newer or describes no code."""
    latest = max(code_changed, default=None)
    if latest is None or latest <= doc_changed:
        return 0.0
    return (latest - doc_changed).total_seconds() / 86400


def freshness(days: float) -> str:
    """'fresh' under 7 days behind its code, 'stale' up to 30, 'very stale' beyond."""
    if days < FRESH_DAYS:
        return "fresh"
    return "stale" if days <= STALE_DAYS else "very stale"
