"""What a Python measurement imports, and what it tried to import and did not find, seen
from inside its own processes at setup (the traced run, commands.run's `trace_to`).

strace cannot see either: Python lists a folder once and answers later lookups from that
listing, so a module it looks for and does not find (`try: from fastconf import ...`)
leaves no failed stat, and a stdlib module found in its usual place says nothing of the
`statistics.py` that would shadow it beside the script. So the traced run gets a
`sitecustomize` of the harness's, first on PYTHONPATH, which puts a finder first on
`sys.meta_path`: it asks the other finders, writes each top-level name with where it was
found (or that it was not) and the process's `sys.path` to a log folder outside the
worktree, and changes nothing else. Any real `sitecustomize` is then imported as usual.
measured.py turns the log into paths that must stay absent.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

FOLDER = "imports"  # under the traced run's folder: the hook and the logs
ENV_LOG = "AUTORESEARCH_IMPORT_LOG"

HOOK = """\
import os as _os
import sys as _sys


def _install():
    folder = _os.environ.get("AUTORESEARCH_IMPORT_LOG")
    here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    if not folder:
        return
    state = {"busy": False, "path": None}

    def write(text):
        try:
            name = _os.path.join(folder, "log.%d" % _os.getpid())
            with open(name, "a", encoding="utf-8") as out:
                out.write(text)
        except OSError:
            pass

    class Watch:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if state["busy"] or path is not None or "." in name:
                return None
            state["busy"] = True
            try:
                spec = None
                for finder in list(_sys.meta_path):
                    find = getattr(finder, "find_spec", None)
                    if finder is Watch or find is None:
                        continue
                    spec = find(name, path, target)
                    if spec is not None:
                        break
                lines = []
                now = tuple(_os.path.abspath(p or ".") for p in _sys.path)
                if now != state["path"]:
                    state["path"] = now
                    lines += ["path\\t%s\\n" % p for p in now]
                if spec is None:
                    lines.append("absent\\t%s\\n" % name)
                else:
                    lines.append("found\\t%s\\t%s\\n" % (name, spec.origin or ""))
                write("".join(lines))
                return spec
            finally:
                state["busy"] = False

    _sys.meta_path.insert(0, Watch)
    write("start\\t%s\\n" % _sys.executable)  # this process logs: the harness counts them


_install()
del _install
_me = _sys.modules.pop("sitecustomize", None)
try:
    import sitecustomize  # noqa: F401  (the environment's own, if it has one)
except ImportError:
    _sys.modules["sitecustomize"] = _me  # the import system expects one under this name
"""


# A `python` first on PATH that puts the hook first on PYTHONPATH again, after whatever
# the command set (`PYTHONPATH=. python bench.py`), and runs the next `python` on PATH.
SHIM = """#!/bin/sh
rest=$(printf %s "$PATH" | sed "s|^{bin}:||")
real=$(PATH="$rest" command -v "${{0##*/}}") || exit 127
PYTHONPATH="{hook}${{PYTHONPATH:+:$PYTHONPATH}}" PATH="$rest" exec "$real" "$@"
"""
SHIMMED = ("python", "python3")


def wrapper(folder: Path) -> list[str]:
    """The argv prefix that runs a command with the hook first on PYTHONPATH (and a
    `python` shim first on PATH that keeps it there) and its log going to
    `folder`/imports (made here; it must be writable in the jail)."""
    where = Path(folder) / FOLDER
    hook, bin_dir = where / "hook", where / "bin"
    hook.mkdir(parents=True, exist_ok=True)
    bin_dir.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    for name in SHIMMED:
        shim = bin_dir / name
        shim.write_text(SHIM.format(bin=bin_dir, hook=hook))
        shim.chmod(0o755)
    script = (
        'PYTHONPATH="$0${PYTHONPATH:+:$PYTHONPATH}"; '
        f'PATH={shlex.quote(str(bin_dir))}:"$PATH"; '
        f"{ENV_LOG}={shlex.quote(str(where))}; "
        f'export PATH PYTHONPATH {ENV_LOG}; exec "$@"'
    )
    return ["/bin/sh", "-c", script, str(hook)]


@dataclass
class ImportLog:
    """Top-level modules the processes found (name -> origin), those they looked for and
    did not find, and the folders of their `sys.path`, in order."""

    found: dict[str, str] = field(default_factory=dict)
    absent: list[str] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    started: int = 0  # Python processes that ran the hook (a trace counts those that ran)


_PYTHON = re.compile(r"python[\d.]*$")


def unlogged(execs: list[tuple[str, tuple[str, ...]]], log: ImportLog | None) -> list[str]:
    """Command lines of the Python processes of a traced run (`execs`: each exec's path and
    argv) that cannot have logged their imports, when fewer logged than ran: those given
    -I, -E or -S, else every one (run by a path of its own with a PYTHONPATH of its own)."""
    ran = [
        argv
        for path, argv in execs
        if _PYTHON.search(os.path.basename(path)) and Path(path).parent.parent.name != FOLDER
    ]
    if len(ran) <= (log.started if log is not None else 0):
        return []
    flagged = [argv for argv in ran if _unhooked(argv)]
    return [shlex.join(argv) for argv in (flagged or ran)]


def _unhooked(argv: tuple[str, ...]) -> bool:
    """Whether the interpreter's own options hold -E or -I (PYTHONPATH, and with it the
    hook, ignored) or -S (no `site`, so no `sitecustomize`), read as Python reads them."""
    words = iter(argv[1:])
    for word in words:
        if not word.startswith("-") or word in ("-", "--"):
            return False
        if word.startswith("--"):
            continue
        for i, letter in enumerate(word[1:]):
            if letter in "IES":
                return True
            if letter in "cm":  # the rest is the program: no option follows
                return False
            if letter in "XW":  # the rest of the word, or the next one, is its argument
                if i == len(word) - 2:
                    next(words, None)
                break
    return False


def read(folder: Path) -> ImportLog | None:
    """The log the hook wrote under `folder` (a traced run's), None when none was written
    (no Python ran, or the hook could not)."""
    logs = sorted((Path(folder) / FOLDER).glob("log.*"))
    if not logs:
        return None
    out = ImportLog()
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            kind, _, rest = line.partition("\t")
            if kind == "start":
                out.started += 1
            elif kind == "path" and rest not in out.path:
                out.path.append(rest)
            elif kind == "absent" and rest not in out.absent:
                out.absent.append(rest)
            elif kind == "found":
                name, _, origin = rest.partition("\t")
                out.found.setdefault(name, origin)
    # A name found by one process and not by another (a fallback tried first) is found.
    out.absent = [n for n in out.absent if n not in out.found]
    return out
