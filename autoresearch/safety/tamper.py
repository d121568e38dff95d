"""What a change may not reach for without being flagged: the process its tests or its
measurement run in, the test runner, and the evaluator's own files.

Every mode screens every change a team hands in, on the diff, before the gate
(`Screen`, called from `protect.Protection`); experiment mode screens each proposal with
the whole list (`scan`). The test gate and a metric read different things of the process,
so a screen has a profile: `gate` (sweep, fix, learn, ship, security: what can turn a test
run's verdict — the runner's own modules, exit status, start-up files, builtins, frames),
`measure` (narrow, broad: also output, clocks and the environment the metric reads), and
`full` (experiment: every check on every file).

No harness can stop code under test from changing the process it runs in: a change that
rebinds `print`, `json.dumps` or `time.perf_counter` when the metric script imports it
rewrites what a byte-identical, protected script reports. What can be done is done here:
each changed file is read before and after, and what the change *adds* from the checked
list below (CHECKS) is a flag. A flagged change is not kept unless the spec says
`experiment.allow_flagged: true`; an improvement beyond `experiment.max_gain` is a flag
too. The sure defence is an evaluator that runs the code under test in a process of its
own and reads its result from a file or a pipe the code cannot reach (docs/experiment.md).

The Python checks read the syntax tree (aliases resolved: `import builtins as b;
b.print = f` is `builtins.print`, and so are `p = b; p.print = f` and `getattr(b, "print")`),
and tells.py reads it for code that tells a test run from a real one; Go, Rust and
JavaScript, and their runners' configuration, are read line by line (tamper_lines.py). The
list errs on the side of flagging: a flag costs an iteration, a false keep costs the user's
trust in every result.
"""

from __future__ import annotations

import ast
import codecs
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from autoresearch.safety import git, tamper_lines, tells

# Which checks count (`counts`): every one (experiment), a metric's (narrow, broad), a test
# gate's (every other mode).
FULL, MEASURE, GATE = "full", "measure", "gate"
PROFILES = (FULL, MEASURE, GATE)

# The classes of tampering, each with what it means; a Flag names one.
CHECKS = {
    "builtins": "rebinds or reaches into builtins (print, open, ...)",
    "modules": "rebinds an imported module's attribute (directly, through an alias, its "
    "__dict__, vars(), __setattr__ or mock.patch) or changes the import system (sys.modules, "
    "sys.path, importlib, __import__, exec)",
    "output": "writes or redirects the interpreter's output (print, sys.stdout, fd 1 and 2, "
    "atexit) or sets its exit status (sys.exit, os._exit), which the metric and guard read",
    "timers": "rebinds a clock (time, datetime)",
    "environment": "changes the environment the evaluator reads (os.environ, putenv) or reads "
    "what its process was started with (sys.argv)",
    "frames": "reaches into other code's frames or objects (sys._getframe, inspect, gc, ctypes)",
    "evaluator": "changes a file the evaluator runs or names, or names one in code",
    "startup": "adds or changes a file the interpreter or a test runner loads by itself "
    "(sitecustomize, usercustomize, .pth, conftest.py, runner configs)",
    "shadowing": "adds a module that shadows the standard library, the test runner or one the "
    "evaluator imports",
    "runner": "reaches into the test runner (its modules _pytest and pluggy, its report and "
    "result classes, its hooks and plugin lists, unittest's result classes)",
    "gain": "improves the metric by more than experiment.max_gain",
    "testrun": "tells a test run from a real one in code that is not a test (the runner's "
    "modules or name, the command line, the user, HOME, a CI variable, the caller's stack or "
    "test name; Go's testing.Testing, Rust's cfg!(test), Jest's worker variable)",
}

# Modules whose import alone reaches into the process.
IMPORT_CHECKS = {
    "builtins": "builtins",
    "importlib": "modules",
    "imp": "modules",
    "site": "modules",
    "ctypes": "frames",
    "gc": "frames",
    "inspect": "frames",
    "atexit": "output",
    "faulthandler": "output",
    # A child process shares the measuring process's output (fd 1) and can write to it.
    "subprocess": "output",
    "pty": "output",
    "multiprocessing": "output",
    "signal": "frames",
    # Patches any attribute named by a string ("json.dumps"), past every check on names.
    "unittest.mock": "modules",
    "mock": "modules",
    "_io": "output",
    # The test runner's own code: a change that imports it can rewrite its reports.
    "_pytest": "runner",
    "pluggy": "runner",
    "unittest.result": "runner",
    "unittest.runner": "runner",
}
# Names and attributes whose mere use is a flag (qualified, aliases resolved).
REFERENCE_CHECKS = {
    "__builtins__": "builtins",
    "__import__": "modules",
    "exec": "modules",
    "eval": "modules",
    "compile": "modules",
    "sys.modules": "modules",
    "sys.path": "modules",
    "sys.meta_path": "modules",
    "sys.path_hooks": "modules",
    "sys.path_importer_cache": "modules",
    "sys.stdout": "output",
    "sys.stderr": "output",
    "sys.__stdout__": "output",
    "sys.__stderr__": "output",
    "sys.displayhook": "output",
    "sys.excepthook": "output",
    "os.write": "output",
    "os.dup2": "output",
    "os.dup": "output",
    "os.fdopen": "output",
    "io.FileIO": "output",  # a file object on fd 1 or 2, past the check of open()
    **{
        f"os.{name}": "output"
        for name in "system popen fork forkpty posix_spawn posix_spawnp execv execve execvp "
        "execvpe execl execle execlp execlpe spawnv spawnve spawnvp spawnvpe spawnl spawnle "
        "spawnlp spawnlpe".split()
    },
    # The exit status is what a guard reads: a test run that fails can still exit 0 from a
    # cleanup (request.config.add_cleanup(lambda: os._exit(0))), and forge its report too.
    # A call that can only exit non-zero is not flagged (EXITS).
    "os._exit": "output",
    "os.kill": "output",
    "os.killpg": "output",
    "sys.exit": "output",
    "SystemExit": "output",
    "exit": "output",
    "quit": "output",
    "os.putenv": "environment",
    # What the process was started with: a test run's argv names where its report goes.
    "sys.argv": "environment",
    "sys.orig_argv": "environment",
    "os.unsetenv": "environment",
    "sys._getframe": "frames",
    "sys.settrace": "frames",
    "sys.setprofile": "frames",
    "sys.addaudithook": "frames",
    # Every live object, the runner's reports among them.
    "gc.get_objects": "frames",
    "gc.get_referrers": "frames",
    "gc.get_referents": "frames",
    # The runner's report and result classes, and its hook machinery.
    **{
        f"pytest.{name}": "runner"
        for name in "TestReport CollectReport CallInfo hookimpl hookspec PytestPluginManager "
        "TerminalReporter".split()
    },
    "unittest.TestResult": "runner",
    "unittest.TextTestResult": "runner",
    "unittest.TextTestRunner": "runner",
    "pytest_plugins": "runner",
}
# Top-level modules of the test runners: a file of that name in the worktree shadows them.
RUNNER_MODULES = frozenset("pytest _pytest pluggy py xdist pytest_cov coverage nose".split())
# Text naming the runner's internals (`sys.modules["_pytest.reports"]`, a plugin entry
# point); a hook named as text (`getattr(config.hook, "pytest_...")`).
RUNNER_TEXT = re.compile(r"\b_pytest\b|\bpluggy\b|\bpytest11\b|\bpytest_[a-z_]+\b")
# Hooks a test module may define for itself without being a plugin.
MODULE_HOOKS = frozenset({"pytest_generate_tests"})
# Attributes that lead into another piece of code's frames or globals, whatever the object.
FRAME_ATTRIBUTES = frozenset(
    "f_back f_globals f_locals f_builtins tb_frame gi_frame cr_frame __globals__ __code__ "
    "__subclasses__ __closure__ __self__ __builtins__".split()
)
# Names that, written as text, reach what the checks above guard (getattr, globals()[...]).
NAMED_CHECKS = {
    **{name: "frames" for name in FRAME_ATTRIBUTES},
    "__builtins__": "builtins",
    "builtins": "builtins",
    "__import__": "modules",
}
ENVIRON_WRITES = frozenset("update setdefault pop popitem clear __setitem__ __delitem__".split())
# Ways to end the process with a status of one's choosing; a call whose argument can only
# give a failing status (a message, a non-zero number) cannot fake a pass.
EXITS = frozenset("os._exit sys.exit SystemExit exit quit".split())
# setattr by another name: object.__setattr__(json, "dumps", f), type(m).__setattr__(...).
SETATTR_LIKE = frozenset("__setattr__ __delattr__".split())
OUTPUT_PATHS = ("/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/", "/proc/thread-self/")
# Files an interpreter or a test runner loads without being asked to.
STARTUP_NAMES = frozenset(
    "sitecustomize.py usercustomize.py conftest.py pytest.ini tox.ini setup.cfg pyproject.toml "
    ".pythonrc.py pyvenv.cfg .env .envrc package.json .npmrc".split()
)
STARTUP_SUFFIXES = (".pth",)
# A folder of an installed distribution's metadata: on the path (the worktree is, for
# `python -m pytest`), its entry points are read by the runner, which loads the plugins they
# name (`[pytest11]`) before any test; no file of it is ever imported by name.
DISTRIBUTION_FOLDERS = (".dist-info", ".egg-info")
# Compiled or native modules the import system prefers to a source file beside them.
SHADOW_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd")
MAX_BYTES = 1_000_000  # a file larger than this is not parsed; it is flagged as unreadable
# What _blob gives for a version too large or not UTF-8: a code file like that cannot be
# checked, so the readers say unreadable and it is flagged.
UNREADABLE = "\0" * (MAX_BYTES + 1)
# PEP 263: a source encoding declared on the first two lines. The checks read the text as
# UTF-8; under `coding: utf-7` a comment's "+AAo-" is a line break the interpreter runs.
CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


@dataclass(frozen=True)
class Flag:
    """One thing a change reaches for: the check it fails, where, and what it is."""

    check: str  # a key of CHECKS
    path: str
    line: int | None
    detail: str

    def describe(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.detail} ({self.check})"


def summary(flags: list[dict[str, Any]] | list[Flag], limit: int = 3) -> str:
    """One line for a verdict: the first few flags and how many more."""
    items = [f if isinstance(f, Flag) else Flag(**f) for f in flags]
    shown = "; ".join(f.describe() for f in items[:limit])
    return shown + (f"; and {len(items) - limit} more" if len(items) > limit else "")


def refusal(flags: list[dict[str, Any]], allowed: bool) -> str | None:
    """Why a flagged change is not measured or kept; None when it has no flag or the spec
    allows flagged changes."""
    if not flags or allowed:
        return None
    return (
        f"flagged, not kept: {summary(flags)} (a change that reaches into the measuring "
        "process can move the metric without being better; experiment.allow_flagged: true "
        "keeps such changes)"
    )


def scan(
    worktree: Path, files: list[str], start: str, evaluator: list[str] | None = None
) -> list[Flag]:
    """The flags of the change to `files` in `worktree` against commit `start`, read from
    git (the index after staging the files, and the commit), never from the live files."""
    evaluator = sorted(set(evaluator or []))
    imported = evaluator_imports(worktree, start, evaluator)
    git.worktree_git(worktree, "add", "-A", "--", *files)
    try:
        flags: list[Flag] = []
        for path in files:
            old = _blob(worktree, f"{start}:{path}")
            new = _blob(worktree, f":{path}")
            flags += check_file(path, old, new, evaluator, imported)
        return flags
    finally:
        git.worktree_git(worktree, "reset", "-q")


@dataclass(frozen=True)
class Screen:
    """The tamper screen one session runs on every change a team hands in (protect.py calls
    it on what is about to be tested or committed): the profile of its mode, the checks the
    spec lets through (`allow_tamper_flags`) and the evaluator's files (the measurement's,
    protected at setup)."""

    profile: str = GATE
    allowed: frozenset[str] = frozenset()
    evaluator: tuple[str, ...] = ()
    installed: frozenset[str] = frozenset()  # modules the measured process imports (setup)

    def flags(
        self, worktree: Path, base: str = "HEAD", changes: tuple[git.Staged, ...] | None = None
    ) -> list[Flag]:
        """The flags of what the index holds against commit `base`, read from git.
        `changes`: `git.staged_changes` as the caller read it, with nothing changed since."""
        if changes is None:
            changes = git.staged_changes(worktree, base)
        changes = tuple(sorted(changes, key=lambda c: c.path))
        if not changes:
            return []
        evaluator = list(self.evaluator)
        # The same change screened again (before the gate, at commit): the blob ids of both
        # sides name every byte the checks read; the evaluator's files are read at `base`.
        screen = (self.profile, tuple(sorted(self.allowed)), self.evaluator)
        screen += (tuple(sorted(self.installed)),)
        key = (str(worktree), screen, changes, git.head(worktree) if evaluator else "")
        screened = _SCREENED.get(key)  # read once: another job's thread may empty it
        if screened is not None:
            return screened
        imported = evaluator_imports(worktree, base, evaluator)
        contents = git.blobs(worktree, [i for c in changes for i in (c.old, c.new)], MAX_BYTES)
        flags: list[Flag] = []
        for change in changes:
            old, new = _text(contents.get(change.old)), _text(contents.get(change.new))
            flags += check_file(
                change.path, old, new, evaluator, imported, self.profile, self.installed
            )
        if len(_SCREENED) >= git.KEPT_ANSWERS:
            _SCREENED.clear()
        _SCREENED[key] = flags
        return flags

    def split(self, flags: list[Flag]) -> tuple[list[Flag], list[Flag]]:
        """(the flags that stop the change, those the spec lets through)."""
        blocking = [f for f in flags if f.check not in self.allowed]
        return blocking, [f for f in flags if f.check in self.allowed]


_SCREENED: dict[tuple, list[Flag]] = {}


def _text(data: bytes | None) -> str | None:
    """A blob as `_blob` reads it: text with its line ends made "\n", UNREADABLE when too
    large or not UTF-8, None when absent."""
    if data is None:
        return None
    if data == git.TOO_LARGE:
        return UNREADABLE
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return UNREADABLE
    return text.replace("\r\n", "\n").replace("\r", "\n")


def screen_refusal(flags: list[Flag]) -> str:
    """Why a flagged change is not kept, naming each line and check."""
    checks = sorted({f.check for f in flags})
    return (
        f"tamper screen: {summary(flags, limit=5)}: a change that reaches into the process "
        "that tests or measures it can pass without being right "
        f"(allow_tamper_flags: [{', '.join(checks)}] keeps such changes)"
    )


def check_file(
    path: str,
    old: str | None,
    new: str | None,
    evaluator: list[str] = (),  # type: ignore[assignment]
    evaluator_imports: set[str] = frozenset(),  # type: ignore[assignment]
    profile: str = FULL,
    installed: frozenset[str] = frozenset(),
) -> list[Flag]:
    """The flags of one file's change from `old` to `new` (None: absent on that side),
    under `profile` (PROFILES). `installed`: top-level modules the measured or tested
    process imports from outside the worktree, which a new file of that name shadows."""
    flags: list[Flag] = []
    name = PurePosixPath(path).name
    if path in evaluator:
        flags.append(Flag("evaluator", path, None, "changes a file the evaluator runs"))
    if is_startup_path(path):
        line = _config_line(path, old, new) if profile != FULL else None
        if profile == FULL or line is not None:
            flags.append(
                Flag("startup", path, line or None, f"{name} is loaded without being imported")
            )
    if old is None and (name.endswith(SHADOW_SUFFIXES) or "__pycache__" in path.split("/")):
        flags.append(Flag("shadowing", path, None, "adds a compiled module, preferred to source"))
    elif old is None and (top := _new_module(path, evaluator)):
        if top in sys.stdlib_module_names:
            flags.append(Flag("shadowing", path, None, f"adds {top!r}, a standard module"))
        elif top in RUNNER_MODULES:
            flags.append(Flag("shadowing", path, None, f"adds {top!r}, the test runner's"))
        elif top in evaluator_imports:
            flags.append(
                Flag("shadowing", path, None, f"adds {top!r}, which the evaluator imports")
            )
        elif top in installed:
            flags.append(
                Flag("shadowing", path, None, f"adds {top!r}, an installed module it imports")
            )
    if new is None:
        return flags
    if path.endswith((".py", ".pyw", ".pyi")):
        # The evaluator's files as code would name them: the path and the bare file name.
        watched = frozenset(evaluator) | {PurePosixPath(p).name for p in evaluator}
        before = python_uses(old or "", watched)
        after = python_uses(new, watched)
    elif tamper_lines.is_code_path(path):  # Go, Rust, JavaScript: read line by line
        readable = len(new) <= MAX_BYTES
        before = tamper_lines.code_uses(path, (old or "")[:MAX_BYTES], is_test_path(path))
        after = tamper_lines.code_uses(path, new, is_test_path(path)) if readable else None
        if after is not None and path.endswith("_test.go"):
            after += tamper_lines.go_test_hooks(old, new)
    else:
        return flags  # data and prose: what runs is checked above, by path
    if before is None:
        before = []
    if after is None:  # unreadable after the change: cannot be checked, so it is a flag
        kind = "Python" if path.endswith((".py", ".pyw", ".pyi")) else "text"
        return flags + [Flag("modules", path, None, f"cannot be read as {kind} to check it")]
    seen = Counter((check, detail) for check, detail, _ in before)
    test_file = is_test_path(path)
    for check, detail, line in after:
        if seen[(check, detail)] > 0:
            seen[(check, detail)] -= 1  # there before the change
            continue
        if counts(profile, check, detail, test_file):
            flags.append(Flag(check, path, line, detail))
    return flags


# --- profiles: which flags count where -----------------------------------------------------
# What a test run's verdict can be turned by, in any file: the runner itself, the exit
# status by a path that skips the runner's own ending, frames and every live object, and
# the builtins every module shares. Printing, clocks and the environment are not: the
# verdict is read from the runner's report, not from what the process prints.
GATE_OUTPUT = frozenset(
    "os._exit os.kill os.killpg atexit faulthandler "
    # Go's and cargo's verdict is read from the test binary's output: what takes it over.
    "os.Stdout os.Stderr os.NewFile syscall.Dup2 syscall.Dup3 unix.Dup2 unix.Dup3 "
    "libc::dup2 libc::dup3 unistd::dup2 nix::unistd::dup2 set_output_capture".split()
)
GATE_FRAMES = frozenset(
    "sys.settrace sys.setprofile sys.addaudithook sys._getframe gc.get_objects "
    "gc.get_referrers gc.get_referents ctypes f_back f_globals f_locals f_builtins tb_frame "
    "gi_frame cr_frame __globals__ __subclasses__ __builtins__".split()
)
# What honest library code does with the import system, named by the detail's object.
LIBRARY_MODULES = frozenset("importlib imp site mock unittest.mock sys.path compile".split())


def _object(detail: str) -> str:
    """What a use's detail names: `uses .f_back` -> `f_back`, `names 'f_back'` -> `f_back`."""
    what = detail.split(" ", 1)[1] if " " in detail else detail
    if what.startswith(("on ", "from ")):
        what = what.split(" ", 1)[1]
    return what.strip("'\".").split(" ")[0].rstrip(",")


def counts(profile: str, check: str, detail: str, test_file: bool) -> bool:
    """Whether a use raises a flag under `profile` (in a test file or not). The runner,
    start-up files, shadowing, the evaluator's files and unreadable code count
    everywhere; a test file may patch, mock and print as tests do."""
    if profile == FULL or check in ("runner", "startup", "shadowing", "evaluator", "gain"):
        return True
    if check == "testrun":  # a test may skip on CI or ask which runner runs it
        return not test_file
    if detail.startswith(("cannot be read", "declares source encoding")):
        return True
    what = _object(detail)
    if check == "builtins":  # rebinding one, not importing or reading it
        return not detail.startswith(("imports", "uses builtins.", "names 'builtins'"))
    if check == "frames":
        return what in GATE_FRAMES
    if check == "output" and what in GATE_OUTPUT:
        return True
    if test_file:  # a test patches, mocks, prints and sets variables as tests do
        return check == "modules" and what.startswith(("sys.meta_path", "sys.path_hooks"))
    if profile == GATE and check in ("output", "environment"):
        return False  # not what a test run's verdict is read from
    if check == "modules":  # importing the import system or reading it is what libraries do
        known = what in LIBRARY_MODULES or what.startswith("importlib.")
        reads = detail.startswith(("imports", "uses")) and known
        return not reads and not detail.startswith("imports * from")
    if check == "environment":
        return what not in ("sys.argv", "sys.orig_argv")
    return True  # measure: output and clocks of the measured process; gate: clocks


TEST_DIRS = frozenset({"tests", "test", "testing", "__tests__", "spec"})


def is_startup_path(path: str) -> bool:
    """A file an interpreter or a test runner loads without being asked to: a start-up
    module, a runner configuration, a `.pth`, or any file of a distribution's metadata
    folder (its entry points name plugins the runner loads)."""
    p = PurePosixPath(path)
    return (
        p.name in STARTUP_NAMES
        or p.name.endswith(STARTUP_SUFFIXES)
        or tamper_lines.is_config_path(path)
        or any(part.endswith(DISTRIBUTION_FOLDERS) for part in p.parts[:-1])
    )


JS_TEST_SUFFIXES = tuple(
    f".{kind}{suffix}" for kind in ("test", "spec") for suffix in tamper_lines.SCRIPT_SUFFIXES
)


def is_test_path(path: str) -> bool:
    """A test module by its place or name (conftest.py is a start-up file, not a test)."""
    p = PurePosixPath(path)
    name = p.name
    return (
        name.startswith("test_")
        or name.endswith(("_test.py", "_test.go", *JS_TEST_SUFFIXES))
        or any(part in TEST_DIRS for part in p.parts[:-1])
    ) and name != "conftest.py"


# Sections of a shared configuration file that configure a test runner or a plugin.
RUNNER_SECTION = re.compile(r"pytest|entry.?points|plugins|coverage|jest|mocha|vitest", re.I)
# A line that reaches the runner whatever its section (a plugin's entry point, options).
RUNNER_LINE = re.compile(r"pytest11|addopts|PYTEST_|(^|\s)-p\s")
SECTION = re.compile(r"^\s*\[([^\]]+)\]\s*$")
JSON_RUNNER_KEY = re.compile(r'"(jest|mocha|vitest|ava|test|pretest|posttest|scripts)"')
SHARED_CONFIGS = frozenset("pyproject.toml setup.cfg tox.ini package.json".split())


def _config_line(path: str, old: str | None, new: str | None) -> int | None:
    """Where a change to a start-up file reaches the runner: 0 for the whole file (a new
    or removed one, one read only by a runner), the first changed line of a runner
    section of a shared file (pyproject.toml's [tool.pytest...], setup.cfg's
    [tool:pytest], package.json's "jest"), None when only other sections changed."""
    name = PurePosixPath(path).name
    if tamper_lines.is_config_path(path):
        return tamper_lines.config_line(path, old, new)
    if name not in SHARED_CONFIGS or old is None or new is None:
        return 0
    if name == "package.json":
        try:  # a key under "jest" is on a line of its own: compare the values
            line = tamper_lines.package_json_line(old, new)
        except ValueError:
            line = None
        if line is not None:
            return line
    for number, text, section in _changed_lines(old, new):
        if RUNNER_SECTION.search(section) or RUNNER_LINE.search(text):
            return number
        if name == "package.json" and JSON_RUNNER_KEY.search(text):
            return number
    return None


def _changed_lines(old: str, new: str) -> list[tuple[int, str, str]]:
    """(line number in `new` or the nearest, its text, its section) of every changed line
    of either side."""
    import difflib

    out: list[tuple[int, str, str]] = []
    old_lines, new_lines = old.splitlines(), new.splitlines()
    sections_old, sections_new = _sections(old_lines), _sections(new_lines)
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for j in range(j1, j2):
            out.append((j + 1, new_lines[j], sections_new[j]))
        for i in range(i1, i2):
            out.append((min(j1 + 1, len(new_lines)) or 1, old_lines[i], sections_old[i]))
    return out


def _sections(lines: list[str]) -> list[str]:
    current, out = "", []
    for text in lines:
        match = SECTION.match(text)
        if match:
            current = match.group(1)
        out.append(current)
    return out


def evaluator_imports(worktree: Path, start: str, evaluator: list[str]) -> set[str]:
    """Top-level module names the evaluator's Python files import (at `start`)."""
    names: set[str] = set()
    for path in evaluator:
        text = _blob(worktree, f"{start}:{path}") if path.endswith(".py") else None
        try:
            tree = ast.parse(text or "")
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names


def evaluator_files(
    worktree: Path,
    commands: list[str | None],
    protected: list[str],
    outputs: list[str] = (),  # type: ignore[assignment]
) -> list[str]:
    """The files the evaluator runs or names: each word of its commands that is a tracked
    file of the worktree, the protected literal paths, and `outputs`, the files it reads
    its result from (json_file:<path>), tracked or not."""
    words = {w.strip("'\"") for c in commands if c for w in re.split(r"[\s=:;|&<>()]+", c)}
    tracked = set(git.worktree_git(worktree, "ls-files", "-z").split("\0"))
    found = {w[2:] if w.startswith("./") else w for w in words} & tracked
    made = {o[2:] if o.startswith("./") else o for o in outputs}
    return sorted(found | made | {p for p in protected if p in tracked})


# --- reading one version of a file ---------------------------------------------------------

Use = tuple[str, str, int | None]  # (check, detail, line)


def python_uses(source: str, watched: frozenset[str] = frozenset()) -> list[Use] | None:
    """Every checked thing a Python source reaches for; None when it does not parse.
    `watched`: the evaluator's file names, which a string in the code may not name."""
    if len(source) > MAX_BYTES:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    finder = _Finder(watched)
    finder.visit(tree)
    return finder.uses + tells.tells(tree, finder.qual) + _declared_encoding(source)


def _declared_encoding(source: str) -> list[Use]:
    """A source encoding other than UTF-8 declared by the file: what runs is not what was
    read."""
    for number, line in enumerate(source.splitlines()[:2], 1):
        match = CODING.match(line)
        if match is None:
            continue
        try:
            name = codecs.lookup(match.group(1)).name
        except LookupError:
            name = match.group(1)
        if name in ("utf-8", "ascii"):
            return []
        return [("modules", f"declares source encoding {match.group(1)}", number)]
    return []


class _Finder(ast.NodeVisitor):
    """Collects the checked uses of one module, its import aliases resolved."""

    def __init__(self, watched: frozenset[str] = frozenset()) -> None:
        self.uses: list[Use] = []
        self.aliases: dict[str, str] = {}  # local name -> qualified name
        self.modules: set[str] = set()  # local names bound to an imported module
        self.watched = watched  # the evaluator's file names
        self.called: set[int] = set()  # ids of the names a call is made through
        self.failing_exits: set[int] = set()  # ids of exit names called to fail, not flagged
        self.own_module: set[int] = set()  # ids of `sys.modules` read as sys.modules[__name__]

    def use(self, check: str, detail: str, node: ast.AST) -> None:
        self.uses.append((check, detail, getattr(node, "lineno", None)))

    # imports

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            local = alias.asname or alias.name.split(".")[0]
            self.aliases[local] = alias.name if alias.asname else local
            self.modules.add(local)
            self._imported(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._imported(module, node)
        for alias in node.names:
            qual = f"{module}.{alias.name}" if module else alias.name
            local = alias.asname or alias.name
            self.aliases[local] = qual
            if qual in REFERENCE_CHECKS:
                self.use(REFERENCE_CHECKS[qual], f"imports {qual}", node)
            elif qual in IMPORT_CHECKS:  # from unittest import mock
                self.use(IMPORT_CHECKS[qual], f"imports {qual}", node)
            if alias.name == "*":
                self.use("modules", f"imports * from {module}", node)
                continue
            self.modules.add(local)  # from package import name: may be a module or a class

    def _imported(self, module: str, node: ast.AST) -> None:
        parts = module.split(".")
        for depth in range(1, len(parts) + 1):
            name = ".".join(parts[:depth])
            if name in IMPORT_CHECKS:
                self.use(IMPORT_CHECKS[name], f"imports {module}", node)
                return

    # names and attributes

    def qual(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for (`b.print` -> `builtins.print`)."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.qual(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = self.qual(node.func)
            if func in ("__import__", "importlib.import_module"):
                return str(node.args[0].value)
        if isinstance(node, ast.Call) and len(node.args) >= 2 and self._func(node) == "getattr":
            name = node.args[1]
            base = self.qual(node.args[0])
            if base and isinstance(name, ast.Constant) and isinstance(name.value, str):
                return f"{base}.{name.value}"  # getattr(sys, "stdout") is sys.stdout
        return None

    def _func(self, node: ast.Call) -> str | None:
        """The plain name a call is made through (`getattr`, `super`), aliases resolved."""
        if isinstance(node.func, ast.Name):
            return self.aliases.get(node.func.id, node.func.id)
        return None

    def on_module(self, node: ast.AST) -> bool:
        """Whether `node` is a name bound to an imported module, or an attribute of one."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.modules

    def visit_Name(self, node: ast.Name) -> None:
        qual = self.aliases.get(node.id, node.id)
        if id(node) in self.failing_exits:
            return
        if qual in REFERENCE_CHECKS:  # exec, __import__, or an alias of sys.modules ...
            self.use(REFERENCE_CHECKS[qual], f"uses {qual}", node)
        elif qual == "print" and isinstance(node.ctx, ast.Load) and id(node) not in self.called:
            # p = print; weakref.finalize(x, print, ...): a print the call check misses.
            self.use("output", "uses print as a value", node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        # sys.modules[__name__]: a module reaching itself, which libraries do; any other key
        # (a name built at run time) may be the runner's module.
        key = node.slice
        if isinstance(key, ast.Name) and key.id == "__name__":
            if self.qual(node.value) == "sys.modules":
                self.own_module.add(id(node.value))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        qual = self.qual(node)
        if id(node) in self.failing_exits:
            return
        if id(node) in self.own_module:
            self.generic_visit(node)
            return
        if node.attr in FRAME_ATTRIBUTES:
            self.use("frames", f"uses .{node.attr}", node)
        if qual in REFERENCE_CHECKS:
            self.use(REFERENCE_CHECKS[qual], f"uses {qual}", node)
        elif qual and qual.startswith("builtins."):
            self.use("builtins", f"uses {qual}", node)
        elif node.attr == "__dict__" and self.on_module(node.value):
            # json.__dict__["dumps"] = f, sys.__dict__["modules"]: setattr by another name.
            self.use("modules", f"uses {qual or node.attr}", node)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        if any(p in node.value for p in OUTPUT_PATHS):
            self.use("output", f"names {node.value[:40]!r}", node)
        elif node.value.removeprefix("./") in self.watched:  # open("measure.py", "w")
            self.use("evaluator", f"names {node.value!r}, a file the evaluator runs", node)
        elif node.value in NAMED_CHECKS:  # globals()["__builtins__"], getattr(x, "f_back")
            self.use(NAMED_CHECKS[node.value], f"names {node.value!r}", node)
        elif RUNNER_TEXT.search(node.value):  # sys.modules["_pytest.reports"]
            self.use("runner", f"names {node.value[:40]!r}", node)

    # changes

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._target(target)
        self.generic_visit(node)
        # j = json; e = os.environ: the new name stands for what it was given, so a change
        # made through it is seen as one made through the module.
        qual = self.qual(node.value)
        if qual and self.on_module(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.aliases[target.id] = qual
                    self.modules.add(target.id)

    def visit_AugAssign(self, node: ast.AugAssign | ast.AnnAssign) -> None:
        self._target(node.target)
        self.generic_visit(node)

    visit_AnnAssign = visit_AugAssign

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._target(target)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name == "print":
            self.use("output", "defines print", node)
        elif node.name.startswith("pytest_") and node.name not in MODULE_HOOKS:
            # A hook outside a conftest is a plugin waiting for `-p` or an entry point.
            self.use("runner", f"defines hook {node.name}", node)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def _target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._target(element)
            return
        if isinstance(target, ast.Starred):
            self._target(target.value)
            return
        if isinstance(target, ast.Name):
            if target.id == "print":
                self.use("output", "rebinds print", target)
            return
        if isinstance(target, ast.Attribute):
            qual, base = self.qual(target), target.value
            on_module = self.on_module(base)
            if isinstance(base, ast.Call) and self.qual(base):  # __import__('x').y = ...
                on_module = True
            if qual and on_module:
                self.use(_rebind_check(qual), f"rebinds {qual}", target)
            return
        if isinstance(target, ast.Subscript):
            qual = self.qual(target.value) or ""
            if qual in ("os.environ", "os.environb"):
                self.use("environment", f"changes {qual}", target)
            elif qual in ("__builtins__", "builtins.__dict__", "sys.modules"):
                self.use("builtins" if "builtins" in qual else "modules", f"changes {qual}", target)
            elif isinstance(target.value, ast.Call) and self.qual(target.value.func) in (
                "vars",
                "globals",
            ):
                self.use("modules", f"changes {self.qual(target.value.func)}()", target)

    def visit_Call(self, node: ast.Call) -> None:
        func = self.qual(node.func)
        self.called.add(id(node.func))
        if func in EXITS and node.args and _fails(node.args[0]):
            self.failing_exits.add(id(node.func))  # raise SystemExit("LEAK"): exits 1
        fetched = self.qual(node) if self._func(node) == "getattr" else None
        if fetched in REFERENCE_CHECKS:  # getattr(sys, "stdout").write(...)
            self.use(REFERENCE_CHECKS[fetched], f"uses {fetched}", node)
        if func in ("setattr", "delattr") and node.args:
            obj = node.args[0]
            if not _is_self(obj):
                what = self.qual(obj) or ast.unparse(obj)[:40]
                self.use(_rebind_check(what), f"{func} on {what}", node)
        elif isinstance(node.func, ast.Attribute) and node.func.attr in SETATTR_LIKE:
            owner, first = node.func.value, (node.args[0] if node.args else None)
            mine = _is_self(owner) or (first is not None and _is_self(first))
            if not mine and not (isinstance(owner, ast.Call) and self._func(owner) == "super"):
                what = ast.unparse(node.func)[:40]
                self.use("modules", f"calls {what}", node)
        elif func == "vars" and node.args and self.on_module(node.args[0]):
            self.use("modules", f"uses vars({ast.unparse(node.args[0])[:40]})", node)
        elif func == "print":
            self.use("output", "prints", node)
        elif func in ("open", "io.open") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and first.value in (1, 2):
                self.use("output", f"opens file descriptor {first.value}", node)
        elif isinstance(node.func, ast.Attribute) and node.func.attr in ENVIRON_WRITES:
            if self.qual(node.func.value) in ("os.environ", "os.environb"):
                self.use("environment", f"calls os.environ.{node.func.attr}", node)
        self.generic_visit(node)


def _fails(arg: ast.AST) -> bool:
    """Whether an exit status argument can only be a failing one: a non-zero number, or a
    message (any text exits 1)."""
    if isinstance(arg, ast.Constant):
        return isinstance(arg.value, str) or (type(arg.value) is int and arg.value != 0)
    if isinstance(arg, ast.JoinedStr):
        return True
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        return any(
            isinstance(side, ast.JoinedStr)
            or (isinstance(side, ast.Constant) and isinstance(side.value, str))
            for side in (arg.left, arg.right)
        )
    return False


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _rebind_check(qual: str) -> str:
    """Which check rebinding `qual` fails."""
    top = qual.split(".")[0]
    if top in ("pytest", "_pytest", "pluggy", "unittest"):
        return "runner"
    if top in ("builtins", "__builtins__"):
        return "builtins"
    if top in ("time", "datetime"):
        return "timers"
    if qual.startswith(("sys.std", "sys.__std", "sys.displayhook", "os.write")):
        return "output"
    if qual.startswith("os.environ"):
        return "environment"
    return "modules"


def _module_top(path: str) -> str:
    parts = PurePosixPath(path).parts
    first = parts[0]
    return first[:-3] if len(parts) == 1 and first.endswith(".py") else first


def _new_module(path: str, evaluator: list[str] = ()) -> str | None:  # type: ignore[assignment]
    """The module name a new Python file makes importable where it shadows another: at the
    worktree's root (`statistics.py`, `json/__init__.py`), or in a folder put first on the
    path, the folder of a script the evaluator runs (`bench/statistics.py` beside
    `bench/measure.py`) or a test folder (pytest's default import mode). A module inside a
    package (`pkg/json.py`) shadows nothing. None for other files."""
    if not path.endswith(".py"):
        return None
    p = PurePosixPath(path)
    if len(p.parts) == 1 or (len(p.parts) == 2 and p.name == "__init__.py"):
        return _module_top(path)
    folders = {str(PurePosixPath(e).parent) for e in evaluator}
    if str(p.parent) in folders or any(part in TEST_DIRS for part in p.parts[:-1]):
        return p.parent.name if p.name == "__init__.py" else p.stem
    return None


def _blob(worktree: Path, spec: str) -> str | None:
    """One version of a file from git (`commit:path` or `:path` for the index), or None."""
    proc = git.worktree_proc(worktree, "cat-file", "-s", spec)
    if proc.returncode != 0:
        return None
    if int(proc.stdout.strip() or 0) > MAX_BYTES:
        return UNREADABLE
    try:
        shown = git.worktree_proc(worktree, "show", spec)
    except UnicodeDecodeError:  # not UTF-8: a source in another encoding is not read here
        return UNREADABLE
    return shown.stdout if shown.returncode == 0 else None
