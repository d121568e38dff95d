"""The ship lens's readiness checklist: each gate a command or a check done by code, the
default checklist per `ship.type`, and running them all on a worktree.

Built-in gates, each on the lines added since `ship.base`:
- secrets: nothing secret-looking (modes/lens/masking.py's scanner);
- todo: no new TODO or FIXME;
- version: the project's version (pyproject.toml or package.json) differs from base's;
- changelog: CHANGELOG.md names the current version;
- breaking: a public function or class removed from the code is mentioned as a breaking
  change in CHANGELOG.md.
Command gates pass when the command exits 0. Gates a person must decide (`ship.manual`) are
listed, never run and never "fixed", and are not in the score.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoresearch.safety import commands, git, worktree_files

from ..lens.masking import scan
from ..lens.suppressions import is_test_file, parse_diff

PASS, FAIL, PERSON = "pass", "fail", "needs a person"
TAIL = 1200
# Fixing order: what blocks everything else first.
ORDER = ("tests", "build", "lint", "secrets", "todo", "version", "changelog", "breaking")
DEFAULTS = {
    "pr": ("tests", "lint", "secrets", "todo", "breaking"),
    "release": ("tests", "lint", "secrets", "todo", "version", "changelog", "breaking"),
    "package": ("tests", "lint", "secrets", "version", "build"),
}
BUILD = "rm -rf dist && python -m build >/dev/null && python -m twine check dist/*"
CHANGELOGS = ("CHANGELOG.md", "CHANGES.md", "HISTORY.md")
_TODO = re.compile(r"\b(?:TODO|FIXME)\b")
_PUBLIC_DEF = re.compile(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z]\w*)")


@dataclass(frozen=True)
class Gate:
    name: str
    kind: str  # command | builtin | person
    what: str  # one line: what it takes to pass
    command: str = ""


@dataclass
class Result:
    name: str
    status: str  # pass | fail | needs a person
    detail: str = ""


def checklist(
    kind: str,
    test_command: str,
    linter: str | None,
    add: list[dict[str, Any]],
    drop: list[str],
    manual: list[str],
) -> list[Gate]:
    """The gates of a `ship.type`, with the spec's additions, without its drops, in fixing
    order (added gates after the defaults, people's gates last)."""
    known = {
        "tests": Gate("tests", "command", "the test suite passes", test_command),
        "lint": Gate("lint", "command", "the linter reports nothing", linter or ""),
        "build": Gate("build", "command", "the package builds and twine accepts it", BUILD),
        "secrets": Gate("secrets", "builtin", "no secret in the lines added since base"),
        "todo": Gate("todo", "builtin", "no TODO or FIXME added since base"),
        "version": Gate("version", "builtin", "the version differs from base's"),
        "changelog": Gate("changelog", "builtin", "CHANGELOG.md has an entry for the version"),
        "breaking": Gate(
            "breaking", "builtin", "removed public functions or classes are in CHANGELOG.md"
        ),
    }
    names = [n for n in DEFAULTS[kind] if n not in drop and (n != "lint" or linter)]
    gates = [known[n] for n in sorted(names, key=ORDER.index)]
    gates += [
        Gate(str(g["name"]), "command", str(g.get("what") or g["command"]), str(g["command"]))
        for g in add
        if g["name"] not in drop
    ]
    gates += [Gate(name, "person", name) for name in manual]
    return gates


# --- running them ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    worktree: Path
    base: str  # the commit the diff-based gates look from
    timeout_s: float
    secrets: list[str]
    keep: tuple[str, ...]  # commit ids the secret scanner must not flag


def run_all(gates: list[Gate], ctx: Context) -> list[Result]:
    return [run_one(g, ctx) for g in gates]


def run_one(gate: Gate, ctx: Context) -> Result:
    if gate.kind == "person":
        return Result(gate.name, PERSON, "a person decides; listed, never fixed")
    if gate.kind == "command":
        result = commands.run(
            gate.command, ctx.worktree, timeout_s=ctx.timeout_s, extra_secrets=ctx.secrets
        )
        head = "timed out" if result.timed_out else f"exit code {result.exit_code}"
        return Result(gate.name, PASS if result.ok else FAIL, f"{head}\n{result.tail(TAIL)}")
    problem = BUILTINS[gate.name](ctx)
    return Result(gate.name, FAIL if problem else PASS, problem or "")


def passing(results: list[Result]) -> int:
    return sum(1 for r in results if r.status == PASS)


def checked(results: list[Result]) -> int:
    """The gates code decides (a person's are not in the score)."""
    return sum(1 for r in results if r.status != PERSON)


def score(results: list[Result]) -> float:
    return passing(results) / checked(results) if checked(results) else 1.0


# --- the built-in checks ------------------------------------------------------------------------


def _diff(ctx: Context) -> str:
    return git.git(ctx.worktree, "diff", "--no-color", ctx.base, "--", check=False)


def _added(ctx: Context) -> list[tuple[str, int, str]]:
    return [(f.path, n, text) for f in parse_diff(_diff(ctx)) for n, text in f.added]


def _secrets(ctx: Context) -> str | None:
    hits = [f"{path}:{n} ({s.kind})" for path, n, text in _added(ctx) for s in scan(text, ctx.keep)]
    return f"secret-looking strings added: {', '.join(hits)}" if hits else None


def _todo(ctx: Context) -> str | None:
    hits = [f"{path}:{n}" for path, n, text in _added(ctx) if _TODO.search(text)]
    return f"TODO/FIXME added at {', '.join(hits)}" if hits else None


def version_of(
    worktree: Path, commit: str | None = None, unread: list[str] | None = None
) -> str | None:
    """The project's version in pyproject.toml or package.json (at `commit`, or on disk);
    a file on disk the reader refuses (a link out, a FIFO) is noted in `unread`."""

    def read(name: str) -> str | None:
        if commit is None:
            return worktree_files.read_if_any(worktree, name, unread)
        text = git.git(worktree, "show", f"{commit}:{name}", check=False)
        return text or None

    text = read("pyproject.toml")
    if text:
        try:
            version = (tomllib.loads(text).get("project") or {}).get("version")
        except tomllib.TOMLDecodeError:
            version = None
        if version:
            return str(version)
    text = read("package.json")
    if text:
        try:
            return str(json.loads(text).get("version") or "") or None
        except ValueError:
            return None
    return None


def _version(ctx: Context) -> str | None:
    unread: list[str] = []
    now, then = version_of(ctx.worktree, unread=unread), version_of(ctx.worktree, ctx.base)
    if unread:
        return "; ".join(unread)
    if now is None:
        return "no version found in pyproject.toml or package.json"
    if now == then:
        return f"the version is still {now}, as at base"
    return None


def _changelog_text(worktree: Path, unread: list[str]) -> str | None:
    """The first changelog there is; None when there is none or it is refused (noted in
    `unread`: a gate must not pass on a file it could not read)."""
    for name in CHANGELOGS:
        try:
            return worktree_files.read_text(worktree, name)
        except worktree_files.Missing:
            continue
        except worktree_files.Refused as err:
            unread.append(f"{name}: not read: {err}")
            return None
    return None


def _changelog(ctx: Context) -> str | None:
    unread: list[str] = []
    text = _changelog_text(ctx.worktree, unread)
    if unread:
        return "; ".join(unread)
    if text is None:
        return f"no {CHANGELOGS[0]}"
    version = version_of(ctx.worktree)
    if version and version not in text:
        return f"{CHANGELOGS[0]} has no entry for {version}"
    return None


def _breaking(ctx: Context) -> str | None:
    removed, added = set(), set()
    for f in parse_diff(_diff(ctx)):
        if not f.path.endswith(".py") or is_test_file(f.path):
            continue
        removed |= {m.group(1) for _, t in f.removed if (m := _PUBLIC_DEF.match(t.strip()))}
        added |= {m.group(1) for _, t in f.added if (m := _PUBLIC_DEF.match(t.strip()))}
    gone = sorted(removed - added)
    if not gone:
        return None
    unread: list[str] = []
    text = (_changelog_text(ctx.worktree, unread) or "").lower()
    if unread:
        return f"removed {', '.join(gone)}, and " + "; ".join(unread)
    if "breaking" in text and all(name.lower() in text for name in gone):
        return None
    return f"removed without a breaking-change note in {CHANGELOGS[0]}: {', '.join(gone)}"


BUILTINS = {
    "secrets": _secrets,
    "todo": _todo,
    "version": _version,
    "changelog": _changelog,
    "breaking": _breaking,
}
