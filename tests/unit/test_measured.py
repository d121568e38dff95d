"""What a measurement runs is found by watching its run at setup, and protected.

Each command form below runs `bench/p99.sh` (or the module a Python command names) in its
own way; narrow's setup traces the run and must protect, and list, that file. The form is
also written so that parsing the command's text alone misses it where the issue found
it missed: only the trace sees `cd bench && ./p99.sh`.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from conftest import git

from autoresearch.measure import measured
from autoresearch.modes.narrow import Narrow
from autoresearch.safety import commands, trace
from autoresearch.safety.protect import ProtectedChange, Protection
from autoresearch.safety.sandbox import Refused, Sandbox
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord

needs_strace = pytest.mark.skipif(trace.strace() is None, reason="strace is not installed")

P99 = "#!/bin/sh\necho 5\n"
FILES = {
    "bench/p99.sh": P99,
    "bench/Makefile": "all:\n\t./p99.sh\n",
    "bench/p99.py": "print(5)\n",
    "run.sh": "#!/bin/sh\nbench/p99.sh\n",
    "Makefile": ".PHONY: bench\nbuild:\n\ttrue\n\nbench:\n\t@./bench/p99.sh\n",
    "package.json": json.dumps({"name": "t", "scripts": {"bench": "./bench/p99.sh"}}),
    "benchlib.py": "import app\n\n\ndef main():\n    print(app.work())\n",
    "benchpkg/__init__.py": "",
    "benchpkg/__main__.py": "print(5)\n",
    "app.py": "def work():\n    return 5\n",
    "src/app.py": "def work():\n    return 5\n",
}
EXECUTABLE = ("bench/p99.sh", "run.sh")
# How a file can come to be protected by watching the run (not by the text alone).
TRACED = {measured.EXECUTED, measured.SCRIPT, measured.MODULE}


def make_target(path: Path, extra: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True)
    for name, text in {**FILES, **(extra or {})}.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    for name in EXECUTABLE:
        (path / name).chmod((path / name).stat().st_mode | stat.S_IXUSR)
    os.symlink("bench/p99.sh", path / "latest.sh")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def set_up_ignoring(tmp_path: Path, command: str):
    return set_up(tmp_path, command, extra={".gitignore": "*.cache\n"})


def session_of(tmp_path: Path, layout: SessionLayout, mode: str, extra: dict | None = None):
    """A target, its worktree at `layout` on the mode's branch, and the setup record."""
    repo = make_target(tmp_path / "target", extra)
    scripts = [rel for rel in extra or () if rel.endswith(".sh") and rel not in EXECUTABLE]
    for rel in scripts:
        (repo / rel).chmod(0o755)
    if scripts:
        git(repo, "commit", "-q", "-am", "scripts run as programs")
    branch = f"autoresearch/{mode}/{layout.name}"
    worktree = layout.worktree()
    worktree.parent.mkdir(parents=True)
    git(repo, "worktree", "add", "-q", "-b", branch, str(worktree))
    record = SetupRecord(
        name=layout.name,
        mode=mode,
        version="0",
        target=str(repo),
        stack=None,
        test_command="true",
        linter_command=None,
        branch=branch,
        base_commit=git(worktree, "rev-parse", "HEAD"),
        baseline={"ok": True, "summary": "ok"},
        date="today",
        config_file=None,
        conventions="",
    )
    return repo, worktree, record


def set_up(tmp_path: Path, command: str, scope: dict | None = None, extra: dict | None = None):
    """Narrow's setup of a session whose goal.command is `command`."""
    layout = SessionLayout(tmp_path / "sessions" / "s")
    repo, worktree, record = session_of(tmp_path, layout, "narrow", extra)
    values = {
        "mode": "narrow",
        "goal": {"metric": "p99", "command": command, "target": "<= 1"},
        "angles": [{"name": "fast", "hypothesis": "It can be faster."}],
        "scope": scope or {},
        "agent": {"backend": "script"},
    }
    lines: list[str] = []
    Narrow().setup.on_setup(layout, record, values, lines.append)
    return worktree, record, values, lines


@pytest.fixture
def wrapper_on_path(tmp_path, monkeypatch):
    """A `uv run`-like tool outside the worktree: `runner run CMD...` runs CMD."""
    folder = tmp_path / "tools"
    folder.mkdir()
    tool = folder / "runner"
    tool.write_text('#!/bin/sh\nshift\nexec "$@"\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


FORMS = [
    ("cd bench && ./p99.sh", "bench/p99.sh"),
    ("sh -c './bench/p99.sh'", "bench/p99.sh"),
    ('bash -c "cd bench; ./p99.sh"', "bench/p99.sh"),
    ("make bench", "bench/p99.sh"),
    ("make -C bench", "bench/p99.sh"),
    ("npm run --silent bench", "bench/p99.sh"),
    ("python3 -c 'import benchlib; benchlib.main()'", "benchlib.py"),
    ("python3 -m benchpkg", "benchpkg/__main__.py"),
    ("echo bench/p99.sh | xargs sh", "bench/p99.sh"),
    ("FOO=1 ./bench/p99.sh", "bench/p99.sh"),
    ("env FOO=1 ./bench/p99.sh", "bench/p99.sh"),
    ("time ./bench/p99.sh", "bench/p99.sh"),
    ("timeout 60 ./bench/p99.sh", "bench/p99.sh"),
    ("nice ./bench/p99.sh", "bench/p99.sh"),
    ("(cd bench; ./p99.sh)", "bench/p99.sh"),
    ("./run.sh", "bench/p99.sh"),
    ("runner run ./bench/p99.sh", "bench/p99.sh"),
    ('PATH="$PWD/bench:$PATH" p99.sh', "bench/p99.sh"),
    ("exec ./bench/p99.sh", "bench/p99.sh"),
    ("./bench/p99.sh | tail -1", "bench/p99.sh"),
    ("sh < bench/p99.sh", "bench/p99.sh"),
    # Beyond the list: a link to the script, a shell's own dot command, a script
    # named by a variable, python given its script after options.
    ("./latest.sh", "bench/p99.sh"),
    ("./latest.sh", "latest.sh"),
    ("cd bench; . ./p99.sh", "bench/p99.sh"),
    ('S=bench/p99.sh; sh "$S"', "bench/p99.sh"),
    ("python3 -u -W ignore bench/p99.py", "bench/p99.py"),
    ("cd bench && python3 p99.py", "bench/p99.py"),
]


@needs_strace
@pytest.mark.usefixtures("wrapper_on_path")
@pytest.mark.parametrize("command,script", FORMS)
def test_the_file_a_command_form_runs_is_protected_listed_and_cannot_be_changed(
    tmp_path, command, script
):
    if command.startswith("npm") and shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    worktree, record, values, _ = set_up(tmp_path, command)
    assert measured.anchored(script) in values["protected"]  # that file, not its name anywhere
    listed = {p["path"]: p["source"] for p in record.measured["protected"]}
    assert listed[script] in TRACED, listed
    # The agents' tools refuse the edit; a command that makes it is caught and undone.
    with pytest.raises(Refused, match="protected"):
        Sandbox(worktree, values["protected"]).resolve(script, write=True)
    before = (worktree / script).read_text()
    (worktree / script).write_text("echo 1\n")
    guard = Protection(record.base_commit, tuple(values["protected"]))
    with pytest.raises(ProtectedChange):
        guard.enforce(worktree)
    assert (worktree / script).read_text() == before


@needs_strace
def test_code_the_measurement_imports_stays_editable_and_is_listed(tmp_path):
    worktree, record, values, _ = set_up(tmp_path, "python3 -c 'import benchlib; benchlib.main()'")
    assert "./benchlib.py" in values["protected"]
    assert not {"app.py", "./app.py"} & set(values["protected"])
    editable = {w["path"]: w["source"] for w in record.measured["editable"]}
    assert editable["app.py"] == measured.READ_EDITABLE
    Sandbox(worktree, values["protected"]).resolve("app.py", write=True)  # not refused


@needs_strace
def test_a_file_the_measurement_reads_outside_the_scope_is_protected(tmp_path):
    # A pipe hides the script from the shell that runs it; the read is what the trace sees.
    _, record, values, _ = set_up(tmp_path, "cat bench/p99.sh | sh", {"include": ["src/**"]})
    listed = {p["path"]: p["source"] for p in record.measured["protected"]}
    assert listed["bench/p99.sh"] == measured.READ_FIXED


@needs_strace
@pytest.mark.parametrize(
    "command", ["wc -l < app.py", "grep -c def app.py", "sh -c 'wc -c < app.py'"]
)
def test_a_file_the_measurement_only_reads_as_data_stays_editable(tmp_path, command):
    _, record, values, _ = set_up(tmp_path, f"{command}; echo 5")
    assert "app.py" not in values["protected"]
    assert "app.py" in [w["path"] for w in record.measured["editable"]]


def test_without_strace_setup_says_so_once_and_protects_what_the_text_names(tmp_path, monkeypatch):
    monkeypatch.setattr(trace, "strace", lambda: None)
    _, record, values, lines = set_up(tmp_path, "./bench/p99.sh")
    listed = {p["path"]: p["source"] for p in record.measured["protected"]}
    assert listed["bench/p99.sh"] == measured.NAMED
    said = [w for w in record.warnings if "strace is not installed" in w]
    assert len(said) == 1 and "from the command's text only" in said[0]
    assert sum("strace is not installed" in line for line in lines) == 1
    assert record.measured["traced"] is False


@needs_strace
def test_where_strace_cannot_start_the_command_still_runs_once_and_setup_says_so(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(trace, "wrapper", lambda folder: [shutil.which("false") or "false"])
    counter = tmp_path / "runs"
    result = commands.run(f"echo x >> {counter}; echo 5", tmp_path, trace_to=tmp_path / "t")
    assert result.output == "5\n" and counter.read_text() == "x\n"  # ran once, untraced
    assert measured.read_run(tmp_path / "t", tmp_path)[0] is None

    _, record, values, _ = set_up(tmp_path / "s", "./bench/p99.sh")
    assert "strace could not trace" in " ".join(record.warnings)
    assert "bench/p99.sh" in values["protected"]  # from the text


@needs_strace
def test_the_listing_shows_each_protected_file_and_where_it_came_from(tmp_path):
    _, record, _, _ = set_up(tmp_path, "make bench")
    shown = measured.lines(record.measured)
    assert shown[0].startswith("Protected")
    row = next(line for line in shown if "bench/p99.sh" in line).split()
    assert row == ["bench/p99.sh", "traced", "exec", "(goal.command)"]
    assert any(line.split()[:2] == ["Makefile", "named"] for line in shown)
    assert any(line.split()[:3] == ["tests", "test", "files"] for line in shown)


def test_setup_json_keeps_the_measured_files_in_one_order_whatever_order_the_trace_saw():
    # A measurement's processes report files in whatever order they ran: two setups of
    # one session must still write the same setup.json.
    read = [measured.Watched(p, measured.READ_EDITABLE, "pytest", False) for p in ("b.py", "a.py")]
    ran = [measured.Watched(p, "traced", "pytest") for p in ("z.sh", "y.sh")]
    one, other = measured.Watch(), measured.Watch()
    one.add([*read, *ran])
    other.add([*reversed(ran), *reversed(read)])
    assert one.to_record([], {}) == other.to_record([], {})
    record = one.to_record([], {})
    assert [e["path"] for e in record["editable"]] == ["a.py", "b.py"]
    assert [e["path"] for e in record["protected"]] == ["y.sh", "z.sh"]
    # The spec's own list keeps the order the spec gives it.
    assert [e["path"] for e in one.to_record(["z.sh", "y.sh"], {})["protected"]] == ["z.sh", "y.sh"]


# --- experiment: the metric (or evaluator) and the guard -----------------------------------


def set_up_experiment(tmp_path: Path, metric: str, guard: str):
    from autoresearch.modes import get

    mode = get("experiment")
    layout = mode.layout(tmp_path / "sessions" / "e")
    extra = {"bench/check.sh": "#!/bin/sh\nexit 0\n"}
    repo, worktree, record = session_of(tmp_path, layout, "experiment", extra)
    values = {
        "mode": "experiment",
        "target": str(repo),
        "experiment": {
            "goal": "faster",
            "scope": ["app.py"],
            "metric": {"command": metric, "format": "last_line", "direction": "minimize"},
            "guard": guard,
            "max_iterations": 3,
        },
    }
    mode.setup.on_setup(layout, record, values, lambda line: None)
    return worktree, record, values


@needs_strace
def test_experiment_protects_what_its_metric_and_guard_run(tmp_path):
    _, record, values = set_up_experiment(tmp_path, "cd bench && ./p99.sh", "cd bench; ./check.sh")
    listed = {p["path"]: (p["source"], p.get("command")) for p in record.measured["protected"]}
    assert listed["bench/p99.sh"] == (measured.EXECUTED, "experiment.metric.command")
    assert listed["bench/check.sh"] == (measured.EXECUTED, "experiment.guard")


@needs_strace
def test_experiment_protects_what_its_metric_reads_outside_the_scope(tmp_path):
    # The scope is app.py (at any depth): the harness module the metric imports is not the
    # agent's to change, the code it measures is.
    command = "python3 -c 'import benchlib; benchlib.main()'"
    _, record, values = set_up_experiment(tmp_path, command, "true")
    listed = {p["path"]: p["source"] for p in record.measured["protected"]}
    assert listed["benchlib.py"] == measured.MODULE
    assert "app.py" not in values["protected"]
    _, record, values = set_up_experiment(tmp_path / "2", "cat benchlib.py | wc -l", "true")
    listed = {p["path"]: p["source"] for p in record.measured["protected"]}
    assert listed["benchlib.py"] == measured.READ_FIXED


# --- fix: the error commands and the guard ----------------------------------------------------


@needs_strace
def test_fix_protects_what_its_error_count_and_guard_run(tmp_path):
    from autoresearch.modes import get

    mode = get("fix")
    layout = mode.layout(tmp_path / "sessions" / "f")
    extra = {"bench/check.sh": "#!/bin/sh\nexit 0\n"}
    repo, worktree, record = session_of(tmp_path, layout, "fix", extra)
    values = {
        "mode": "fix",
        "target": str(repo),
        "test_timeout_s": 60,
        "fix": {
            "errors": [{"command": "cd bench && ./p99.sh", "parser": "exit"}],
            "guard": "(cd bench; ./check.sh)",
        },
    }
    mode.recon(layout, record, values, lambda line: None, None)
    listed = {p["path"]: (p["source"], p.get("command")) for p in record.measured["protected"]}
    assert listed["bench/p99.sh"] == (measured.EXECUTED, "fix.errors.0.command")
    assert listed["bench/check.sh"] == (measured.EXECUTED, "fix.guard")
    assert {"bench/p99.sh", "bench/check.sh"} <= set(values["protected"])


# --- what the measurement looked for and did not find ------------------------------------------


@needs_strace
@pytest.mark.parametrize(
    "command,absent",
    [
        # A folder earlier on $PATH: a new bin/p99.sh would run instead of bench/p99.sh.
        ('PATH="$PWD/bin:$PWD/bench:$PATH" p99.sh', "bin/p99.sh"),
        # A cache the measurement trusts when it is there.
        ("cat metric.cache 2>/dev/null || ./bench/p99.sh", "metric.cache"),
    ],
)
def test_a_path_the_measurement_looked_for_must_stay_absent(tmp_path, command, absent):
    worktree, record, values, _ = set_up(tmp_path, command)
    listed = {p["path"]: p["source"] for p in record.measured["protected"]}
    assert listed[absent] == measured.ABSENT
    with pytest.raises(Refused, match="protected"):
        Sandbox(worktree, values["protected"]).resolve(absent, write=True)
    # Made by a command instead (code under test): removed, never committed.
    (worktree / absent).parent.mkdir(exist_ok=True)
    (worktree / absent).write_text("#!/bin/sh\necho 1\n")
    Protection(record.base_commit, tuple(values["protected"])).commit(worktree, "try")
    assert not (worktree / absent).exists()
    assert git(worktree, "rev-parse", "HEAD") == record.base_commit


@needs_strace
def test_an_absent_path_git_ignores_is_not_listed(tmp_path):
    # Git-ignored files never reach a commit or a measurement: nothing to protect.
    _, record, _, _ = set_up_ignoring(tmp_path, "cat out.cache 2>/dev/null; ./bench/p99.sh")
    assert "out.cache" not in [p["path"] for p in record.measured["protected"]]


@needs_strace
def test_the_folder_pytest_makes_its_cache_in_is_not_listed(tmp_path):
    # pytest makes its cache in a folder of a drawn name, then renames it .pytest_cache: a
    # measurement that looked for it protected a path no run looks for again.
    command = (
        "cat pytest-cache-files-k3j2/x 2>/dev/null; cat metric.cache 2>/dev/null; ./bench/p99.sh"
    )
    _, record, _, _ = set_up(tmp_path, command)
    listed = [p["path"] for p in record.measured["protected"]]
    assert "metric.cache" in listed
    assert not [path for path in listed if "pytest-cache-files-" in path]


# --- the trace itself: calls no command form above makes ------------------------------------


def test_the_trace_follows_fchdir_execveat_and_a_childs_inherited_cwd_and_stdin(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    wt = "/w"
    (folder / "t.1").write_text(
        f'execve("/bin/sh", ["sh", "-c", "x"], 0x1 /* 3 vars */) = 0\n'
        f"fchdir(3<{wt}/bench>)                   = 0\n"
        f'openat(AT_FDCWD<{wt}/bench>, "in.sh", O_RDONLY) = 4<{wt}/bench/in.sh>\n'
        f"dup2(4<{wt}/bench/in.sh>, 0)            = 0<{wt}/bench/in.sh>\n"
        "clone(child_stack=NULL, flags=SIGCHLD) = 2\n"
        f'execve("./gone.sh", ["./gone.sh"], 0x1 /* 3 vars */) = -1 ENOENT (No such file)\n'
    )
    (folder / "t.2").write_text(
        f'execveat(5<{wt}/tools>, "run", ["run", "a b"], 0x1 /* 3 vars */, 0) = 0\n'
        'openat(AT_FDCWD, "data\\"q.txt", O_RDONLY) = 3\n'
    )
    seen = trace.read(folder, Path(wt))
    assert seen.execs[0].path == "/bin/sh"
    child = seen.execs[1]
    assert (child.path, child.argv) == (f"{wt}/tools/run", ("run", "a b"))
    assert child.cwd == f"{wt}/bench" and child.stdin == f"{wt}/bench/in.sh"
    assert f'{wt}/bench/data"q.txt' in seen.opened  # the child's cwd, an escaped quote
    assert f"{wt}/bench/gone.sh" in seen.missing
    # The redirected file was put on standard input: data to the shell, not its script.
    assert all(r.path != f"{wt}/bench/in.sh" for r in seen.read_by)


def test_status_shows_the_count_and_only_the_protected_paths_that_name_files():
    from autoresearch.modes.narrow.protect import TEST_GLOBS

    patterns = list(dict.fromkeys(["bench/p99.sh", "Makefile", *TEST_GLOBS]))
    record = {
        "protected": [{"path": p, "source": "test files"} for p in patterns],
        "editable": [],
        "notes": [],
    }
    record["protected"][0] |= {"source": "traced exec", "command": "goal.command"}
    files = {"bench/p99.sh", "Makefile", "tests/test_a.py", "src/app.py"}
    shown = measured.status_lines(record, files, "sessions/s/setup.json")
    assert shown[0].startswith(f"Protected: {len(patterns)} paths")
    assert "4 of them" in shown[0] and "sessions/s/setup.json" in shown[0]
    listed = [line.split()[0] for line in shown[1:]]  # not a line per pattern naming no file
    assert listed == ["bench/p99.sh", "Makefile", "tests", "test_*.py"]
    assert shown[1].split()[1:] == ["traced", "exec", "(goal.command)"]


def test_a_top_level_path_the_measurement_looked_for_protects_that_path_only():
    # A run that probes the worktree's top for `__init__.py` or a folder `pkg` (ruff
    # looking for its package root, Python for a module) must not freeze every package's
    # `__init__.py` nor `src/pkg/`: the code the session is there to change.
    from autoresearch.safety.protect import Protection

    watch = measured.Watch(
        [
            measured.Watched("__init__.py", measured.ABSENT, "goal.command"),
            measured.Watched("pkg", measured.ABSENT, "goal.command"),
            measured.Watched("bench/p99.py", measured.SCRIPT, "goal.command"),
        ]
    )
    held = Protection("base", tuple(watch.patterns()))
    assert held.covers("__init__.py") and held.covers("pkg/__init__.py")
    assert held.covers("bench/p99.py")
    assert not held.covers("src/pkg/__init__.py")
    assert not held.covers("tabulate/__init__.py")
    # setup.json still says where each came from
    record = watch.to_record(watch.patterns(), {})
    assert {p["path"]: p["source"] for p in record["protected"]} == {
        "__init__.py": measured.ABSENT,
        "pkg": measured.ABSENT,
        "bench/p99.py": measured.SCRIPT,
    }


def test_status_counts_a_top_level_path_the_measurement_looked_for_as_that_file_only():
    record = {
        "protected": [
            {"path": "__init__.py", "source": measured.ABSENT, "command": "goal.command"},
            {"path": "tests", "source": "test files (goal.protect_tests)"},
        ]
    }
    lines = measured.status_lines(record, {"pkg/__init__.py", "tests/test_a.py"}, "setup.json")
    assert "1 of them naming files it has" in lines[0]
    assert not any("__init__.py" in line for line in lines[1:])
