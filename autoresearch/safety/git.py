"""Git operations on the target: worktrees, branches, commits, resets, reverts.

Every call names its repository and cannot land anywhere else: git runs with `-C <path>`
and may not search above that path, and the helpers that change a worktree first check
that it is a live worktree made by autoresearch and bind GIT_DIR/GIT_WORK_TREE to it. The
user's checkout is only read (without git's optional index lock) and gets new refs under
autoresearch/ and, for `on_dirty: stash`, one stash entry.

The repository never runs code in the harness's git. A worktree's `.git` file lies in the
worktree, where the target's commands and the agents write; a test can point it at a git
directory of its own making, with hooks and an fsmonitor that git would run for us, with our
environment. So the file is never taken on trust: when a worktree is made, its
administrative and common directories are recorded beside it (`record_of`), out of the
jail's reach; every call on the worktree names them, and one whose `.git` file no longer
points there is refused. And every call runs with the settings in `LOCKDOWN`: no hook, no
fsmonitor, no external diff or textconv, no submodule recursion (docs/safety.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import json
import os
import re
import secrets as random_names
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from autoresearch.errors import UserError
from autoresearch.safety import child_env, git_objects
from autoresearch.session import files

AUTHOR = ["-c", "user.name=autoresearch", "-c", "user.email=autoresearch@localhost"]
# Settings that would let a repository run a program in the harness's git, switched off for
# every call: the harness makes its commits and resets itself, and never needs one. (Filter
# and merge drivers are defined in git config only, which the target cannot write: the
# worktree's config is the recorded common directory's, read-only inside the jail.)
LOCKDOWN = (
    "core.hooksPath=/dev/null",  # no hook runs: /dev/null/<hook> never exists
    "core.fsmonitor=false",  # a configured fsmonitor is a program git starts on status/add
    "core.sshCommand=false",
    "diff.external=",
    "commit.gpgSign=false",  # gpg.program is a program too
    "tag.gpgSign=false",
    "submodule.recurse=false",  # a reset that updates submodules clones from any URL
    "protocol.ext.allow=never",
    # A submodule's (or any nested repository's) own configuration is never read: looking
    # inside one means running git there, with whatever filter its config names.
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
    "fetch.recurseSubmodules=false",
    # Nothing a harness call starts writes the common directory's top, which the box keeps
    # read-only (COMMON_WRITABLE): no automatic gc or maintenance (gc.pid, a pack-refs'
    # packed-refs) and no rerere (rr-cache/; a user's recorded resolution never changes
    # what the harness replays). The user's own git still does all three.
    "gc.auto=0",
    "maintenance.auto=false",
    "rerere.enabled=false",
)
# Commands that could run a textconv filter or an external diff: told not to.
DIFFING = {"diff": 1, "log": 1, "show": 1}
# Commands that would look into a submodule's working tree (a `git status` run inside it):
# told not to, whatever `.gitmodules` or the submodule's config say.
SUBMODULE_BLIND = ("status", "diff", "diff-index", "diff-files")
# A gitlink: the mode of a submodule's entry in a tree or the index.
GITLINK = "160000"
# A file in a linked worktree's administrative directory (.git/worktrees/<id>/) that marks
# the worktree as made by autoresearch: only such worktrees are reset, cleaned or removed.
MARKER = "autoresearch-worktree"
# Configuration git reads besides the repository's own: none. The user's global and the
# system's files may define filters, textconv and merge drivers that a `.gitattributes` in
# the worktree would select; the harness needs none of them.
NO_OUTSIDE_CONFIG = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
# Lock files a killed git leaves behind in a worktree's administrative directory.
WORKTREE_LOCKS = ("index.lock", "HEAD.lock")


class GitError(RuntimeError):
    pass


class StaleWorktree(GitError):
    """A folder whose `.git` names a worktree git no longer has (its repository went)."""


class ForgedGitLink(GitError, UserError):
    """A worktree's `.git` file no longer names the git directory recorded when it was made."""


def environment(bound_to: Path | None, *, git_dir: Path | None = None) -> dict[str, str]:
    """The environment for a git process that must act on `bound_to` and nothing else
    (None: discovery upwards is allowed, for finding the top of a checkout).

    The allowlist of `child_env`: no key, no secret, no GIT_* variable of ours (one that
    points git at another repository, adds configuration or names a program), a private
    HOME, and neither the user's global nor the system's git configuration."""
    return _environment(os.path.realpath(bound_to) if bound_to is not None else None, git_dir)


# Reads never take the index lock: a kill during `git status` in the user's checkout must
# not leave .git/index.lock behind for their next commit.
_FIXED = NO_OUTSIDE_CONFIG | {"GIT_OPTIONAL_LOCKS": "0"}


def _environment(work: str | None, git_dir: Path | None) -> dict[str, str]:
    """`environment` for a worktree whose path, links resolved, is `work`."""
    env = child_env.for_tool() | _FIXED
    if work is not None:
        # git may look for `.git` in the named directory only, never in an enclosing one.
        env["GIT_CEILING_DIRECTORIES"] = os.path.dirname(work)
    if git_dir is not None:
        env["GIT_DIR"] = str(git_dir)
        env["GIT_WORK_TREE"] = work if work is not None else os.path.realpath(".")
    return env


def argv(path: Path | str, *args: str) -> list[str]:
    """The command line of a harness git call in `path`, with LOCKDOWN's settings."""
    lockdown = [word for setting in LOCKDOWN for word in ("-c", setting)]
    if args and args[0] in DIFFING:
        args = (args[0], "--no-ext-diff", "--no-textconv", *args[1:])
    if args and args[0] in SUBMODULE_BLIND:
        args = (args[0], "--ignore-submodules=all", *args[1:])
    return ["git", "-C", str(path), *AUTHOR, *lockdown, *args]


# Subcommands that read or write the files of the worktree, where a filter or any program a
# repository brought could run: on a session worktree they run inside a jail (CONFINED).
# `commit` too: it refreshes the index first, and a file changed within the index's own
# second is read again, through the clean filter the repository's config names.
TOUCHES_FILES = frozenset(
    {
        "status", "diff", "diff-index", "diff-files", "add", "checkout", "checkout-index",
        "reset", "clean", "stash", "cherry-pick", "revert", "apply", "rm", "update-index",
        "commit",
    }
)  # fmt: skip
# Whether harness git on a session worktree runs confined (the Landlock box, else bwrap
# where it works): no network, no home, only the worktree and its git directories writable.
CONFINED = True


def confined(cmd: list[str], args: tuple[str, ...], env: dict[str, str]) -> list[str]:
    """`cmd` as run: confined when it is a call bound to one of our worktrees (GIT_DIR and
    GIT_WORK_TREE set) that touches its files, else as it is. In the Landlock box where
    the kernel has it (`_boxed`), else in the target's commands' jail, as ourselves (the
    git directories are ours to write), with the worktree, the common git directory and a
    throwaway index's folder writable."""
    if not args or args[0] not in TOUCHES_FILES:
        return cmd
    boxed = _boxed(cmd, args, env)
    if boxed is not None:
        return boxed
    jailed = _jailed_script([cmd], [args], env)
    return cmd if jailed is None else jailed


# Whether the harness's confined git runs in the Landlock box (gitbox.py) where the kernel
# has one; off, or where it has none, in the bwrap jail below. The box needs no namespace
# nor mount (safe beside other sessions' boxes), keeps root's git from every file outside
# the worktree and the system's programs (root-only ones included), and costs a fraction
# of a jail (docs/safety.md).
LANDLOCK = True


def _boxed(
    cmd: list[str],
    args: tuple[str, ...],
    env: dict[str, str],
    batch: tuple[tuple[list[str], tuple[str, ...]], ...] = (),
    may_fail: frozenset[int] = frozenset(),
) -> list[str] | None:
    """`cmd` in the Landlock box, or None where it does not run there (CONFINED or LANDLOCK
    off, no usable launcher, a call not bound to one of our worktrees). `batch`: the
    (command, args) of several calls run in a row in the one box instead (gitbox's -x),
    those whose place is in `may_fail` allowed to fail."""
    from autoresearch.safety import gitbox

    if not (CONFINED and LANDLOCK):
        return None
    work, admin = env.get("GIT_WORK_TREE"), env.get("GIT_DIR")
    if not work or not admin or gitbox.usable() is None:
        return None
    index = env.get("GIT_INDEX_FILE")
    index_dir = str(Path(index).parent) if index else ""
    line = _box_prefix(work, admin, index_dir, env.get("HOME", ""), env.get("PATH", ""))
    # A file a call names outside the worktree (the patch `apply` reads) may be read.
    calls = batch or ((cmd, args),)
    named = [a for _, one in calls for a in one[1:] if os.path.isabs(a) and os.path.isfile(a)]
    line = [*line[:-1], *(w for a in named for w in ("-r", a))]
    if batch:
        line += [w for one, _ in batch for w in ("-x", str(len(one)))]
        line += [w for n in sorted(may_fail) for w in ("-m", str(n))]
    return [*line, "--", *(w for one, _ in calls for w in one)]


@functools.lru_cache(maxsize=64)
def _box_prefix(work: str, admin: str, index_dir: str, home: str, path: str) -> tuple[str, ...]:
    """The box's command line up to `--`, built once per worktree (a third of a
    millisecond a call otherwise, a quarter of what the box costs)."""
    from autoresearch.safety import gitbox

    common = _common_of(Path(admin))
    private = gitbox.private_folders(home) if home else {}
    own = [str(p) for p in git_writable(Path(admin), common)]
    writable = [work, *own, *([index_dir] if index_dir else []), *private.values()]
    readable = [str(common), *gitbox.path_folders(path, [work, str(common)])]
    return tuple(gitbox.argv(writable, readable, [], keep_caps=os.geteuid() == 0, env=private))


def _common_of(admin: Path) -> Path:
    """The common git directory a worktree's administrative directory names."""
    try:
        return (admin / (admin / "commondir").read_text().strip()).resolve()
    except (OSError, UnicodeError):
        return admin


# What the harness's confined calls (TOUCHES_FILES) write in the common git directory, which
# for a session worktree is the user's own `.git`: nothing. Not a ref: every session's
# branch lies under refs/heads/autoresearch/, and a right on a folder covers all below it,
# so a program one session's git ran (a filter) could move another session's branch; in a
# reftable repository all refs are one store. So a confined call runs on a detached HEAD,
# which lies in the worktree's own directory (worktrees/<id>, with its index, ORIG_HEAD,
# reflog and a revert's state: writable whole, its HEAD checked before every call,
# `_check_head`), and the harness moves the branch itself afterwards, outside any box, by
# `update-ref` from the tip the call started at (`_on_detached_head`). Not objects/ either,
# which holds every session's commits and the user's own: such a program could remove one,
# or plant a file under the name of content the harness commits next (git writes no object
# it has). A confined git writes its objects to a folder of the worktree's own
# (OWN_OBJECTS, GIT_OBJECT_DIRECTORY; the repository's objects/ its alternate, read-only),
# and the harness moves each into objects/ after the call, checked against its name
# (`_take_objects`). Nothing at the top (config, packed-refs, the main checkout's index and
# HEAD) nor in hooks/ or info/ either: what is written there runs, or selects what runs,
# the next time the user's own git runs, unconfined.
COMMON_WRITABLE: tuple[str, ...] = ()
OWN_OBJECTS = git_objects.OWN_OBJECTS
# The harness's own branches: the only ones a worktree of ours may hold (`_check_head`).
OWNED_REFS = "refs/heads/autoresearch"
# Subcommands in which git may update HEAD, and so the branch it names (`_writes_refs`).
MOVES_HEAD = frozenset({"commit", "reset", "revert", "cherry-pick", "checkout"})


def git_writable(admin: Path, common: Path) -> list[Path]:
    """The git directories a confined call on the worktree of `admin` may change: its
    administrative directory (its objects' folder, OWN_OBJECTS, within) and
    COMMON_WRITABLE's folders of `common`."""
    folders = [common / name for name in COMMON_WRITABLE if (common / name).is_dir()]
    return [admin, *folders] if admin != common else [common]


def boxed(cmd: list[str]) -> bool:
    """Whether `cmd` is a command line of the Landlock box: a direct child of ours, whose
    CPU rusage counts, run as it is."""
    from autoresearch.safety import gitbox

    return bool(cmd) and cmd[0] == str(gitbox.EXE)


def confinement() -> str:
    """Which confinement the harness's git on a session worktree runs in here, in words
    (setup.json's sandbox.harness_git)."""
    from autoresearch.safety import gitbox
    from autoresearch.safety import jail as jails

    if not CONFINED:
        return "none"
    if LANDLOCK and gitbox.usable() is not None:
        return "landlock: only the worktree, its git directories and the system's programs"
    if not jails.probe().works:
        return "none: neither Landlock (ABI 6) nor bwrap here"
    if os.geteuid() == 0:
        return "bwrap, as root with CAP_DAC_OVERRIDE and CAP_FOWNER (no Landlock here)"
    return "bwrap (no Landlock here)"


def _jailed_script(
    cmds: list[list[str]],
    args: list[tuple[str, ...]],
    env: dict[str, str],
    script: Callable[[list[list[str]], str], str] | None = None,
) -> list[str] | None:
    """The jail's command line that runs `script(cmds, worktree)` (default: the one command
    of `cmds`; the calls as run, a file they name maybe replaced by a copy nobody may read),
    or None where harness git runs unconfined (CONFINED off, no bwrap, a call not bound to
    one of our worktrees). The jail is the same for one call or several: it depends on the
    worktree, its git directories, a throwaway index's folder and the files the calls name."""
    if not CONFINED:
        return None
    work, admin = env.get("GIT_WORK_TREE"), env.get("GIT_DIR")
    if not work or not admin:
        return None
    index = env.get("GIT_INDEX_FILE")
    # A file a call names outside the worktree (the patch `apply` reads) is shown read-only.
    named = tuple(
        sorted(
            {
                a
                for one in args
                for a in one[1:]
                if os.path.isabs(a) and not _inside(a, [work]) and os.path.isfile(a)
            }
        )
    )
    prefix = _live_prefix(
        work,
        admin,
        str(Path(index).parent) if index else "",
        env.get("HOME", ""),
        env["PATH"],
        named,
    )
    if prefix is None:
        return None
    if any(word.startswith("--reuid=") for word in prefix):
        _hand_over(work)  # git runs as nobody: what the harness wrote since is nobody's too
        if named:
            # Nobody may not read our files (a patch in the session folder is 0600): it
            # reads a copy, shown read-only in the jail in the file's place.
            copies = {n: _readable_copy(n) for n in named}
            cmds = [[copies.get(word, word) for word in cmd] for cmd in cmds]
            index_dir = str(Path(index).parent) if index else ""
            home = env.get("HOME", "")
            shown = tuple(sorted(copies.values()))
            prefix = _live_prefix(work, admin, index_dir, home, env["PATH"], shown) or prefix
    return [*prefix, script(cmds, work) if script else _in_jail(cmds[0], work)]


def _in_jail(cmd: list[str], work: str) -> str:
    # `-C` names the worktree as the caller did (sessions/<name>/worktree is a link into the
    # store); the jail shows it at the real path, GIT_WORK_TREE's.
    if cmd[1:2] == ["-C"]:
        cmd = [cmd[0], "-C", work, *cmd[3:]]
    return shlex.join(cmd)


def worktree_batch(
    worktree: Path, *calls: tuple[str, ...], may_fail: frozenset[int] = frozenset()
) -> subprocess.CompletedProcess[str]:
    """Several git calls on our worktree, in order, that touch its files: in ONE Landlock
    box (gitbox's -x), or ONE jail (one bwrap, its namespaces and mounts, instead of one
    for each), the same confinement each would get alone. Stops at the first that fails
    (but those whose place in `calls` is in `may_fail`); the output is the last call's,
    stderr all of theirs. Unconfined (no bwrap, CONFINED off) the calls run one by one,
    as `worktree_proc` runs them.

    Only calls whose outputs are read after the last one ends belong in one batch: the
    jail's processes end with it, and nothing of the harness runs between its calls."""
    env = _bound(worktree)
    cmds = [argv(worktree, *c) for c in calls]
    # One box runs the calls in a row itself (no shell): a box's start costs about what a
    # small git call does.
    from autoresearch.safety import gitbox

    batch = tuple(zip(cmds, calls, strict=True))
    boxed = _boxed(cmds[0], calls[0], env, batch, may_fail) if calls else None
    if boxed is not None and len(calls) > gitbox.MAX_BATCH:
        return _calls_in_a_row(worktree, calls, env, may_fail)
    if boxed is not None:
        return _on_detached_head(boxed, calls, env, text=True)

    def script(cmds: list[list[str]], work: str) -> str:
        steps = []
        for n, cmd in enumerate(cmds):
            line = _in_jail(cmd, work)
            if n < len(cmds) - 1:
                line += " >/dev/null"
            steps.append(f"{{ {line} || true; }}" if n in may_fail else line)
        return " && ".join(steps)

    jailed = _jailed_script(cmds, list(calls), env, script)
    if jailed is not None:
        return _on_detached_head(jailed, calls, env, text=True)
    return _calls_in_a_row(worktree, calls, env, may_fail)


def _calls_in_a_row(
    worktree: Path, calls: tuple[tuple[str, ...], ...], env: dict[str, str], may_fail: frozenset
) -> subprocess.CompletedProcess[str]:
    """`worktree_batch`'s calls one by one, each confined as `_run` confines it alone; the
    output the last call's, stderr all of theirs (as in one jail)."""
    proc, errors = None, []
    for n, one in enumerate(calls):
        proc = _run(worktree, one, env, check=False)
        errors.append(proc.stderr)
        if proc.returncode != 0 and n not in may_fail:
            break
    assert proc is not None
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, "".join(errors))


def worktree_batch_git(worktree: Path, *calls: tuple[str, ...], **kw) -> str:
    """`worktree_batch`, checked: GitError naming the calls when one failed. The output as
    git wrote it (a `-z` list's first entry may start with a space)."""
    proc = worktree_batch(worktree, *calls, **kw)
    if proc.returncode != 0:
        names = "; ".join("git " + " ".join(c) for c in calls)
        raise GitError(f"{names} failed in {worktree}: {proc.stderr.strip()}")
    return proc.stdout


def _live_prefix(*key: str | tuple[str, ...]) -> tuple[str, ...] | None:
    """`_jail_prefix`, built again when a view of the git directory it binds is gone (the
    jail could not start): a cached line must not outlive what it names."""
    from autoresearch.safety import nobody_view

    prefix = _jail_prefix(*key)
    # The folders shown from a view are the view's own or below it (view/objects, ...).
    shown = [w for w in prefix or () if nobody_view.PREFIX in w and "/view" in w]
    views = {w[: w.index("/view") + len("/view")] for w in shown}
    if all(nobody_view.present(Path(w)) for w in views):
        return prefix
    _jail_prefix.cache_clear()
    nobody_view.view.cache_clear()
    return _jail_prefix(*key)


@functools.lru_cache(maxsize=64)
def _jail_prefix(
    work: str, admin: str, index_dir: str, home: str, path: str, named: tuple[str, ...] = ()
) -> tuple[str, ...] | None:
    """The bwrap command line up to the shell command, built once per worktree: its
    toolchain and home lookups cost more than the git call they confine."""
    from autoresearch.safety import jail as jails

    box = jails.build_jail({"sandbox": "auto"}, Path(work), read_only=[Path(n) for n in named])
    if box.mode != "bwrap":
        return None
    common = _common_of(Path(admin))
    # The common directory stays shown read-only (build_jail shows the git directories so).
    extra = [*git_writable(Path(admin), common), *([Path(index_dir)] if index_dir else [])]
    views = _nobody_views(box, common, index_dir, extra)
    if views is not None:
        # As root: git runs as nobody, without any capability, so a program a repository's
        # config names (a filter) cannot read what only root may read on the host; the git
        # directory, root's on disk, is shown through a view where nobody may write it.
        box = dataclasses.replace(box.allowing(*extra), keep_caps=(), sources=views)
    else:
        # As ourselves: the git directories are ours. As root where no view can be made,
        # a process without capabilities could not change the files a command, as nobody,
        # left in the worktree; it keeps the two that let it (docs/safety.md).
        caps = ("CAP_DAC_OVERRIDE", "CAP_FOWNER") if os.geteuid() == 0 else ()
        box = dataclasses.replace(box.allowing(*extra), drop_to=None, keep_caps=caps)
    with tempfile.TemporaryDirectory(prefix="autoresearch-gitjail-") as scratch:
        line = box.argv("", Path(work), Path(scratch), {"HOME": home, "PATH": path})
    if views is not None:
        # git as nobody would refuse the worktree, whose top stays ours ("dubious ownership").
        trust = ["GIT_CONFIG_COUNT", "1", "GIT_CONFIG_KEY_0", "safe.directory"]
        trust += ["GIT_CONFIG_VALUE_0", "*"]
        line[1:1] = [w for i in range(0, len(trust), 2) for w in ("--setenv", *trust[i : i + 2])]
    return tuple(line[:-1])


def _readable_copy(path: str) -> str:
    """A copy of our file `path` the jail's user (nobody) may read, in a folder of ours
    that others may pass through but not list (the copy's name is random)."""
    global _copies
    if _copies is None:
        _copies = tempfile.TemporaryDirectory(prefix="autoresearch-gitread-")
        os.chmod(_copies.name, 0o711)
    copy = Path(_copies.name) / f"{random_names.token_hex(8)}{Path(path).suffix}"
    shutil.copyfile(path, copy)
    copy.chmod(0o644)
    return str(copy)


_copies: tempfile.TemporaryDirectory | None = None  # removed when the process exits


def _hand_over(work: str) -> None:
    from autoresearch.safety import jail as jails

    jails.Jail("bwrap", Path(work), drop_to=jails.JAIL_UID).hand_over_worktree()


def _nobody_views(
    box, common: Path, index_dir: str, writable: list[Path]
) -> tuple[tuple[Path, Path], ...] | None:
    """Where root's git as nobody sees the `writable` folders of the common git directory
    from (the same places in a view of it: nobody_view.py), or None where it cannot: not
    root, no drop to nobody, no idmapped mount here."""
    from autoresearch.safety import nobody_view

    if not NOBODY_GIT or box.drop_to is None:
        return None
    shown = nobody_view.view(common)
    if shown is None:
        return None
    if index_dir:
        os.chown(index_dir, box.drop_to, box.drop_to)  # a throwaway folder of ours
    inside = [p for p in writable if p == common or common in p.parents]
    return tuple((p, shown / p.relative_to(common)) for p in inside)


# Whether root's confined git runs as nobody where an idmapped view can be made. Off: the
# views are mounts under the host's /tmp, and a jail built while another process's view
# exists fails to remount it ("Invalid argument"), so sessions or cluster jobs side by side
# broke each other's jails. Until a view lives in a mount namespace of its own, root's
# confined git keeps CAP_DAC_OVERRIDE and CAP_FOWNER (docs/safety.md says what that leaves).
NOBODY_GIT = False


def _run(
    path: Path | str,
    args: tuple[str, ...],
    env: dict[str, str],
    *,
    check: bool = True,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    plain = argv(path, *args)
    cmd = confined(plain, args, env)
    if cmd is not plain:
        proc = _on_detached_head(cmd, (args,), env, text=True, stdin=stdin)
    else:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            env=env,
        )
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed in {path}: {proc.stderr.strip()}")
    return proc


def git(repo: Path | str, *args: str, check: bool = True) -> str:
    """Run git in `repo` itself: a directory without its own `.git` is an error, never a
    reason to act on whatever repository encloses it. A worktree autoresearch made is named
    by its recorded git directories, never by its `.git` file."""
    env = _bound(Path(repo)) if _has_record(repo) else environment(Path(repo))
    return _run(repo, args, env, check=check).stdout.strip()


def raw(path: Path | str, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    """A harness git call whose bytes and exit code the caller reads itself (`-z` lists, a
    yes/no answer); named and locked down like every other call, never checked."""
    path = Path(path)
    env = _bound(path) if _has_record(path) else environment(path)
    plain = argv(path, *args)
    cmd = confined(plain, args, env)
    if cmd is not plain:
        return _on_detached_head(cmd, (args,), env, text=False, timeout=timeout)
    return subprocess.run(
        cmd,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=timeout,
    )


def _run_in_box(
    cmd: list[str],
    env: dict[str, str],
    *,
    text: bool,
    stdin: str | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """A confined command line run: in the bwrap jail with its CPU counted (`_run_counted`),
    in the Landlock box past a time limit by telling it to end (`_run_box`), else as it is."""
    if not boxed(cmd) and stdin is None:
        return _run_counted(cmd, env, text=text, timeout=timeout)
    if boxed(cmd) and timeout is not None and stdin is None and not text:
        return _run_box(cmd, env, timeout)
    return subprocess.run(
        cmd,
        capture_output=True,
        text=text,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        env=env,
        timeout=timeout,
    )


def _run_box(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """A boxed call with a time limit: past it the box is told to end (SIGTERM: the
    launcher kills every process in it) rather than killed, which would leave what git
    started running; TimeoutExpired, as subprocess.run raises it."""
    with subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _run_counted(
    jailed: list[str], env: dict[str, str], *, text: bool, timeout: float | None = None
) -> subprocess.CompletedProcess:
    """A jailed git command line run so that its CPU is counted: the jail's shell reports
    its children's CPU with `times` on its stdin, a file of ours (git itself gets
    /dev/null), as a target's command does (commands.CPU_REPORTER). What runs in a jail is
    invisible to rusage; this goes to `commands.jailed_cpu`, which timings.tsv reads (the
    jail's own setup, bwrap's, is still not counted). A figure, never a verdict."""
    from autoresearch.safety import commands

    script = "{ " + jailed[-1] + "; } </dev/null; s=$?; times >&0; exit $s"
    with tempfile.NamedTemporaryFile(prefix="autoresearch-gitcpu-") as report:
        proc = subprocess.run(
            [*jailed[:-1], script],
            capture_output=True,
            text=text,
            stdin=report,
            env=env,
            timeout=timeout,
        )
        seconds = commands._reported_cpu(Path(report.name))
    if seconds is not None:
        commands.jailed_cpu.add(seconds)
    return proc


# -- a confined call never writes a branch -------------------------------------------------
# The box grants no ref (COMMON_WRITABLE): a confined call on a worktree that holds a branch
# runs with its HEAD detached at the branch's tip, and what the call moved HEAD to (a reset,
# a revert's commit) goes to the branch afterwards, outside the box, by `update-ref <ref>
# <new> <old>`, which runs no program and fails where the branch moved meanwhile. Then HEAD
# names the branch again: between calls the worktree holds it as git made it (the user's
# `git worktree list`, a checkout of it refused elsewhere). HEAD is written as git writes
# it, through HEAD.lock, by us: two processes a call otherwise.

_HEX = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


@dataclasses.dataclass(frozen=True)
class _Held:
    """A worktree's branch while a confined call runs on its detached HEAD: `admin` its
    administrative directory, `ref` the branch (refs/heads/...), `tip` its commit then."""

    admin: str
    ref: str
    tip: str


def _on_detached_head(
    cmd: list[str], calls: tuple[tuple[str, ...], ...], env: dict[str, str], **run
) -> subprocess.CompletedProcess:
    """The confined command line `cmd` of `calls`, run (`_run_in_box`) with the worktree's
    own objects' folder (`git_objects.Store`), whose objects then go to the repository: on the
    worktree's detached HEAD where a call updates refs itself (`_writes_refs`), the branch
    moved after it to where it left HEAD; else as it is, and a HEAD a program in the box
    changed is put back (two writes of HEAD a call saved: each a rename, a millisecond on
    ext4)."""
    store = _store(env)
    boxed_env = env | store.env() if store is not None else env
    if not any(_writes_refs(call) for call in calls):
        return _head_kept(cmd, env, run, store)
    held = _detach(env)
    try:
        done = _run_in_box(cmd, boxed_env, **run)
    except BaseException:
        _take_objects(store, env)
        if held is not None:
            _write_head(held.admin, f"ref: {held.ref}\n")  # a call cut short moves nothing
        raise
    _take_objects(store, env)
    if held is not None:
        _reattach(held, env)
    return done


def _writes_refs(call: tuple[str, ...]) -> bool:
    """Whether git itself updates HEAD, and so the branch it names, in `call`: a commit, a
    reset (to HEAD too), a revert, a cherry-pick, a checkout of a commit (not of paths)."""
    if not call or call[0] not in MOVES_HEAD:
        return False
    return call[0] != "checkout" or "--" not in call


def _head_kept(
    cmd: list[str], env: dict[str, str], run: dict, store: git_objects.Store | None
) -> subprocess.CompletedProcess:
    """`cmd` run as it is, on a worktree whose HEAD no call of it moves; HEAD put back where
    a program in the box changed it (to name main, say: the next call would refuse it)."""
    admin = env.get("GIT_DIR") if env.get("GIT_WORK_TREE") else None
    before = _text(_joined(admin, "HEAD")) if admin else None
    try:
        return _run_in_box(cmd, env | store.env() if store is not None else env, **run)
    finally:
        _take_objects(store, env)
        if admin and before and before.startswith("ref: "):
            if _text(_joined(admin, "HEAD")) != before:
                _write_head(admin, before + "\n")


def _store(env: dict[str, str]) -> git_objects.Store | None:
    """Where the confined call `env` binds to a linked worktree writes its objects; None
    for a call bound to no worktree or to a repository's own checkout."""
    admin, work = env.get("GIT_DIR"), env.get("GIT_WORK_TREE")
    if not admin or not work:
        return None
    return git_objects.Store.of(admin, _common_at(admin, None))


def _take_objects(store: git_objects.Store | None, env: dict[str, str]) -> None:
    """The objects a confined call wrote taken into the repository (`git_objects.take`); a
    pack once `git verify-pack`, which runs no program, checked every object in it."""
    if store is None:
        return

    def verified_pack(index: str) -> bool:
        check = subprocess.run(
            argv(env["GIT_WORK_TREE"], "verify-pack", index),
            capture_output=True,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        return check.returncode == 0

    git_objects.take(store, verified_pack)


def _detach(env: dict[str, str]) -> _Held | None:
    """HEAD of the worktree `env` is bound to, detached at its branch's tip; None where it
    holds no branch (a lane's, the baseline's) or the call is bound to no worktree."""
    admin, work = env.get("GIT_DIR"), env.get("GIT_WORK_TREE")
    if not admin or not work:
        return None
    text = _text(_joined(admin, "HEAD"))
    if text is None or not text.startswith("ref: "):
        return None
    ref = text[len("ref: ") :].strip()
    tip = _tip(_common_at(admin, None), ref)
    if tip is None:
        raise GitError(
            f"{work}: its branch {ref} names no commit (its ref file is missing or is no "
            "commit id); refusing to run git there. Put back the commit it held, then rerun"
        )
    _write_head(admin, tip + "\n")
    return _Held(admin, ref, tip)


def _reattach(held: _Held, env: dict[str, str]) -> None:
    """The branch moved to where the call left HEAD, then HEAD named the branch again.
    GitError, the branch left alone, where it no longer is at the tip the call started
    from."""
    now = _text(_joined(held.admin, "HEAD"))
    failed = None
    if now is not None and now != held.tip and _HEX.fullmatch(now):
        message = _last_reflog_message(held.admin, now) or "autoresearch: moved in the box"
        update = ("update-ref", "-m", message, held.ref, now, held.tip)
        done = subprocess.run(
            argv(env["GIT_WORK_TREE"], *update),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        if done.returncode != 0:
            failed = GitError(
                f"{held.ref} moved while the harness's git ran in {env['GIT_WORK_TREE']} (it "
                f"was at {held.tip[:12]}); left where it is, {now[:12]} not applied: "
                f"{done.stderr.strip()}"
            )
    _write_head(held.admin, f"ref: {held.ref}\n")
    if failed is not None:
        raise failed


def _tip(common: str, ref: str) -> str | None:
    """The commit id `ref` names in the common directory `common`: its loose file (never
    followed as a link), else its line in packed-refs; None when neither names one."""
    try:
        text = _read(_joined(common, ref), flags=os.O_NOFOLLOW).decode().strip()
    except (OSError, UnicodeError):
        text = None
    if text is not None:
        return text if _HEX.fullmatch(text) else None
    try:
        packed = _read(_joined(common, "packed-refs")).decode()
    except (OSError, UnicodeError):
        return None
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref and _HEX.fullmatch(sha):
            return sha
    return None


def _write_head(admin: str, text: str) -> None:
    """The worktree's HEAD replaced by `text` as git replaces it: written whole to HEAD.lock,
    which no other process may hold meanwhile, then renamed over HEAD."""
    lock = _joined(admin, "HEAD.lock")
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except FileExistsError:
        raise GitError(
            f"{lock} exists: a git is working on this worktree, or one was killed; remove "
            "it once none is, then rerun"
        ) from None
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(lock, _joined(admin, "HEAD"))


def _last_reflog_message(admin: str, sha: str) -> str | None:
    """What git said of its last move of the worktree's HEAD (`reset: moving to ...`), where
    that move went to `sha`: the branch's reflog says the same."""
    try:
        fd = os.open(_joined(admin, "logs/HEAD"), _READ)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        tail = os.pread(fd, 4096, max(0, size - 4096)).decode("utf-8", "replace")
    finally:
        os.close(fd)
    last = tail.rstrip("\n").rpartition("\n")[2]
    head, _, message = last.partition("\t")
    words = head.split()
    return message if len(words) > 1 and words[1] == sha and message else None


def is_repo(path: Path) -> bool:
    """Whether `path` is inside some work tree (the user may name any folder of theirs)."""
    if not path.is_dir():
        return False
    proc = _run(path, ("rev-parse", "--is-inside-work-tree"), environment(None), check=False)
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def toplevel(path: Path) -> Path:
    return Path(_run(path, ("rev-parse", "--show-toplevel"), environment(None)).stdout.strip())


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


def is_dirty(repo: Path) -> bool:
    return bool(git(repo, "status", "--porcelain"))


def branch_exists(repo: Path, branch: str) -> bool:
    return bool(git(repo, "branch", "--list", branch))


def current_branch(repo: Path) -> str:
    """The branch checked out in `repo` ("HEAD" when detached). For a worktree we made, read
    from its recorded administrative directory's HEAD file, as git reads it: a stage asks
    this of a branch that never changes under it, and a git process to say so cost one a
    stage."""
    record = _recorded_admin(Path(repo)) if record_of(Path(repo)).is_file() else None
    admin = record[0] if record is not None else None
    if admin is not None and worktree_admin(Path(repo)) == admin:
        try:
            ref = (admin / "HEAD").read_text().strip()
        except OSError:
            ref = ""
        if ref.startswith("ref: refs/heads/"):
            return ref[len("ref: refs/heads/") :]
        if re.fullmatch(r"[0-9a-f]{40}", ref):
            return "HEAD"
    return git(repo, "rev-parse", "--abbrev-ref", "HEAD")


def has_branch(repo: Path, branch: str) -> bool:
    """Whether `repo` is a repository of its own with the branch `branch` (one git call
    where `is_repo` and `branch_exists` took two; False for a folder that is no repository,
    where `branch_exists` raises)."""
    if not Path(repo).is_dir():
        return False
    ref = f"refs/heads/{branch}"
    proc = _run(
        repo, ("rev-parse", "--verify", "--quiet", ref), environment(Path(repo)), check=False
    )
    return proc.returncode == 0


def snapshot(repo: Path) -> dict[str, str]:
    """What the user sees: branch, HEAD, index and working tree state."""
    return {
        "branch": current_branch(repo),
        "head": head(repo),
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "index": git(repo, "ls-files", "--stage"),
        # Plumbing: porcelain `git diff` rewrites the index even with optional locks off.
        "diff": git(repo, "diff-index", "-p", "HEAD", "--"),
    }


def common_dir(repo: Path) -> Path:
    common = Path(git(repo, "rev-parse", "--git-common-dir"))
    return (common if common.is_absolute() else Path(repo) / common).resolve()


def repo_lock(repo: Path) -> AbstractContextManager[None]:
    """Serialise ref and worktree changes on one repository (parallel sessions and tracks).

    Not re-entrant: flock excludes a second open of the file even in the same process.
    """
    return files.locked(common_dir(repo) / "autoresearch.lock")


# -- worktrees ---------------------------------------------------------------------------


def record_of(worktree: Path) -> Path:
    """Where the git directories of the worktree at `worktree` are recorded: beside it, in
    its parent folder, which no command in the jail and no agent tool can write."""
    worktree = Path(worktree).absolute()
    return worktree.parent / f".{worktree.name}.git-dirs.json"


def _record(worktree: Path, admin: Path) -> None:
    common = (admin / (admin / "commondir").read_text().strip()).resolve()
    data = {"worktree": str(Path(worktree).absolute()), "admin": str(admin), "common": str(common)}
    # The branch the worktree holds ("": none, detached), while it is one of ours: its HEAD
    # lies in a folder the box may write, and must never come to name another ref.
    symbolic = _symbolic_head(admin)
    if symbolic is None or symbolic.startswith(OWNED_REFS + "/"):
        data["head"] = symbolic or ""
    path = record_of(worktree)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def _recorded_admin(worktree: Path) -> tuple[Path, str | None] | None:
    """The administrative directory recorded when the worktree was made, and the ref its
    HEAD named then ("": detached; None: not recorded, a record of an older version); None
    when there is no record (a worktree made by an older version, or by someone else)."""
    try:
        data = json.loads(_read(record_of(worktree)))
        admin, common = Path(data["admin"]), Path(data["common"])
        head = data.get("head")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    # The record was written by us, but check its shape anyway: <common>/worktrees/<id>.
    if admin.parent != common / "worktrees":
        return None
    return admin, head if isinstance(head, str) else None


# Every check before a call reads a handful of small files afresh (a program run in the box
# may have changed any of them since the last call): with os.open and os.read, not Path's
# text layer, and names resolved by the kernel, not a walk of lstat calls (bench_bound.py).
_READ = os.O_RDONLY | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY


def _read(name: str | Path, dir_fd: int | None = None, *, flags: int = 0) -> bytes:
    """The whole of a small file, `name` relative to `dir_fd` when given; OSError as
    Path.read_bytes raises it."""
    fd = os.open(name, _READ | flags, dir_fd=dir_fd)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _text(name: str, dir_fd: int | None = None) -> str | None:
    """A small file's text, stripped; None when it cannot be read (as `_symbolic_head`)."""
    try:
        return _read(name, dir_fd).decode().strip()
    except (OSError, UnicodeError):
        return None


def _resolved(fd: int, path: str) -> str:
    """The path, links resolved, of the folder open at `fd` (opened from `path`): the
    kernel's name for it, one call; `os.path.realpath` of `path` where /proc has none (not
    mounted, or the folder removed since)."""
    try:
        name = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
    if not name.startswith("/") or name.endswith(" (deleted)"):
        return os.path.realpath(path)
    return name


def _symbolic_head(admin: Path) -> str | None:
    """The ref the HEAD of `admin` names (refs/heads/...), None when it names a commit."""
    try:
        text = (admin / "HEAD").read_text().strip()
    except (OSError, UnicodeError):
        return None
    return text[len("ref: ") :].strip() if text.startswith("ref: ") else None


def _check_head(worktree: Path, admin: str, recorded: str | None, admin_fd: int) -> None:
    """ForgedGitLink when the worktree's HEAD names another ref than the one it held when
    it was made (`recorded`; None: any branch of ours). A program git ran in the box could
    write HEAD, to make the harness's next commit or reset, run outside it, move the
    user's branch. `admin`: the administrative directory, links resolved, open at
    `admin_fd` (its HEAD is read there)."""
    text = _text("HEAD", admin_fd)
    symbolic = text[len("ref: ") :].strip() if text and text.startswith("ref: ") else None
    if symbolic is None:
        if recorded:
            # Detached where the worktree holds a branch: left so by a confined call that
            # never ended (the harness killed in it). The branch, moved only outside the
            # box, is where the harness left it: HEAD names it again. Not while a HEAD.lock
            # is there (a git killed with it, which clear_stale_lock removes next): no git
            # moves HEAD without taking it, so nothing is lost meanwhile.
            with contextlib.suppress(GitError):
                _write_head(admin, f"ref: {recorded}\n")
        return  # a commit id: what the harness does there moves no ref
    if recorded is None and not symbolic.startswith(OWNED_REFS + "/"):
        held = f"a branch under {OWNED_REFS}/, the only ones the harness's git may move"
    elif recorded is not None and symbolic != recorded:
        held = recorded or "a commit, no branch"
        held += " as when it was made"
    else:
        # The branch itself lies in a folder the box may write: a `ref:` line in its file,
        # or a link git reads as one, would pass the harness's next commit on to the ref
        # it names (the user's main).
        loose = _joined(os.path.dirname(os.path.dirname(admin)), symbolic)
        try:
            # O_NOFOLLOW: a link is refused at the open (ELOOP), one call for both checks.
            forged = _read(loose, flags=os.O_NOFOLLOW).startswith(b"ref:")
        except OSError as error:
            # ELOOP is also a loop further up the path: only a link at the end is forged.
            # Otherwise packed, or not made yet: what git writes is a plain ref.
            forged = error.errno == errno.ELOOP and os.path.islink(loose)
        if not forged:
            return
        raise ForgedGitLink(
            f"{worktree} is not a live git worktree any more: its branch, {loose}, is a "
            "symbolic ref now (something changed it); refusing to run git there. Put back "
            "the commit id it held, then rerun"
        )
    raise ForgedGitLink(
        f"{worktree} is not a live git worktree any more: its HEAD, {Path(admin) / 'HEAD'}, "
        f"names {symbolic}, not {held} (something changed it); refusing to run git there. Put "
        "back what it named, then rerun"
    )


# Pure functions of the strings a check read (never of the disk), kept per process: Path's
# parsing costs more than the reads themselves.
@functools.lru_cache(maxsize=256)
def _joined(folder: str, name: str) -> str:
    """str(Path(folder) / name)."""
    return str(Path(folder) / name)


@functools.lru_cache(maxsize=256)
def _record_path(worktree: str) -> str:
    """str(record_of(worktree)) for an absolute `worktree`."""
    return str(record_of(Path(worktree)))


@functools.lru_cache(maxsize=256)
def _record_shape(admin: str, common: str) -> str | None:
    """The recorded `admin` as Path writes it, where it lies at <common>/worktrees/<id>;
    None for another shape (`_recorded_admin`'s check)."""
    path = Path(admin)
    return str(path) if path.parent == Path(common) / "worktrees" else None


def _has_record(worktree: Path | str) -> bool:
    """`record_of(worktree).is_file()`, asked before every call in a folder."""
    name = os.fspath(worktree)
    return os.path.isfile(_record_path(name) if os.path.isabs(name) else record_of(Path(name)))


def _recorded_in(worktree: str) -> tuple[str, str | None] | None:
    """`_recorded_admin` on strings: the record read afresh, parsed on every call."""
    path = _record_path(worktree) if os.path.isabs(worktree) else str(record_of(Path(worktree)))
    try:
        data = json.loads(_read(path))
        admin, common = data["admin"], data["common"]
        head = data.get("head")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not isinstance(admin, str) or not isinstance(common, str):
        return None  # what Path() would refuse
    shaped = _record_shape(admin, common)
    if shaped is None:
        return None
    return shaped, head if isinstance(head, str) else None


def worktree_admin(worktree: Path) -> Path | None:
    """The administrative directory of a live linked worktree at `worktree`, else None.

    Live means: `worktree/.git` is a regular file naming a directory whose `gitdir` file
    names `worktree/.git` back. A missing or foreign `.git` gives None. Where the worktree's
    git directories were recorded (every worktree made by autoresearch), the `.git` file must
    name the recorded one while both exist: ForgedGitLink otherwise.
    """
    return _checked(worktree).admin


@dataclasses.dataclass(frozen=True)
class _Checked:
    """What `worktree_admin` found, for the call it is checked for: the administrative
    directory (None: not a live worktree), the worktree's path with its links resolved
    (GIT_WORK_TREE), and whether the marker of ours was there (when asked)."""

    admin: Path | None
    work: str | None = None
    ours: bool = False


def _checked(worktree: Path, *, ours: bool = False) -> _Checked:
    """`worktree_admin`'s checks, each file read once, from the folders as opened: the
    worktree and its administrative directory are opened once, and what is checked inside
    them is read relative to the open folders (the same files the names led to)."""
    name = os.fspath(worktree)
    try:
        work_fd = os.open(name, _FOLDER)
    except (OSError, ValueError):
        work_fd = None
    admin_fd = None
    try:
        work = _resolved(work_fd, name) if work_fd is not None else None
        linked = (
            _linked_admin(name, work, work_fd) if work is not None and work_fd is not None else None
        )
        admin, admin_fd = (linked[0], linked[1]) if linked is not None else (None, None)
        record = _recorded_in(name)
        if record is not None and linked is not None and admin != record[0]:
            # Resolved the long way before any verdict: where mounts overlap, the kernel's
            # name for a folder may be another than realpath's, which the record holds.
            admin = os.path.realpath(linked[2])
        if record is not None and admin != record[0]:
            recorded = Path(record[0])
            if not Path(worktree).is_dir() or not recorded.is_dir():
                return _Checked(None)  # the worktree or its repository is gone: stale, not forged
            raise ForgedGitLink(
                f"{worktree} is not a live git worktree any more: its .git file is missing or "
                f"no longer points at the git directory recorded for it, {recorded} (something "
                "in the worktree changed it); refusing to run git there. Put back the line "
                f"'gitdir: {recorded}' in {Path(worktree) / '.git'}, then rerun"
            )
        if admin is None or admin_fd is None:
            return _Checked(None)
        if record is None and not _plausible(Path(worktree), Path(admin)):
            return _Checked(None)
        common = os.path.dirname(os.path.dirname(admin))
        if record is not None and _common_at(admin, admin_fd) != common:
            # The administrative directory is writable in the box: a program git ran there
            # could point its `commondir` at a git directory of its making (a config naming
            # filters, folders the next box would make writable).
            raise ForgedGitLink(
                f"{worktree} is not a live git worktree any more: {Path(admin) / 'commondir'} "
                f"no longer names {common}, its repository's git directory (something changed "
                "it); refusing to run git there. Put back the line '../..' in it, then rerun"
            )
        if record is not None:
            _check_head(worktree, admin, record[1], admin_fd)
            _check_no_worktree_config(worktree, admin, admin_fd)
        found = Path(admin)
        return _Checked(found, work, ours and _is_ours(found, admin_fd))
    finally:
        for fd in (admin_fd, work_fd):
            if fd is not None:
                os.close(fd)


def _common_at(admin: str, admin_fd: int | None) -> str:
    """`_common_of(admin)` as a string, its `commondir` read in the open folder (None: by
    name): git's own `../..` needs no resolving, `admin` having its links resolved already."""
    text = (
        _text("commondir", admin_fd) if admin_fd is not None else _text(_joined(admin, "commondir"))
    )
    if text is None:
        return admin
    if text == "../..":
        return os.path.dirname(os.path.dirname(admin))
    return os.path.realpath(os.path.join(admin, text))


def _check_no_worktree_config(worktree: Path, admin: str, admin_fd: int) -> None:
    """ForgedGitLink when the worktree's own git directory holds a `config.worktree`. The
    harness never writes one, and the box lets a program git runs write that folder: where
    the repository turns `extensions.worktreeConfig` on (`git sparse-checkout` does), every
    later git call there would read it, an `include.path` or a filter of its choosing."""
    try:
        # One lstat: a link (to anything) or a regular file. Not a link, lstat is stat.
        mode = os.stat("config.worktree", dir_fd=admin_fd, follow_symlinks=False).st_mode
    except OSError:
        return
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        raise ForgedGitLink(
            f"{worktree} is not a live git worktree any more: {Path(admin) / 'config.worktree'} "
            "appeared (the harness never writes one; something in the box did); refusing to "
            "run git there. Remove it, then rerun"
        )


def _plausible(worktree: Path, admin: Path) -> bool:
    """For a worktree with no record: its administrative directory lies where git makes one,
    `<common>/worktrees/<id>` outside the worktree, with `commondir` naming that common."""
    worktree = Path(worktree).resolve()
    if admin == worktree or worktree in admin.parents or admin.parent.name != "worktrees":
        return False
    try:
        common = (admin / (admin / "commondir").read_text().strip()).resolve()
    except (OSError, UnicodeError):
        return False
    return common == admin.parent.parent and (common / "objects").is_dir()


def _linked_admin(name: str, work: str, work_fd: int) -> tuple[str, int, str] | None:
    """What the `.git` file of the worktree `name` (open at `work_fd`, `work` its path,
    links resolved) names, when that names it back: the administrative directory's path,
    links resolved, the directory open (the caller closes it), and its path as spelled."""
    try:
        # O_NOFOLLOW: a link is refused at the open; O_NONBLOCK: a FIFO never hangs the open
        # (it is no regular file: refused below, before any read).
        fd = os.open(".git", _READ | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=work_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        line = b"".join(chunks).decode().strip()
    except (OSError, UnicodeError):
        return None
    finally:
        os.close(fd)
    if not line.startswith("gitdir: "):
        return None
    named = line[len("gitdir: ") :]
    try:
        admin_fd = os.open(named, _FOLDER, dir_fd=work_fd)  # a relative name: from the worktree
    except (OSError, ValueError):
        return None  # no folder there: no `gitdir` in it either
    try:
        spelled = os.path.join(name, named)
        admin = _resolved(admin_fd, spelled)
        back = _text("gitdir", admin_fd)
        dot_git = os.path.join(work, ".git")  # `.git` is no link: resolved, it is this
        if back is None or (back != dot_git and not _names_it(back, dot_git, name)):
            os.close(admin_fd)
            return None
    except BaseException:
        os.close(admin_fd)
        raise
    return admin, admin_fd, spelled


def _names_it(back: str, dot_git: str, name: str) -> bool:
    """Whether `back`, resolved, is the worktree's `.git`: `dot_git`, or as `realpath`
    resolves it (where the kernel's name for the folder is another)."""
    real = os.path.realpath(back)
    return real == dot_git or real == os.path.realpath(os.path.join(name, ".git"))


def _is_ours(admin: Path, admin_fd: int | None = None) -> bool:
    try:
        marked = stat.S_ISREG(
            os.stat(MARKER if admin_fd is not None else admin / MARKER, dir_fd=admin_fd).st_mode
        )
    except OSError:
        marked = False
    if marked:
        return True
    # Worktrees made before the marker existed: they hold a branch under autoresearch/.
    try:
        return (admin / "HEAD").read_text().startswith("ref: refs/heads/autoresearch/")
    except OSError:
        return False


def _mark_ours(admin: Path, worktree: Path) -> None:
    (admin / MARKER).write_text("made by autoresearch; it may reset, clean and remove it\n")
    if not record_of(worktree).is_file():
        _record(worktree, admin)


def is_our_worktree(worktree: Path) -> bool:
    admin = worktree_admin(worktree)
    return admin is not None and _is_ours(admin)


def _bound(worktree: Path) -> dict[str, str]:
    """The environment for a git call that changes `worktree`; refuses any other path."""
    checked = _checked(worktree, ours=True)
    if checked.admin is None:
        raise GitError(
            f"{worktree} is not a live git worktree (its .git file is missing or broken); "
            "refusing to run git there, it would act on an enclosing repository"
        )
    if not checked.ours:
        raise GitError(f"{worktree} is a worktree autoresearch did not create; leaving it alone")
    return _environment(checked.work, checked.admin)


def worktree_git(worktree: Path, *args: str, check: bool = True) -> str:
    """Run git in our live worktree `worktree`, bound to it by GIT_DIR/GIT_WORK_TREE;
    GitError for any other path. For changes to a worktree outside the helpers here."""
    return _run(worktree, args, _bound(worktree), check=check).stdout.strip()


def worktree_proc(worktree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Like `worktree_git`, but the whole process back, output untouched (a patch needs its
    last newline) and a failure left to the caller."""
    return _run(worktree, args, _bound(worktree), check=False)


def _registration(repo: Path, worktree: Path) -> Path | None:
    """The administrative directory registering `worktree`, even when the path is gone."""
    wanted = (Path(worktree) / ".git").resolve()
    admin_root = common_dir(repo) / "worktrees"
    if not admin_root.is_dir():
        return None
    for admin in sorted(admin_root.iterdir()):
        try:
            if Path((admin / "gitdir").read_text().strip()).resolve() == wanted:
                return admin
        except (OSError, UnicodeError):
            continue
    return None


def remove_worktree(repo: Path, worktree: Path) -> bool:
    """Remove our worktree at `worktree` (files and registration); False if none is there.

    Only this path is touched: other worktrees of the repository, including ones whose
    directory is missing (an unplugged drive), are never pruned.
    """
    admin = _registration(repo, worktree)
    if admin is None:
        return False
    if not _is_ours(admin):
        raise GitError(f"{worktree} is a worktree autoresearch did not create; leaving it alone")
    if Path(worktree).exists() and worktree_admin(worktree) is None:
        raise GitError(
            f"{worktree} exists but its .git file is missing or broken; move the directory "
            "away and rerun"
        )
    git(repo, "worktree", "remove", "--force", "--force", str(worktree))
    record_of(worktree).unlink(missing_ok=True)
    return True


def free_branch_name(repo: Path, wanted: str) -> str:
    """`wanted`, or `wanted-2`, `wanted-3`... whichever is not taken yet.

    The answer is only good while `repo_lock` is held: use `open_worktree`, which chooses
    and creates the branch in one step.
    """
    if not branch_exists(repo, wanted):
        return wanted
    n = 2
    while branch_exists(repo, f"{wanted}-{n}"):
        n += 1
    return f"{wanted}-{n}"


def _reuse(repo: Path, worktree: Path) -> str | None:
    """The branch of our live worktree at `worktree` (a rerun), None if there is none."""
    admin = worktree_admin(worktree)
    if admin is None:
        if (Path(worktree) / ".git").exists():
            raise StaleWorktree(f"{worktree}/.git does not belong to a live worktree")
        return None
    if common_dir(worktree) != common_dir(repo):
        raise GitError(f"{worktree} is a worktree of another repository than {repo}")
    return current_branch(worktree)


def _create(repo: Path, worktree: Path, branch: str | None, start: str) -> None:
    stale = _registration(repo, worktree)
    if stale is not None:
        # Our earlier worktree at this path whose directory is gone: drop that one only.
        remove_worktree(repo, worktree)
    if Path(worktree).exists() and any(Path(worktree).iterdir()):
        raise GitError(f"{worktree} exists, is not empty and is not a git worktree")
    Path(worktree).parent.mkdir(parents=True, exist_ok=True)
    # Made without its files: `worktree add` writes the registration and the branch, and
    # runs no program. The checkout, which runs whatever filter the repository's config
    # names for a file, is a reset made once the worktree is ours, confined like any other
    # (it would otherwise run with every folder of the user's `.git` writable).
    add = ("worktree", "add", "--no-checkout")
    if branch is None:
        git(repo, *add, "--detach", str(worktree), start)
    elif branch_exists(repo, branch):
        git(repo, *add, str(worktree), branch)
    else:
        git(repo, *add, "-b", branch, str(worktree), start)
    record_of(worktree).unlink(missing_ok=True)  # a record of an earlier worktree at this path
    admin = worktree_admin(worktree)
    if admin is None:  # git said yes but left no worktree: never act on a guess
        raise GitError(f"git worktree add did not create a live worktree at {worktree}")
    _mark_ours(admin, worktree)
    worktree_git(worktree, "reset", "--hard", "-q")


def open_worktree(repo: Path, worktree: Path, wanted: str, start: str) -> str:
    """Our worktree at `worktree` on a fresh branch named `wanted` (or `wanted-N` when that
    is taken), made at `start`; a rerun gets the existing one back. Returns the branch.

    Choosing the name and creating the branch happen under one hold of the repository
    lock, so two sessions can never end up on the same branch.
    """
    with repo_lock(repo):
        current = _reuse(repo, worktree)
        if current is not None:
            _mark_ours(worktree_admin(worktree), worktree)  # type: ignore[arg-type]
            return current
        branch = _registered_branch(repo, worktree) or free_branch_name(repo, wanted)
        _create(repo, worktree, branch, start)
        return branch


def _registered_branch(repo: Path, worktree: Path) -> str | None:
    """The branch our vanished worktree at this path had: a rerun continues on it."""
    admin = _registration(repo, worktree)
    if admin is None or not _is_ours(admin):
        return None
    try:
        ref = (admin / "HEAD").read_text().strip()
    except OSError:
        return None
    prefix = "ref: refs/heads/"
    if ref.startswith(prefix) and branch_exists(repo, ref[len(prefix) :]):
        return ref[len(prefix) :]
    return None


def add_detached_worktree(repo: Path, worktree: Path, start: str) -> None:
    """A worktree at `start` with no branch (to run something at a fixed commit)."""
    with repo_lock(repo):
        if _reuse(repo, worktree) is None:
            _create(repo, worktree, None, start)


# -- stale locks ---------------------------------------------------------------------------


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root + os.sep) for root in roots)


def _git_process_uses(roots: list[Path]) -> bool:
    """Whether a live git process works in one of `roots` (cwd, open file or GIT_DIR).

    Without /proc nothing can be ruled out, so the answer is yes.
    """
    proc = Path("/proc")
    if not (proc / "self").is_dir():
        return True
    names = [str(Path(r).resolve()) for r in roots]
    for entry in proc.iterdir():
        if not entry.name.isdigit() or entry.name == str(os.getpid()):
            continue
        try:
            if not (entry / "comm").read_text().startswith("git"):
                continue
            if _inside(os.readlink(entry / "cwd"), names):
                return True
            for fd in (entry / "fd").iterdir():
                if _inside(os.readlink(fd), names):
                    return True
            for item in (entry / "environ").read_bytes().split(b"\0"):
                key, _, value = item.decode("utf-8", "replace").partition("=")
                if key in ("GIT_DIR", "GIT_WORK_TREE") and _inside(value, names):
                    return True
        except OSError:
            continue  # the process ended meanwhile, or belongs to someone we cannot see
    return False


def clear_stale_lock(worktree: Path) -> list[Path]:
    """Remove lock files a killed git left in our worktree; returns what was removed.

    A lock is stale when no live git process works in the worktree: after `kill -9` in
    the middle of a commit or reset, `index.lock` stays and every later git call there
    fails. A lock some running git holds is left alone. Call before resetting.
    """
    admin = worktree_admin(worktree)
    if admin is None or not _is_ours(admin):
        return []
    locks = [admin / name for name in WORKTREE_LOCKS]
    try:
        ref = (admin / "HEAD").read_text().strip()
        common = (admin / (admin / "commondir").read_text().strip()).resolve()
    except OSError:
        ref = ""
    if ref.startswith("ref: refs/heads/"):
        # The branch is checked out here only, so its ref lock is this worktree's too.
        locks.append(common / (ref[len("ref: ") :] + ".lock"))
    present = {}
    for lock in locks:
        try:
            present[lock] = os.lstat(lock).st_ino
        except FileNotFoundError:
            continue
    if not present or _git_process_uses([Path(worktree), admin]):
        return []
    removed = []
    for lock, inode in present.items():
        try:
            # The same file we judged stale, not one a git started since has made.
            if os.lstat(lock).st_ino == inode:
                os.unlink(lock)
                removed.append(lock)
        except FileNotFoundError:
            continue
    return removed


# -- changing a worktree -------------------------------------------------------------------


def reset_to(worktree: Path, commit: str, *, ignored: bool = True) -> TreeState | None:
    """Return the worktree to `commit` exactly: no stacked commits, no stray file, no
    git-ignored file and no nested repository (`clean -ffdx`). A nested repository a test
    made would otherwise stay, and a later `add -A` would commit it as a gitlink.

    `ignored` is accepted for the callers that still name it; every reset is a full one.
    A lock left by a killed git is removed first, so a rerun after `kill -9` can start.
    Returns what the one `git status` read when the worktree was at `commit` already (a
    caller that must know the worktree's exact tree next reads no second one); None after
    a reset, which git's own status did not check.
    """
    del ignored  # every attempt ends on the commit alone, whatever the caller asked
    clear_stale_lock(worktree)
    _empty_submodules(worktree)  # git status, blind to submodules, would not see one filled
    remove_nested_git(worktree)  # neither status nor clean sees one in a tracked folder
    state = _already_at(worktree, commit)
    if state is not None:
        return state  # one git call instead of two: each stage starts where the last one ended
    worktree_batch_git(worktree, ("reset", "--hard", commit), ("clean", "-ffdxq"))
    _empty_submodules(worktree)  # the commit's own submodules, when it has other ones
    return None


def clean(worktree: Path) -> None:
    """Remove every untracked and ignored file (`clean -ffdx`) and every `.git` below the
    worktree's own (remove_nested_git): what is left is what git tracks."""
    worktree_git(worktree, "clean", "-ffdxq")
    remove_nested_git(worktree)


def remove_nested_git(worktree: Path) -> list[str]:
    """Remove each `.git` (folder, file or link) below the worktree's own, the paths removed.

    git never touches an entry named `.git`: `clean -ffdx` removes an untracked nested
    repository, but one made in a folder that holds tracked files stays, and so does any
    `.git` folder there, valid repository or not, and `status --ignored` shows neither. A
    run of the target's code could keep state in one from run to run of a measurement (a
    result cached in `src/.git/`), or leave a repository whose configuration a later git
    would read. One walk of the worktree (after a clean it holds only tracked files)."""
    root = Path(worktree)
    removed = []
    for folder, dirs, names in os.walk(root):
        if folder == str(root):
            dirs[:] = [d for d in dirs if d != ".git"]
            continue
        if ".git" not in dirs and ".git" not in names:
            continue
        path = Path(folder) / ".git"
        if ".git" in dirs:
            dirs.remove(".git")
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(str(path.relative_to(root)))
    return removed


def _empty_submodules(worktree: Path) -> None:
    """Submodules as the base has them in a worktree: empty folders. `clean` leaves a
    gitlink's folder alone (it is tracked), so a repository a test run put there would stay,
    and `add -A` would stage the submodule at its commit. Only where `.gitmodules` says
    there are submodules (a gitlink without one is refused at commit all the same)."""
    if not (Path(worktree) / ".gitmodules").is_file():
        return
    listed = worktree_proc(worktree, "ls-files", "--stage", "-z").stdout
    for entry in listed.split("\0"):
        meta, _, path = entry.partition("\t")
        if not path or not meta.startswith(GITLINK):
            continue
        folder = Path(worktree) / path
        if folder.is_symlink() or not folder.is_dir():
            continue  # nothing to empty: git shows a missing one as deleted, never runs it
        for child in folder.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()


@dataclasses.dataclass(frozen=True)
class TreeState:
    """What one `git status` of a worktree read: HEAD's commit and every path that differs
    from it (`status --porcelain=v2` records: "1 XY ..." a change, "u ..." a conflict,
    "? path" untracked, "! path" ignored). Blind to submodules, as every harness status is,
    and to files whose index entry says not to look (`IndexListing.hidden`)."""

    head: str
    entries: tuple[str, ...]

    @property
    def clean(self) -> bool:
        """Nothing differs from HEAD: no change staged or not, no untracked or ignored file."""
        return not self.entries

    @property
    def staged_only(self) -> bool:
        """Every difference is staged, none between the index and the files, and nothing
        untracked or ignored: the worktree holds exactly what the index does."""
        return all(e.startswith("1 ") and e[3:4] == "." for e in self.entries)


STATUS_ARGS = (
    "status",
    "--porcelain=v2",
    "-z",
    "--branch",
    "--no-renames",
    "--untracked-files=all",
    "--ignored=matching",
)


def tree_state(worktree: Path) -> TreeState | None:
    """The worktree's state in one `git status` (every untracked and ignored file listed);
    None when git cannot tell."""
    proc = worktree_proc(worktree, *STATUS_ARGS)
    if proc.returncode != 0:
        return None
    head, entries = "", []
    for record in proc.stdout.split("\0"):
        if record.startswith("# branch.oid "):
            head = record.split()[2]
        elif record and not record.startswith("# "):
            entries.append(record)
    if not re.fullmatch(r"[0-9a-f]{40}", head):
        return None  # no commit yet ("(initial)")
    return TreeState(head, tuple(entries))


def _already_at(worktree: Path, commit: str) -> TreeState | None:
    """The state read, when HEAD is `commit` (a full sha, or HEAD itself) and nothing
    differs from it: no change staged or not, no untracked or ignored file, no nested
    repository; else None."""
    if commit != "HEAD" and not re.fullmatch(r"[0-9a-f]{40}", commit):
        return None
    state = tree_state(worktree)
    if state is None or not state.clean or commit not in ("HEAD", state.head):
        return None
    return state


@dataclasses.dataclass(frozen=True)
class IndexListing:
    """What the index says beyond the paths' contents, from one `ls-files -s -v`: entries
    that tell git not to look at their file (assume-unchanged: a lowercase tag; skip-worktree:
    "S"), which `git status` would not show changed, and gitlinks, which no harness status
    or diff shows (they run with --ignore-submodules=all)."""

    hidden: bool
    gitlinks: bool


def index_listing(worktree: Path) -> IndexListing | None:
    listed = worktree_proc(worktree, "ls-files", "-s", "-v", "-z")
    if listed.returncode != 0:
        return None
    entries = [e for e in listed.stdout.split("\0") if e]
    return IndexListing(
        hidden=any(e[0].islower() or e[0] == "S" for e in entries),
        gitlinks=any(e[2:].startswith(GITLINK + " ") for e in entries),
    )


# A commit's tree never changes: asked once per process.
_TREES: dict[str, str] = {}
# Answers kept about fixed commits, at most: a long session's process keeps a flat size.
KEPT_ANSWERS = 4096


def _keep(cache: dict, key: object, value: object) -> None:
    if len(cache) >= KEPT_ANSWERS:
        cache.clear()  # asked again, never answered wrong
    cache[key] = value


# What a cache below holds is read once, with `get`: jobs are threads of one process, and
# another job's `_keep` may empty the cache between a check that a key is there and a read.
_NOT_KEPT = object()


def tree_of(worktree: Path, commit: str) -> str:
    """The id of the tree of `commit` (a full sha)."""
    tree = _TREES.get(commit)
    if tree is None:
        tree = git(worktree, "rev-parse", f"{commit}^{{tree}}")
        _keep(_TREES, commit, tree)
    return tree


def restore(worktree: Path) -> None:
    """Throw away uncommitted changes (a failed fix)."""
    reset_to(worktree, "HEAD")


class GitlinkRefused(GitError):
    """The index holds a gitlink (a nested repository as a submodule) that HEAD does not
    have, or has at another commit: nobody wrote it, it is never committed."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        self.reason = (
            f"{shown}: a nested repository (a gitlink) the base does not have, or has at "
            "another commit; never committed, change rejected"
        )
        super().__init__(self.reason)


def new_gitlinks(worktree: Path) -> list[str]:
    """Gitlinks of the index that HEAD lacks or has at another commit (read from the
    index and HEAD's tree only: nothing looks inside a nested repository)."""

    def gitlinks(text: str, sha_at: int) -> dict[str, str]:
        found = {}
        for entry in text.split("\0"):
            meta, _, path = entry.partition("\t")
            words = meta.split()
            if path and words and words[0] == GITLINK:
                found[path] = words[sha_at]
        return found

    staged = gitlinks(worktree_proc(worktree, "ls-files", "--stage", "-z").stdout, 1)
    if not staged:
        return []
    before = gitlinks(worktree_proc(worktree, "ls-tree", "-r", "-z", "HEAD").stdout, 2)
    return sorted(p for p, sha in staged.items() if before.get(p) != sha)


@dataclasses.dataclass(frozen=True)
class Staged:
    """One path the index changes against a commit, from `diff --cached --raw`: the blob
    ids before and after (ZERO for a side that has none)."""

    path: str
    old: str
    new: str


ZERO = "0" * 40


def staged_changes(worktree: Path, base: str = "HEAD") -> tuple[Staged, ...]:
    """What the index changes against `base`, read once with the blob ids of both sides:
    the names a commit, the restyle check and the tamper screen each asked for, and the
    ids that let the screen read every file in one `cat-file --batch` (`blobs`). Blind to
    gitlinks, as every harness diff is (`new_gitlinks` looks for them)."""
    args = staged_args(base)
    proc = worktree_proc(worktree, *args)
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed in {worktree}: {proc.stderr.strip()}")
    return parse_staged(proc.stdout)


def staged_args(base: str = "HEAD") -> tuple[str, ...]:
    return ("diff", "--cached", "--raw", "-z", "--no-renames", "--abbrev=40", base, "--")


def parse_staged(text: str) -> tuple[Staged, ...]:
    """`staged_changes` from the output of `staged_args` (the last call of a batch)."""
    words = text.split("\0")
    out = []
    # ":<old mode> <new mode> <old id> <new id> <status>" NUL "<path>" NUL, per path.
    for meta, path in zip(words[0::2], words[1::2], strict=False):
        parts = meta.lstrip(":").split()
        if len(parts) == 5 and path:
            out.append(Staged(path, parts[2], parts[3]))
    return tuple(out)


def blobs(worktree: Path, ids: list[str], max_bytes: int) -> dict[str, bytes | None]:
    """The contents of git blobs by id, all in one `cat-file --batch`: None for an id the
    repository lacks, b"" plus a size above `max_bytes` for one too large to read (its
    bytes are read past, never held)."""
    wanted = [i for i in dict.fromkeys(ids) if re.fullmatch(r"[0-9a-f]{40}", i) and i != ZERO]
    found: dict[str, bytes | None] = {}
    if not wanted:
        return found
    args = ("cat-file", "--batch")
    env = _bound(worktree)
    proc = subprocess.Popen(
        confined(argv(worktree, *args), args, env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    # Written from a thread: git answers each line as it reads it, and a full pipe of
    # answers must not wait on our writing of the questions.
    feed = threading.Thread(target=_feed, args=(proc.stdin, "".join(i + "\n" for i in wanted)))
    feed.start()
    try:
        for blob in wanted:
            header = proc.stdout.readline().decode("ascii", "replace").split()
            if len(header) != 3 or header[1] != "blob":
                found[blob] = None  # "<id> missing", or not a blob
                continue
            size = int(header[2])
            if size > max_bytes:
                left = size + 1
                while left:
                    left -= len(proc.stdout.read(min(left, 1 << 20)) or b"\0" * left)
                found[blob] = TOO_LARGE
                continue
            found[blob] = proc.stdout.read(size + 1)[:-1]
    finally:
        feed.join()
        proc.stdout.close()
        proc.wait()
    return found


# What `blobs` gives for a blob above its bound.
TOO_LARGE = b"\0too large"


def _feed(pipe, text: str) -> None:
    try:
        pipe.write(text.encode())
        pipe.close()
    except BrokenPipeError:
        pass


def commit_index(worktree: Path, message: str, *, changed: bool = False) -> str | None:
    """Commit what the index holds, exactly (a replay's own paths, no `add -A`); None when
    it holds no change. GitlinkRefused, with the index put back to HEAD, for a gitlink
    nobody wrote."""
    refused = new_gitlinks(worktree)
    if refused:
        worktree_git(worktree, "reset", "-q")
        raise GitlinkRefused(refused)
    # `changed`: the caller read the staged changes itself, and there were some.
    if not changed and worktree_proc(worktree, "diff", "--cached", "--quiet").returncode == 0:
        return None
    worktree_git(worktree, "commit", "-q", "--no-verify", "-m", message)
    return _committed(worktree)


def commit_like(worktree: Path, original: str, message: Callable[[str], str]) -> str | None:
    """Commit what the index holds (a replay's own paths, no `add -A`) as a copy of
    `original`: `message` of its message, its author's and committer's names, emails and
    dates, so the same change on the same parent gets the same id on every run (a review
    branch re-pushed needs no force). None when it holds no change; GitlinkRefused, with the
    index put back to HEAD, for a gitlink nobody wrote."""
    refused = new_gitlinks(worktree)
    if refused:
        worktree_git(worktree, "reset", "-q")
        raise GitlinkRefused(refused)
    if worktree_proc(worktree, "diff", "--cached", "--quiet").returncode == 0:
        return None
    fields = "%an%x00%ae%x00%ad%x00%cn%x00%ce%x00%cd%x00%B"
    read = worktree_proc(worktree, "log", "-1", "--date=raw", f"--format={fields}", original)
    if read.returncode != 0:
        raise GitError(f"git log {original} failed in {worktree}: {read.stderr.strip()}")
    *people, text = read.stdout.split("\0", 6)
    names = ("AUTHOR_NAME", "AUTHOR_EMAIL", "AUTHOR_DATE")
    names += ("COMMITTER_NAME", "COMMITTER_EMAIL", "COMMITTER_DATE")
    env = _bound(worktree) | {f"GIT_{n}": v for n, v in zip(names, people, strict=True)}
    # --cleanup=verbatim: the message as given (git would take a `#` line for a comment).
    said = message(text.rstrip("\n"))
    _run(worktree, ("commit", "-q", "--no-verify", "--cleanup=verbatim", "-m", said), env)
    return _committed(worktree)


def _committed(worktree: Path) -> str:
    """The commit HEAD names just after the harness's commit, read from the files the
    commit wrote (the worktree's HEAD, its branch's ref, checked as every call checks
    them): one git process a commit fewer. `git rev-parse` where they name none."""
    admin = worktree_admin(worktree)
    text = _text(_joined(str(admin), "HEAD")) if admin is not None else None
    if text is not None and text.startswith("ref: "):
        text = _tip(_common_at(str(admin), None), text[len("ref: ") :].strip())
    if text is not None and _HEX.fullmatch(text):
        return text
    return worktree_git(worktree, "rev-parse", "HEAD")


def commit_all(worktree: Path, message: str) -> str | None:
    """Commit every change in the worktree; None when there is nothing to commit."""
    worktree_git(worktree, "add", "-A")
    return commit_index(worktree, message)


def commit_empty(worktree: Path, message: str) -> str:
    """A commit that changes no file (a marker, such as an experiment's baseline); its id."""
    worktree_git(worktree, "commit", "-q", "--allow-empty", "--no-verify", "-m", message)
    return _committed(worktree)


def commit_patch(worktree: Path, start: str, patch: Path, message: str) -> str | None:
    """A commit of `patch` applied to `start`, built in a throwaway index: the worktree's
    files, its index and HEAD are untouched. None when the patch does not apply there."""
    with tempfile.TemporaryDirectory(prefix="autoresearch-index-") as tmp:
        env = _bound(worktree) | {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _run(worktree, ("read-tree", start), env)
        apply = ("apply", "--cached", "--binary", str(Path(patch).resolve()))
        applied = _run(worktree, apply, env, check=False)
        if applied.returncode != 0:
            return None
        tree = _run(worktree, ("write-tree",), env).stdout.strip()
        return _run(worktree, ("commit-tree", tree, "-p", start, "-m", message), env).stdout.strip()


def commits_between(worktree: Path, start: str, end: str = "HEAD") -> list[str]:
    """Commits in start..end, newest first."""
    out = git(worktree, "rev-list", f"{start}..{end}")
    return out.split() if out else []


def _fixed(*commits: str) -> bool:
    """Whether every name is a full commit id: what git answers of them never changes."""
    return all(re.fullmatch(r"[0-9a-f]{40}", c) for c in commits)


# Answers about fixed commits, asked once per process: (question, start, end) -> answer.
_BETWEEN: dict[tuple[str, str, str], object] = {}


def count_commits(worktree: Path, start: str, end: str = "HEAD") -> int:
    """How many commits start..end holds."""
    key = ("count", start, end)
    kept = _BETWEEN.get(key, _NOT_KEPT)
    if kept is not _NOT_KEPT:
        return kept  # type: ignore[return-value]
    count = int(git(worktree, "rev-list", "--count", f"{start}..{end}"))
    if _fixed(start, end):
        _keep(_BETWEEN, key, count)
    return count


def subject(worktree: Path, commit: str) -> str:
    return git(worktree, "log", "-1", "--format=%s", commit)


def changed_files(worktree: Path, start: str, end: str = "HEAD") -> list[str]:
    key = ("files", start, end)
    kept = _BETWEEN.get(key, _NOT_KEPT)
    if kept is not _NOT_KEPT:
        return list(kept)  # type: ignore[call-overload]
    if _fixed(start, end):
        # Two commits' trees, compared by git's plumbing as `git diff` would (renames as
        # their new name, no gitlink): no file of the worktree is read, so no jail is built.
        args = ("diff-tree", "-r", "--name-only", "-M", "--ignore-submodules=all", start, end)
        out = git(worktree, *args)
    else:
        out = git(worktree, "diff", "--name-only", start, end)
    files = sorted(out.splitlines()) if out else []
    if _fixed(start, end):
        _keep(_BETWEEN, key, tuple(files))
    return files


def apply_commit(worktree: Path, commit: str) -> bool:
    """Apply one commit's change to the worktree, uncommitted (a replay); False, and the
    worktree as it was, when it does not apply."""
    env = _bound(worktree)
    proc = _run(worktree, ("cherry-pick", "--no-commit", commit), env, check=False)
    if proc.returncode != 0:
        _run(worktree, ("cherry-pick", "--quit"), env, check=False)
        reset_to(worktree, "HEAD")
        return False
    return True


def revert(worktree: Path, commit: str) -> bool:
    """Revert one commit; False (and the revert abandoned) on a conflict."""
    env = _bound(worktree)
    proc = _run(worktree, ("revert", "--no-edit", commit), env, check=False)
    if proc.returncode != 0:
        _run(worktree, ("revert", "--abort"), env, check=False)
        return False
    return True


# -- the user's uncommitted changes ----------------------------------------------------------


def record_dirty_state(repo: Path, message: str) -> str | None:
    """Save the user's uncommitted work as a stash entry named `message`, touching nothing.

    The entry has git's own stash layout (HEAD, the index, and the untracked non-ignored
    files as a third parent), so `git stash apply --index` gives it all back. The user's
    files, index and index lock are left alone: every tree is built in a temporary index.
    Idempotent: the commits carry HEAD's date, so the same state always makes the same
    entry, and an entry already in the stash list (a setup killed and rerun) is returned
    rather than stored twice. None when there is nothing uncommitted.
    """
    repo = Path(repo)
    with repo_lock(repo):
        if not is_dirty(repo):
            return None
        base = head(repo)
        label = f"{current_branch(repo)}: {base[:10]} {subject(repo, base)}"
        env = environment(repo)
        date = git(repo, "log", "-1", "--format=%cI", base)
        for who in ("AUTHOR", "COMMITTER"):
            env |= {f"GIT_{who}_NAME": "autoresearch", f"GIT_{who}_EMAIL": "autoresearch@localhost"}
            env[f"GIT_{who}_DATE"] = date
        index_file = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-path", "index"))
        untracked = _run(repo, ("ls-files", "--others", "--exclude-standard", "-z"), env).stdout

        def commit(tree: str, text: str, *parents: str) -> str:
            args = ["commit-tree", tree, "-m", text]
            for parent in parents:
                args += ["-p", parent]
            return _run(repo, tuple(args), env).stdout.strip()

        with tempfile.TemporaryDirectory(prefix="autoresearch-stash-") as tmp:

            def tree(name: str, args: tuple[str, ...] = (), stdin: str | None = None) -> str:
                scratch = Path(tmp) / name
                if name != "untracked" and index_file.exists():
                    shutil.copyfile(index_file, scratch)
                scratch_env = env | {"GIT_INDEX_FILE": str(scratch)}
                if args:
                    _run(repo, args, scratch_env, stdin=stdin)
                return _run(repo, ("write-tree",), scratch_env).stdout.strip()

            parents = [base, commit(tree("index"), f"index on {label}", base)]
            if untracked:
                files = tree("untracked", ("update-index", "--add", "-z", "--stdin"), untracked)
                parents.append(commit(files, f"untracked files on {label}"))
            entry = commit(tree("work", ("add", "-u")), message, *parents)
        stored = git(repo, "log", "-g", "--format=%H", "refs/stash", "--", check=False)
        if entry not in stored.split():
            git(repo, "stash", "store", "-m", message, entry)
        return entry


def ignored_paths(worktree: Path, paths: list[str]) -> set[str]:
    """Which of `paths` (worktree-relative) git ignores in the session worktree. A path in a
    submodule's folder is not this repository's to ignore (check-ignore fails on the whole
    batch for one: wcwidth's setup stopped at `ucs-detect/pyvenv.cfg`, which Python looks
    for); it counts as not ignored, so a file the measurement looked for there stays
    watched."""
    if not paths:
        return set()
    env = _bound(worktree)
    links = [
        entry.split("\t", 1)[1]
        for entry in _run(worktree, ("ls-files", "--stage", "-z"), env).stdout.split("\0")
        if entry.startswith("160000 ")
    ]
    paths = [p for p in paths if not any(p == g or p.startswith(g + "/") for g in links)]
    if not paths:
        return set()
    proc = _run(
        worktree,
        ("check-ignore", "-z", "--stdin"),
        env,
        check=False,
        stdin="\0".join(paths) + "\0",
    )
    if proc.returncode not in (0, 1):
        raise GitError(f"git check-ignore failed in {worktree}: {proc.stderr.strip()}")
    return {p for p in proc.stdout.split("\0") if p}
