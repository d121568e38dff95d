"""Shared fixtures: throwaway target repositories and a way to run the workflow on them.

Every end-to-end test runs the real Snakefile through the Snakemake CLI in its own
working directory; the session spec is passed with --configfile (it lands in
`config`, the top layer of the spec), so nothing is written to this checkout.
"""

from __future__ import annotations

import compileall
import json
import os
import py_compile
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BIN = str(Path(sys.executable).parent)

CALC = """\
def add(a, b):
    return a + b


def mean(values):
    return sum(values) / len(values)
"""
CALC_TESTS = """\
from calc import add, mean


def test_add():
    assert add(2, 3) == 5


def test_mean():
    assert mean([1, 2, 3]) == 2
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def missing(reason: str, variable: str) -> NoReturn:
    """Skip a test for lack of something this machine has not got, or fail it where
    `variable` is set: .ci/run sets it where it installed that thing, so that a skip there,
    say after a failed install, never passes CI without the test having run."""
    if os.environ.get(variable):
        pytest.fail(f"{reason}; {variable} is set, so this test must run here")
    pytest.skip(reason)


def wait_for(predicate, timeout: float = 120.0) -> None:
    """Poll until `predicate()` holds (a background run reached some point)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def make_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def no_key_sweep(target, **extra) -> dict:
    """A one-cycle sweep of `target` with the ruff backend (no model, no key)."""
    values = {
        "mode": "sweep",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "agent": {"backend": "ruff"},
        "max_cycles": 1,
    }
    values.update(extra)
    return values


@pytest.fixture
def untouched(target):
    """The target's branches, HEAD, index, files and worktrees are as before the test."""
    from autoresearch.safety import git as gitops

    def state():
        worktrees = git(target, "worktree", "list")
        return gitops.snapshot(target), git(target, "branch", "--list"), worktrees

    before = state()
    yield target
    assert state() == before


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A workdir for a run with no Anthropic key in its environment."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    return tmp_path / "work"


@pytest.fixture(autouse=True)
def no_key_taken():
    """A key one test's client took from the environment is not another test's."""
    from autoresearch.agents.backends import api_key

    yield
    api_key.forget()
    api_key.keep_in_environment(False)


@pytest.fixture(autouse=True, scope="session")
def private_worktree_store(tmp_path_factory):
    """Session worktrees go to $XDG_DATA_HOME: a folder of the test run's, never ~/.local."""
    data = tmp_path_factory.mktemp("data")
    old = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(data)
    yield data
    if old is None:
        os.environ.pop("XDG_DATA_HOME", None)
    else:
        os.environ["XDG_DATA_HOME"] = old


def pytest_configure(config) -> None:
    """The harness's own modules (autoresearch/, scripts/) compiled once, before any session.

    Every session starts Python afresh (snakemake, each CLI call, each job of the
    cluster-generic profile), and where PYTHONDONTWRITEBYTECODE is set none of them writes
    its bytecode: each compiled this checkout's modules again, a tenth of the CPU of a
    Snakemake start. Read by hash (CHECKED_HASH), never by mtime, so an edited source is
    compiled again whatever its size and second. __pycache__/ is git-ignored. The targets'
    own modules are left alone: a rewrite of the same size in the same second would run
    the old bytecode.
    """
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller has done it
    for package in ("autoresearch", "scripts"):
        compileall.compile_dir(
            ROOT / package, quiet=1, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
        )


def pytest_collection_modifyitems(config, items) -> None:
    """Everything under tests/e2e/ runs sessions through Snakemake: marked `e2e`.

    Whole files go to the workers in collection order (make test: --dist loadfile
    --no-loadscope-reorder), so the files are ordered longest first: the session files,
    most tests first, then the quick unit files, which fill in at the end while the last
    long file finishes. xdist's own order (most tests first) started the long e2e files
    with few tests last, and the suite's last minutes ran on one worker.
    """
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        if "e2e" in Path(str(item.fspath)).parent.parts:
            item.add_marker(pytest.mark.e2e)
        files.setdefault(item.nodeid.split("::")[0], []).append(item)

    def weight(name: str) -> tuple[bool, int]:
        tests = files[name]
        return (not tests[0].get_closest_marker("e2e"), -len(tests))

    items[:] = [item for name in sorted(files, key=weight) for item in files[name]]


def calc_repo(path: Path) -> Path:
    """A small Python project with a passing pytest suite (also for module-scoped fixtures)."""
    return make_repo(
        path,
        {
            "calc.py": CALC,
            "tests/test_calc.py": CALC_TESTS,
            "README.md": "# calc\nAdds numbers.\n",
            "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
        },
    )


@pytest.fixture
def target(tmp_path) -> Path:
    """A small Python project with a passing pytest suite."""
    return calc_repo(tmp_path / "target")


def _default_sigint() -> None:
    # A suite started as a background job of a script inherits SIGINT ignored, and so
    # would every process it starts.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Workflow:
    """Runs `snakemake` on this repository's Snakefile in a private working directory."""

    def __init__(self, workdir: Path, snakefile: Path = ROOT / "Snakefile"):
        self.workdir = workdir
        self.snakefile = snakefile
        self.extra_env: dict[str, str] = {}
        workdir.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
        # `python -m autoresearch.cli` run from the session's folder imports this checkout,
        # whichever checkout the environment's package was installed from.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        env.pop("ANTHROPIC_API_KEY", None)
        # The targets' test commands (`python -m pytest` in this venv) load none of the
        # venv's own pytest plugins (xdist, anyio...): no target here needs them, and
        # loading them was a fifth of the CPU of each of the sessions' target test runs.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        env.update(self.extra_env)
        return env

    def spec(self, name: str, values: dict) -> Path:
        path = self.workdir / "specs" / f"{name}.yaml"
        path.parent.mkdir(exist_ok=True)
        # The target's commands get only what the spec passes: the switch above with them.
        commands = dict(values.get("commands") or {})
        passed = list(commands.get("pass_env") or [])
        if "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in passed:
            commands["pass_env"] = [*passed, "PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
            values = {**values, "commands": commands}
        path.write_text(yaml.safe_dump(values))
        return path

    def script(self, steps: dict, name: str = "script.yaml") -> Path:
        path = self.workdir / name
        path.write_text(yaml.safe_dump(steps))
        return path

    def command(self, name, spec=None, *extra, target=None, cores=1) -> list[str]:
        """The snakemake command line for session `name` (spec passed with --configfile)."""
        args = [sys.executable, "-m", "snakemake", "--snakefile", str(self.snakefile)]
        args += ["--cores", str(cores), target or f"sessions/{name}/done", *extra]
        if spec is not None:
            args += ["--configfile", str(self.spec(name, spec))]
        return args

    def start(self, name: str, spec: dict | None = None) -> subprocess.Popen:
        """Run in the background, in its own process group (so a test can kill -9 it), with
        Ctrl-C's default action, as from a terminal, however the test run was started."""
        return subprocess.Popen(
            self.command(name, spec),
            cwd=self.workdir,
            env=self.env(),
            start_new_session=True,
            preexec_fn=_default_sigint,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(
        self,
        name: str,
        spec: dict | None = None,
        *extra: str,
        target: str | None = None,
        check: bool = True,
        cores: int = 1,
        timeout: float = 600,
    ):
        args = self.command(name, spec, *extra, target=target, cores=cores)
        proc = subprocess.run(
            args, cwd=self.workdir, env=self.env(), capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
        return proc

    def run_script(self, target: Path, script: dict, name: str = "s", **extra) -> list[dict]:
        """Session `name` of `target` (a sweep unless `extra` says otherwise) with the
        script backend replaying `script`; what the agent was sent and did (the transcript)."""
        transcript = self.workdir / "t.jsonl"
        self.run(name, script_spec(target, self.script(script), transcript, **extra))
        return self.transcript(transcript)

    def session(self, name: str) -> Path:
        return self.workdir / "sessions" / name

    def decision(self, name: str, cycle: int, track: str = "") -> dict:
        base = self.session(name) / "cycles" / track if track else self.session(name) / "cycles"
        return json.loads((base / f"{cycle:03d}" / "decision.json").read_text())

    def transcript(self, path: Path) -> list[dict]:
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def workflow(tmp_path) -> Workflow:
    return Workflow(tmp_path / "work")


# Every check of the tamper screen: a test of another defence (the graded run, the commit
# guard, test identity) lets the screen pass its change, so that it sees that defence alone.
SCREEN_OFF = {
    "allow_tamper_flags": [
        "builtins", "modules", "output", "timers", "environment", "frames", "evaluator",
        "startup", "shadowing", "runner", "testrun",
    ]
}  # fmt: skip


# The calc target's bug as Red reports it, and Green's fix of it (mean of nothing is 0.0).
MEAN_FINDING = {
    "severity": "high",
    "title": "mean crashes on empty input",
    "location": "calc.py:5",
    "issue": "mean([]) divides by zero.",
    "impact": "ZeroDivisionError for callers.",
}
GUARDED_CALC = CALC.replace(
    "    return sum(values)", "    if not values:\n        return 0.0\n    return sum(values)"
)


def one_fix(
    content: str = GUARDED_CALC,
    *,
    finding: dict = MEAN_FINDING,
    path: str = "calc.py",
    summary: str = "guard",
    run_tests: bool = False,
) -> dict:
    """A script of one cycle: Red reports `finding`, Green writes `content` to `path` (and
    runs the tests, with `run_tests`) and keeps it as F-001 with `summary`."""
    steps = [{"tool": "write_file", "args": {"path": path, "content": content}}]
    if run_tests:
        steps.append({"tool": "run_tests", "args": {}})
    steps.append({"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": summary}})
    return {"red": {1: [{"tool": "report_finding", "args": finding}]}, "green": {1: steps}}


def script_spec(target: Path, script: Path, transcript: Path, **extra) -> dict:
    """A sweep spec driven by the replaying `script` backend."""
    spec = {
        "mode": "sweep",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "agent": {"backend": "script", "script": str(script), "transcript": str(transcript)},
    }
    spec.update(extra)
    return spec


@dataclass
class SessionDirs:
    """A target checkout and a session worktree of it, laid out as a real session's are."""

    target: Path
    sessions: Path
    worktree: Path


@pytest.fixture
def session_dirs(tmp_path, target) -> SessionDirs:
    sessions = tmp_path / "work" / "sessions"
    worktree = sessions / "s" / "worktree"
    worktree.parent.mkdir(parents=True)
    git(target, "worktree", "add", "-q", "-b", "autoresearch/improve", str(worktree))
    (sessions / "s" / "session.yaml").write_text("secrets: [DB_PASSWORD]\n")
    (sessions / "other").mkdir()
    (sessions / "other" / "notes.md").write_text("another session's notes\n")
    return SessionDirs(target, sessions, worktree)


def live_processes(marker: str) -> list[int]:
    """PIDs of live (not zombie) processes with `marker` as one of their arguments."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in argv and state != "Z":
            found.append(int(entry.name))
    return found


def kill_all(marker: str) -> None:
    """Kill every process whose command line holds `marker` (a test's leftovers)."""
    for pid in live_processes(marker):
        os.kill(pid, signal.SIGKILL)


# Code under test that makes every outcome "passed" once pytest is loaded (patching pytest's
# report class from inside the tested process): the canaries and the report plugin see it.
PATCH_REPORTS = """
import sys
if "_pytest.reports" in sys.modules:
    from _pytest import reports
    _init = reports.TestReport.__init__
    def _passing(self, *args, **kwargs):
        _init(self, *args, **kwargs)
        self.outcome = "passed"
        self.longrepr = None
    reports.TestReport.__init__ = _passing
"""
