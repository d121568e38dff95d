"""The sandbox: which paths it resolves, which writes it allows, how globs match.

The table of escape attempts against the tools lives in test_attacks.py.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from autoresearch.agents.tools import Toolbox
from autoresearch.safety.sandbox import Refused, Sandbox, check_glob, glob_match

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


def test_a_refused_write_names_the_protected_pattern_that_covers_it(world):
    # narrow adds `tests` and the measurement's files: the user's spec never names them
    box = Sandbox(world["wt"], ["./count.sh", "tests"])
    # wcwidth: "in spec key `protected`" sent the user to a spec that never named the file.
    said = r"'src/tests/a.py' is protected \(by `tests` in session.yaml's `protected`: the spec's"
    with pytest.raises(Refused, match=said):
        box.resolve("src/tests/a.py", write=True)
    box.resolve("src/count.sh", write=True)  # `./count.sh` is the top one only


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
        ("bench/measure.sh", "./measure.sh", False),  # `./`: the one at the top only
        ("pkg/__init__.py", "./__init__.py", False),
        ("pkg/a.py", "./pkg", True),
        ("src/pkg/a.py", "./pkg", False),
        ("a.py", "[ab].py", True),
        ("c.py", "[!ab].py", True),
        ("a.py", "[!ab].py", False),
        ("c.py", "[^ab].py", True),
        ("src/a/b.py", "src[!x]a/b.py", False),  # a negated class never matches `/`
        ("[!]", "[!]", True),  # no closing bracket after the `!]`: all literal
        ("a", "[!]", False),
        ("]", "[]]", True),
        ("x", "[!]]", True),
        ("]", "[!]]", False),
        ("\\", "[\\]", True),
        ("a.py", "[\\]", False),
        ("[ab", "[ab", True),
        ("-", "[a-]", True),
        ("m.py", "[a-z].py", True),
        ("src/x/y/z.py", "**/**/**/z.py", True),
        ("z.py", "**/**/z.py", True),
    ],
)
def test_glob_match(path, pattern, expected):
    assert glob_match(path, pattern) is expected


@pytest.mark.parametrize("pattern", ["[z-a]", "src/[9-0]*.py", "[!z-a]"])
def test_a_glob_with_a_reversed_range_is_named_as_invalid(pattern):
    assert "reversed" in check_glob(pattern)
    with pytest.raises(ValueError, match="reversed"):
        glob_match("a", pattern)


def test_a_valid_glob_passes_the_check():
    assert check_glob("src/**/[!_]*.py") is None
