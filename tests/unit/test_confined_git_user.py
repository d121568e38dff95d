"""As root, a filter the repository's own config names, run by the harness's confined git,
cannot read a file only root may read: in the Landlock box (the default where the kernel
has it) or in the bwrap jail as nobody; while git still writes the worktree and the git
directory (root's on disk, and root's after). The bwrap jail with root's two capabilities,
the fallback, does not stop it."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import git, make_repo

from autoresearch.safety import git as ar_git
from autoresearch.safety import gitbox, jail, nobody_view

# Where the jail shows the host: a secret under /tmp, /var/tmp, a home or /run would be hidden
# by the jail anyway, and the test would prove nothing. The checkout, unless it is a clone in
# such a place (as CI's may be); then a root folder the jail never covers.
HIDDEN = (
    *(p for p in jail.SCRATCH_DIRS.values() if p),
    *jail.HOME_ROOTS,
    Path.home(),
    *jail.EMPTIED_DIRS,
)
CHECKOUT = Path(__file__).resolve().parents[2]
VISIBLE = next(
    place
    for place in (CHECKOUT, Path("/var/lib"))
    if not any(place == h or h in place.parents for h in HIDDEN)
)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="only a root harness keeps capabilities"),
    pytest.mark.skipif(not jail.probe().works, reason="bubblewrap cannot run here"),
]


@pytest.fixture
def vault():
    folder = Path(tempfile.mkdtemp(prefix=".vault-", dir=VISIBLE))
    folder.chmod(0o755)
    secret = folder / "secret"
    secret.write_text("ROOTONLYdeadbeef\n")
    secret.chmod(0o600)
    yield secret
    shutil.rmtree(folder)


@pytest.fixture
def worktree(tmp_path) -> Path:
    target = make_repo(tmp_path / "target", {"calc.py": "X = 1\n"})
    place = tmp_path / "store" / "worktree"
    ar_git.open_worktree(target, place, "autoresearch/s", ar_git.head(target))
    return place


@pytest.fixture
def no_landlock(monkeypatch):
    """The bwrap jail, as where the kernel has no Landlock."""
    monkeypatch.setattr(ar_git, "LANDLOCK", False)


@pytest.mark.parametrize("confinement", ["landlock", "bwrap as nobody", "bwrap with caps"])
def test_a_filter_run_by_the_confined_git_cannot_read_a_root_only_file(
    worktree, vault, monkeypatch, confinement
):
    if confinement == "landlock" and gitbox.usable() is None:
        pytest.skip("no Landlock ABI 6, or no C compiler to build gitbox")
    as_nobody = confinement == "bwrap as nobody"
    if as_nobody and nobody_view.view(ar_git.common_dir(worktree)) is None:
        pytest.skip("no idmapped mount here (kernel or filesystem)")
    monkeypatch.setattr(ar_git, "NOBODY_GIT", as_nobody)  # off by default: landlock without it
    monkeypatch.setattr(ar_git, "LANDLOCK", confinement == "landlock")
    ar_git._jail_prefix.cache_clear()
    seen = worktree / "seen.txt"
    common = ar_git.common_dir(worktree)
    script = f"cat '{vault}' > '{seen}' 2>&1; cat"
    git(common.parent, "config", "filter.x.clean", script)
    (worktree / ".gitattributes").write_text("calc.py filter=x\n")
    (worktree / "calc.py").write_text("X = 2\n")

    ar_git.worktree_git(worktree, "add", "calc.py")

    said = seen.read_text()
    assert "Permission denied" in said or "ROOTONLYdeadbeef" in said  # the filter did run
    # Only the fallback with root's capabilities reads it.
    assert ("ROOTONLYdeadbeef" in said) is (confinement == "bwrap with caps")
    # git still did its work, and the git directory stays root's on disk.
    assert git(worktree, "diff", "--cached", "--name-only") == "calc.py"
    owners = {p.stat().st_uid for p in (common / "objects").rglob("*") if p.is_file()}
    assert owners == {0}


def test_the_confined_git_as_nobody_resets_and_cleans_what_a_command_left(
    worktree, monkeypatch, no_landlock
):
    monkeypatch.setattr(ar_git, "NOBODY_GIT", True)
    if nobody_view.view(ar_git.common_dir(worktree)) is None:
        pytest.skip("no idmapped mount here (kernel or filesystem)")
    ar_git._jail_prefix.cache_clear()
    # Files of both owners: nobody's (a jailed command's) and root's (the harness's own).
    (worktree / "calc.py").write_text("X = 3\n")
    (worktree / "left").mkdir()
    (worktree / "left" / "junk.txt").write_text("junk\n")
    os.chown(worktree / "left", jail.JAIL_UID, jail.JAIL_GID)
    ar_git.worktree_git(worktree, "reset", "-q", "--hard")
    ar_git.worktree_git(worktree, "clean", "-ffdxq")
    assert (worktree / "calc.py").read_text() == "X = 1\n"
    assert not (worktree / "left").exists()


def test_a_view_left_by_a_killed_process_is_removed_by_the_next(tmp_path):
    import subprocess
    import sys

    folder = tmp_path / "git"
    folder.mkdir()
    code = (
        "import os, sys; from pathlib import Path; from autoresearch.safety import nobody_view\n"
        f"v = nobody_view.view(Path({str(folder)!r}))\n"
        "print(v, flush=True); os._exit(0)\n"  # no atexit: as if killed
    )
    left = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    if left.strip() == "None":
        pytest.skip("no idmapped mount here (kernel or filesystem)")
    place = Path(left.strip()).parent
    assert place.is_dir()
    other = tmp_path / "other"
    other.mkdir()
    assert nobody_view.view(other) is not None
    assert not place.exists()
    assert (folder).is_dir()  # the folder itself is untouched


def test_a_view_of_a_live_process_is_never_taken_for_a_stale_one(tmp_path):
    import subprocess
    import sys

    folder = tmp_path / "git"
    folder.mkdir()
    code = (
        "import sys; from pathlib import Path; from autoresearch.safety import nobody_view\n"
        f"print(nobody_view.view(Path({str(folder)!r})), flush=True)\n"
        "sys.stdin.read()\n"  # alive until told
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        made = holder.stdout.readline().strip()
        if made == "None":
            pytest.skip("no idmapped mount here (kernel or filesystem)")
        other = tmp_path / "other"
        other.mkdir()
        nobody_view.view.cache_clear()
        assert nobody_view.view(other) is not None  # removes stale views: not this one
        assert nobody_view.present(Path(made))
    finally:
        holder.communicate("")
    assert not Path(made).exists()  # its owner unmounted it at exit


def test_a_view_gone_under_the_confined_git_is_made_again(worktree, monkeypatch, no_landlock):
    monkeypatch.setattr(ar_git, "NOBODY_GIT", True)
    if nobody_view.view(ar_git.common_dir(worktree)) is None:
        pytest.skip("no idmapped mount here (kernel or filesystem)")
    ar_git._jail_prefix.cache_clear()
    ar_git.worktree_git(worktree, "status")
    point = nobody_view.view(ar_git.common_dir(worktree))
    subprocess_umount = ["umount", "-l", str(point)]
    import subprocess

    subprocess.run(subprocess_umount, check=True)
    assert not nobody_view.present(point)
    (worktree / "calc.py").write_text("X = 4\n")
    ar_git.worktree_git(worktree, "reset", "-q", "--hard")  # a jail that binds a live view
    assert (worktree / "calc.py").read_text() == "X = 1\n"
