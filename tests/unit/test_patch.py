"""An agent's change: the files it wrote that differ from HEAD, and them as one patch;
every mode reads it through the one shared module, none through another mode's stages."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import git, make_repo

from autoresearch.safety import git as ours
from autoresearch.safety.patch import apply_patch, changed_of, make_patch

ROOT = Path(__file__).resolve().parents[2]


def worktree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A session worktree (the helpers act only on worktrees autoresearch made)."""
    repo = make_repo(tmp_path / "target", files)
    ours.open_worktree(repo, tmp_path / "wt", "autoresearch/t", ours.head(repo))
    return tmp_path / "wt"


def test_only_written_files_that_differ_from_head_are_the_change(tmp_path):
    repo = worktree(tmp_path, {"a.py": "a = 1\n", "b.py": "b = 1\n"})
    (repo / "a.py").write_text("a = 2\n")
    (repo / "b.py").write_text("b = 1\n")  # written back as it was: no change
    (repo / "left.txt").write_text("a command's leftover, not written by the agent\n")
    (repo / "new.py").write_text("n = 1\n")
    assert changed_of(repo, ["a.py", "b.py", "new.py"]) == ["a.py", "new.py"]
    assert changed_of(repo, []) == []


def test_the_patch_holds_the_files_and_leaves_the_index_as_it_was(tmp_path):
    repo = worktree(tmp_path, {"a.py": "a = 1\n"})
    (repo / "a.py").write_text("a = 2\n")
    (repo / "new.py").write_text("n = 1\n")
    patch = make_patch(repo, ["a.py", "new.py"])
    assert "+a = 2" in patch and "new file mode" in patch
    assert git(repo, "diff", "--cached", "--name-only") == ""


def test_no_mode_borrows_another_modes_stage_file():
    borrowers = []
    for path in sorted((ROOT / "autoresearch").rglob("*.py")):
        if "experiment" in path.relative_to(ROOT / "autoresearch").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith(
                "experiment.stages"
            ):
                borrowers.append(path.relative_to(ROOT).as_posix())
    assert borrowers == []


def test_a_change_to_a_file_with_windows_line_endings_applies_where_it_was_made(tmp_path):
    repo = worktree(tmp_path, {"core.py": "def f():\r\n    return 1\r\n"})
    (repo / "core.py").write_text("def f():\n    return 2\n")  # the agent wrote plain LF
    patch = make_patch(repo, ["core.py"])
    assert "-    return 1\r\n" in patch  # the removed lines as the file holds them
    ours.restore(repo)
    (tmp_path / "change.patch").write_text(patch)
    applied = ours.worktree_proc(repo, "apply", "--index", str(tmp_path / "change.patch"))
    assert applied.returncode == 0, applied.stderr
    assert (repo / "core.py").read_bytes() == b"def f():\n    return 2\n"


def test_a_patch_applies_again_staged_or_says_why_it_does_not(tmp_path):
    repo = worktree(tmp_path, {"a.py": "a = 1\n"})
    (repo / "a.py").write_text("a = 2\n")
    patch = tmp_path / "change.patch"
    patch.write_text(make_patch(repo, ["a.py"]))
    git(repo, "checkout", "--", "a.py")
    assert apply_patch(repo, patch) is None
    assert git(repo, "diff", "--cached", "--name-only") == "a.py"  # staged, for the commit
    git(repo, "reset", "-q", "--hard")
    (repo / "a.py").write_text("a = 3\n")  # the tree the patch was made on is gone
    git(repo, "commit", "-qam", "moved on")
    why = apply_patch(repo, patch)
    assert why is not None and "a.py" in why
    assert git(repo, "status", "--porcelain") == ""  # nothing half applied
