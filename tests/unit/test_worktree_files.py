"""The one reader of worktree files: what it reads, and everything it refuses to."""

from __future__ import annotations

import ast
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from autoresearch.safety import worktree_files
from autoresearch.safety.worktree_files import Missing, Refused, read_bytes, read_if_any, read_text

SECRET = "SECRET-KEY-0xdeadbeef"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A worktree with one plain file, and a secret beside it (outside)."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.key").write_text(SECRET + "\n")
    wt = tmp_path / "wt"
    (wt / "src").mkdir(parents=True)
    (wt / "src" / "app.py").write_text("print('hi')\n")
    return wt


def test_a_plain_file_is_read(tree):
    assert read_text(tree, "src/app.py") == "print('hi')\n"


def test_a_link_inside_to_a_file_inside_is_read(tree):
    (tree / "alias.py").symlink_to("src/app.py")
    (tree / "srcdir").symlink_to("src")
    assert read_text(tree, "alias.py") == "print('hi')\n"
    assert read_text(tree, "srcdir/app.py") == "print('hi')\n"


def test_a_link_out_of_the_worktree_is_refused(tree):
    (tree / "requirements.txt").symlink_to(tree.parent / "outside" / "secret.key")
    with pytest.raises(Refused, match="leads outside the repository"):
        read_text(tree, "requirements.txt")


def test_a_relative_link_out_is_refused(tree):
    (tree / "requirements.txt").symlink_to("../outside/secret.key")
    with pytest.raises(Refused, match="leads outside the repository"):
        read_text(tree, "requirements.txt")


def test_a_chain_of_links_that_ends_outside_is_refused(tree):
    (tree / "hop2").symlink_to(tree.parent / "outside" / "secret.key")
    (tree / "hop1").symlink_to("hop2")
    (tree / "requirements.txt").symlink_to("hop1")
    with pytest.raises(Refused, match="leads outside the repository"):
        read_text(tree, "requirements.txt")


def test_a_directory_link_out_is_refused(tree):
    (tree / "conf").symlink_to(tree.parent / "outside")
    with pytest.raises(Refused, match="leads outside the repository"):
        read_text(tree, "conf/secret.key")


def test_a_name_with_dotdot_that_climbs_out_is_refused(tree):
    with pytest.raises(Refused, match="leads outside the repository"):
        read_text(tree, "src/../../outside/secret.key")


def test_an_absolute_name_is_refused(tree):
    with pytest.raises(Refused, match="absolute path"):
        read_text(tree, str(tree.parent / "outside" / "secret.key"))


def test_a_symlink_loop_is_refused(tree):
    (tree / "a").symlink_to("b")
    (tree / "b").symlink_to("a")
    with pytest.raises(Refused, match="cannot be resolved"):
        read_text(tree, "a")


def test_the_git_directory_is_refused_even_through_a_link(tree):
    (tree / ".git").mkdir()
    (tree / ".git" / "config").write_text("[core]\n")
    (tree / "cfg").symlink_to(".git/config")
    for name in (".git/config", "cfg"):
        with pytest.raises(Refused, match=".git directory"):
            read_text(tree, name)


def test_a_fifo_is_refused_without_blocking(tree):
    os.mkfifo(tree / "requirements.txt")
    # Opening a FIFO for reading with no writer blocks forever; the refusal comes first.
    with pytest.raises(Refused, match="not a regular file"):
        read_text(tree, "requirements.txt")


def test_a_link_inside_to_a_fifo_inside_is_refused(tree):
    os.mkfifo(tree / "pipe")
    (tree / "requirements.txt").symlink_to("pipe")
    with pytest.raises(Refused, match="not a regular file"):
        read_text(tree, "requirements.txt")


def test_a_link_to_dev_zero_is_refused_without_reading(tree):
    (tree / "requirements.txt").symlink_to("/dev/zero")
    with pytest.raises(Refused, match="leads outside the repository"):
        read_bytes(tree, "requirements.txt")


def test_a_device_node_inside_is_refused_before_it_is_opened(tree):
    try:
        os.mknod(tree / "zero", 0o600 | 0o020000, os.makedev(1, 5))  # S_IFCHR: /dev/zero
    except PermissionError:
        pytest.skip("creating a device node needs root")
    with pytest.raises(Refused, match="not a regular file"):
        read_bytes(tree, "zero")


def test_a_socket_is_refused(tree):
    # AF_UNIX paths are limited to 108 bytes: bind from inside the folder.
    cwd = os.getcwd()
    os.chdir(tree)
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind("sock")
    finally:
        os.chdir(cwd)
    try:
        with pytest.raises(Refused, match="not a regular file"):
            read_bytes(tree, "sock")
    finally:
        server.close()


def test_a_directory_is_refused(tree):
    for name in ("src", "", "."):
        with pytest.raises(Refused, match="is a directory"):
            read_bytes(tree, name)


def test_a_file_over_the_cap_is_refused(tree):
    (tree / "big.txt").write_bytes(b"x" * 101)
    assert read_bytes(tree, "big.txt", max_bytes=101) == b"x" * 101
    with pytest.raises(Refused, match="larger than 100 bytes"):
        read_bytes(tree, "big.txt", max_bytes=100)


def test_a_hard_link_to_a_file_outside_is_refused(tree):
    os.link(tree.parent / "outside" / "secret.key", tree / "requirements.txt")
    with pytest.raises(Refused, match="hard link to a file outside"):
        read_text(tree, "requirements.txt")


def test_two_names_inside_for_one_file_are_read(tree):
    os.link(tree / "src" / "app.py", tree / "copy.py")
    assert read_text(tree, "copy.py") == "print('hi')\n"


def test_a_missing_file_is_missing_not_refused(tree):
    with pytest.raises(Missing, match="does not exist"):
        read_text(tree, "nope.txt")
    with pytest.raises(Missing):
        read_text(tree, "nodir/nope.txt")
    with pytest.raises(Missing):
        read_text(tree, "src/app.py/nope.txt")  # a file where a folder would be


def test_a_directory_swapped_for_a_link_after_the_check_is_refused(tree, monkeypatch):
    """The race: the name resolves inside, then `src` becomes a link out before the open."""
    (tree.parent / "outside" / "app.py").write_text(SECRET)
    real = worktree_files.resolve

    def resolve_then_swap(worktree, rel):
        found = real(worktree, rel)
        shutil.rmtree(tree / "src")
        (tree / "src").symlink_to(tree.parent / "outside")
        return found

    monkeypatch.setattr(worktree_files, "resolve", resolve_then_swap)
    with pytest.raises(Refused, match="changed while it was being opened"):
        read_text(tree, "src/app.py")


def test_a_file_swapped_for_a_link_after_the_check_is_refused(tree, monkeypatch):
    real = worktree_files.resolve

    def resolve_then_swap(worktree, rel):
        found = real(worktree, rel)
        (tree / "src" / "app.py").unlink()
        (tree / "src" / "app.py").symlink_to(tree.parent / "outside" / "secret.key")
        return found

    monkeypatch.setattr(worktree_files, "resolve", resolve_then_swap)
    with pytest.raises(Refused, match="changed while it was being opened"):
        read_text(tree, "src/app.py")


def test_read_if_any_reports_a_refusal_and_is_silent_about_a_missing_file(tree):
    (tree / "requirements.txt").symlink_to(tree.parent / "outside" / "secret.key")
    refused: list[str] = []
    assert read_if_any(tree, "requirements.txt", refused) is None
    assert read_if_any(tree, "absent.txt", refused) is None
    assert refused == [
        "requirements.txt: not read: 'requirements.txt' leads outside the repository "
        "(through a symlink)"
    ]
    assert SECRET not in " ".join(refused)


# --- the class: no harness code reads a target's file but through the reader ------------------

ROOT = Path(__file__).resolve().parents[2]
# Names that hold a target's worktree or checkout (or a path under one) in harness code.
TARGET_NAMES = {"worktree", "target", "repo", "checkout", "cwd"}
RAW_READS = {"read_text", "read_bytes", "open", "fromfile", "read"}
PARSERS = {"os", "worktree_files", "json", "yaml", "tomllib"}  # their .open/.read are not files
# Raw reads under a target's name that are meant: (module, the call) -> why.
ALLOWED = {
    ("autoresearch/safety/git.py", "open(common_dir(repo)"): "the harness's own lock, in git's dir",
    ("autoresearch/safety/git.py", "dot_git.read_text()"): "`.git` itself, lstat-checked before",
    ("autoresearch/safety/git.py", "(admin / "): "git's admin directory, not the worktree",
    (
        "autoresearch/safety/git.py",
        "record_of(worktree)",
    ): "the harness's record beside the worktree",
    (
        "autoresearch/safety/jail.py",
        "dot_git.read_text()",
    ): "`.git`, which the reader refuses by design",
    (
        "autoresearch/safety/jail.py",
        "(own / 'commondir')",
    ): "git's admin directory, not the worktree",
    ("autoresearch/safety/git.py", "proc.stdout.read("): "cat-file --batch's pipe, git's bytes",
    ("autoresearch/measure/metrics.py", "path.read_text("): "an absolute json_file the spec names",
    ("autoresearch/modes/experiment/program.py", "(folder / MISSION_FILE)"): "the spec's mission",
}


def _names(node: ast.AST) -> set[str]:
    found = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            found.add(n.id)
        elif isinstance(n, ast.Attribute):
            found.add(n.attr)
    return found


def _raw_reads_of_target_paths(tree: ast.Module) -> list[str]:
    """Calls like `(worktree / name).read_text()` or `open(path)` where `path` came from a
    target's name, followed through assignments and loops within each function."""
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        bad = set(TARGET_NAMES)
        for _ in range(3):  # a few rounds reach a fixpoint for straight-line flows
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign) and _names(n.value) & bad:
                    bad |= {t for target in n.targets for t in _names(target)}
                elif isinstance(n, (ast.For, ast.comprehension)) and _names(n.iter) & bad:
                    bad |= _names(n.target)
                elif isinstance(n, ast.NamedExpr) and _names(n.value) & bad:
                    bad.add(n.target.id)
        for n in ast.walk(fn):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in RAW_READS:
                if isinstance(f.value, ast.Name) and f.value.id in PARSERS:
                    continue
                if _names(f.value) & bad:
                    out.append(ast.unparse(n))
            elif isinstance(f, ast.Name) and f.id == "open" and n.args and _names(n.args[0]) & bad:
                out.append(ast.unparse(n))
    return out


def test_harness_code_reads_no_target_file_but_through_the_reader():
    unexpected = []
    for path in sorted((ROOT / "autoresearch").rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module == "autoresearch/safety/worktree_files.py":
            continue
        for call in _raw_reads_of_target_paths(ast.parse(path.read_text())):
            if not any(module == m and call.startswith(c) for m, c in ALLOWED):
                unexpected.append(f"{module}: {call}")
    assert unexpected == [], "read these through autoresearch.safety.worktree_files"


def test_a_bind_mount_inside_the_worktree_is_refused(tree):
    """A bind mount keeps the filesystem's st_dev: the mount id of the opened file tells."""
    (tree / "bind").mkdir()
    if subprocess.run(["mount", "--bind", str(tree.parent / "outside"), str(tree / "bind")],
                      capture_output=True).returncode != 0:  # fmt: skip
        pytest.skip("cannot mount here (needs root with CAP_SYS_ADMIN)")
    try:
        with pytest.raises(Refused, match="mounted inside the repository"):
            read_text(tree, "bind/secret.key")
    finally:
        subprocess.run(["umount", str(tree / "bind")], capture_output=True)
