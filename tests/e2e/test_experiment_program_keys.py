"""program.md's optional keys through Snakemake: git_branch, preserve_on_fail and the
commits, config.json and run folder the loop documents describe."""

from __future__ import annotations

import json

import yaml
from conftest import git, make_repo
from test_experiment import FAST, MEASURE, PROGRAM, TESTS, change, spec_for

KEYS_PROGRAM = PROGRAM.replace(
    "guard: python -m pytest -q\n",
    "guard: python -m pytest -q\n"
    "git_branch: autoresearch/mar5\n"
    "preserve_on_fail: true\n"
    "cooldown_seconds: 0\n",
).replace("max_experiments: 6", "max_experiments: 3")
SCRIPT = {
    "experiment": {
        1: change(800, "Halve the inner loop"),
        2: change(900, "Unroll the loop by hand"),  # worse: discarded, and preserved
        3: change(0, "Skip the work entirely"),  # better, but the guard fails: preserved
    }
}


def make_keys_target(path):
    return make_repo(
        path,
        {
            "fast.py": FAST.format(n=1000),
            "measure.py": MEASURE.replace("{{", "{").replace("}}", "}"),
            "tests/test_fast.py": TESTS,
            "program.md": KEYS_PROGRAM,
            ".gitignore": "out/\n",
        },
    )


def test_program_md_keys_name_the_branch_preserve_failures_and_shape_the_commits(
    workflow, tmp_path
):
    target = make_keys_target(tmp_path / "target")
    spec = spec_for(target, workflow, SCRIPT, program="program.md", output="out")
    spec["experiment"].pop("cooldown_s")  # program.md's own cooldown_seconds: 0 applies
    workflow.run("k", spec)
    session = workflow.session("k")
    setup = json.loads((session / "experiment-setup.json").read_text())
    run_id = setup["run_id"]

    # git_branch: the kept commits land on the branch program.md names, in the target.
    assert json.loads((session / "setup.json").read_text())["branch"] == "autoresearch/mar5"
    subjects = git(target, "log", "--format=%s", "autoresearch/mar5").splitlines()
    assert subjects == [
        "autoresearch: exp 1 -- ops=800 (was 1000) -- Halve the inner loop",
        "autoresearch: baseline ops=1000",
        "initial",
    ]
    # The experiments start from the baseline commit, which holds the target's tree.
    baseline_commit = git(target, "rev-parse", "autoresearch/mar5~1")
    assert setup["base_commit"] == baseline_commit
    assert git(target, "rev-parse", f"{baseline_commit}^{{tree}}") == git(
        target, "rev-parse", "main^{tree}"
    )

    # preserve_on_fail: each change not kept is a ref on top of the commit it came from.
    refs = git(target, "for-each-ref", "--format=%(refname)", "refs/autoresearch/").splitlines()
    assert refs == [
        f"refs/autoresearch/preserved/{run_id}/0002",
        f"refs/autoresearch/preserved/{run_id}/0003",
    ]
    kept = git(target, "rev-parse", "autoresearch/mar5")
    for ref, n in zip(refs, (900, 0), strict=True):
        assert git(target, "show", f"{ref}:fast.py") + "\n" == FAST.format(n=n)
        assert git(target, "rev-parse", f"{ref}~1") == kept
    assert git(target, "branch", "--contains", refs[0]) == ""  # on no branch
    folder = target / "out/runs" / run_id
    assert (folder / "preserved/iteration-0002.patch").read_text() == (
        session / "iterations/002/proposal.patch"
    ).read_text()
    assert f"**Preserved**: {refs[1]}" in (session / "decision-log.md").read_text()
    assert "preserved (not kept): 2 under" in (session / "done").read_text()

    # The frozen config as config.json beside baseline.json (and in the run folder).
    frozen = yaml.safe_load((session / "session.yaml").read_text())["experiment"]
    config = json.loads((session / "config.json").read_text())
    assert config == frozen and config["git_branch"] == "autoresearch/mar5"
    assert config["cooldown_s"] == 0 and config["preserve_on_fail"] is True
    assert (session / "baseline.json").exists()
    assert json.loads((folder / "config.json").read_text()) == config
    # The user's checkout: still on main, unchanged.
    assert git(target, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(target, "status", "--porcelain") == ""


def test_a_git_branch_that_is_taken_gets_a_free_name_and_the_taken_one_is_untouched(
    workflow, tmp_path
):
    # (A branch outside autoresearch/, such as the user's `main`, is refused at load:
    # test_experiment_units.py. The harness's git may move only its own branches.)
    target = make_keys_target(tmp_path / "target")
    program = (target / "program.md").read_text()
    (target / "program.md").write_text(program.replace("max_experiments: 3", "max_experiments: 1"))
    git(target, "commit", "-qam", "one experiment")
    git(target, "branch", "autoresearch/mar5")  # taken, by an earlier run or the user
    taken = git(target, "rev-parse", "autoresearch/mar5")
    workflow.run("t", spec_for(target, workflow, SCRIPT, program="program.md"))
    branch = json.loads((workflow.session("t") / "setup.json").read_text())["branch"]
    assert branch == "autoresearch/mar5-2"
    assert git(target, "rev-parse", "autoresearch/mar5") == taken  # the taken one never moves
    subject = git(target, "log", "-1", "--format=%s", "autoresearch/mar5-2")
    assert subject.startswith("autoresearch: exp 1 -- ")
