"""The files a measurement is made of, found by watching its run at setup (trace.py).

The rule, for each command that decides what is kept (a metric, a guard, an evaluator):
- every program it executes inside the worktree is protected (`./p99.sh`, `make`'s
  recipe, a script found on a $PATH folder of the worktree, a symlink and its target);
- every script an interpreter is given, by argument (`sh bench/p99.sh`) or on standard
  input (`sh < bench/p99.sh`), and every module the command names (`python -m benchpkg`,
  `python -c 'import benchlib; ...'`) is protected;
- every file the command's text, a Makefile target or a package.json script names is
  protected (the text parsing of command_files.py, kept as a supplement);
- a file the run only reads is protected when it lies outside the session's editable
  scope, and otherwise stays editable (the measurement imports the very code being
  improved) but is listed, so a person sees what the number depends on;
- a path it looked for and did not find (a `$PATH` folder before the script's, a cache it
  would trust) must stay absent: it is protected, so a new file there is never committed.
Only files tracked at the base commit count: what a run creates is output, not code.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from autoresearch.measure import imports
from autoresearch.measure.metrics import MetricCommand
from autoresearch.safety import commands, git, trace
from autoresearch.safety.command_files import measurement_scripts
from autoresearch.safety.jail import Jail
from autoresearch.safety.sandbox import glob_match
from autoresearch.session.record import SetupRecord

EXECUTED = "traced exec"
SCRIPT = "interpreter script"
MODULE = "module the command names"
NAMED = "named by the command"
READ_FIXED = "read by the measurement, outside the editable scope"
READ_EDITABLE = "read by the measurement, editable"
ABSENT = "looked for, absent: must stay absent"
IMPORT_ABSENT = "a module the measurement tried to import and did not find: must stay absent"
IMPORT_SHADOW = "would shadow a module the measurement imports from outside the worktree"
# Where a module comes from that no file can stand in for.
NOT_FILES = ("built-in", "frozen", "")
# Caches a run looks for and makes itself: never the measurement's to protect. pytest makes
# its cache in a folder of a drawn name (CACHE_MAKING), then renames it `.pytest_cache`.
CACHE_PARTS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
CACHE_MAKING = ("pytest-cache-files-",)
# sys.path entries that are not paths (an editable install's hook), stat'ed against the cwd.
NOT_PATHS = ("__path_hook__",)

# Programs that run the file (or code) they are given, and their options that take a value.
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"}
PYTHONS = {"python", "python3", "pypy", "pypy3"}
OTHERS = {"node", "deno", "bun", "ruby", "perl", "php", "Rscript", "julia", "lua", "tclsh"}
CODE_FLAGS = {"-c", "-e", "--eval", "-p", "--print", "-E"}  # the next word is code, no script
VALUE_FLAGS = {
    "shell": {"-o", "+o", "-O", "+O"},
    "python": {"-W", "-X"},
    "other": {"-I", "-r", "--require", "-M"},
}
STDIN_WORDS = {"-", "-s"}  # `python -`, `bash -s`: the script is standard input
RUN_WORDS = {"run"}  # `deno run x.ts`, `bun run x.js`


@dataclass(frozen=True)
class Watched:
    """One file of a measurement: where it came from, for which command, and whether it is
    protected (False: read by the measurement, but inside the editable scope)."""

    path: str
    source: str
    command: str
    protected: bool = True


@dataclass
class Watch:
    """What a session's measurement commands ran, for setup.json, `plan` and `status`."""

    files: list[Watched] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # why a command was not traced

    def add(self, found: Iterable[Watched]) -> None:
        """Add files; a path another command already listed keeps its first protected
        entry (one that was only read is replaced by one that protects it)."""
        at = {w.path: i for i, w in enumerate(self.files)}
        for item in found:
            i = at.get(item.path)
            if i is None:
                at[item.path] = len(self.files)
                self.files.append(item)
            elif item.protected and not self.files[i].protected:
                self.files[i] = item

    def protected(self) -> list[str]:
        return list(dict.fromkeys(w.path for w in self.files if w.protected))

    def patterns(self) -> list[str]:
        """The protected paths as the spec's `protected` globs: each names its own file
        only (a root `__init__.py` the run looked for must not cover every package's)."""
        return [anchored(p) for p in self.protected()]

    def editable(self) -> list[str]:
        return [w.path for w in self.files if not w.protected]

    def rescoped(self, editable: Callable[[str], bool]) -> Watch:
        """The same files with the reads judged against scope `editable` (`plan` learns
        the scope after the dry runs)."""
        files = []
        for w in self.files:
            if w.source in (READ_FIXED, READ_EDITABLE):
                shut = not editable(w.path)
                w = Watched(w.path, READ_FIXED if shut else READ_EDITABLE, w.command, shut)
            files.append(w)
        return Watch(files, list(self.notes))

    def to_record(self, patterns: list[str], labels: dict[str, str]) -> dict[str, Any]:
        """The record setup.json keeps: every protected path with its source (`labels` for
        those no command ran: the spec's list, test files), and the editable reads."""
        sources = {anchored(w.path): w for w in self.files if w.protected}
        # Sorted where the trace gave the order: its processes report files in whatever
        # order they ran, and two runs of one setup must write the same setup.json.
        patterns = patterns or sorted(sources)
        protected = []
        for pattern in patterns:
            if pattern in sources:
                w = sources[pattern]  # the file's path, not its glob (`./` at the top)
                protected.append({"path": w.path, "source": w.source, "command": w.command})
            else:
                label = labels.get(pattern, "spec key protected")
                protected.append({"path": pattern, "source": label})
        return {
            "traced": not self.notes,
            "notes": self.notes,
            "protected": protected,
            "editable": [
                asdict(w) for w in sorted(self.files, key=lambda w: w.path) if not w.protected
            ],
        }


def anchored(path: str) -> str:
    """A worktree path as a glob of that file only: a glob without `/` matches the name
    in every folder (sandbox.glob_match), so a top-level one gets `./`."""
    return path if "/" in path else f"./{path}"


def said(paths: list[str], shown: int = 8) -> str:
    """The protected paths in one line of setup's log: a module's two paths for each of
    the measurement's import folders run to hundreds, and setup.json lists them all."""
    if not paths:
        return "protected, as the measurement runs them: none found"
    more = f" and {len(paths) - shown} more (setup.json lists them)" if len(paths) > shown else ""
    return f"protected, as the measurement runs them: {', '.join(paths[:shown])}{more}"


def lines(record: dict[str, Any] | None) -> list[str]:
    """What `plan` and `status` print about a session's protected files."""
    if not record:
        return []
    out = ["Protected (held to the base commit; no agent may change them):"]
    by_import = (IMPORT_ABSENT, IMPORT_SHADOW)
    listed = [p for p in record["protected"] if p["source"] not in by_import]
    width = max((len(p["path"]) for p in listed), default=0)
    for item in listed:
        where = f" ({item['command']})" if item.get("command") else ""
        out.append(f"  {item['path'].ljust(width)}  {item['source']}{where}")
    for source in by_import:  # two paths per module and folder: said once per module
        paths = [p["path"] for p in record["protected"] if p["source"] == source]
        names = sorted({PurePosixPath(p.removesuffix("/__init__.py")).stem for p in paths})
        if names:
            more = f" and {len(names) - 12} more" if len(names) > 12 else ""
            shown = ", ".join(names[:12]) + more
            out.append(f"  {len(paths)} paths: {source}: {shown}")
    if len(out) == 1:
        out.append("  (none)")
    if record.get("editable"):
        out.append("Read by the measurement, editable:")
        out += [f"  {w['path']}  ({w['command']})" for w in record["editable"]]
    out += [f"  note: {note}" for note in record.get("notes") or []]
    return out


def status_lines(record: dict[str, Any] | None, files: set[str], where: str) -> list[str]:
    """What `status` prints about the protected files: how many paths are protected, the
    ones that match a file of the base commit (`files`) with where each came from, and
    where the whole list is (`where`: setup.json); the others guard files that may appear."""
    if not record:
        return []
    items = record["protected"]

    def pattern(item: dict[str, Any]) -> str:
        # A file a command ran or looked for is that file (`anchored`), not a glob.
        return anchored(item["path"]) if item.get("command") else item["path"]

    present = [p for p in items if any(glob_match(f, pattern(p)) for f in files)]
    out = [
        f"Protected: {len(items)} paths held to the base commit, {len(present)} of them "
        f"naming files it has (the whole list: {where}):"
    ]
    width = max((len(p["path"]) for p in present), default=0)
    for item in present:
        how = f" ({item['command']})" if item.get("command") else ""
        out.append(f"  {item['path'].ljust(width)}  {item['source']}{how}")
    if record.get("editable"):
        out.append(f"Read by the measurement, editable: {len(record['editable'])} files")
    out += [f"  note: {note}" for note in record.get("notes") or []]
    return out


def scope_rule(include: Iterable[str] = (), exclude: Iterable[str] = ()) -> Callable[[str], bool]:
    """Whether a worktree path lies in the scope the agents may change (sandbox.in_scope)."""
    inc, exc = list(include), list(exclude)

    def editable(rel: str) -> bool:
        if inc and not any(glob_match(rel, p) for p in inc):
            return False
        return not any(glob_match(rel, p) for p in exc)

    return editable


def traced_run(
    command: str,
    cwd: Path,
    *,
    timeout_s: float,
    secrets: list[str] | None = None,
    jail: Jail | None = None,
) -> tuple[trace.Trace | None, str | None]:
    """Run `command` once under strace, for what it runs: (trace, None) or (None, why not).

    A run of its own because strace slows every exec and open down a little: a metric
    measured under it (a time, a rate) would not compare with the untraced cycles.
    """
    if trace.strace() is None:
        return None, trace.MISSING
    with tempfile.TemporaryDirectory(prefix="autoresearch-trace-") as tmp:
        commands.run(
            command,
            cwd,
            timeout_s=timeout_s,
            extra_secrets=secrets,
            stdout_only=True,
            jail=jail,
            trace_to=Path(tmp),
        )
        return read_run(Path(tmp), cwd)


def read_run(folder: Path, cwd: Path) -> tuple[trace.Trace | None, str | None]:
    """The first traced run under `folder` (commands.run's `trace_to`), or why there is none."""
    if trace.strace() is None:
        return None, trace.MISSING
    run = Path(folder) / "run-1"
    if not trace.written(run):
        failed = run / "failed"
        why = failed.read_text().strip().splitlines()[-1:] if failed.exists() else []
        return None, "strace could not trace the command here" + (f": {why[0]}" if why else "")
    return dataclasses.replace(trace.read(run, cwd), imports=imports.read(run)), None


def tracked_files(worktree: Path, commit: str) -> set[str]:
    out = git.worktree_git(worktree, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit)
    return {p for p in out.split("\0") if p}


def classify(
    seen: trace.Trace | None,
    named: Iterable[str],
    worktree: Path,
    tracked: set[str],
    editable: Callable[[str], bool],
    key: str,
    ignored: Callable[[list[str]], set[str]] = lambda paths: set(),
) -> list[Watched]:
    """The files of one command (spec key `key`) by the rule in this module's docstring.
    `ignored` tells which worktree paths git ignores (never committed, never measured)."""
    root = Path(worktree).absolute()
    real_root = root.resolve()
    found: list[Watched] = []

    def add(path: str | None, source: str, base: str | None = None) -> None:
        if not path:
            return
        for rel in _relatives(path, base, root, real_root):
            if rel in tracked:
                found.append(Watched(rel, source, key))

    opened: list[str] = []
    if seen is not None:
        for ex in seen.execs:
            add(ex.path, EXECUTED)
            script, module, code = _interpreted(ex)
            add(script, SCRIPT, ex.cwd)
            if script is None and module is None and code is None and _interpreter(ex):
                add(ex.stdin, SCRIPT)
            for name in ([module] if module else []) + _imports(code, ex):
                for path in seen.opened:
                    if _is_module(path, name):
                        add(path, MODULE)
        # A shell reads a file itself only to run it (`. ./lib.sh`, its own script): data
        # comes in through a redirection, which trace.py tells apart.
        for read in seen.read_by:
            if os.path.basename(read.program) in SHELLS:
                add(read.path, SCRIPT)
        opened = list(seen.opened)
    for rel in named:
        add(str(root / rel), NAMED)
    fixed = {w.path for w in found}
    for path in opened:
        for rel in _relatives(path, None, root, real_root):
            if rel in tracked and rel not in fixed:
                fixed.add(rel)
                shut = not editable(rel)
                found.append(Watched(rel, READ_FIXED if shut else READ_EDITABLE, key, shut))
    if seen is not None:
        absent = []
        for path in seen.missing:
            for rel in _relatives(path, None, root, real_root):
                if rel not in tracked and not _junk(rel) and rel not in absent:
                    absent.append(rel)
        skip = ignored(absent)
        found += [Watched(rel, ABSENT, key) for rel in absent if rel not in skip]
        if seen.imports is not None:
            found += [
                Watched(rel, source, key)
                for rel, source in import_paths(seen.imports, root, real_root)
                if rel not in tracked
            ]
    first: dict[str, Watched] = {}
    for w in found:
        first.setdefault(w.path, w)  # the first source found names it
    return list(first.values())


def _junk(rel: str) -> bool:
    """Whether `rel` lies in a cache a run makes itself, or is not a path at all."""
    parts = rel.split("/")
    return bool(
        set(parts) & CACHE_PARTS
        or any(part.startswith(CACHE_MAKING) for part in parts)
        or any(n in rel for n in NOT_PATHS)
    )


def import_paths(log: imports.ImportLog, root: Path, real_root: Path) -> list[tuple[str, str]]:
    """(path, source) of each file that, created in a folder of the worktree the
    measurement's Python imports from, would change what it imports: a module it looked
    for and did not find (`try: from fastconf import ...`), or one it found outside the
    worktree (`statistics.py` beside the script shadows the standard one)."""
    folders: list[str] = []
    for entry in log.path:
        rel = "" if entry in (str(root), str(real_root)) else None
        rel = rel if rel is not None else _inside(entry, root) or _inside(entry, real_root)
        if rel is not None and rel not in folders and not _junk(rel):
            folders.append(rel)
    outside = [
        name
        for name, origin in log.found.items()
        if origin not in NOT_FILES and not (_inside(origin, root) or _inside(origin, real_root))
    ]
    out: list[tuple[str, str]] = []
    for names, source in ((log.absent, IMPORT_ABSENT), (outside, IMPORT_SHADOW)):
        for name in names:
            for folder in folders:
                stem = f"{folder}/{name}" if folder else name
                out += [(f"{stem}.py", source), (f"{stem}/__init__.py", source)]
    return out


def _relatives(path: str, base: str | None, root: Path, real_root: Path) -> list[str]:
    """`path` as worktree paths: as named (links not followed) and as resolved."""
    named = os.path.normpath(os.path.join(base or str(root), path))
    out = []
    for candidate in (named, os.path.realpath(named)):
        rel = _inside(candidate, root) or _inside(candidate, real_root)
        if rel and not (rel == ".git" or rel.startswith(".git/")) and rel not in out:
            out.append(rel)
    return out


def _inside(path: str, top: Path) -> str | None:
    prefix = str(top).rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def _interpreter(ex: trace.Exec) -> str | None:
    for word in (ex.path, ex.argv[0] if ex.argv else ""):
        name = os.path.basename(word)
        if name in SHELLS or name in PYTHONS or name in OTHERS:
            return name
        if name.startswith(("python3.", "pypy3.")):
            return "python3"
    return None


def _interpreted(ex: trace.Exec) -> tuple[str | None, str | None, str | None]:
    """(script, module, code) an interpreter's argv gives it; all None: standard input."""
    name = _interpreter(ex)
    if name is None:
        return None, None, None
    args = list(ex.argv[1:])
    if name in ("deno", "bun") and args and args[0] in RUN_WORDS:
        args = args[1:]
    family = "shell" if name in SHELLS else "python" if name in PYTHONS else "other"
    while args:
        word = args.pop(0)
        if word == "--":
            return (args[0] if args else None), None, None
        if word in STDIN_WORDS:
            return None, None, None
        if family == "python" and word == "-m":
            return None, args[0] if args else None, None
        # `sh -c`, `bash -ec`; `python -c`, `node -e`, `perl -E`.
        shell_code = family == "shell" and word[:1] == "-" and "c" in word[1:] and word[1] != "-"
        if shell_code or (family != "shell" and word in CODE_FLAGS):
            return None, None, args[0] if args else ""
        if word in VALUE_FLAGS[family]:
            args = args[1:]
        elif not word.startswith(("-", "+")):
            return word, None, None
    return None, None, None


def _imports(code: str | None, ex: trace.Exec) -> list[str]:
    """The modules `python -c CODE` imports by name."""
    if not code or _interpreter(ex) not in PYTHONS:
        return []
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def _is_module(path: str, name: str) -> bool:
    """Whether `path` is the file of module `name` (`a.b`: a/b.py, a/b/__init__.py,
    a/b/__main__.py), under whatever folder of sys.path."""
    stem = "/" + name.replace(".", "/")
    return path.endswith((f"{stem}.py", f"{stem}/__init__.py", f"{stem}/__main__.py"))


@dataclass
class Watcher:
    """Watches a session's measurement commands at setup and collects their files.

    `named` is the text parsing (the files a command line names, in `cwd`); `editable`
    says whether a worktree path lies in the scope the agents may change.
    """

    worktree: Path
    base: str
    editable: Callable[[str], bool]
    named: Callable[[str, Path], list[str]]
    watch: Watch = field(default_factory=Watch)
    tracked: set[str] | None = None  # the files of `base`; None: read from the worktree
    ignored: Callable[[list[str]], set[str]] | None = None  # None: git check-ignore there

    def __post_init__(self) -> None:
        if self.ignored is None:
            self.ignored = lambda paths: git.ignored_paths(self.worktree, paths)

    def run(
        self,
        key: str,
        command: str,
        *,
        timeout_s: float,
        secrets: list[str] | None = None,
        jail: Jail | None = None,
    ) -> None:
        """Run `command` once under strace (traced_run) and add what it ran."""
        seen, note = traced_run(
            command, self.worktree, timeout_s=timeout_s, secrets=secrets, jail=jail
        )
        git.reset_to(self.worktree, self.base)  # the run may leave files behind
        self.saw(key, command, seen, note)

    def saw(self, key: str, command: str, seen: trace.Trace | None, note: str | None) -> None:
        """Add the files of a command whose run was traced (`seen`), or, with `note`
        saying why it was not, those its text names."""
        if self.tracked is None:
            self.tracked = tracked_files(self.worktree, self.base)
        named = self.named(command, self.worktree)
        self.watch.add(
            classify(seen, named, self.worktree, self.tracked, self.editable, key, self.ignored)
        )
        if note:
            told = (
                f"{note}: the files the measurement runs are found from the command's text "
                "only (see docs/safety.md)"
            )
            if told not in self.watch.notes:
                self.watch.notes.append(told)
        if seen is not None:
            blind = imports.unlogged([(e.path, e.argv) for e in seen.execs], seen.imports)
            told = (
                (
                    f"spec key `{key}`: its Python ran as `{blind[0]}`, which loads no import log "
                    "(-I, -E or -S ignore the harness's hook; so does a PYTHONPATH set for an "
                    "interpreter named by its path): what it imports is not protected, neither a "
                    "module it looks for in vain nor one shadowed beside its script; run it as "
                    "`python script.py` without those flags to protect them (docs/safety.md)"
                )
                if blind
                else None
            )
            if told and told not in self.watch.notes:
                self.watch.notes.append(told)


def session_watcher(worktree: Path, base: str, scope: dict[str, Any] | None) -> Watcher:
    """The Watcher of a session's setup: `scope` is the spec's (`include`/`exclude`), and
    a command's named files are read as the rules of command_files.py read them."""
    scope = scope or {}
    editable = scope_rule(scope.get("include") or (), scope.get("exclude") or ())
    return Watcher(worktree, base, editable, measurement_scripts)


def watch_at_setup(
    worktree: Path,
    record: SetupRecord,
    values: dict[str, Any],
    key: str,
    metric: MetricCommand,
    jail: Jail | None,
    log: Callable[[str], None],
) -> Watch:
    """What the spec's `metric` command (at `key`) runs, watched in a run of its own in
    `worktree` at setup; its notes are logged and kept among the setup's warnings."""
    watcher = session_watcher(worktree, record.base_commit, values.get("scope"))
    command, timeout_s = metric.command, metric.timeout_s  # type: ignore[attr-defined]
    watcher.run(key, command, timeout_s=timeout_s, secrets=values.get("secrets"), jail=jail)
    for note in watcher.watch.notes:
        log(f"warning: {note}")
        record.warnings.append(note)
    return watcher.watch
