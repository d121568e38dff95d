"""`autoresearch finalize NAME`: a finished session's kept commits as review branches.

Each change set (changesets.py) is replayed onto the session's base in a worktree of its
own, on `autoresearch/<name>/review/<n>-<slug>`, and the target's test command runs on its
tip in the session's jail, judged by `verdict.acceptable` against the base's run. A set
that fails alone is joined with the first other set it passes with, or reported as only
valid together with the rest. Each set gets `sessions/<name>/review/<n>.md`, the body of
its pull request. The push and `gh pr create` commands are printed, and run only with
`--push`. Nothing is run in the user's checkout but ref changes: the branches are made,
and a rerun deletes the branches its previous run recorded (only while they still point
where that run left them), never any other.
"""

from __future__ import annotations

import dataclasses
import keyword
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.engine.stage import jail_for
from autoresearch.errors import SessionError
from autoresearch.gate import overlay, testrun
from autoresearch.gate.testrun import TestRun
from autoresearch.gate.verdict import Verdict, acceptable, graded_verdict
from autoresearch.safety import child_env, git
from autoresearch.session.bindings import Removed, removed_names
from autoresearch.session.changesets import (
    REFACTOR,
    Commit,
    Groups,
    ReviewLoop,
    collided_with,
    fixed_alike,
    group,
    grouped,
    kind_of,
    session_commits,
)
from autoresearch.session.files import locked, read_json, write_json, write_text
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec
from autoresearch.views import session_report

SUBJECT_PREFIX = re.compile(
    r"^(fix|refactor|experiment|docs|learn)(\([^)]*\))?:\s*(\[[^\]]+\]\s*)?"
)
SLUG_CHARS = 40


@dataclass
class ReviewSet:
    """One change set on its review branch, as tested there."""

    loop: ReviewLoop
    commits: list[Commit]
    number: int = 0
    branch: str = ""
    worktree: Path | None = None
    tip: str = ""
    run: TestRun | None = None
    verdict: Verdict | None = None
    joined: list[str] = field(default_factory=list)  # why sets were joined into this one
    tree: str = ""  # the tree the set's replay on the base ends at
    needs: list[int] = field(default_factory=list)  # only valid together with these sets
    size: session_report.Size | None = None  # base..tip, once described
    # Each session commit's copy on the review branch (none where its change was already
    # there): what the pull request's text lists, its ids being the branch's own.
    landed: dict[str, str] = field(default_factory=dict)
    # Session commits none of whose added lines is left at the set's tip (`undone_in`).
    undone: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return self.verdict is not None and self.verdict.ok

    @property
    def files(self) -> list[str]:
        return sorted({f for c in self.commits for f in c.files})


@dataclass
class Session:
    """What finalize reads of a session, once."""

    layout: SessionLayout
    record: SetupRecord
    spec: SessionSpec
    mode: Any  # modes.Mode (not imported: the modes import this package's modules)
    order: dict[str, int] = field(default_factory=dict)  # each commit's place on its branch
    # The base's test run, made now in a worktree like the sets' (same machine, same
    # tools), by base commit: what each set is judged against.
    base_runs: dict[str, TestRun] = field(default_factory=dict)
    jail: str = ""  # how the tests were confined: "bwrap", or "none" and why
    grouping: str = "kind"  # changesets.GROUPINGS: by kind, all in one set, a set per commit

    @property
    def target(self) -> Path:
        return Path(self.record.target)

    @property
    def store(self) -> Path:
        """Where the review worktrees go: beside the session's own, outside sessions/."""
        return Path(self.record.worktrees or self.layout.root) / "review"

    @property
    def folder(self) -> Path:
        return self.layout.root / "review"


def title_of(commit: Commit) -> str:
    """The title the mode gave the change, else the commit's subject without the
    harness's `fix: [F-001]` prefix."""
    if commit.note is not None and commit.note.title.strip():
        return " ".join(commit.note.title.split())
    return SUBJECT_PREFIX.sub("", commit.subject).strip() or commit.subject


def for_review(message: str) -> str:
    """A session commit's message as a review branch carries it: the finding's id, which
    means nothing in the maintainer's repository, moves from the subject to a trailer
    (`fix: [F-001] guard empty mean` -> `fix: guard empty mean`, `Autoresearch-Finding:
    F-001`)."""
    subject, _, body = message.partition("\n")
    found = SUBJECT_PREFIX.match(subject)
    if found is None or found.group(3) is None:
        return message
    ids = found.group(3).strip()[1:-1].strip()
    short = subject[: found.start(3)] + subject[found.end(3) :]
    body = body.strip("\n")
    return f"{short}\n\n" + (f"{body}\n\n" if body else "") + f"Autoresearch-Finding: {ids}\n"


def slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    out = ""
    for word in words:
        if len(out) + len(word) + 1 > SLUG_CHARS:
            break
        out = f"{out}-{word}" if out else word
    return out or "change"


def purpose_of(commits: list[Commit]) -> str:
    """What a run of mechanical changes of one kind does, in words: their title without
    the names each one names (`Remove unused import: `os`` -> `Remove unused import`)."""
    kind = kind_of(commits[0])
    if kind == REFACTOR:
        # The ruff backend's: `format PATH with ruff format`, a reformat and nothing else.
        tools = {m.group(1) if (m := FORMATTED.match(title_of(c))) else "" for c in commits}
        if len(tools) == 1 and "" not in tools:
            return f"Reformat with {tools.pop()}"
        return "Refactor, behaviour kept"
    titles = {title_of(c) for c in commits}
    if len(titles) == 1:
        return titles.pop()
    first = title_of(commits[0])
    words = re.sub(r"`[^`]*`", " ", first).strip(" :,;.-")
    words = " ".join(words.split())
    if len(words.split()) < 2 or words.split()[-1].lower() in DANGLING:
        return f"Fix what {kind} flags"
    said = list(dict.fromkeys(m for c in commits for m in QUOTED.findall(title_of(c))))
    if QUOTED_END.search(first) and all(keyword.iskeyword(q.strip("`")) for q in said):
        # Quoted keywords are what the change acts on (`Remove unnecessary `else``), not
        # names it lists: without them the title stops mid-phrase.
        return f"{words} {' or '.join(said)}" if len(said) <= TITLED else f"Fix what {kind} flags"
    return words


FORMATTED = re.compile(r"^format \S+ with (.+)$")
QUOTED = re.compile(r"`[^`]*`")
QUOTED_END = re.compile(r"`[^`]*`\s*$")  # a title ending in quoted words
DANGLING = {"with", "to", "for", "in", "of", "by", "as", "from", "on", "at", "and", "or"}
TITLED = 3  # the behaviour changes a title names before it counts the rest


def set_title(review: ReviewSet) -> str:
    """What the set does: a mechanical set's purpose with its rules and count, a behaviour
    change's own title, every commit's where a few were joined."""
    commits = review.commits
    kinds = [kind_of(c) for c in commits]
    if all(kinds):
        # Rules whose fixes read alike are told once (RET505's and RET508's `else`).
        alike = fixed_alike(commits)
        by_kind: dict[str, list[Commit]] = {}
        for commit in commits:
            by_kind.setdefault(alike.get(kind_of(commit), kind_of(commit)), []).append(commit)
        if len(commits) == 1:
            return title_of(commits[0])
        said = [purpose_of(group) for group in by_kind.values()]
        purposes = "; ".join([said[0], *(p[:1].lower() + p[1:] for p in said[1:])])
        rules = ", ".join(k for k in dict.fromkeys(kinds) if k != REFACTOR)
        files = len(review.files)
        count = f"{len(commits)} changes in {files} file{'s' if files > 1 else ''}"
        return f"{purposes} ({rules + ': ' if rules else ''}{count})"
    # A change a later commit of the set rewrote whole is not what the branch does.
    kept = [c for c in commits if c.sha not in review.undone] or commits
    titles = list(dict.fromkeys(title_of(c) for c in kept if not kind_of(c)))
    if len(titles) > TITLED:
        titles = [*titles[: TITLED - 1], f"and {len(titles) - TITLED + 1} other changes"]
    mechanical = list(dict.fromkeys(k for k in kinds if k))
    if mechanical:  # joined with a behaviour change (the lines, --one-set): named, not hidden
        rules = [k for k in mechanical if k != REFACTOR]
        titles += [f"lint fixes ({', '.join(rules)})"] if rules else []
        titles += ["refactor"] if REFACTOR in mechanical else []
    return "; ".join(titles)


# --- grouping checked by replay ----------------------------------------------------------


def scratch(session: Session, base: str) -> Path:
    """A detached worktree of ours at `base`, to read and try replays in."""
    place = session.store / "scratch"
    git.add_detached_worktree(session.target, place, base)
    git.reset_to(place, base, ignored=True)
    return place


def replay(
    worktree: Path, base: str, commits: list[Commit], landed: dict[str, str] | None = None
) -> int | None:
    """Rebuild `commits` in order on `base` in `worktree`, each as a commit with its own
    message; the index of the first that does not apply, or None when all did. `landed`,
    when given, is filled with each commit's copy (its id by the original's)."""
    # Ignored files too: what a test run in this worktree left (a build, a generated module)
    # must not reach the next tree tested here.
    git.reset_to(worktree, base, ignored=True)
    for i, commit in enumerate(commits):
        if not git.apply_commit(worktree, commit.sha):
            return i
        # As the session made it (author, dates; the message for a maintainer): a rerun
        # makes the same ids.
        try:
            copy = git.commit_like(worktree, commit.sha, for_review)  # its paths only
            if copy is None:
                continue  # its change is already there (a revert undid a revert, say)
            if landed is not None:
                landed[commit.sha] = copy
        except git.GitlinkRefused:
            return i  # a gitlink nobody wrote is never committed: the commit fails here
    return None


BLAMED = re.compile(r"^([0-9a-f]{40}) \d+ \d+", re.MULTILINE)  # blame --porcelain's line heads


def undone_in(worktree: Path, landed: dict[str, str], commits: list[Commit]) -> set[str]:
    """The commits of a set, replayed in `worktree` (copies in `landed`), that added lines
    of which none is left at its HEAD: a later commit of the set wrote over all of them.
    isodate's experiment kept a speed-up, then a "comment only" change written over a stale
    copy of the file, which put the old code back; the pull request was titled after both,
    for a diff of one comment line. A commit that only removed lines is not judged here."""
    if len(commits) < 2:
        return set()
    owners: set[str] = set()
    for path in sorted({f for c in commits for f in c.files}):
        blame = git.raw(worktree, "blame", "--porcelain", "HEAD", "--", path)
        if blame.returncode == 0:  # a file the set deleted has no lines to own
            owners |= set(BLAMED.findall(blame.stdout.decode("utf-8", "replace")))
    undone = set()
    for commit in commits[:-1]:
        copy = landed.get(commit.sha)
        if copy is None or copy in owners:
            continue
        numstat = git.git(worktree, "diff", "--numstat", f"{copy}^", copy)
        if any(row.split("\t", 1)[0] not in ("0", "-") for row in numstat.splitlines()):
            undone.add(commit.sha)
    return undone


def applicable_sets(
    worktree: Path,
    base: str,
    commits: list[Commit],
    how: str = "kind",
    log: Callable[[str], None] = lambda _: None,
) -> list[list[int]]:
    """The rule's sets, joined until every set applies on the base by itself; then joined
    as a reviewer wants them (changesets.grouped), and checked the same way again. The
    kinds are joined after the first check: a refactor that only applies with a fix is one
    set with it, and its kind is that fix's, not a link between every set of refactors."""
    groups = settle(worktree, base, commits, group(worktree, commits), log)
    return settle(worktree, base, commits, grouped(groups, commits, how), log).sets()


def settle(
    worktree: Path, base: str, commits: list[Commit], groups: Groups, log: Callable[[str], None]
) -> Groups:
    """`groups` joined further until every set applies on the base by itself."""
    while True:
        for members in groups.sets():
            failed = replay(worktree, base, [commits[i] for i in members])
            if failed is None:
                continue
            needed = collided_with(commits, members[failed], members)
            if needed is None:
                raise SessionError(
                    f"commit {commits[members[failed]].sha[:12]} does not apply on the base "
                    "even with every earlier commit of the session"
                )
            log(
                f"commit {commits[members[failed]].sha[:12]} does not apply without "
                f"{commits[needed].sha[:12]}: their sets are one"
            )
            groups.join(members[0], needed)
            break
        else:
            return groups


def review_base(repo: Path, base: str) -> str:
    """Where a loop's review branches start: its base, less the empty marker commits the
    session made on top of the target's own (experiment's baseline), which a pull request
    would carry as commits that change nothing."""
    while True:
        parents, tree, email = git.git(repo, "log", "-1", "--format=%P%x00%T%x00%ae", base).split(
            "\0"
        )
        if len(parents.split()) != 1 or email != HARNESS_EMAIL:
            return base
        if git.git(repo, "rev-parse", f"{parents}^{{tree}}") != tree:
            return base
        base = git.git(repo, "rev-parse", parents)


HARNESS_EMAIL = "autoresearch@localhost"  # git.AUTHOR's: the commits the harness made


# --- the review branches -------------------------------------------------------------------


def build(session: Session, review: ReviewSet) -> None:
    """Make the set's branch and worktree, replay the set there, run the tests on its tip."""
    base = review.loop.base
    place = session.store / str(review.number)
    title = slug(set_title(review))
    wanted = f"autoresearch/{session.layout.name}/review/{review.number}-{title}"
    review.branch = git.open_worktree(session.target, place, wanted, base)
    review.worktree = place
    review.landed = {}
    if replay(place, base, review.commits, review.landed) is not None:
        raise SessionError(f"set {review.number} no longer applies on {base[:12]}")
    review.tip = git.head(place)
    review.run, review.verdict = test(session, place, base)


def run_suite(session: Session, place: Path) -> TestRun:
    """The target's test command on the tree in `place`, uncached, in the session's jail."""
    jail = jail_for(session.layout, session.record.worktrees, session.spec.get("commands"), place)
    session.jail = "in a bwrap jail" if jail.mode == "bwrap" else f"without a jail ({jail.note})"
    return testrun.run_tests(
        session.record.test_command,
        place,
        stack=session.record.stack,
        timeout_s=session.spec.test_timeout_s,
        secrets=session.spec.secrets,
        uncached=True,
        jail=jail,
    )


def test(session: Session, place: Path, base: str) -> tuple[TestRun, Verdict]:
    """The tests on `place`, judged against the base's run as the session's own changes
    were: no test that passed on the base may fail."""
    return graded_test(session, place, base, session.base_runs[base])


def graded_test(
    session: Session, place: Path, start: str, reference: TestRun | None
) -> tuple[TestRun, Verdict]:
    """The suite on the tree in `place`, held to `reference`, the run of commit `start`, as
    the test gate holds a change (docs/safety.md "How the gate grades a change"): when the
    tree touched what defines or configures the tests of `start`, the start's versions laid
    over it decide, and its own tests must pass too. The run of the tree as it is, and the
    verdict."""
    run = run_suite(session, place)
    failing_ok = session.spec.allow_failing_baseline
    laid = (
        overlay.plan(
            place, start, reference, session.spec.allow_test_edits, session.spec.test_support
        )
        if reference is not None
        else None
    )
    if laid is None or (laid.empty and not laid.edited):
        return run, acceptable(run, reference, allow_failing_baseline=failing_ok)
    # Nothing to lay but an edited test (one inside a source file): the run as it is grades.
    graded = run
    if not laid.empty:
        graded = overlay.run_laid(
            place, laid, lambda: run_suite(session, place), session.record.test_command
        )
    edits = session.spec.allow_test_edits
    return run, graded_verdict(
        graded, run, reference, laid.edited, failing_ok, False, edits, laid.inputs
    )


def join_failing(session: Session, sets: list[ReviewSet], log: Callable[[str], None]) -> None:
    """A set whose tests fail alone is tried together with each other set of its loop, in
    order; the first pairing that passes becomes one set (on the other set's branch)."""
    for review in list(sets):
        if review.ok or review not in sets:
            continue
        base = review.loop.base
        trial = scratch(session, base)
        for other in [s for s in sets if s is not review and s.loop == review.loop]:
            merged = sorted(other.commits + review.commits, key=lambda c: session.order[c.sha])
            if replay(trial, base, merged) is not None:
                continue
            run, verdict = test(session, trial, base)
            if not verdict.ok:
                continue
            log(f"set {review.number} fails alone and passes with set {other.number}: joined")
            # The same commits in the same order on the same base: the tree just tested.
            other.landed = {}
            replay(other.worktree, base, merged, other.landed)
            other.commits, other.run, other.verdict = merged, run, verdict
            other.undone = undone_in(other.worktree, other.landed, merged)
            other.tip = git.head(other.worktree)
            other.joined.append(
                f"Set {review.number} ({set_title(review)}) joined this set: its tests failed "
                f"alone ({review.verdict.reason if review.verdict else 'not run'})."
            )
            git.remove_worktree(session.target, review.worktree)
            delete_branch(session.target, review.branch, review.tip)
            sets.remove(review)
            break
    for review in sets:  # after every join, so no number named here has gone since
        if not review.ok:
            review.needs = [s.number for s in sets if s is not review and s.loop == review.loop]


def delete_branch(target: Path, branch: str, expected: str | None) -> bool:
    """Delete our branch, only while it still points at `expected` (what we left there)
    and no worktree has it checked out (the user may have checked a review branch out)."""
    worktrees = git.git(target, "worktree", "list", "--porcelain").splitlines()
    if f"branch refs/heads/{branch}" in worktrees:
        return False
    ref = f"refs/heads/{branch}"
    # --no-deref: a branch of ours turned into a symbolic ref (by anything outside the box,
    # which writes no ref) goes itself, never the ref it names (the user's main).
    args = ["update-ref", "--no-deref", "-d", ref] + ([expected] if expected else [])
    return git.raw(target, *args).returncode == 0


# --- a rerun replaces what the last run made -----------------------------------------------


def branches_file(session: Session) -> Path:
    return session.folder / "branches.json"


def clear_previous(session: Session, log: Callable[[str], None]) -> None:
    """Remove the worktrees and branches the previous run recorded, and its descriptions.
    A branch moved since (someone committed on it) is left alone, and said so."""
    earlier = read_json(branches_file(session)) or {}
    merged = [earlier["merged"]] if earlier.get("merged") else []  # broad's (modes/broad)
    for entry in earlier.get("sets", []) + merged:
        place = Path(entry["worktree"])
        if place.exists() or git.worktree_admin(place) is not None:
            git.remove_worktree(session.target, place)
        if not delete_branch(session.target, entry["branch"], entry["tip"]):
            if git.branch_exists(session.target, entry["branch"]):
                log(
                    f"left {entry['branch']} alone: it moved since the last finalize, or "
                    "a worktree has it checked out"
                )
    for old in session.folder.glob("*.md") if session.folder.is_dir() else []:
        old.unlink()


# --- what the reviewer reads -----------------------------------------------------------------


def commit_size(worktree: Path, sha: str) -> session_report.Size:
    return session_report.size_of(
        git.git(worktree, "diff-tree", "-r", "--numstat", "--no-renames", "--no-commit-id", sha)
    )


DEAD = re.compile(r"\bdead\b", re.I)


def plainly(lines: tuple[str, ...], removed: list[Removed]) -> list[str]:
    """A change note's lines, without a claim of dead code the tree does not bear out: only
    where the set removes names and none of them is still named anywhere."""
    proven = bool(removed) and all(r.unreferenced for r in removed)
    return [line for line in lines if proven or not DEAD.search(line)]


def describe(session: Session, review: ReviewSet) -> str:
    base = review.loop.base
    diffstat = git.git(review.worktree, "diff", "--numstat", base, review.tip)
    size = review.size = session_report.size_of(diffstat)
    run, verdict = review.run, review.verdict
    removed = removed_names(review.worktree, base, review.tip, review.files)
    count = len(review.commits)
    lines = [
        f"# {set_title(review)}",
        "",
        # The size first: a reviewer sees at once whether a one-line title hides a rewrite.
        f"**{size.text} lines in {size.files} file{'s' if size.files != 1 else ''}, "
        f"{count} commit{'s' if count != 1 else ''}.**",
        "",
        f"Review set {review.number} of session `{session.layout.name}` "
        f"({session.mode.name}{', track ' + review.loop.track if review.loop.track else ''}): "
        f"branch `{review.branch}`, made from the base commit {base[:12]}.",
        "",
    ]
    if review.loop.context:
        lines += [*plainly(review.loop.context, removed), ""]
    lines += ["## What changed and why", ""]
    for commit in review.commits:
        # The branch's own commit, as the maintainer will see it (no `[F-001]` in its
        # subject); the session's, where its change was already on the branch.
        copy = review.landed.get(commit.sha)
        subject = for_review(commit.subject).partition("\n")[0]
        lines.append(
            f"- `{copy[:12]}` {subject} ({commit_size(review.worktree, copy).text})"
            if copy
            else f"- {subject}: already on the branch (session commit `{commit.sha[:12]}`)"
        )
        notes = plainly(commit.note.lines, removed) if commit.note else []
        if commit.sha in review.undone:
            notes.append(
                "undone by a later commit of this set: none of the lines it added is in "
                "this branch's diff"
            )
        lines += [f"    - {line}" for line in notes]
    if removed:
        lines += ["", "## Names removed", ""]
        for r in removed:
            searched = f"in {r.path}" if r.what == "assignment" else "in the tree"
            where = (
                "still named in " + ", ".join(r.still_named_in)
                if r.still_named_in
                else f"named nowhere else {searched}"
            )
            lines.append(f"- `{r.name}` ({r.what}, {r.path}): {where}")
    lines += [*(f"\n{j}" for j in review.joined), "", "## Tests", ""]
    baseline = session.base_runs[base]
    lines += [
        f"- Command: `{session.record.test_command}`, run on this branch's tip "
        f"{review.tip[:12]}, {session.jail}",
        f"- On the base {base[:12]}, run the same way: {baseline.summary}",
        f"- On this branch: {run.summary if run else 'not run'}",
        f"- Verdict: {'kept' if review.ok else 'FAILS ALONE'}: "
        f"{verdict.reason if verdict else 'not judged'}",
    ]
    if review.needs:
        sets = ("sets " if len(review.needs) > 1 else "set ") + ", ".join(map(str, review.needs))
        lines.append(
            f"- Only valid together with {sets}: it failed alone and with each of them by itself"
        )
    lines += ["", "## Files", ""]
    for row in diffstat.splitlines():
        added, removed_lines, path = row.split("\t", 2)
        lines.append(f"- {path} (+{added} -{removed_lines})")
    return "\n".join(lines) + "\n"


def commands_for(session: Session, review: ReviewSet, remote: str) -> list[list[str]]:
    body = session.folder / f"{review.number}.md"
    return [
        ["git", "-C", str(session.target), "push", remote, review.branch],
        ["gh", "pr", "create", "--head", review.branch, "--title", set_title(review)]
        + ["--body-file", str(body)],
    ]


def run_commands(
    session: Session, branch: str, commands: list[list[str]], log: Callable[[str], None]
) -> bool:
    """Run a branch's push and pull-request commands; never for the checked-out branch."""
    if branch == git.current_branch(session.target):
        raise SessionError(f"{branch} is the checked-out branch of {session.target}")
    for argv in commands:
        if shutil.which(argv[0]) is None:
            log(f"not run: {argv[0]} is not installed: {shlex.join(argv)}")
            return False
        cwd = session.target if argv[0] == "gh" else None
        # The user's own push and pull request: their credentials (an ssh agent, GH_TOKEN)
        # are needed here, never the model API's key.
        env = {k: v for k, v in os.environ.items() if not k.startswith(child_env.NEVER_PREFIXES)}
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            log(f"failed ({proc.returncode}): {shlex.join(argv)}: {proc.stderr.strip()}")
            return False
        log(f"ran: {shlex.join(argv)}")
    return True


# --- the command ---------------------------------------------------------------------------


def finalize(
    session: Session, *, do_push: bool = False, remote: str = "origin", log=print
) -> list[ReviewSet]:
    layout = session.layout
    if not layout.done.exists():
        raise SessionError(
            f"session {layout.name!r} has not finished (no {layout.done}): run it to its end "
            "first, then finalize it"
        )
    if not git.is_repo(session.target):
        raise SessionError(
            f"{layout.setup}: key 'target': {session.target} is not a git repository any more"
        )
    # Two finalize runs of one session would replay into the same worktrees: one at a time.
    with locked(layout.root / ".finalize.lock"):
        return _finalize(session, do_push, remote, log)


def _finalize(
    session: Session, do_push: bool, remote: str, log: Callable[[str], None]
) -> list[ReviewSet]:
    layout = session.layout
    clear_previous(session, log)
    session.folder.mkdir(parents=True, exist_ok=True)
    sets: list[ReviewSet] = []
    order: dict[str, int] = {}
    for loop in session.mode.views.review_loops(layout, session.record, session.spec):
        if not git.branch_exists(session.target, loop.branch):
            log(f"no branch {loop.branch} in {session.target}: nothing of it to review")
            continue
        loop = dataclasses.replace(loop, base=review_base(session.target, loop.base))
        place = scratch(session, loop.base)
        notes = session.mode.views.change_notes(layout, loop.track, session.spec)
        commits = [
            dataclasses.replace(c, note=notes.get(c.sha))
            for c in session_commits(place, loop.base, loop.branch)
            if c.files  # a marker that changes nothing (a baseline) is no change to review
        ]
        order |= {c.sha: i for i, c in enumerate(commits)}
        if commits and loop.base not in session.base_runs:
            git.reset_to(place, loop.base, ignored=True)
            session.base_runs[loop.base] = run_suite(session, place)
            log(f"tests on the base {loop.base[:12]}: {session.base_runs[loop.base].summary}")
        for members in applicable_sets(place, loop.base, commits, session.grouping, log):
            chosen = [commits[i] for i in members]
            landed: dict[str, str] = {}
            replay(place, loop.base, chosen, landed)
            tree = git.git(place, "rev-parse", "HEAD^{tree}")
            undone = undone_in(place, landed, chosen)
            title = set_title(ReviewSet(loop, chosen, undone=undone))
            if tree == git.git(place, "rev-parse", f"{loop.base}^{{tree}}"):
                log(f"skipped {len(chosen)} commits that cancel out: {title}")
                continue
            same = next((s for s in sets if s.tree == tree and s.loop.base == loop.base), None)
            if same is not None:
                # Broad's tracks can make the same change: one branch for it, not one per track.
                where = f"track {loop.track}" if loop.track else loop.branch
                shas = ", ".join(c.sha[:12] for c in chosen)
                same.joined.append(f"The same change was made by {where} too ({shas}).")
                log(f"the change of {where} ({title}) is one already found: not a set of its own")
                continue
            sets.append(ReviewSet(loop, chosen, tree=tree, undone=undone))
        git.remove_worktree(session.target, place)
    session.order = order
    for n, review in enumerate(sets, 1):
        review.number = n
        build(session, review)
        # Recorded as soon as made: a rerun after a kill finds and replaces them too.
        write_json(branches_file(session), {"sets": [entry(r) for r in sets[:n]]})
        log(f"set {n}: {review.branch}: {review.verdict.reason}")
    join_failing(session, sets, log)
    if (session.store / "scratch").exists():
        git.remove_worktree(session.target, session.store / "scratch")
    for review in sets:
        write_text(session.folder / f"{review.number}.md", describe(session, review))
    write_json(branches_file(session), {"sets": [entry(r) for r in sets]})
    session_report.add_review_sets(layout)  # the report's landing page links them
    for review in sets:
        # The branches stay; their worktrees go, so the user can check a branch out.
        git.remove_worktree(session.target, review.worktree)
    report(session, sets, do_push, remote, log)
    session.mode.views.after_review(session, sets, do_push, remote, log)
    return sets


def entry(review: ReviewSet) -> dict[str, Any]:
    return {
        "number": review.number,
        "track": review.loop.track,
        "branch": review.branch,
        "worktree": str(review.worktree),
        "tip": review.tip,
        "commits": [c.sha for c in review.commits],
        "files": review.files,
        "tests_ok": review.ok,
        "verdict": review.verdict.reason if review.verdict else None,
        "only_valid_with": review.needs,
        # Lines added and deleted and files changed, base..tip: what the report shows.
        "size": dataclasses.asdict(review.size) if review.size else None,
    }


def report(
    session: Session, sets: list[ReviewSet], do_push: bool, remote: str, log: Callable[[str], None]
) -> None:
    if not sets:
        log(f"session {session.layout.name!r} kept no change: nothing to review")
        return
    for review in sets:
        where = session.folder / f"{review.number}.md"
        # "tests pass" only when they ran and passed: a set kept against a failing base
        # breaks nothing, but its tests do not pass.
        passed = review.run is not None and review.run.ok
        state = ("tests pass" if passed else "no new failures") if review.ok else "tests FAIL alone"
        log(f"\n{review.number}. {set_title(review)} [{state}]\n   {review.branch}\n   {where}")
        if not review.ok:
            reason = review.verdict.reason if review.verdict else ""
            log(f"   not offered for a pull request: {reason}")
            continue
        if do_push:  # the printed commands, as the user would run them (their git and gh)
            run_commands(session, review.branch, commands_for(session, review, remote), log)
        else:
            for argv in commands_for(session, review, remote):
                log("   " + shlex.join(argv))
    if not do_push:
        log("\nnothing was pushed: run the commands above, or finalize again with --push")
