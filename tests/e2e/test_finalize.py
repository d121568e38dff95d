"""`autoresearch finalize`: a finished session's kept commits as tested review branches.

One sweep session (script backend) keeps six fixes: two that build on each other in
calc.py, one in text.py, a new util.py, a change of calc.py's `add` that imports util.py
(so it fails alone), and a new test that needs util.py and text.py's change both. The
narrow demo with the ruff backend is finalized too.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CALC, Workflow, git, make_repo

from autoresearch.safety import git as harness_git

TEXT = 'def shout(s):\n    return s.upper() + "!"\n\n\ndef whisper(s):\n    return s.lower()\n'
TESTS = {
    "tests/test_calc.py": "from calc import add, mean\n\n\ndef test_add():\n"
    "    assert add(2, 3) == 5\n\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2\n",
    "tests/test_text.py": "from text import shout\n\n\ndef test_shout():\n"
    '    assert shout("a") == "A!"\n',
}
GUARDED = CALC.replace(
    "def mean(values):\n",
    'def mean(values):\n    if not values:\n        raise ValueError("no values")\n',
)
REWORDED = GUARDED.replace('"no values"', '"mean of no values"')
UTIL = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
CLAMPED = "from util import clamp\n" + REWORDED.replace(
    "return a + b", "return clamp(a + b, -(10**9), 10**9)"
)
# Needs util.py (set 3) and whisper's new ending (set 2): valid only with both.
BOTH = (
    "from text import whisper\nfrom util import clamp\n\n\ndef test_both():\n"
    "    assert clamp(5, 0, 1) == 1 and whisper('A') == 'a...'\n"
)
NARRATIVE = "I read calc.py line by line and noticed this while tracing mean()."
HINT = "You should add a guard that raises ValueError."


def finding(title: str, location: str, issue: str) -> dict:
    args = {"severity": "high", "title": title, "location": location, "issue": issue}
    return {"tool": "report_finding", "args": args | {"impact": "Callers get wrong results."}}


def fix(fid: str, path: str, content: str, summary: str) -> list[dict]:
    return [
        {"tool": "write_file", "args": {"path": path, "content": content}},
        {"tool": "finish_fix", "args": {"finding_id": fid, "summary": summary}},
    ]


SCRIPT = {
    "red": {
        1: [
            finding(
                "mean crashes on an empty list", "calc.py:5", f"mean([]) fails. {NARRATIVE} {HINT}"
            ),
            finding("whisper is too loud", "text.py:5", "whisper keeps the case."),
            finding("mean's error is vague", "calc.py:5", "The message says too little."),
            finding("no clamp helper", "calc.py:1", "Bounds are checked by hand."),
            finding("add overflows", "calc.py:1", "add has no bound."),
            finding("nothing tests the pair", "text.py:1", "clamp and whisper are not tested."),
            finding("text.py has no docstring", "text.py:1", "Readers must guess."),
        ]
    },
    "green": {
        1: fix("F-001", "calc.py", GUARDED, "guard empty mean")
        + fix("F-002", "text.py", TEXT.replace("s.lower()", "s.lower() + '...'"), "soften whisper")
        + fix("F-003", "calc.py", REWORDED, "say what is empty")
        + fix("F-004", "util.py", UTIL, "add clamp")
        + fix("F-005", "calc.py", CLAMPED, "bound add")
        + fix("F-006", "tests/test_both.py", BOTH, "test the pair")
        + [{"tool": "skip_finding", "args": {"finding_id": "F-007", "reason": "cosmetic"}}]
    },
}


def finalize(wf: Workflow, name: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "finalize", name, *extra],
        cwd=wf.workdir,
        env=wf.env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The session run to its end, the user's checkout snapshot, then one finalize."""
    tmp = tmp_path_factory.mktemp("finalize")
    target = make_repo(tmp / "target", {"calc.py": CALC, "text.py": TEXT, **TESTS})
    remote = tmp / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(target, "remote", "add", "origin", str(remote))
    (target / "notes.txt").write_text("the user's uncommitted work\n")  # untracked, kept
    wf = Workflow(tmp / "work")
    script = wf.script(SCRIPT)
    spec = {
        "mode": "sweep",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "max_cycles": 1,
        "teams": ["red", "green"],
        "test_gate": "per_fix",
        "on_dirty": "stash",
        "agent": {"backend": "script", "script": str(script)},
    }
    wf.run("s", spec)
    before = harness_git.snapshot(target)
    proc = finalize(wf, "s")
    return wf, target, remote, before, proc


def review_branches(target: Path, name: str = "s") -> dict[str, str]:
    out = git(
        target,
        "for-each-ref",
        "--format=%(refname:short) %(objectname)",
        f"refs/heads/autoresearch/{name}/review/",
    )
    return dict(line.split() for line in out.splitlines())


def subjects(target: Path, base: str, branch: str) -> list[str]:
    return git(target, "log", "--reverse", "--format=%s", f"{base}..{branch}").splitlines()


def base_of(wf: Workflow, name: str = "s") -> str:
    return json.loads((wf.session(name) / "setup.json").read_text())["base_commit"]


PASSING = [
    "autoresearch/s/review/1-guard-empty-mean-say-what-is-empty",
    "autoresearch/s/review/2-soften-whisper",
    "autoresearch/s/review/3-add-clamp",
]
ONLY_TOGETHER = "autoresearch/s/review/5-test-the-pair"


def test_finalize_splits_independent_fixes_and_keeps_dependent_ones_together(swept):
    wf, target, _, _, proc = swept
    assert proc.returncode == 1, proc.stderr + proc.stdout  # one set is not valid alone
    base = base_of(wf)
    branches = sorted(review_branches(target))
    assert branches == PASSING + [ONLY_TOGETHER]
    # The finding's id, which means nothing in the maintainer's repository, is a trailer.
    assert subjects(target, base, branches[0]) == [
        "fix: guard empty mean",
        "fix: say what is empty",
    ]
    assert subjects(target, base, branches[1]) == ["fix: soften whisper"]
    message = git(target, "log", "-1", "--format=%B", branches[1]).strip()
    assert message == "fix: soften whisper\n\nAutoresearch-Finding: F-002"
    # Each branch holds its own change and nothing else.
    changed = git(target, "diff", "--name-only", base, branches[1]).split()
    assert changed == ["text.py"]


def test_each_pr_text_lists_its_review_branchs_own_commits(swept):
    # The maintainer reviews the branch: its ids and subjects, not the session's (whose
    # `fix: [F-001] …` subjects and ids are nowhere on the branch). Set 3 was joined, its
    # branch replayed again: its listing must follow the second replay.
    wf, target, _, _, _ = swept
    base = base_of(wf)
    for number, branch in enumerate(PASSING, 1):
        text = (wf.session("s") / "review" / f"{number}.md").read_text()
        listed = re.findall(r"^- `([0-9a-f]{12})` (.+) \(\+\d+ −\d+\)$", text, re.MULTILINE)
        own = git(target, "log", "--reverse", "--format=%H %s", f"{base}..{branch}")
        assert listed == [
            (sha[:12], subject)
            for sha, subject in (line.split(" ", 1) for line in own.splitlines())
        ], number


def test_a_set_that_fails_alone_is_joined_with_the_set_it_needs(swept):
    wf, target, _, _, _ = swept
    base = base_of(wf)
    assert subjects(target, base, "autoresearch/s/review/3-add-clamp") == [
        "fix: add clamp",
        "fix: bound add",
    ]
    text = (wf.session("s") / "review" / "3.md").read_text()
    assert "Set 4 (bound add) joined this set: its tests failed alone" in text
    assert not (wf.session("s") / "review" / "4.md").exists()


def test_each_review_branch_is_tested_on_its_tip(swept):
    wf, target, _, _, _ = swept
    record = json.loads((wf.session("s") / "review" / "branches.json").read_text())
    tips = review_branches(target)
    assert [e["tests_ok"] for e in record["sets"]] == [True, True, True, False]
    for entry in record["sets"]:
        assert tips[entry["branch"]] == entry["tip"]
        md = (wf.session("s") / "review" / f"{entry['number']}.md").read_text()
        assert f"run on this branch's tip {entry['tip'][:12]}, " in md
        if shutil.which("bwrap"):  # the jail's own tests say why they skip without it
            assert f"{entry['tip'][:12]}, in a bwrap jail" in md
        if entry["tests_ok"]:
            assert "- On this branch: 3 passed" in md


def test_a_set_valid_only_with_others_is_reported_and_offered_for_no_pr(swept):
    wf, _, _, _, proc = swept
    record = json.loads((wf.session("s") / "review" / "branches.json").read_text())
    assert record["sets"][-1]["only_valid_with"] == [1, 2, 3]
    text = (wf.session("s") / "review" / "5.md").read_text()
    # The set only adds a test file: the start's tests pass without it, the set as it left
    # its tests cannot collect it.
    assert (
        "- Verdict: FAILS ALONE: the change's tests, as it left them: no test ran: "
        "collection error" in text
    )
    assert "- Only valid together with sets 1, 2, 3:" in text
    assert "5. test the pair [tests FAIL alone]" in proc.stdout
    assert f"push origin {ONLY_TOGETHER}" not in proc.stdout


def test_descriptions_come_from_what_green_was_given_never_from_red(swept):
    wf, _, _, _, _ = swept
    text = (wf.session("s") / "review" / "1.md").read_text()
    assert "Finding F-001 (high): mean crashes on an empty list" in text
    assert "Location: calc.py:5" in text
    assert "noticed" not in text and "should add a guard" not in text
    assert "## Files\n\n- calc.py (+2 -0)" in text


def test_finalize_prints_push_and_pr_commands_and_pushes_nothing(swept):
    wf, target, remote, _, proc = swept
    body = wf.session("s") / "review" / "2.md"
    assert "push origin autoresearch/s/review/2-soften-whisper" in proc.stdout
    assert f"--body-file {body}" in proc.stdout
    assert "nothing was pushed" in proc.stdout
    assert git(remote, "for-each-ref") == ""


def test_finalize_leaves_the_users_checkout_alone(swept):
    _, target, _, before, _ = swept
    assert harness_git.snapshot(target) == before
    assert (target / "notes.txt").read_text() == "the user's uncommitted work\n"


def test_push_runs_the_push_for_each_set(swept, tmp_path):
    wf, target, remote, before, _ = swept
    proc = finalize(wf, "s", "--push")
    assert proc.returncode == 1, proc.stderr + proc.stdout
    pushed = git(remote, "for-each-ref", "--format=%(refname:short)").split()
    assert sorted(pushed) == PASSING  # the set that fails alone is not pushed
    if shutil.which("gh") is None:
        assert "not run: gh is not installed" in proc.stdout
    assert harness_git.snapshot(target) == before


def test_a_rerun_replaces_its_own_branches_and_no_other(swept):
    wf, target, _, before, _ = swept
    base = base_of(wf)
    mine = "autoresearch/s/review/9-mine"
    git(target, "branch", mine, base)  # a branch of the user's under the same prefix
    moved = "autoresearch/s/review/2-soften-whisper"
    git(target, "branch", "-f", moved, base)  # one of ours the user moved since
    proc = finalize(wf, "s")
    assert proc.returncode == 1, proc.stderr + proc.stdout
    branches = review_branches(target)
    assert branches[mine] == base and branches[moved] == base
    assert f"left {moved} alone" in proc.stdout
    assert sorted(branches) == sorted(
        [
            "autoresearch/s/review/1-guard-empty-mean-say-what-is-empty",
            moved,
            moved + "-2",
            "autoresearch/s/review/3-add-clamp",
            ONLY_TOGETHER,
            mine,
        ]
    )
    assert subjects(target, base, moved + "-2") == ["fix: soften whisper"]
    record = json.loads((wf.session("s") / "review" / "branches.json").read_text())
    assert [e["branch"] for e in record["sets"]] == [
        "autoresearch/s/review/1-guard-empty-mean-say-what-is-empty",
        moved + "-2",
        "autoresearch/s/review/3-add-clamp",
        ONLY_TOGETHER,
    ]
    assert harness_git.snapshot(target) == before


def test_a_rerun_never_deletes_a_review_branch_the_user_has_checked_out(swept):
    wf, target, _, _, _ = swept
    first = "autoresearch/s/review/1-guard-empty-mean-say-what-is-empty"
    git(target, "checkout", "-q", first)  # the user looks at a review branch
    try:
        tip = review_branches(target)[first]
        before = harness_git.snapshot(target)
        proc = finalize(wf, "s")
        assert proc.returncode == 1, proc.stderr + proc.stdout
        assert f"left {first} alone" in proc.stdout
        assert review_branches(target)[first] == tip
        assert harness_git.snapshot(target) == before
        record = json.loads((wf.session("s") / "review" / "branches.json").read_text())
        assert record["sets"][0]["branch"] == first + "-2"
    finally:
        git(target, "checkout", "-q", "main")


def test_finalize_names_a_session_that_does_not_exist(swept):
    wf, _, _, _, _ = swept
    proc = finalize(wf, "nosuch")
    assert proc.returncode == 2
    assert "no set-up session 'nosuch'" in proc.stderr


def test_finalize_refuses_a_session_that_has_not_finished(swept):
    wf, target, _, _, _ = swept
    done = wf.session("s") / "done"
    branches = review_branches(target)
    done.rename(done.with_name("done.aside"))
    try:
        proc = finalize(wf, "s")
    finally:
        done.with_name("done.aside").rename(done)
    assert proc.returncode == 2
    assert "session 's' has not finished" in proc.stderr
    assert review_branches(target) == branches  # nothing replaced


# Finalize on a narrow session reads the narrow demo's: tests/e2e/test_report_narrow.py.


EXPERIMENT_PROGRAM = """# Fewer steps

```yaml
target_file: fast.py
eval_command: python measure.py
metric_key: ops
direction: minimize
max_experiments: 2
experiment_timeout: 60
```

## Research Direction

Reduce the number of steps without breaking the tests.
"""


def test_finalize_on_an_experiment_session_describes_each_kept_hypothesis(tmp_path):
    fast = "def steps():\n    return {n}\n"
    target = make_repo(
        tmp_path / "target",
        {
            "fast.py": fast.format(n=1000),
            "measure.py": "import json\nimport fast\n\nprint(json.dumps({'ops': fast.steps()}))\n",
            "tests/test_fast.py": "from fast import steps\n\n\ndef test_steps():\n"
            "    assert steps() > 0\n",
            "program.md": EXPERIMENT_PROGRAM,
        },
    )

    def change(n: int, hypothesis: str) -> list[dict]:
        return [
            {"tool": "write_file", "args": {"path": "fast.py", "content": fast.format(n=n)}},
            {
                "tool": "finish_experiment",
                "args": {"hypothesis": hypothesis, "change_summary": f"steps() returns {n}"},
            },
        ]

    wf = Workflow(tmp_path / "work")
    script = {"experiment": {1: change(800, "Halve the inner loop"), 2: change(700, "Memoize")}}
    spec = {
        "mode": "experiment",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "experiment": {"program": "program.md", "cooldown_s": 0},
        "agent": {"backend": "script", "script": str(wf.script(script))},
    }
    wf.run("e", spec)
    proc = finalize(wf, "e")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    # Both experiments rewrote the same line: one set, both commits, tested on its tip.
    record = json.loads((wf.session("e") / "review" / "branches.json").read_text())
    assert [len(e["commits"]) for e in record["sets"]] == [2]
    # The second rewrote the first's line whole: the set is named after what it changes.
    assert record["sets"][0]["branch"] == "autoresearch/e/review/1-memoize"
    assert record["sets"][0]["tests_ok"] is True
    # The branch starts at the target's own commit: the session's empty baseline marker
    # is not a commit of the pull request.
    tip = record["sets"][0]["tip"]
    main = git(target, "rev-parse", "main")
    assert git(target, "rev-list", "--count", f"{main}..{tip}") == "2"
    for sha in git(target, "rev-list", f"{main}..{tip}").split():
        assert git(target, "diff-tree", "-r", "--name-only", "--no-commit-id", sha)
    text = (wf.session("e") / "review" / "1.md").read_text()
    assert text.startswith("# Memoize\n")
    assert "Experiment #1: Halve the inner loop" in text
    assert "ops: 1000 → 800" in text
    assert "undone by a later commit of this set" in text  # the first's line is the second's
    assert "Experiment #2: Memoize" in text
