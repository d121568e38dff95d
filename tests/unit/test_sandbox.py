"""Escape attempts against the agent tools: every one refused as an is_error result."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from autoresearch.sandbox import Refused, Sandbox, glob_match
from autoresearch.tools import Toolbox

SECRET = "TOP SECRET, outside the worktree"


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """A repo, a linked worktree of it (as sessions use), and secrets around it."""
    base = tmp_path_factory.mktemp("sandbox")
    repo = base / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "tests" / "test_app.py").write_text("from src.app import add\n")
    (repo / "measure.sh").write_text("echo 42\n")
    (repo / ".gitignore").write_text("secret.env\nbuild/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    wt = base / "wt"
    git(repo, "worktree", "add", "-q", "-b", "session", str(wt))
    (base / "outside.txt").write_text(SECRET)
    (base / "outside_dir").mkdir()
    (base / "outside_dir" / "secret.txt").write_text(SECRET)
    (wt / "secret.env").write_text("TOKEN=1\n")
    (wt / "build").mkdir()
    (wt / "build" / "out.txt").write_text("built\n")
    os.symlink(base / "outside.txt", wt / "link_out")
    os.symlink(base / "outside_dir", wt / "linkdir")
    os.symlink("measure.sh", wt / "alias_to_measure")
    os.symlink("src", wt / "srclink")
    return {"base": base, "repo": repo, "wt": wt}


def toolbox(world, team: str = "green") -> Toolbox:
    return Toolbox(
        team,
        world["wt"],
        test_command="true",
        protected=["measure.sh", "tests/**"],
        exclude=["vendor/**"],
    )


OUTSIDE_ABS = "__OUTSIDE_ABS__"

ESCAPES = [
    ("read_file", {"path": "../outside.txt"}),
    ("read_file", {"path": "/etc/passwd"}),
    ("read_file", {"path": OUTSIDE_ABS}),
    ("read_file", {"path": "link_out"}),
    ("read_file", {"path": "linkdir/secret.txt"}),
    ("read_file", {"path": ".git"}),
    ("read_file", {"path": ".git/config"}),
    ("read_file", {"path": ".GIT/config"}),
    ("read_file", {"path": "src/../../outside.txt"}),
    ("read_file", {"path": "src/../.git"}),
    ("read_file", {"path": "~/.bashrc"}),
    ("read_file", {"path": "~"}),
    ("read_file", {"path": "%2e%2e/outside.txt"}),
    ("read_file", {"path": "..%2foutside.txt"}),
    ("read_file", {"path": "%2E%2E%2Foutside.txt"}),
    ("read_file", {"path": "%2egit/config"}),
    ("read_file", {"path": "src/app.py\x00.txt"}),
    ("read_file", {"path": "src/app.py\n"}),
    ("read_file", {"path": "..\\outside.txt"}),
    ("read_file", {"path": "C:\\Windows\\win.ini"}),
    ("read_file", {"path": "does/not/exist.py"}),
    ("list_files", {"path": ".."}),
    ("list_files", {"path": "/"}),
    ("list_files", {"path": ".git"}),
    ("search", {"pattern": "SECRET", "path": "../"}),
    ("search", {"pattern": "SECRET", "path": "link_out"}),
    ("search", {"pattern": "SECRET", "path": "linkdir"}),
    ("write_file", {"path": "../evil.txt", "content": "x"}),
    ("write_file", {"path": "__EVIL_ABS__", "content": "x"}),
    ("write_file", {"path": "link_out", "content": "x"}),
    ("write_file", {"path": "linkdir/new.txt", "content": "x"}),
    ("edit_file", {"path": "link_out", "old_str": "TOP", "new_str": "x"}),
    ("write_file", {"path": ".git/hooks/pre-commit", "content": "rm -rf /"}),
    ("write_file", {"path": ".git", "content": "gitdir: /tmp/elsewhere"}),
    ("write_file", {"path": "measure.sh", "content": "echo 0"}),
    ("write_file", {"path": "./measure.sh", "content": "echo 0"}),
    ("write_file", {"path": "alias_to_measure", "content": "echo 0"}),
    ("write_file", {"path": "tests/test_app.py", "content": ""}),
    ("edit_file", {"path": "tests/test_app.py", "old_str": "add", "new_str": "sub"}),
    ("write_file", {"path": "tests/new_test.py", "content": ""}),
    ("write_file", {"path": "src//../measure.sh", "content": "echo 0"}),
    ("write_file", {"path": "vendor/lib.py", "content": "x"}),
    ("write_file", {"path": "", "content": "x"}),
    ("write_file", {"path": "src", "content": "x"}),
    ("write_file", {"path": "src/app.py", "content": "x", "mode": "0777"}),
    ("edit_file", {"path": "src/app.py", "old_str": "", "new_str": "x"}),
    ("read_file", {"path": 7}),
    ("read_file", {}),
    ("run_linter", {}),  # green has no linter tool
    (
        "report_finding",
        {"severity": "high", "title": "t", "location": "l", "issue": "i", "impact": "m"},
    ),
    ("exec", {"command": "cat /etc/passwd"}),
    ("bash", {"command": "rm -rf /"}),
]


def _fill(args: dict, world) -> dict:
    filled = dict(args)
    if filled.get("path") == OUTSIDE_ABS:
        filled["path"] = str(world["base"] / "outside.txt")
    if filled.get("path") == "__EVIL_ABS__":
        filled["path"] = str(world["base"] / "evil_abs.txt")
    return filled


def test_the_corpus_is_large_enough():
    assert len(ESCAPES) >= 30


@pytest.mark.parametrize(("tool", "args"), ESCAPES, ids=[f"{t}:{a!r}"[:60] for t, a in ESCAPES])
def test_escape_attempt_is_refused_as_an_error_result(world, tool, args):
    before = {p: p.read_text() for p in [world["base"] / "outside.txt", world["wt"] / "measure.sh"]}
    result = toolbox(world).call(tool, _fill(args, world))
    assert result.is_error, result.content
    assert SECRET not in result.content
    for path, text in before.items():
        assert path.read_text() == text
    assert not (world["base"] / "evil.txt").exists()
    assert not (world["base"] / "evil_abs.txt").exists()
    assert not (world["base"] / "outside_dir" / "new.txt").exists()
    assert not (world["wt"] / "vendor").exists()
    assert (world["wt"] / "tests" / "test_app.py").read_text() == "from src.app import add\n"


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": "src/new.py", "content": "x"}),
        ("edit_file", {"path": "src/app.py", "old_str": "a + b", "new_str": "b + a"}),
        ("run_tests", {}),
        ("finish_fix", {"finding_id": "F-001", "summary": "s"}),
    ],
)
def test_red_team_has_no_write_or_test_tool(world, tool, args):
    result = toolbox(world, "red").call(tool, args)
    assert result.is_error and "not available to the red team" in result.content
    assert not (world["wt"] / "src" / "new.py").exists()
    assert "a + b" in (world["wt"] / "src" / "app.py").read_text()


def test_strategist_cannot_write(world):
    result = toolbox(world, "strategist").call("write_file", {"path": "x.py", "content": ""})
    assert result.is_error


def test_arguments_that_are_not_an_object_are_refused(world):
    assert toolbox(world).call("read_file", ["src/app.py"]).is_error  # type: ignore[arg-type]


def test_list_and_search_hide_ignored_files_git_and_links_out(world):
    box = toolbox(world)
    listing = box.call("list_files", {}).content.splitlines()
    assert "src/app.py" in listing and "measure.sh" in listing
    for hidden in ("secret.env", "build/out.txt", "link_out", ".git"):
        assert hidden not in listing
    assert not any(name.startswith(("linkdir", ".git/")) for name in listing)
    hits = box.call("search", {"pattern": "SECRET|TOKEN"}).content
    assert hits == "(no matches)"


def test_normal_operations_inside_the_worktree_succeed(world, tmp_path):
    box = toolbox(world)
    assert box.call("read_file", {"path": "src/app.py"}).content.startswith("1\tdef add")
    assert box.call("read_file", {"path": "./src/app.py"}).is_error is False
    assert box.call("read_file", {"path": "srclink/app.py"}).is_error is False  # link inside
    assert box.call("read_file", {"path": "measure.sh"}).is_error is False  # protected: read ok
    assert box.call("list_files", {"path": "src"}).content == "src/app.py"
    assert box.call("search", {"pattern": "return", "glob": "*.py"}).content == (
        "src/app.py:2: return a + b"
    )
    created = box.call("write_file", {"path": "src/pkg/new_mod.py", "content": "X = 1\n"})
    assert not created.is_error
    assert (world["wt"] / "src" / "pkg" / "new_mod.py").read_text() == "X = 1\n"
    edited = box.call(
        "edit_file", {"path": "src/pkg/new_mod.py", "old_str": "X = 1", "new_str": "X = 2"}
    )
    assert not edited.is_error
    (world["wt"] / "src" / "pkg" / "new_mod.py").unlink()
    (world["wt"] / "src" / "pkg").rmdir()


# -- the Sandbox itself ---------------------------------------------------------------------


def test_resolve_returns_the_relative_posix_path(world):
    box = Sandbox(world["wt"])
    path, rel = box.resolve("src/./app.py")
    assert rel == "src/app.py" and path == (world["wt"] / "src" / "app.py").resolve()
    assert box.resolve("")[1] == ""
    with pytest.raises(Refused):
        box.resolve("", write=True)


def test_include_limits_writes_to_the_scope(world):
    box = Sandbox(world["wt"], include=["src/**"])
    box.resolve("src/x.py", write=True)
    with pytest.raises(Refused, match="scope"):
        box.resolve("README.md", write=True)


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("tests/test_a.py", "tests/**", True),
        ("tests/sub/test_a.py", "tests/**", True),
        ("tests/test_a.py", "tests", True),
        ("tests/test_a.py", "tests/", True),
        ("src/tests.py", "tests", False),
        ("a/b/c.lock", "*.lock", True),
        ("src/a.py", "src/*.py", True),
        ("src/sub/a.py", "src/*.py", False),
        ("src/sub/a.py", "src/**/*.py", True),
        ("src/a.py", "src/**/*.py", True),
        ("measure.sh", "./measure.sh", True),
        ("bench/measure.sh", "measure.sh", True),
        ("a.py", "[ab].py", True),
        ("c.py", "[!ab].py", True),
    ],
)
def test_glob_match(path, pattern, expected):
    assert glob_match(path, pattern) is expected
