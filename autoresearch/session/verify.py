"""The audit of a session (`autoresearch verify NAME`): every claim its files make, checked
again against git and the recorded test runs. Reads only: nothing is written anywhere.

A cycle is trusted to nothing but its records: its stage files must all be there, its
decision must start where the one before it ended and end on the loop's branch, the commits
it says it kept must be that stretch of the branch, its test run must be a run recorded for
its end commit's tree, and its rows in results.tsv must say what its decision says.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autoresearch import modes
from autoresearch.agents.backends.base import Usage
from autoresearch.engine.loop import Status
from autoresearch.errors import UserError
from autoresearch.gate import testrun, verdict
from autoresearch.gate.testrun import TestRun
from autoresearch.modes.base import Ended, Mode
from autoresearch.safety import git, seen
from autoresearch.session import spec
from autoresearch.session.layout import LOOP_DIR, SessionLayout
from autoresearch.session.record import SetupRecord, load_record
from autoresearch.session.spec import DEFAULT_TEAMS, SessionSpec
from autoresearch.views import journal

SHOWN = 5  # differences printed; the rest are counted
# What of a test run decides a verdict: a decision's run must match a run of its tree in these.
RUN_FIELDS = (
    "outcome",
    "summary",
    "passed",
    "failed",
    "skipped",
    "errors",
    "passing_ids",
    "failing_ids",
    "skipped_ids",
)
FIXED_ROW = re.compile(r"^(\d+) fixed, \d+ skipped$")  # the description a green row gives
FINDINGS_ROW = re.compile(r"^(\d+) findings$")  # a red row's
SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


class NoSession(UserError):
    """There is no set-up session of that name to verify."""


@dataclass(frozen=True)
class Difference:
    """One claim of one file that git or the recorded runs contradict."""

    path: str  # the file making the claim, relative to the sessions/ folder's parent
    what: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


@dataclass(frozen=True)
class Commit:
    sha: str
    tree: str
    parent: str | None  # the first parent: the harness's commits are a line
    subject: str


@dataclass
class Branch:
    """One loop's branch as git has it now: its tip and every commit since the base."""

    name: str
    base: str
    tip: str | None  # None: the branch is gone
    commits: dict[str, Commit] = field(default_factory=dict)  # base..tip
    base_tree: str | None = None

    def holds(self, sha: str) -> bool:
        return sha == self.base or sha in self.commits

    def tree(self, sha: str) -> str | None:
        return self.base_tree if sha == self.base else getattr(self.commits.get(sha), "tree", None)

    def stretch(self, start: str, end: str) -> list[Commit] | None:
        """The commits from `start` (excluded) to `end`, oldest first; None when `end` does
        not descend from `start` along first parents."""
        line: list[Commit] = []
        sha: str | None = end
        while sha != start:
            commit = self.commits.get(sha or "")
            if commit is None:
                return None
            line.append(commit)
            sha = commit.parent
        return line[::-1]


@dataclass
class Audit:
    """What `verify` found: the counts it checked and every difference."""

    name: str
    step: str = "cycle"  # what the loop calls one turn: cycle, iteration
    cycles: int = 0
    commits: int = 0
    trees: int = 0  # decisions whose test run was found recorded for their end tree
    differences: list[Difference] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # claims no record lets us check

    @property
    def ok(self) -> bool:
        return not self.differences

    def differ(self, path: str, what: str) -> None:
        self.differences.append(Difference(path, what))

    def summary(self) -> str:
        """The one line of a session that verifies."""
        line = f"verified: {_count(self.cycles, self.step)}, {_count(self.commits, 'commit')}"
        if self.trees:
            line += f", {self.trees} test runs matched to their trees"
        return line + "".join(f"; not checked: {u}" for u in self.unchecked)

    def report(self, shown: int = SHOWN) -> str:
        """The first `shown` differences, one line each, and how many more there are."""
        lines = [str(d) for d in self.differences[:shown]]
        if len(self.differences) > shown:
            lines.append(f"... and {len(self.differences) - shown} more")
        return "\n".join(lines)


def audit(root: Path) -> Audit:
    """Check session `root` (sessions/<name>); raises NoSession when it never set up."""
    root = Path(root).absolute()
    if not (root / "setup.json").is_file():
        raise NoSession(f"no set-up session {root.name!r} under {root.parent}/ (no setup.json)")
    try:
        record = load_record(SessionLayout(root))
        mode = modes.get(record.mode)
    except (ValueError, TypeError, KeyError) as err:
        raise NoSession(
            f"{root / 'setup.json'}: not a setup record this version reads ({err})"
        ) from None
    layout = mode.layout(root)
    result = Audit(layout.name, mode.views.step_word)
    rows = _results(_text(layout.results, result), result)
    runs = _test_runs(_text(layout.test_runs, result))
    frozen, spec_problem = _frozen(layout)
    untested = uncommitted = 0
    decided: list[dict[str, Any]] = []
    for track in mode.tracks(layout):
        loop = Loop(layout, mode, record, frozen, track, rows, runs, result)
        untested += loop.check()
        uncommitted += loop.uncommitted
        decided += loop.decided.values()
    if mode.views.lists_cycles:
        _check_summary(layout, decided, result)
    if _not_written(layout.done) is None and frozen is not None:
        in_order = sorted(decided, key=lambda d: d.get("cycle") or 0)
        where = str(layout.done.relative_to(root.parent.parent))
        try:
            done = mode.views.render_done(Ended(layout, record, frozen, in_order))
        except (OSError, AttributeError, KeyError, TypeError, ValueError) as err:
            result.differ(where, f"its records cannot render it ({type(err).__name__}: {err})")
        else:
            if done is None:
                result.unchecked.append(f"done (the {mode.name} mode's says more than its records)")
            else:
                check_rendered(layout.done, where, done, result)
    _check_rows_have_loops(layout, mode, rows, result)
    if spec_problem and result.cycles:
        result.differ(
            str(layout.spec.relative_to(root.parent.parent)),
            f"{spec_problem}: the frozen spec, which the test gate's verdicts are checked with",
        )
    if uncommitted:
        result.unchecked.append(
            f"the commits of {_count(uncommitted, result.step)} (their decisions name none)"
        )
    if not mode.setup.loop_stages:
        result.unchecked.append(f"stage files ({mode.name} names no stages; decisions only)")
    if untested:
        result.unchecked.append(
            f"the test runs of {_count(untested, result.step)} "
            "(their records name no run of a tree)"
        )
    return result


def status_line(root: Path) -> str | None:
    """`autoresearch status`: one line when verify would fail, else None."""
    try:
        found = audit(root)
    except (UserError, git.GitError, OSError):
        return None
    except Exception as err:  # status must print whatever a broken record does to the audit
        return f"Verify: could not check ({type(err).__name__}: {err}); run `autoresearch verify`"
    if found.ok:
        return None
    more = len(found.differences) - 1
    also = f" (and {more} more)" if more else ""
    return (
        f"Verify: would fail: {found.differences[0]}{also}; run `autoresearch verify {found.name}`"
    )


# --- one loop ------------------------------------------------------------------------


@dataclass
class Loop:
    """One loop of a session (its only one, or a broad track) checked against its branch."""

    layout: SessionLayout
    mode: Mode
    record: SetupRecord
    spec: SessionSpec | None  # the frozen spec: the gate's allow_* keys
    track: str
    rows: list[dict[str, str]]
    runs: dict[tuple[str, str], list[dict[str, Any]]]
    audit: Audit
    uncommitted: int = 0  # decisions that name no commit to check
    decided: dict[int, dict[str, Any]] = field(default_factory=dict)

    def rel(self, path: Path) -> str:
        return str(path.relative_to(self.layout.root.parent.parent))

    def check(self) -> int:
        """Run every check of this loop; returns how many decisions had no test run to
        match against their tree."""
        decisions = self.decided = self.decisions()
        self.audit.cycles += len(decisions)
        self.check_stage_files(decisions)
        self.check_rows(decisions)
        if not decisions and not self.layout.done.exists():
            return 0  # nothing claimed yet (a broad track may not even have its branch)
        branch = self.branch()
        if branch is None:
            return 0
        self.check_commits(decisions, branch)
        return self.check_test_runs(decisions, branch)

    # --- files -------------------------------------------------------------------------

    def decisions(self) -> dict[int, dict[str, Any]]:
        decided: dict[int, dict[str, Any]] = {}
        for number in self.layout.completed_cycles(self.track):
            path = self.layout.decision(number, self.track)
            data = self.read_record(path)
            if data is None:
                continue
            said = (data.get("cycle"), data.get("track") or "")
            if said != (number, self.track):
                self.audit.differ(
                    self.rel(path),
                    f"is the decision of {self.audit.step} {said[0]}"
                    + (f" of track {said[1]}" if said[1] else "")
                    + ", not of its folder's",
                )
                continue
            decided[number] = data
        return decided

    def read_record(self, path: Path) -> dict[str, Any] | None:
        """A JSON record the harness wrote: a regular file (never a link to another's, never
        a FIFO that would hang the audit) holding an object; else a difference and None."""
        problem = _not_written(path)
        if problem is None:
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError) as err:
                problem = f"cannot be read ({err})"
            else:
                if isinstance(data, dict):
                    return data
                problem = "holds no record"
        self.audit.differ(self.rel(path), problem)
        return None

    def indexed(self) -> set[int]:
        """The cycles the decisions index lists (read as it is: never rebuilt here)."""
        index = self.layout.decisions_index(self.track)
        found = set()
        for line in _text(index, self.audit).splitlines():
            try:
                found.add(int(json.loads(line)["cycle"]))
            except (ValueError, KeyError, TypeError):
                continue  # a line a crash cut short
        return found

    def row_cycles(self) -> set[int]:
        return {int(r["cycle"]) for r in self.rows if r["track"] == self.track and _num(r)}

    def check_stage_files(self, decided: dict[int, dict[str, Any]]) -> None:
        """Every stage file of every decided cycle, and a decision for every cycle that
        something says has finished (the index, a later cycle, `done`)."""
        base = self.layout.cycles(self.track)
        found = base.iterdir() if base.is_dir() else []
        folders = {int(p.name) for p in found if LOOP_DIR.match(p.name)}
        indexed = self.indexed()
        index = self.rel(self.layout.decisions_index(self.track))
        logged = self.logged()
        last = max(folders | set(decided) | indexed | set(logged) | self.row_cycles(), default=0)
        finished = self.layout.done.exists()
        for number in range(1, last + 1):
            folder = self.layout.cycle(number, self.track)
            if number in decided:
                self.check_cycle_files(number, folder, decided[number])
                continue
            path = self.layout.decision(number, self.track)
            if path.exists() or path.is_symlink():
                continue  # there but unreadable: said already
            decision = self.rel(path)
            if number in indexed:
                self.audit.differ(decision, f"missing, though {index} lists it")
            elif number not in folders and number in logged:
                self.audit.differ(
                    decision, f"missing with its folder, though {self.rel(logged[number])} ran"
                )
            elif number < last:
                self.audit.differ(
                    decision, f"missing, though {self.audit.step} {last} after it ran"
                )
            elif finished:
                self.audit.differ(decision, "missing, though the session is done")

    def logged(self) -> dict[int, Path]:
        """The cycles whose stages left a log (logs/<rule>/[track/]NNN.log): witnesses of a
        cycle that ran, whatever became of its folder. (`redo` moves them with the folder.)"""
        found: dict[int, Path] = {}
        for stage in self.mode.setup.loop_stages:
            folder = self.layout.logs / self.mode.setup.stage_rules.get(stage, stage) / self.track
            if folder.is_dir():
                for log in sorted(folder.glob("*.log")):
                    if LOOP_DIR.match(log.stem):
                        found.setdefault(int(log.stem), log)
        return found

    def stages_run(self) -> list[str]:
        """The loop's stages this session runs: a team stage the frozen spec's `teams` leave
        out (Refactor) makes no files. Without a readable spec, every stage (said already)."""
        if self.spec is None:
            return list(self.mode.setup.loop_stages)
        dropped = set(DEFAULT_TEAMS) - set(self.spec.teams)
        return [s for s in self.mode.setup.loop_stages if s not in dropped]

    def check_cycle_files(self, number: int, folder: Path, decision: dict[str, Any]) -> None:
        self.check_stage_files_there(number, folder, decision)
        made = {n for stage in self.stages_run() for n in self.mode.setup.stage_files[stage]}
        if self.spec is None or not made:
            return  # the page renders with the spec's keys: its problem is said already
        try:
            rendered = self.mode.views.cycle_page(self.spec, decision)
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            problem = f"cannot be rendered ({type(err).__name__}: {err})"
            self.audit.differ(self.rel(self.layout.decision(number, self.track)), problem)
            return
        if rendered is None:
            return
        name, text = rendered
        if name in made and _not_written(folder / name) is None:  # else: said as missing
            check_rendered(folder / name, self.rel(folder / name), text, self.audit)

    def check_stage_files_there(self, number: int, folder: Path, decision: dict[str, Any]) -> None:
        candidates = [
            c["candidate"] for c in _records(decision.get("candidates")) if "candidate" in c
        ]
        unmade = self.mode.setup.unmade_files(decision)
        for stage in self.stages_run():
            for name in self.mode.setup.stage_files[stage]:
                problem = _not_written(folder / name)
                if problem is None or (problem == "missing" and name in unmade):
                    continue
                # A batch's proposals are made one per candidate, in its own folder.
                places = [folder / c / name for c in candidates]
                if places and all(_not_written(p) is None for p in places):
                    continue
                if problem != "missing":
                    self.audit.differ(self.rel(folder / name), problem)
                    continue
                self.audit.differ(
                    self.rel(folder / name),
                    f"missing, though {self.audit.step} {number} is decided; rerun it whole, "
                    f"as the resume rule does a cycle without its eval-results.md: "
                    f"{self.redo(number)} (later ones are set aside too)",
                )

    def redo(self, number: int) -> str:
        """The command that reruns cycle `number` from its first stage (the resume rule)."""
        flag = f"--{self.audit.step}"
        track = f" --track {self.track}" if self.track else ""
        stage = self.mode.setup.loop_stages[0]
        return f"`autoresearch redo {self.layout.name} {flag} {number}{track} --stage {stage}`"

    # --- git ---------------------------------------------------------------------------

    def branch(self) -> Branch | None:
        """The loop's branch and its commits since the base, in one `git log`."""
        where = self.rel(self.layout.setup)
        name, base = self.record.branch, self.record.base_commit
        if self.track:
            meta = self.layout.track_meta(self.track)
            where = self.rel(meta)
            data = self.read_record(meta)
            if data is None:
                return None
            name, base = data.get("branch"), data.get("base_commit")
            if not isinstance(name, str):
                self.audit.differ(where, "names no branch")
                return None
        if not _is_sha(base):
            self.audit.differ(where, f"its base commit {base!r:.60} is not a commit id")
            return None
        target = Path(self.record.target)
        tip = git.raw(target, "rev-parse", "--verify", "--quiet", f"refs/heads/{name}^{{commit}}")
        if tip.returncode != 0:
            self.audit.differ(where, f"branch {name} is not in {target}")
            return None
        branch = Branch(name, base, tip.stdout.decode().strip())
        base_tree = git.raw(target, "rev-parse", "--verify", "--quiet", f"{base}^{{tree}}")
        if base_tree.returncode != 0:
            self.audit.differ(where, f"base commit {base[:12]} is not in {target}")
            return None
        branch.base_tree = base_tree.stdout.decode().strip()
        log = git.raw(target, "log", "--format=%H%x1f%T%x1f%P%x1f%s%x1e", f"{base}..{branch.tip}")
        for entry in log.stdout.decode(errors="replace").split("\x1e"):
            cells = entry.strip("\n").split("\x1f")
            if len(cells) == 4:
                sha, tree, parents, subject = cells
                branch.commits[sha] = Commit(sha, tree, (parents.split() or [None])[0], subject)
        ancestor = git.raw(target, "merge-base", "--is-ancestor", base, branch.tip)
        if ancestor.returncode != 0:
            self.audit.differ(where, f"branch {name} no longer grows from base {base[:12]}")
        return branch

    def check_commits(self, decided: dict[int, dict[str, Any]], branch: Branch) -> None:
        """The decisions chain from the base along the branch; each names the commits of its
        stretch; a finished loop's branch ends where its last decision does."""
        expected = branch.base
        total = 0
        last_end = branch.base
        for number in sorted(decided):
            d = decided[number]
            path = self.rel(self.layout.decision(number, self.track))
            # A step that records only its end (an audit lens's) starts where the last ended.
            start, end = d.get("start_commit", expected), d.get("end_commit")
            if end is None and "start_commit" not in d:
                self.uncommitted += 1
                continue
            # Never handed to git unchecked: a "commit" like --output=FILE is an option.
            if not (_is_sha(start) and _is_sha(end)):
                self.audit.differ(path, "its start and end commits are not commit ids")
                continue
            if start != expected:
                self.audit.differ(
                    path,
                    f"starts at {start[:12]}, but the cycle before it ended at {expected[:12]}",
                )
            expected = last_end = end
            if not branch.holds(end):
                self.audit.differ(path, self.not_on_branch("end commit", end, branch))
                continue
            stretch = branch.stretch(start, end) if branch.holds(start) else None
            if stretch is None:
                self.audit.differ(
                    path, f"end commit {end[:12]} does not descend from its start {start[:12]}"
                )
                continue
            total += len(stretch)
            self.audit.commits += len(stretch)
            claimed = d.get("commits_total")
            if isinstance(claimed, int) and not self.track_is_partial(decided) and claimed != total:
                self.audit.differ(
                    path, f"says {claimed} commits on {branch.name}, git has {total} to its end"
                )
            self.check_kept(number, d, stretch, branch)
        if self.layout.done.exists() and branch.tip != last_end:
            self.audit.differ(
                self.rel(self.layout.done),
                f"the session is done, but {branch.name} is at {(branch.tip or '')[:12]}, "
                f"not at the last recorded commit {last_end[:12]}",
            )

    def track_is_partial(self, decided: dict[int, dict[str, Any]]) -> bool:
        """Whether an earlier decision is missing (its commits are then not counted here)."""
        return bool(decided) and len(decided) != max(decided)

    def not_on_branch(self, what: str, sha: str, branch: Branch) -> str:
        line = f"{what} {sha[:12]} is not on {branch.name}"
        target = Path(self.record.target)
        behind = git.raw(target, "merge-base", "--is-ancestor", branch.tip or "", sha)
        if branch.tip and behind.returncode == 0:
            return line + f" (the branch, at {branch.tip[:12]}, was moved back behind it)"
        return line + self.amended_hint(sha, branch)

    def amended_hint(self, sha: str, branch: Branch) -> str:
        """When the branch has another commit with the recorded one's subject: amended?"""
        if not _is_sha(sha):
            return " (and not a commit id)"
        subject = git.raw(Path(self.record.target), "log", "-1", "--format=%s", sha)
        if subject.returncode != 0:
            return " (and not in the repository)"
        said = subject.stdout.decode().strip()
        twins = [c.sha for c in branch.commits.values() if c.subject == said]
        if twins:
            return f" (the branch has {twins[0][:12]} with its message: amended after the fact?)"
        return ""

    def check_kept(
        self, number: int, d: dict[str, Any], stretch: list[Commit], branch: Branch
    ) -> None:
        """Each commit a record of the cycle says it kept is in the cycle's stretch, with
        the message recorded; each commit of the stretch is one a record names."""
        path = self.rel(self.layout.decision(number, self.track))
        on_stretch = {c.sha: c for c in stretch}
        undone = _records(d.get("reverted"))
        # A reset took the stage records' commits off the branch: only the decision stands.
        reset = any(r.get("how") == "reset" for r in undone)
        named = {r.get("commit") for r in undone}
        reverts = {f'Revert "{r.get("subject")}"' for r in undone if r.get("how") == "revert"}
        if d.get("status"):  # one step, one commit: its end
            named.add(d.get("end_commit"))
        for source, kept in self.kept_claims(number, d):
            if reset and source != path:
                continue
            for item in kept:
                sha = item.get("commit") if isinstance(item, dict) else None
                if not isinstance(sha, str):
                    continue
                named.add(sha)
                commit = on_stretch.get(sha)
                if commit is None:
                    where = f"cycle {number}'s commits" if branch.holds(sha) else branch.name
                    hint = "" if branch.holds(sha) else self.amended_hint(sha, branch)
                    self.audit.differ(source, f"kept commit {sha[:12]} is not on {where}{hint}")
                    continue
                message = item.get("message")
                if isinstance(message, str) and message.splitlines()[:1] != [commit.subject]:
                    self.audit.differ(
                        source,
                        f"kept commit {sha[:12]} is recorded as {message.splitlines()[0]!r}, "
                        f"git says {commit.subject!r}",
                    )
        for commit in stretch:
            if commit.sha not in named and commit.subject not in reverts:
                self.audit.differ(
                    path, f"commit {commit.sha[:12]} {commit.subject!r} is named by no record"
                )

    def kept_claims(self, number: int, d: dict[str, Any]) -> list[tuple[str, list[Any]]]:
        """(file, the commits it says it made) for the decision and each stage record."""
        folder = self.layout.cycle(number, self.track)
        claims = [(self.rel(self.layout.decision(number, self.track)), _records(d.get("fixed")))]
        for stage in self.mode.setup.loop_stages:
            for name in self.mode.setup.stage_files[stage]:
                path = folder / name
                if not name.endswith(".json") or name == "decision.json" or not path.exists():
                    continue
                data = self.read_record(path)
                for key in ("fixed", "commits"):
                    made = data.get(key) if data is not None else None
                    if isinstance(made, list):
                        claims.append((self.rel(path), _records(made)))
        return claims

    # --- test runs ---------------------------------------------------------------------

    def check_test_runs(self, decided: dict[int, dict[str, Any]], branch: Branch) -> int:
        """A decision's test run must be one recorded for its end commit's tree (the harness
        records each run of a committed tree in test-runs.jsonl). Returns how many
        decisions hold no run to check."""
        untested = 0
        for number in sorted(decided):
            d = decided[number]
            tests, end = d.get("tests"), d.get("end_commit")
            if not isinstance(tests, dict) or not isinstance(end, str):
                untested += 1
                continue
            tree = branch.tree(end)
            if tree is None:
                continue  # not on the branch: said already
            path = self.rel(self.layout.decision(number, self.track))
            recorded = self.runs_of(tree, branch)
            if d.get("reverted") and not any(_same_run(tests, run) for run in recorded):
                # A cycle undone for its metric (narrow) keeps the run that passed the gate:
                # the run of its change, on a tree of its stretch.
                stretch = branch.stretch(d.get("start_commit") or "", end) or []
                recorded += [r for c in stretch for r in self.runs_of(c.tree, branch)]
            if not recorded:
                self.audit.differ(
                    path,
                    f"its test run ({tests.get('summary')}) is no run of its end commit's "
                    f"tree {tree[:12]}: test-runs.jsonl records none of that tree",
                )
            elif not any(_same_run(tests, run) for run in recorded):
                self.audit.differ(
                    path,
                    f"its test run says {tests.get('summary')!r}, but the runs recorded for "
                    f"tree {tree[:12]} say {recorded[-1].get('summary')!r}",
                )
            else:
                self.audit.trees += 1
            if d.get("tests_pass") is True:
                self.check_gate(path, tests, self.reference(decided, number))
        return untested

    def reference(self, decided: dict[int, dict[str, Any]], number: int) -> dict[str, Any]:
        """The run cycle `number` was held to: the last earlier one that got to its tests,
        else setup's baseline (as StageEnv.reference_tests picks it)."""
        for earlier in range(number - 1, 0, -1):
            tests = (decided.get(earlier) or {}).get("tests")
            if isinstance(tests, dict) and tests.get("outcome") in (testrun.PASSED, testrun.FAILED):
                return tests
        return self.record.baseline

    def check_gate(self, path: str, tests: dict[str, Any], reference: dict[str, Any]) -> None:
        """A decision that says its tests pass: the gate, asked again of its recorded run
        against the run it was held to, must agree."""
        if self.spec is None:
            return
        judged = verdict.acceptable(
            TestRun.from_record(tests),
            TestRun.from_record(reference),
            self.spec.allow_failing_baseline,
            self.spec.allow_test_removal,
        )
        if not judged.ok:
            self.audit.differ(
                path, f"says its tests pass, but the gate, asked again, says: {judged.reason}"
            )

    def runs_of(self, tree: str, branch: Branch) -> list[dict[str, Any]]:
        """The runs recorded for `tree`: test-runs.jsonl's, and setup's baseline run of the
        base commit's tree."""
        runs = list(self.runs.get((tree, self.track), []))
        return runs + ([self.record.baseline] if tree == branch.base_tree else [])

    def usage_problems(self, number: int, row: dict[str, str]) -> list[str]:
        """A row of a team that is also a stage with a record (sweep's red, green and
        refactor): its tokens and cost are that record's."""
        names = self.mode.setup.stage_files.get(row.get("team") or "", ())
        record = next((n for n in names if n.endswith(".json") and n != "decision.json"), None)
        path = self.layout.cycle(number, self.track) / record if record else None
        if path is None or _not_written(path) is not None:
            return []
        try:
            usage = json.loads(path.read_text()).get("usage")
        except (ValueError, AttributeError):
            return []  # an unreadable record: said with its commits
        return _usage_problems(row, usage) if isinstance(usage, dict) else []

    # --- results.tsv ---------------------------------------------------------------------

    def check_rows(self, decided: dict[int, dict[str, Any]]) -> None:
        """Each decided cycle has its rows, and they say what its decision says."""
        rows: dict[int, list[dict[str, str]]] = {}
        for row in self.rows:
            if row["track"] == self.track and _num(row):
                rows.setdefault(int(row["cycle"]), []).append(row)
        for number in sorted(decided):
            d = decided[number]
            mine = rows.get(number, [])
            where = f"cycle {number}" + (f" of track {self.track}" if self.track else "")
            if not mine:
                self.audit.differ(RESULTS, f"no row for {where}")
                continue
            for row in mine:
                problems = _row_problems(row, d) + self.usage_problems(number, row)
                for problem in problems:
                    self.audit.differ(RESULTS, f"{where}, {row['team']} row: {problem}")
            if "reverted" in d and any(r["status"] == Status.REVERTED for r in mine) != bool(
                d["reverted"]
            ):
                said = "reverted" if d["reverted"] else "nothing reverted"
                self.audit.differ(RESULTS, f"{where}: its rows disagree with its decision ({said})")


RESULTS = "results.tsv"


def _usage_problems(row: dict[str, str], usage: dict[str, Any]) -> list[str]:
    """A row's tokens and cost against the usage its stage recorded."""
    try:
        used = Usage(**usage)
        tokens, cost = int(row.get("tokens") or 0), float(row.get("cost_usd") or 0)
    except (TypeError, ValueError):
        return ["its tokens and cost cannot be read"]
    problems = []
    if tokens != used.tokens:
        problems.append(f"{tokens} tokens, its stage recorded {used.tokens}")
    if abs(cost - round(used.cost_usd, 6)) > 1e-9:
        problems.append(f"cost_usd {cost}, its stage recorded {round(used.cost_usd, 6)}")
    return problems


def _row_problems(row: dict[str, str], d: dict[str, Any]) -> list[str]:
    """What a results row says that its cycle's decision does not."""
    problems = []
    passes = {str(bool(d["tests_pass"]))} if d.get("tests_pass") is not None else set()
    statuses = {d["status"]} if d.get("status") else set()
    for c in _records(d.get("candidates")):  # a batch has a row per candidate
        passes.add(str(bool(c.get("tests_pass"))))
        statuses.add(c.get("status"))
    if passes and row.get("tests_pass") not in ("", None, *passes):
        problems.append(f"tests_pass {row['tests_pass']}, the decision says {' or '.join(passes)}")
    if statuses and row.get("status") not in statuses:
        problems.append(f"status {row['status']}, the decision says {' or '.join(statuses)}")
    description = row.get("description") or ""
    fixed = FIXED_ROW.match(description)
    if fixed and "fixed" in d and int(fixed.group(1)) != len(d["fixed"]):
        problems.append(f"{fixed.group(1)} fixed, the decision keeps {len(d['fixed'])}")
    found = FINDINGS_ROW.match(description)
    if found and isinstance(d.get("findings"), int) and int(found.group(1)) != d["findings"]:
        problems.append(f"{found.group(1)} findings, the decision says {d['findings']}")
    return problems


def _is_sha(value: Any) -> bool:
    """A full commit id (SHA-1 or SHA-256), the only form the harness records."""
    return isinstance(value, str) and SHA.fullmatch(value) is not None


def _records(value: Any) -> list[dict[str, Any]]:
    """The records of a list a file holds (anything else in it is not a claim to check)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _not_written(path: Path) -> str | None:
    """Why `path` is not a file as the harness writes them (None: it is one)."""
    if path.is_symlink():
        return "is a link, not the file the stage wrote"
    if not path.exists():
        return "missing"
    if not path.is_file():
        return "is not a regular file"
    return None


def _same_run(tests: dict[str, Any], run: dict[str, Any]) -> bool:
    return all(tests.get(k) == run.get(k) for k in RUN_FIELDS)


def _num(row: dict[str, str]) -> bool:
    return bool(row.get("cycle")) and row["cycle"].isdigit()


def check_rendered(page: Path, where: str, rendered: str, audit: Audit) -> None:
    """A page the views render from records is what they render, line for line (masked as
    the session's writer masks it); the first line that is not is the difference."""
    have = page.read_text(errors="replace").splitlines()
    want = seen.scrub_for(page, rendered).splitlines()
    for number, (line, expected) in enumerate(zip(have, want, strict=False), 1):
        if line != expected:
            said = f"line {number} reads {line!r}, they render {expected!r}"
            break
    else:
        if len(have) == len(want):
            return
        said = (
            f"it ends at line {len(have)}, they render {len(want)} lines"
            if len(have) < len(want)
            else f"line {len(want) + 1} reads {have[len(want)]!r}, they render no more"
        )
    audit.differ(where, f"is not what its records render: {said}")


def _check_summary(layout: SessionLayout, decided: list[dict[str, Any]], audit: Audit) -> None:
    """session.md lists each decided cycle as its decision renders (journal.cycle_line)."""
    page = layout.summary
    if _not_written(page) is not None:
        return
    listed = set(page.read_text(errors="replace").splitlines())
    if "## Cycles completed" not in listed:
        return
    for d in decided:
        try:
            line = journal.cycle_line(d)
        except (KeyError, TypeError, ValueError):
            continue  # a malformed decision: said where it is checked
        if line not in listed:
            audit.differ(
                str(page.relative_to(layout.root.parent.parent)),
                f"does not list {line[2:].split(':', 1)[0].lower()} as its decision says "
                f"({line[2:]!r})",
            )


def _check_rows_have_loops(
    layout: SessionLayout, mode: Mode, rows: list[dict[str, str]], audit: Audit
) -> None:
    """A row of a cycle that has no folder, or of a track the session does not have."""
    tracks = set(mode.tracks(layout))
    loops = layout.cycles()
    for folder in sorted(loops.iterdir()) if loops.is_dir() else []:
        if folder.is_dir() and not LOOP_DIR.match(folder.name) and folder.name not in tracks:
            audit.differ(
                str(folder.relative_to(layout.root.parent.parent)),
                "a loop the session does not have (its tracks: "
                + (", ".join(sorted(t for t in tracks if t)) or "none")
                + ")",
            )
    for row in rows:
        track = row.get("track") or ""
        if track not in tracks:
            audit.differ(RESULTS, f"a row of track {track!r}, which the session does not have")
        elif _num(row) and not layout.cycle(int(row["cycle"]), track).is_dir():
            audit.differ(RESULTS, f"a row of cycle {row['cycle']}, which has no folder")


def _frozen(layout: SessionLayout) -> tuple[SessionSpec | None, str | None]:
    """The session's frozen spec, or None and why it cannot be read."""
    problem = _not_written(layout.spec)
    if problem is None:
        try:
            return spec.load_frozen(layout.spec), None
        except (OSError, ValueError, TypeError, yaml.YAMLError) as err:
            problem = f"cannot be read ({err})"
    return None, problem


def _text(path: Path, audit: Audit) -> str:
    """A session-wide file's text ("" when it does not exist); a link or a FIFO in its
    place is a difference, and is not read."""
    problem = _not_written(path)
    if problem == "missing":
        return ""
    if problem is not None:
        audit.differ(path.name, problem)
        return ""
    return path.read_text()


def _results(text: str, audit: Audit) -> list[dict[str, str]]:
    """results.tsv's rows, every column present ("" where a row has none)."""
    reader = csv.DictReader(io.StringIO(text), delimiter="\t")
    if text and reader.fieldnames != journal.RESULTS_COLUMNS:
        audit.differ(
            RESULTS, f"its header is not the writer's ({' '.join(journal.RESULTS_COLUMNS)})"
        )
    return [{k: str(row.get(k) or "") for k in journal.RESULTS_COLUMNS} for row in reader]


def _test_runs(text: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every recorded run of the suite on a committed tree, by (tree, track). A run of some
    of its tests (a `selection`: the batch gate's early run, a bisection step) is none, nor
    is a graded run (an `overlay`: the start's tests laid over the tree, not the tree as it
    is; a decision records the run of its tree as the change left it)."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            if entry.get("selection") or entry.get("overlay"):
                continue
            runs.setdefault((entry["tree"], entry.get("track") or ""), []).append(entry["run"])
        except (ValueError, KeyError, TypeError):
            continue
    return runs
