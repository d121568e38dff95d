"""Sessions submitted through profiles/slurm to a real Slurm: the same commits, files and
`done` as a local run; a killed controller's leftover jobs are cancelled by the plain
rerun; the profile's resources reach sbatch. Run with `make test-slurm`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import CALC, CALC_TESTS, Workflow, git, make_repo, script_spec, wait_for
from e2e.test_broad import FILES as BROAD_FILES
from e2e.test_broad import broad_spec
from e2e.test_resilience import slow_green_script
from e2e.test_sweep import SCRIPT as SWEEP_SCRIPT
from slurm_cluster import PROFILE, Cluster, Unavailable, bring_up, tear_down

from autoresearch.session import slurm

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

# A loaded 2-core machine runs a Slurm job in tens of seconds (two Snakemake starts
# per job, and the plugin's status checks back off by 10 s each).
RUN_TIMEOUT_S = 2400


@pytest.fixture(scope="module")
def cluster():
    try:
        found = bring_up()
    except Unavailable as err:
        if os.environ.get("AUTORESEARCH_SLURM_REQUIRED"):
            pytest.fail(f"Slurm is required here, but {err}")
        pytest.skip(str(err))
    yield found
    tear_down(found)


def slurm_workflow(path: Path, cluster: Cluster) -> Workflow:
    wf = Workflow(path / "work")
    wf.extra_env = dict(cluster.env)
    return wf


def profile_args(cluster: Cluster, path: Path) -> tuple[str, ...]:
    return ("--profile", str(cluster.profile(path / "profile")))


def masked(text: str, *paths: Path) -> str:
    """Text with what differs between any two runs blanked out: commit ids, the run's own
    directories, how long a command took and the temporary folder its report went to."""
    for path in paths:
        text = text.replace(str(path), "<dir>")
    text = re.sub(r'"duration_s": [0-9.]+', '"duration_s": <s>', text)
    text = re.sub(r"\bin [0-9.]+s\b", "in <s>s", text)  # pytest's own "2 passed in 0.03s"
    text = re.sub(r"autoresearch-tests-\w+", "<tmp>", text)
    return re.sub(r"\b[0-9a-f]{7,40}\b", "<sha>", text)


def session_files(session: Path) -> list[str]:
    """Every file a session wrote, but not the target's worktrees."""
    return sorted(
        str(p.relative_to(session))
        for p in session.rglob("*")
        if p.is_file() and "worktree" not in p.relative_to(session).parts
    )


def history(repo: Path, rev_range: str) -> list[tuple[str, str]]:
    """(subject, tree) of each commit: equal content, whatever the commit ids."""
    out = git(repo, "log", "--format=%s%x09%T", rev_range)
    return [tuple(line.split("\t")) for line in out.splitlines()]


def assert_same_session(local: SimpleNamespace, remote: SimpleNamespace, name: str) -> None:
    mine, theirs = remote.wf.session(name), local.wf.session(name)
    assert session_files(mine) == session_files(theirs)
    assert masked((mine / "done").read_text(), remote.target) == masked(
        (theirs / "done").read_text(), local.target
    )
    for decision in sorted(p.relative_to(theirs) for p in theirs.rglob("decision.json")):
        assert masked((mine / decision).read_text()) == masked((theirs / decision).read_text())


def run_both(tmp_path_factory, cluster: Cluster, files: dict, make_spec, name: str, cores: int):
    """The same session run locally and through the Slurm profile, on twin targets."""
    runs = {}
    for where in ("local", "slurm"):
        base = tmp_path_factory.mktemp(f"{name}-{where}")
        target = make_repo(base / "target", files)
        wf = slurm_workflow(base, cluster)
        extra = profile_args(cluster, base) if where == "slurm" else ()
        wf.run(name, make_spec(target, wf), *extra, cores=cores, timeout=RUN_TIMEOUT_S)
        runs[where] = SimpleNamespace(wf=wf, target=target)
    return runs["local"], runs["slurm"]


# --- a sweep session ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, cluster):
    files = {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS}

    def spec(target, wf):
        return script_spec(target, wf.script(SWEEP_SCRIPT), wf.workdir / "t.jsonl", max_cycles=1)

    return run_both(tmp_path_factory, cluster, files, spec, "s", cores=1)


def test_sweep_through_slurm_makes_the_local_runs_commits(sweep):
    local, remote = sweep
    base = json.loads((local.wf.session("s") / "setup.json").read_text())["base_commit"]
    remote_base = json.loads((remote.wf.session("s") / "setup.json").read_text())["base_commit"]
    ours = history(remote.wf.session("s") / "worktree", f"{remote_base}..HEAD")
    assert ours == history(local.wf.session("s") / "worktree", f"{base}..HEAD")
    assert [subject for subject, _ in ours] == [
        "refactor: comment add",
        "fix: [F-001] guard empty mean",
    ]


def test_sweep_through_slurm_writes_the_local_runs_files_and_done(sweep):
    local, remote = sweep
    assert (remote.wf.session("s") / "done").read_text().startswith("session: s")
    assert_same_session(local, remote, "s")


def test_sweep_stages_ran_as_slurm_jobs_with_the_profiles_resources(sweep, cluster):
    _, remote = sweep
    settings = yaml.safe_load(PROFILE.read_text())
    jobs = cluster.jobs_in(remote.wf.workdir)
    rules = job_rules(remote.wf.workdir)
    assert jobs and {job["JobID"] for job in jobs} == set(rules)
    assert set(rules.values()) & set(settings["set-resources"]), "no rule with own resources"
    for job in jobs:
        rule = rules[job["JobID"]]
        wanted = {**settings["default-resources"], **settings["set-resources"].get(rule, {})}
        assert job["State"] == "COMPLETED", (rule, job)
        assert job["Partition"] == cluster.partition, rule
        if cluster.account:
            assert job["Account"] == cluster.account, rule
        assert job["Timelimit"] == slurm_minutes(wanted["runtime"]), rule
        assert job["ReqMem"] == f"{wanted['mem_mb']}M", rule
        assert job["ReqCPUS"] == str(wanted["cpus_per_task"]), rule


def job_rules(workdir: Path) -> dict[str, str]:
    """Slurm job id -> rule, from the plugin's per-job log files (.../rule_<rule>/.../<id>.log)."""
    logs = workdir / ".snakemake" / "slurm_logs"
    return {
        log.stem: next(p for p in log.relative_to(logs).parts if p.startswith("rule_"))[5:]
        for log in logs.rglob("*.log")
    }


def slurm_minutes(minutes: int) -> str:
    hours, mins = divmod(int(minutes), 60)
    days, hours = divmod(hours, 24)
    return (f"{days}-" if days else "") + f"{hours:02d}:{mins:02d}:00"


# --- a broad session with three tracks -----------------------------------------------------


def test_broad_three_tracks_through_slurm_match_the_local_run(tmp_path_factory, cluster):
    def spec(target, wf):
        # One cycle of Red and Green per track keeps it to 11 jobs, 2 at a time.
        return broad_spec(target, wf.workdir, max_cycles=1, teams=["red", "green"])

    local, remote = run_both(tmp_path_factory, cluster, BROAD_FILES, spec, "b", cores=3)
    for hid in ("h1", "h2", "h3"):
        branch = f"autoresearch/broad/b/{hid}"
        assert history(remote.target, branch) == history(local.target, branch), hid
    newest = history(remote.target, "autoresearch/broad/b/h1")[0]
    assert newest[0] == "fix: [F-001] guard empty mean"
    assert_same_session(local, remote, "b")
    assert len(cluster.jobs_in(remote.wf.workdir)) >= 3 * 2  # each track's stages were jobs


# --- kill -9 of the controlling snakemake -------------------------------------------------


def test_killed_controller_then_plain_rerun_cancels_its_job_and_commits_once(
    tmp_path, target, cluster
):
    wf = slurm_workflow(tmp_path, cluster)
    profile = profile_args(cluster, tmp_path)
    spec = script_spec(
        target,
        wf.script(slow_green_script(120)),
        wf.workdir / "t.jsonl",
        max_cycles=1,
        teams=["red", "green"],
    )
    proc = subprocess.Popen(
        wf.command("s", spec, *profile),
        cwd=wf.workdir,
        env=wf.env(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worktree = wf.session("s") / "worktree"
    committed = lambda: worktree.exists() and "fix: [F-001] one" in subjects(worktree)  # noqa: E731
    wait_for(committed, timeout=RUN_TIMEOUT_S)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    left = cluster.active_jobs_in(wf.workdir)
    assert len(left) == 1, "green's job outlives its controller"

    wf.script(slow_green_script(0))  # the rerun's green does not sleep; the leftover job does
    wf.run("s", spec, *profile, timeout=RUN_TIMEOUT_S)

    assert cluster.active_jobs_in(wf.workdir) == []  # nothing left to commit after `done`
    states = {job["JobID"]: job["State"] for job in cluster.jobs_in(wf.workdir)}
    assert states[left[0]].startswith("CANCELLED")
    log = subjects(worktree)
    assert log.count("fix: [F-001] one") == 1
    assert log.count("fix: [F-002] two") == 1
    assert (wf.session("s") / "done").exists()


def subjects(worktree: Path) -> list[str]:
    return git(worktree, "log", "--format=%s").splitlines()


# --- leftover jobs, told apart by session and directory ------------------------------------


def test_only_the_sessions_own_leftover_jobs_are_cancelled_even_when_pending(
    tmp_path, cluster, monkeypatch
):
    workdir, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    workdir.mkdir()
    elsewhere.mkdir()

    def held_job(directory: Path, target: str) -> str:
        # Held, so it stays pending; the script only has to name its target job.
        wrap = f"python -m snakemake --target-jobs '{target}' --allowed-rules red"
        args = ["sbatch", "--parsable", "--hold", "-p", cluster.partition, "-D", str(directory)]
        if cluster.account:
            args += ["-A", cluster.account]
        return cluster.command(*args, "--wrap", wrap).strip().split(";")[0]

    mine = held_job(workdir, "red:name=s,cycle=001")
    other_session = held_job(workdir, "red:name=s2,cycle=001")
    other_dir = held_job(elsewhere, "red:name=s,cycle=001")
    try:
        for key, value in cluster.env.items():  # the module asks Slurm from this process
            monkeypatch.setenv(key, value)
        found = slurm.leftover_jobs(["s"], workdir)
        assert [(job.job_id, job.state) for job in found] == [(mine, "PENDING")]
        slurm.cancel(found)
        assert cluster.active_jobs_in(workdir) == [other_session]
        assert cluster.active_jobs_in(elsewhere) == [other_dir]
    finally:
        cluster.command("scancel", mine, other_session, other_dir)
