"""A cycle's commit count adds its own commits to the previous cycle's, without walking the
whole branch, and counts from the base when the cycle did not begin where that one ended."""

from __future__ import annotations

from conftest import git, make_repo

from autoresearch import modes
from autoresearch.engine.stage import StageEnv
from autoresearch.session import spec
from autoresearch.session.files import write_json
from autoresearch.session.record import SetupRecord


def env_at(tmp_path, cycle: int) -> tuple[StageEnv, list[str]]:
    """A sweep's cycle `cycle` on a branch of five commits (their shas, oldest first)."""
    repo = make_repo(tmp_path / "target", {"a.txt": "0\n"})
    shas = [git(repo, "rev-parse", "HEAD").strip()]
    for n in range(1, 5):
        (repo / "a.txt").write_text(f"{n}\n")
        git(repo, "commit", "-qam", f"c{n}")
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    layout = modes.get("sweep").layout(tmp_path / "sessions" / "s")
    layout.root.mkdir(parents=True)
    (layout.root / "worktree").symlink_to(repo)
    record = SetupRecord(
        "s", "sweep", "0.1.0", str(repo), None, "pytest", None, "b", shas[0], {}, "", None, ""
    )
    return StageEnv(layout, spec.SessionSpec({"mode": "sweep"}), record, cycle), shas


def test_the_first_cycle_counts_from_the_base(tmp_path):
    env, shas = env_at(tmp_path, 1)
    assert env.commits_total(shas[0], shas[4]) == 4


def test_a_cycle_that_began_where_the_last_ended_adds_its_own_commits(tmp_path):
    env, shas = env_at(tmp_path, 2)
    # The previous count is taken as it stands: the branch before shas[2] is not walked.
    write_json(env.layout.decision(1), {"cycle": 1, "end_commit": shas[2], "commits_total": 40})
    assert env.commits_total(shas[2], shas[4]) == 42


def test_a_cycle_that_began_elsewhere_counts_from_the_base(tmp_path):
    env, shas = env_at(tmp_path, 2)
    write_json(env.layout.decision(1), {"cycle": 1, "end_commit": shas[1], "commits_total": 40})
    assert env.commits_total(shas[2], shas[4]) == 4
