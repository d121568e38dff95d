"""The refs a boxed harness git may move (safety/git.py's git_writable): none. Its calls run
on the worktree's detached HEAD, in the worktree's own git directory, and the harness moves
the branch afterwards, outside the box. A program a repository's config names (a clean
filter, run by the harness's `git add` or `git commit`) cannot move the user's `main`, write
a tag or a replace ref, move another session's branch or its own, nor point the worktree's
HEAD at the user's branch so that the harness's next commit lands there; `git worktree
add`'s checkout runs in the box too. Each attack goes through the harness's own call, as a
session runs it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from conftest import git, make_repo
from test_gitbox import PYTHON, attempt, staged, with_filter

from autoresearch.safety import git as ar_git
from autoresearch.safety import gitbox
from autoresearch.safety import jail as jails

pytestmark = [
    pytest.mark.skipif(
        gitbox.usable() is None, reason="no Landlock ABI 6, or no C compiler to build gitbox"
    ),
    pytest.mark.skipif(PYTHON is None, reason="no python3 in /usr/bin for the filter"),
]


@pytest.fixture
def target(tmp_path) -> Path:
    return make_repo(tmp_path / "target", {"calc.py": "X = 1\n"})


@pytest.fixture
def worktree(target, tmp_path) -> Path:
    place = tmp_path / "store" / "worktree"
    ar_git.open_worktree(target, place, "autoresearch/s", ar_git.head(target))
    return place


def session_commit(worktree: Path) -> str:
    """A commit on the session branch: what an attacker would like `main` to point at."""
    (worktree / "agent.py").write_text("owned = True\n")
    sha = ar_git.commit_all(worktree, "the agent's change")
    assert sha is not None
    return sha


def forge(common: Path, sha: str, seen: Path) -> str:
    """Python that tries, each in its own way, to make the user's refs name `sha`: git's
    own update-ref (the filter inherits the boxed git's GIT_DIR), the loose ref file, a
    tag, the branch's reflog and a replace ref for main's commit."""
    main = (common / "refs" / "heads" / "main").read_text().strip()
    update_ref = (
        "import subprocess\n"
        f"if subprocess.run(['git', 'update-ref', 'refs/heads/main', {sha!r}]).returncode:\n"
        "    raise OSError(13, 'git update-ref failed')"
    )
    tries = [
        update_ref,
        f"open({str(common / 'refs/heads/main')!r}, 'w').write({sha!r} + '\\n')",
        f"open({str(common / 'refs/tags/v9')!r}, 'w').write({sha!r} + '\\n')",
        f"open({str(common / 'logs/refs/heads/main')!r}, 'a').write('x\\n')",
        "import os\n"
        f"os.makedirs({str(common / 'refs/replace')!r}, exist_ok=True)\n"
        f"open({str(common / 'refs/replace' / main)!r}, 'w').write({sha!r} + '\\n')",
    ]
    return "".join(attempt(line, seen) for line in tries)


def refs_of(target: Path) -> str:
    return git(target, "for-each-ref", "--format=%(refname) %(objectname)")


def test_a_filter_cannot_move_main_write_a_tag_or_a_replace_ref(target, worktree):
    sha = session_commit(worktree)
    common = ar_git.common_dir(worktree)
    main, before = ar_git.head(target), refs_of(target)
    seen = worktree / "seen.txt"
    with_filter(worktree, forge(common, sha, seen))
    assert staged(worktree) == "calc.py"  # git did its own work, its ref writes included
    said = seen.read_text().split("\n")[:-1]
    assert len(said) == 5 and all(s.startswith("refused") for s in said), said
    assert ar_git.head(target) == main != sha
    assert refs_of(target) == before
    assert not (common / "refs" / "tags" / "v9").exists()


def test_in_the_bwrap_fallback_a_filter_cannot_move_main_or_write_a_tag(
    target, worktree, monkeypatch
):
    if not jails.probe().works:
        pytest.skip("bubblewrap cannot run here")
    monkeypatch.setattr(gitbox, "usable", lambda: None)
    ar_git._jail_prefix.cache_clear()
    sha = session_commit(worktree)
    common = ar_git.common_dir(worktree)
    main, before = ar_git.head(target), refs_of(target)
    seen = worktree / "seen.txt"
    with_filter(worktree, forge(common, sha, seen))
    assert staged(worktree) == "calc.py"
    said = seen.read_text().split("\n")[:-1]
    assert len(said) == 5 and all(s.startswith("refused") for s in said), said
    assert ar_git.head(target) == main and refs_of(target) == before


def once(action: str, flag: Path) -> str:
    """Python that runs `action` the first time only (a filter runs again in the commit's
    refresh of the index: once is enough to tell where the harness's next call lands)."""
    return (
        f"import os\nif not os.path.exists({str(flag)!r}):\n"
        f"    open({str(flag)!r}, 'w').close()\n"
        + "".join(f"    {line}\n" for line in action.splitlines())
    )


def test_a_head_a_filter_points_at_main_is_put_back_before_the_next_call(target, worktree):
    # The worktree's own git directory stays writable (its HEAD, index, ORIG_HEAD): a HEAD
    # naming the user's branch would make the harness's next commit land on it.
    admin = ar_git.worktree_admin(worktree)
    assert admin is not None
    main = ar_git.head(target)
    forged = f"open({str(admin / 'HEAD')!r}, 'w').write('ref: refs/heads/main\\n')"
    with_filter(worktree, once(forged, worktree / "fired"))
    ar_git.worktree_git(worktree, "add", "calc.py")
    assert (worktree / "fired").exists()
    assert (admin / "HEAD").read_text() == "ref: refs/heads/autoresearch/s\n"
    made = ar_git.commit_index(worktree, "lands on main?")
    assert ar_git.head(target) == main
    assert git(target, "rev-parse", "refs/heads/autoresearch/s") == made


def test_a_head_written_between_calls_to_name_main_stops_the_next_call(target, worktree):
    # Outside any box (the jail shows the git directories read-only; this is the user's
    # own tool, say): the next call refuses a HEAD it did not leave.
    admin = ar_git.worktree_admin(worktree)
    assert admin is not None
    main = ar_git.head(target)
    (admin / "HEAD").write_text("ref: refs/heads/main\n")
    with pytest.raises(ar_git.ForgedGitLink, match="HEAD"):
        ar_git.commit_all(worktree, "lands on main?")
    assert ar_git.head(target) == main


@pytest.mark.parametrize("how", ["file", "symlink"])
def test_a_filter_cannot_turn_a_branch_of_ours_into_a_symbolic_ref(target, worktree, how):
    # A `ref:` line in the branch's file, or a link git reads as one, would make the
    # harness's next commit move main through it: the box may write no ref.
    session_commit(worktree)
    ours = ar_git.common_dir(worktree) / "refs" / "heads" / "autoresearch" / "s"
    if how == "file":
        forged = f"open({str(ours)!r}, 'w').write('ref: refs/heads/main\\n')"
    else:
        forged = (
            f"import os; os.remove({str(ours)!r}); os.symlink('refs/heads/main', {str(ours)!r})"
        )
    main, seen = ar_git.head(target), worktree / "seen.txt"
    with_filter(worktree, attempt(forged, seen))
    assert staged(worktree) == "calc.py"
    assert seen.read_text().startswith("refused"), seen.read_text()
    made = ar_git.commit_index(worktree, "lands on main?")
    assert ar_git.head(target) == main
    assert git(target, "rev-parse", "refs/heads/autoresearch/s") == made


@pytest.mark.parametrize("how", ["file", "symlink"])
def test_a_branch_of_ours_made_a_symbolic_ref_between_calls_stops_the_next_call(
    target, worktree, how
):
    session_commit(worktree)
    ours = ar_git.common_dir(worktree) / "refs" / "heads" / "autoresearch" / "s"
    if how == "file":
        ours.write_text("ref: refs/heads/main\n")
    else:
        ours.unlink()
        ours.symlink_to("refs/heads/main")
    main = ar_git.head(target)
    (worktree / "calc.py").write_text("X = 2\n")
    with pytest.raises(ar_git.ForgedGitLink, match="symbolic"):
        ar_git.commit_all(worktree, "lands on main?")
    assert ar_git.head(target) == main


def test_a_detached_worktrees_head_may_not_become_a_branch(target, tmp_path):
    place = tmp_path / "store" / "lane"
    ar_git.add_detached_worktree(target, place, ar_git.head(target))
    admin = ar_git.worktree_admin(place)
    assert admin is not None
    (admin / "HEAD").write_text("ref: refs/heads/autoresearch/s\n")
    with pytest.raises(ar_git.ForgedGitLink, match="HEAD"):
        ar_git.worktree_git(place, "status")


def test_the_harness_moves_its_own_branch_in_the_box_even_when_it_is_packed(target, worktree):
    start = ar_git.head(worktree)
    first = session_commit(worktree)
    git(target, "pack-refs", "--all")  # the user's gc packs every ref, ours included
    common = ar_git.common_dir(worktree)
    assert not (common / "refs" / "heads" / "autoresearch" / "s").exists()
    assert ar_git.revert(worktree, first)  # a commit, made in the box
    ar_git.reset_to(worktree, start)  # the branch moved back, in the box
    assert git(target, "rev-parse", "refs/heads/autoresearch/s") == start
    assert ar_git.head(target) == git(target, "rev-parse", "main")


def test_worktree_adds_checkout_runs_the_repositorys_filter_in_the_box(target, tmp_path):
    # A smudge filter in the repository's config, selected by a committed .gitattributes:
    # `git worktree add` runs it for every file it checks out.
    common = ar_git.common_dir(target)
    place = tmp_path / "store" / "worktree"
    seen = place / ".git-seen"  # in the new worktree: the filter may write there
    outside = tmp_path / "planted"
    tries = [
        f"open({str(outside)!r}, 'a').write('x')",
        f"open({str(common / 'config')!r}, 'a').write('[core]\\n\\thooksPath = /tmp\\n')",
        f"open({str(common / 'refs/heads/main')!r}, 'w').write('0' * 40 + '\\n')",
        f"import os\nos.makedirs({str(common / 'worktrees' / 'planted')!r})",
    ]
    script = common / "smudge.py"
    script.write_text("".join(attempt(line, seen) for line in tries))
    git(target, "config", "filter.x.smudge", f"{PYTHON} {script}; cat")
    (target / ".gitattributes").write_text("calc.py filter=x\n")
    git(target, "add", ".gitattributes")
    git(target, "commit", "-q", "-m", "attributes")
    config, main = (common / "config").read_bytes(), ar_git.head(target)
    branch = ar_git.open_worktree(target, place, "autoresearch/s", main)
    assert branch == "autoresearch/s" and (place / "calc.py").read_text() == "X = 1\n"
    said = seen.read_text().split("\n")[:-1]
    assert len(said) >= 4 and all(s.startswith("refused") for s in said), said
    assert not outside.exists() and not (common / "worktrees" / "planted").exists()
    assert (common / "config").read_bytes() == config and ar_git.head(target) == main
    # A whole checkout: nothing but what the filter wrote differs from the commit.
    assert ar_git.worktree_git(place, "status", "--porcelain") == "?? .git-seen"


def test_a_detached_worktree_is_checked_out_whole_in_the_box(target, tmp_path):
    (target / "sub").mkdir()
    (target / "sub" / "more.py").write_text("Y = 2\n")
    git(target, "add", "sub")
    git(target, "commit", "-q", "-m", "more")
    place = tmp_path / "store" / "lane"
    ar_git.add_detached_worktree(target, place, ar_git.head(target))
    assert (place / "sub" / "more.py").read_text() == "Y = 2\n"
    assert ar_git.worktree_git(place, "status", "--porcelain") == ""
    assert ar_git.worktree_git(place, "rev-parse", "HEAD") == ar_git.head(target)


def test_finalize_deletes_a_branch_of_ours_made_symbolic_never_the_ref_it_names(target):
    # A boxed program could leave a branch of ours as a symbolic ref to main; deleting "our
    # branch at the tip we left" must not delete main through it.
    from autoresearch.session.finalize import delete_branch

    main = ar_git.head(target)
    git(target, "symbolic-ref", "refs/heads/autoresearch/review", "refs/heads/main")
    assert delete_branch(target, "autoresearch/review", main)
    assert git(target, "rev-parse", "refs/heads/main") == main
    assert not ar_git.branch_exists(target, "autoresearch/review")


def test_a_worktree_config_a_filter_writes_stops_the_next_call(target, worktree):
    # With extensions.worktreeConfig on (as `git sparse-checkout` leaves it), git reads the
    # worktree's own config.worktree, in a folder the box may write: a filter could name an
    # include, a filter or an author there for the harness's next calls, made outside it.
    git(target, "config", "extensions.worktreeConfig", "true")
    admin = ar_git.worktree_admin(worktree)
    assert admin is not None
    planted = "[user]\n\tname = planted by a filter\n"
    with_filter(worktree, f"open({str(admin / 'config.worktree')!r}, 'w').write({planted!r})")
    ar_git.worktree_git(worktree, "add", "calc.py")
    assert (admin / "config.worktree").is_file()  # the box let the filter write it
    with pytest.raises(ar_git.ForgedGitLink, match="config.worktree"):
        ar_git.commit_all(worktree, "written as whom?")
    assert "planted" not in git(target, "log", "--all", "--format=%an")


# -- two sessions on one repository ---------------------------------------------------------
# Every session's branch lies under refs/heads/autoresearch/, and Landlock grants whole
# folders: the box may write no ref at all. Its git runs on a detached HEAD (the worktree's
# own folder), and the harness moves the branch itself, outside the box, by update-ref.


@pytest.fixture
def other(target, tmp_path) -> Path:
    """A second session's worktree on the same repository, one commit ahead of main."""
    place = tmp_path / "store" / "other"
    ar_git.open_worktree(target, place, "autoresearch/t", ar_git.head(target))
    (place / "theirs.py").write_text("THEIRS = 1\n")
    assert ar_git.commit_all(place, "the other session's change")
    return place


def hijack(common: Path, branch: str, sha: str, seen: Path) -> str:
    """Python that tries to point `branch` at `sha`: by git's own update-ref (the filter
    inherits the boxed git's GIT_DIR), by the loose ref file (which overrides a packed
    one), by its reflog, and by a new branch beside it."""
    ref = f"refs/heads/{branch}"
    update_ref = (
        "import subprocess\n"
        f"if subprocess.run(['git', 'update-ref', {ref!r}, {sha!r}]).returncode:\n"
        "    raise OSError(13, 'git update-ref failed')"
    )
    new = common / "refs" / "heads" / "autoresearch" / "planted"
    tries = [
        update_ref,
        f"open({str(common / ref)!r}, 'w').write({sha!r} + '\\n')",
        f"open({str(common / 'logs' / ref)!r}, 'a').write('x\\n')",
        f"open({str(new)!r}, 'w').write({sha!r} + '\\n')",
    ]
    return "".join(attempt(line, seen) for line in tries)


@pytest.mark.parametrize("packed", [False, True], ids=["loose", "packed"])
def test_a_filter_one_session_runs_cannot_move_another_sessions_branch(
    target, worktree, other, packed
):
    theirs = ar_git.head(other)
    mine = session_commit(worktree)
    if packed:
        git(target, "pack-refs", "--all")  # a loose file would now override the packed line
    common = ar_git.common_dir(worktree)
    seen = worktree / "seen.txt"
    with_filter(worktree, hijack(common, "autoresearch/t", mine, seen))
    assert staged(worktree) == "calc.py"  # git did its own work
    said = seen.read_text().split("\n")[:-1]
    assert len(said) == 4 and all(s.startswith("refused") for s in said), said
    assert git(target, "rev-parse", "refs/heads/autoresearch/t") == theirs
    assert not ar_git.branch_exists(target, "autoresearch/planted")
    # The other session's next step sees its own tip, and the filter's session goes on.
    assert ar_git.head(other) == theirs and ar_git.head(worktree) == mine
    assert ar_git.commit_all(worktree, "the filter's session goes on")


def test_a_filter_cannot_move_its_own_sessions_branch_either(target, worktree):
    start = ar_git.head(worktree)
    mine = session_commit(worktree)
    common = ar_git.common_dir(worktree)
    seen = worktree / "seen.txt"
    with_filter(worktree, hijack(common, "autoresearch/s", start, seen))
    assert staged(worktree) == "calc.py"
    said = seen.read_text().split("\n")[:-1]
    assert len(said) == 4 and all(s.startswith("refused") for s in said), said
    assert git(target, "rev-parse", "refs/heads/autoresearch/s") == mine


def test_in_the_bwrap_fallback_a_filter_cannot_move_another_sessions_branch(
    target, worktree, other, monkeypatch
):
    if not jails.probe().works:
        pytest.skip("bubblewrap cannot run here")
    monkeypatch.setattr(gitbox, "usable", lambda: None)
    ar_git._jail_prefix.cache_clear()
    theirs = ar_git.head(other)
    mine = session_commit(worktree)
    seen = worktree / "seen.txt"
    with_filter(worktree, hijack(ar_git.common_dir(worktree), "autoresearch/t", mine, seen))
    assert staged(worktree) == "calc.py"
    said = seen.read_text().split("\n")[:-1]
    assert len(said) == 4 and all(s.startswith("refused") for s in said), said
    assert git(target, "rev-parse", "refs/heads/autoresearch/t") == theirs


def test_a_head_a_filter_detaches_moves_no_branch_and_is_put_back(target, worktree):
    # The worktree's own folder stays writable (its HEAD): a filter that detaches HEAD at
    # an older commit must neither move the branch nor leave the next commit off it.
    start = ar_git.head(worktree)
    mine = session_commit(worktree)
    admin = ar_git.worktree_admin(worktree)
    assert admin is not None
    forged = f"open({str(admin / 'HEAD')!r}, 'w').write({start!r} + '\\n')"
    with_filter(worktree, once(forged, worktree / "fired"))
    ar_git.worktree_git(worktree, "add", "calc.py")
    assert (worktree / "fired").exists()
    assert (admin / "HEAD").read_text() == "ref: refs/heads/autoresearch/s\n"
    assert git(target, "rev-parse", "refs/heads/autoresearch/s") == mine
    after = ar_git.commit_index(worktree, "on the branch")
    assert after is not None
    assert git(target, "rev-parse", "refs/heads/autoresearch/s") == after
    assert git(target, "rev-parse", f"{after}^") == mine


def test_the_worktree_holds_its_branch_between_calls_as_the_user_sees_it(target, worktree):
    # `git worktree list`: the session's worktree is on its branch, before and after the
    # calls that move it (a commit, a reset, a revert), and the branch is where HEAD is.
    start = ar_git.head(worktree)
    first = session_commit(worktree)
    assert ar_git.revert(worktree, first)
    reverted = ar_git.head(worktree)
    ar_git.reset_to(worktree, start)
    listed = git(target, "worktree", "list", "--porcelain")
    assert "branch refs/heads/autoresearch/s" in listed
    assert git(target, "rev-parse", "refs/heads/autoresearch/s") == start
    # The branch's reflog says what moved it, as git's own reset and revert said.
    log = git(target, "reflog", "--format=%H %gs", "refs/heads/autoresearch/s").splitlines()
    assert log[0] == f"{start} reset: moving to {start}"
    assert log[1].startswith(f"{reverted} revert: Revert")
    assert log[2].startswith(f"{first} commit: ")


def test_a_branch_moved_meanwhile_is_not_moved_back(target, worktree, monkeypatch):
    # The branch is moved after the box only from the tip the call started from: a move
    # made meanwhile (the user's own git) is kept, and the call fails saying so.
    start = ar_git.head(worktree)
    first = session_commit(worktree)
    theirs = git(target, "commit-tree", "-p", first, "-m", "the user's", f"{first}^{{tree}}")
    real = ar_git._run_in_box

    def meanwhile(cmd, *args, **kwargs):
        done = real(cmd, *args, **kwargs)
        if "reset" in cmd:  # the user's git, while the box ran the harness's reset
            git(target, "update-ref", "refs/heads/autoresearch/s", theirs)
        return done

    monkeypatch.setattr(ar_git, "_run_in_box", meanwhile)
    with pytest.raises(ar_git.GitError, match="moved"):
        ar_git.reset_to(worktree, start)
    assert git(target, "rev-parse", "refs/heads/autoresearch/s") == theirs


def _has_reftable() -> bool:
    """Whether the installed git makes reftable repositories (git 2.45 and later)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        made = subprocess.run(
            ["git", "init", "-q", "--ref-format=reftable", scratch], capture_output=True
        )
    return made.returncode == 0


@pytest.mark.skipif(not _has_reftable(), reason="this git has no reftable (git 2.45 and later)")
def test_in_a_reftable_repository_a_filter_moves_no_branch(tmp_path):
    # All refs of a reftable repository are one stack of tables in <common>/reftable: the
    # box grants none of it, only the worktree's own folder (its HEAD's own stack).
    target = tmp_path / "target"
    target.mkdir()
    git(target, "init", "-q", "-b", "main", "--ref-format=reftable")
    (target / "calc.py").write_text("X = 1\n")
    git(target, "add", "-A")
    git(target, "commit", "-q", "-m", "initial")
    main = ar_git.head(target)
    mine, theirs = tmp_path / "store" / "mine", tmp_path / "store" / "theirs"
    ar_git.open_worktree(target, mine, "autoresearch/s", main)
    ar_git.open_worktree(target, theirs, "autoresearch/t", main)
    sha = session_commit(mine)
    common = ar_git.common_dir(mine)
    seen = mine / "seen.txt"
    tries = [
        "import subprocess\n"
        f"if subprocess.run(['git', 'update-ref', {ref!r}, {sha!r}]).returncode:\n"
        "    raise OSError(13, 'git update-ref failed')"
        for ref in ("refs/heads/autoresearch/t", "refs/heads/main")
    ]
    tries.append(f"open({str(common / 'reftable' / 'tables.list')!r}, 'a').write('x')")
    with_filter(mine, "".join(attempt(line, seen) for line in tries))
    assert staged(mine) == "calc.py"
    said = seen.read_text().split("\n")[:-1]
    assert len(said) == 3 and all(s.startswith("refused") for s in said), said
    assert git(target, "rev-parse", "refs/heads/autoresearch/t") == main
    assert git(target, "rev-parse", "refs/heads/main") == main
    # The harness still moves its own branch: a commit, a revert, a reset.
    ar_git.worktree_git(mine, "reset", "-q")
    assert ar_git.revert(mine, sha)
    ar_git.reset_to(mine, main)
    assert git(target, "rev-parse", "refs/heads/autoresearch/s") == main
    assert "branch refs/heads/autoresearch/s" in git(target, "worktree", "list", "--porcelain")


def test_a_commits_refresh_of_the_index_runs_the_filter_in_the_box(target, worktree, tmp_path):
    # `git commit` refreshes the index first: a file whose times differ from the index's
    # record (or that changed within the index's own second) is read again, through the
    # clean filter. It ran outside the box before.
    seen, outside = worktree / "seen.txt", tmp_path / "planted"
    with_filter(worktree, attempt(f"open({str(outside)!r}, 'a').write('x')", seen))
    ar_git.worktree_git(worktree, "add", "calc.py")
    ran = len(seen.read_text().splitlines())
    later = (worktree / "calc.py").stat().st_mtime + 5
    os.utime(worktree / "calc.py", (later, later))  # the same bytes, other times
    made = ar_git.commit_index(worktree, "a commit")
    assert len(seen.read_text().splitlines()) > ran  # the commit ran the filter again
    assert all(s.startswith("refused") for s in seen.read_text().splitlines())
    assert not outside.exists()
    assert git(target, "rev-parse", "refs/heads/autoresearch/s") == made


def test_a_call_killed_in_the_box_leaves_a_worktree_the_next_reset_puts_on_its_branch(
    target, worktree
):
    # A kill -9 while the box's git ran: HEAD detached (as the call runs it) and the
    # HEAD.lock that git held. The rerun's reset removes the stale lock and goes on there.
    tip = session_commit(worktree)
    admin = ar_git.worktree_admin(worktree)
    assert admin is not None
    (admin / "HEAD").write_text(ar_git.head(target) + "\n")
    (admin / "HEAD.lock").write_text(tip + "\n")
    ar_git.reset_to(worktree, tip)
    assert (admin / "HEAD").read_text() == "ref: refs/heads/autoresearch/s\n"
    assert not (admin / "HEAD.lock").exists()
    assert git(target, "rev-parse", "refs/heads/autoresearch/s") == tip
    assert ar_git.commit_all(worktree, "nothing to commit") is None


# -- the objects every session and the user share -------------------------------------------
# objects/ holds every session's commits and the user's own: no box writes it. A boxed git
# writes its objects to a folder of the worktree's own; the harness moves them into the
# repository after the call, each one checked against its name.


@pytest.mark.parametrize("confinement", ["box", "bwrap"])
def test_a_filter_one_session_runs_cannot_remove_or_rewrite_another_sessions_objects(
    target, worktree, other, confinement, monkeypatch
):
    if confinement == "bwrap":
        if not jails.probe().works:
            pytest.skip("bubblewrap cannot run here")
        monkeypatch.setattr(gitbox, "usable", lambda: None)
        ar_git._jail_prefix.cache_clear()
    theirs = ar_git.head(other)
    loose = ar_git.common_dir(worktree) / "objects" / theirs[:2] / theirs[2:]
    assert loose.is_file()
    seen = worktree / "seen.txt"
    tries = [
        f"import os; os.remove({str(loose)!r})",
        f"open({str(loose)!r}, 'wb').write(b'x')",
        f"import os; os.rename({str(loose)!r}, {str(loose)!r} + '.gone')",
    ]
    with_filter(worktree, "".join(attempt(line, seen) for line in tries))
    assert staged(worktree) == "calc.py"
    said = seen.read_text().split("\n")[:-1]
    assert len(said) == 3 and all(s.startswith("refused") for s in said), said
    assert git(target, "cat-file", "-t", theirs) == "commit"
    assert "theirs.py" in git(target, "ls-tree", "-r", "--name-only", theirs)


def test_an_object_a_filter_plants_under_a_coming_name_never_reaches_the_repository(
    target, worktree
):
    # A blob's name is the hash of its content: a file planted under the name of content
    # the harness will commit next would stand for it, and git writes no object it has.
    coming = b"X = 3\n"
    blob = hashlib.sha1(b"blob %d\0" % len(coming) + coming).hexdigest()
    common = str(ar_git.common_dir(worktree) / "objects")
    planted = (
        "import os, zlib\n"
        f"store = os.environ.get('GIT_OBJECT_DIRECTORY', {common!r})\n"
        f"os.makedirs(os.path.join(store, {blob[:2]!r}), exist_ok=True)\n"
        f"with open(os.path.join(store, {blob[:2]!r}, {blob[2:]!r}), 'wb') as f:\n"
        "    f.write(zlib.compress(b'blob 6\\0owned!'))\n"
    )
    with_filter(worktree, planted)
    ar_git.worktree_git(worktree, "add", "calc.py")
    (worktree / ".gitattributes").unlink()
    ar_git.worktree_git(worktree, "add", "-A")
    ar_git.commit_index(worktree, "the filter ran")
    (worktree / "calc.py").write_bytes(coming)
    made = ar_git.commit_all(worktree, "X is 3")
    assert made is not None
    assert git(target, "cat-file", "blob", f"{made}:calc.py") == coming.decode().strip()
    assert git(target, "fsck", "--no-dangling", "--no-progress") == ""


def test_a_large_file_git_packs_in_the_box_reaches_the_repository(target, worktree):
    # Above core.bigFileThreshold, `git add` streams the file into a pack of its own.
    git(target, "config", "core.bigFileThreshold", "100")
    (worktree / "big.bin").write_bytes(bytes(range(256)) * 8)
    made = ar_git.commit_all(worktree, "a large file")
    assert made is not None
    packs = list((ar_git.common_dir(worktree) / "objects" / "pack").glob("*.pack"))
    assert packs
    assert git(target, "cat-file", "-s", f"{made}:big.bin") == "2048"
    assert git(target, "fsck", "--no-dangling", "--no-progress") == ""


def test_a_folder_of_objects_a_filter_turns_into_a_link_takes_nothing_from_the_repository(
    target, worktree, other
):
    # The worktree's own objects' folder lies in a folder the box may write: a link there to
    # the repository's objects/ must not make the harness, moving objects in after the
    # call, take the repository's own out.
    theirs = ar_git.head(other)
    admin = ar_git.worktree_admin(worktree)
    assert admin is not None
    own = admin / ar_git.OWN_OBJECTS
    shared = ar_git.common_dir(worktree) / "objects"
    forged = (
        f"import os, shutil\nshutil.rmtree({str(own)!r}, ignore_errors=True)\n"
        f"os.symlink({str(shared)!r}, {str(own)!r})"
    )
    with_filter(worktree, once(forged, worktree / "fired"))
    ar_git.worktree_proc(worktree, "add", "calc.py")  # git may not write through the link
    assert (shared / theirs[:2] / theirs[2:]).is_file()
    assert git(target, "fsck", "--no-dangling", "--no-progress") == ""
    assert own.is_dir() and not own.is_symlink()
    ar_git.worktree_git(worktree, "add", "calc.py")
    assert ar_git.commit_index(worktree, "the session goes on")
