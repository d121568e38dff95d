"""Why a command of the target's (tests, metric, guard) did not get to run, read from its output,
and what to change: one diagnosis for setup's baseline and `autoresearch plan`'s dry runs."""

from __future__ import annotations

import re
from pathlib import Path

# `python -m pytest` where that Python has no pytest: "/usr/bin/python3: No module named pytest"
NO_PYTEST = re.compile(r"^(\S*python[\d.]*): No module named pytest\s*$", re.MULTILINE)
# The shell could not start a program named by path (dash, bash, the kernel's words).
_NOT_STARTED = re.compile(
    r"(/[^\s:]+): (?:not found|No such file or directory|cannot execute: required file not "
    r"found|bad interpreter)"
)
_NO_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '?([\w.]+)'?")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.+)")
_NOT_FOUND = re.compile(r"ERROR: file or directory not found: (\S+)")
# Node's and Jest's: a package (not a path of the project) that resolution did not find.
_NO_PACKAGE = re.compile(r"Cannot find module '([^'./][^']*)'")
_PYTHON_M_PYTEST = re.compile(r"python[\d.]*\s+-m\s+pytest\b")


def likely_fix(
    command: str,
    output: str,
    exit_code: int | None,
    repo: Path,
    *,
    jailed: bool = False,
    key: str = "test_command",
) -> str | None:
    """What to change so that `command` (set by `key`) runs in `repo`, read from its `output`
    (stdout and stderr); None when the output names no cause we know. `jailed`: it ran in
    the bwrap jail, which hides some of the host's folders."""
    repo = Path(repo)
    no_pytest = NO_PYTEST.search(output)
    if no_pytest:
        python = no_pytest.group(1)
        return (
            f"pytest is not installed for {python}: install it there (`{python} -m pip install "
            f"pytest`, or the target's test dependencies), or set {key} to a Python that has "
            "it (`/path/to/venv/bin/python -m pytest`)"
        )
    if exit_code in (126, 127):
        hidden = _program_not_started(output, jailed, key)
        if hidden:
            return hidden
    missing = _NO_MODULE.search(output)
    if missing:
        top = missing.group(1).split(".")[0]
        at_root = (repo / top).is_dir() or (repo / f"{top}.py").is_file()
        in_src = (repo / "src" / top).is_dir() or (repo / "src" / f"{top}.py").is_file()
        unmade = _module_not_in_git(missing.group(1), repo, command, key)
        if unmade:
            return unmade
        if at_root and "pytest" in command and not _PYTHON_M_PYTEST.search(command):
            return (
                f"use `python -m pytest` (module '{top}' is at the repository root; plain "
                "`pytest` does not put the root on sys.path, so a tests/ folder cannot import it)"
            )
        if in_src:
            return (
                f"module '{top}' is under src/: prefix the command with `PYTHONPATH=src` "
                '(`PYTHONPATH=src python -m pytest`), set `pythonpath = ["src"]` in the pytest '
                "config, or install the package first"
            )
        if not at_root:
            return f"install the target's dependencies (module '{top}' is not in the repository)"
    package = _NO_PACKAGE.search(output)
    if package:
        # A session's worktree holds the repository's tracked files: a node_modules the
        # checkout has beside them is not there, and the jail hides homes and /tmp.
        return (
            f"install the target's dependencies where its commands can read them (package "
            f"'{package.group(1)}' is not found: a session's worktree has only the repository's "
            "tracked files, no node_modules): install them in a folder the jail shows (under "
            "/usr or /opt) and name it in NODE_PATH, listed in commands.pass_env (docs/safety.md)"
        )
    absent = _NOT_FOUND.search(output)
    if absent:
        return f"{absent.group(1)} does not exist: fix the path in {key}"
    rejected = _UNRECOGNIZED.search(output)
    if rejected:
        return f"pytest rejected {rejected.group(1).strip()}: check the options in {key}"
    if exit_code == 127:
        return f"install the program it runs, or set {key} to a command that exists"
    return None


_BUILD_FILES = ("pyproject.toml", "setup.py", "setup.cfg", ".gitignore")


def _module_not_in_git(module: str, repo: Path, command: str, key: str) -> str | None:
    """A submodule of a package the repository holds, whose file it does not: one a build
    step writes (a version module), absent from the session's worktree, which holds only
    what git tracks and starts every run with untracked files removed."""
    top, _, rest = module.partition(".")
    if not rest:
        return None
    for root in ("src/", ""):
        if (repo / root / top).is_dir():
            break
    else:
        return None
    relative = f"{root}{module.replace('.', '/')}"
    if (repo / relative).is_dir() or (repo / f"{relative}.py").is_file():
        return None
    path = f"{relative}.py"
    named = [n for n in _BUILD_FILES if path in _read(repo / n)]
    why = (
        f" ({named[0]} lists it)"
        if named[:1] == [".gitignore"]
        else f" ({named[0]} names it: a build step writes it)"
        if named
        else ""
    )
    example = (
        f" (`printf '__version__ = \"0\"\\n' > {path} && {command}`)" if "version" in rest else ""
    )
    return (
        f"module '{module}' ({path}) is not in git{why}, and the session's worktree holds "
        f"only what git tracks: have {key} write it before the tests run{example}, or commit it"
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _program_not_started(output: str, jailed: bool, key: str) -> str | None:
    """A program named by path that the shell could not start: absent here, or present and
    hidden by the jail (it, or the interpreter its `#!` line names, lies in a folder the jail
    hides: a home, the workflow's folder, the host's /tmp)."""
    named = _NOT_STARTED.search(output)
    if not named:
        return None
    program = Path(named.group(1))
    if not program.exists():
        return f"{program} does not exist: fix the path in {key}"
    interpreter = _interpreter_of(program)
    if not jailed:
        if interpreter and not Path(interpreter).exists():
            return f"{program} starts with `#!{interpreter}`, which does not exist: reinstall it"
        return None
    needs = f" and its interpreter {interpreter}" if interpreter else ""
    return (
        f"{program} exists on this machine, but the command jail hides it{needs} (homes, the "
        "host's /tmp and the workflow's folder are hidden from the target's commands): "
        "install the program where the jail shows it (a virtualenv inside the target, or "
        "under /usr or /opt), or set commands.sandbox: none (docs/safety.md)"
    )


def _interpreter_of(program: Path) -> str | None:
    try:
        with program.open("rb") as handle:
            first = handle.readline(400)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    return words[0] if words else None
