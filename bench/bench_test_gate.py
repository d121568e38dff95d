"""Test runs per kept fix: `test_gate: per_fix` against `batch`, same sessions otherwise.

Every run of the test command is logged by a wrapper (its wall seconds), so the figures
count all of them: the gate's, Green's final run, evaluate's. The targets:

  demo      the bundled demo project with the model-free ruff backend (`make demo`'s
            session), its pytest suite slowed by `--delay` seconds per run (a stand-in
            for a real suite's length; 0 runs it as it is);
  breaking  a scripted Green making 8 fixes a cycle, one of which breaks a test, so
            the batch gate has to bisect (a test file per module; `--pytest-cache` lets
            its bisection steps run only the failing test, `--lf`);
  library   with `--library PATH`: a clone of a real library (its committed HEAD), the
            ruff backend with `--select` rules added to its own, its suite run as
            `--library-tests` says (no delay added).
  boltons   with `--library PATH` a clone of boltons (mahmoud/boltons): a scripted
            Green making 4 fixes a cycle to 4 of its modules (a comment each), one of
            which, in cycles 1 and 2, breaks a function its tests check (BOLTONS_PLAN);
            the suite is `--library-tests` (its 625 tests with `--doctest-modules
            boltons tests`).

For each: runs and suite-seconds per kept fix under both gates, their ratio, and
whether both left the same fixes on the branch; of the runs, how many ran some tests
only (`--lf`: a bisection step, the batch gate's early run). The session runs the
autoresearch of this checkout (PYTHONPATH), or of `--checkout PATH` (an older one, for
its "before"; `git archive <commit> | tar -x -C PATH` makes one).

    python bench/bench_test_gate.py [--delay 1.0] [--cycles 3] [--only demo,library]
        [--library ~/src/toolz --library-tests "toolz/tests" --select UP,C4,SIM]
        [--checkout /tmp/before] [--gates batch]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
FIXES = 8  # per cycle on the breaking target
BREAKS = 5  # the fix (of FIXES) that breaks a test

# Each run's start and end (wall seconds), whether it ran some tests only, and its CPU
# seconds (user + system, children included): on a loaded machine the wall time of the
# same run moves by 2x, its CPU time far less.
WRAPPER = """#!/bin/sh
start=$(date +%s.%N)
/usr/bin/time -o "{log}.cpu" -f "%U %S" "$@"
code=$?
some=all
case " $* " in *" --lf "*) some=some ;; esac
cpu=$(tail -n 1 "{log}.cpu" | awk '{{print $1 + $2}}')
echo "$start $(date +%s.%N) $some $cpu" >> "{log}"
exit $code
"""

# boltons: (module, what a fix's edit replaces in it, with what) per cycle; "" appends a
# comment (no test can see it), anything else breaks a function its tests check.
BOLTONS_PLAN: tuple[tuple[tuple[str, str, str], ...], ...] = (
    (
        ("boltons/cacheutils.py", "", ""),
        ("boltons/strutils.py", "def slugify(text, delim='_'", "def slugify(text, delim='-'"),
        ("boltons/dictutils.py", "", ""),
        ("boltons/listutils.py", "", ""),
    ),
    (
        ("boltons/setutils.py", "", ""),
        ("boltons/mathutils.py", "return min(max(x, lower), upper)", "return max(x, lower)"),
        ("boltons/queueutils.py", "", ""),
        ("boltons/formatutils.py", "", ""),
    ),
    (
        ("boltons/jsonutils.py", "", ""),
        ("boltons/timeutils.py", "", ""),
        ("boltons/typeutils.py", "", ""),
        ("boltons/urlutils.py", "", ""),
    ),
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def commit_all(repo: Path) -> None:
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")


def demo_target(path: Path, delay: float) -> dict:
    shutil.copytree(ROOT / "examples/demo-project", path)
    if delay:
        (path / "tests/conftest.py").write_text(
            f"import time\n\n\ndef pytest_sessionstart(session):\n    time.sleep({delay})\n"
        )
    commit_all(path)
    return {"agent": {"backend": "ruff"}}


def breaking_target(path: Path, delay: float, cycles: int, work: Path) -> dict:
    """Module m<k>.py per fix; test_all checks every f<k>() returns k."""
    path.mkdir()
    for k in range(FIXES * cycles):
        (path / f"m{k}.py").write_text(f"def f{k}():\n    return {k}\n")
    # One test file per module, the suite's `delay` shared among them: a run of the one
    # failing test (a bisection step's --lf) costs a share of a full run.
    share = delay / (FIXES * cycles)
    for k in range(FIXES * cycles):
        (path / f"test_m{k}.py").write_text(
            f"import time\n\nfrom m{k} import f{k}\n\n\n"
            f"def test_f{k}():\n    time.sleep({share})\n    assert f{k}() == {k}\n"
        )
    commit_all(path)
    script: dict = {"red": {}, "green": {}}
    for c in range(1, cycles + 1):
        ks = range((c - 1) * FIXES, c * FIXES)
        script["red"][c] = [
            {"tool": "report_finding", "args": {"severity": "low", "title": f"f{k} undocumented",
             "location": f"m{k}.py:1", "issue": "no docstring", "impact": "readers guess"}}
            for k in ks
        ]  # fmt: skip
        steps = []
        for i, k in enumerate(ks):
            body = f"    return {k + 1 if i == BREAKS else k}\n"
            steps += [
                {"tool": "write_file", "args": {"path": f"m{k}.py",
                 "content": f'def f{k}():\n    """f{k}."""\n{body}'}},
                {"tool": "finish_fix", "args": {"finding_id": f"F-{(c - 1) * FIXES + i + 1:03d}",
                 "summary": f"document f{k}"}},
            ]  # fmt: skip
        script["green"][c] = steps
    (work / "script.yaml").write_text(yaml.safe_dump(script))
    return {
        "agent": {"backend": "script", "script": str(work / "script.yaml")},
        "teams": ["red", "green"],
        "stop_below": None,
    }


def library_target(path: Path, args: argparse.Namespace) -> dict:
    """A clone of the library's HEAD: the session sees what its history committed."""
    subprocess.run(["git", "clone", "-q", str(args.library), str(path)], check=True)
    select = [r for r in (args.select or "").split(",") if r]
    return {"agent": {"backend": "ruff", "ruff": {"select": select}}}


def boltons_target(path: Path, args: argparse.Namespace, work: Path) -> dict:
    """A clone of boltons' HEAD and a script of BOLTONS_PLAN's fixes, a cycle each."""
    subprocess.run(["git", "clone", "-q", str(args.library), str(path)], check=True)
    script: dict = {"red": {}, "green": {}}
    n = 0
    for c, plan in enumerate(BOLTONS_PLAN[: args.cycles], 1):
        script["red"][c], script["green"][c] = [], []
        for module, old, new in plan:
            n += 1
            text = (path / module).read_text()
            if old and old not in text:
                raise SystemExit(f"{args.library}: {module} no longer holds {old!r}")
            text = text.replace(old, new, 1) if old else text + f"\n# reviewed: F-{n:03d}\n"
            script["red"][c].append({"tool": "report_finding", "args": {
                "severity": "low", "title": f"{module} unreviewed", "location": f"{module}:1",
                "issue": "not reviewed", "impact": "readers guess"}})  # fmt: skip
            script["green"][c] += [
                {"tool": "write_file", "args": {"path": module, "content": text}},
                {"tool": "finish_fix", "args": {"finding_id": f"F-{n:03d}",
                 "summary": f"review {module}"}},
            ]  # fmt: skip
    (work / "script.yaml").write_text(yaml.safe_dump(script))
    return {
        "agent": {"backend": "script", "script": str(work / "script.yaml")},
        "teams": ["red", "green"],
        "stop_below": None,
    }


def run(kind: str, gate: str, tmp: Path, args: argparse.Namespace) -> dict:
    delay, cycles = args.delay, args.cycles
    work = tmp / f"{kind}-{gate}"
    work.mkdir()
    target = work / "target"
    tests = ""
    cache = "" if args.pytest_cache else " -p no:cacheprovider"
    if kind == "demo":
        extra = demo_target(target, delay)
    elif kind == "library":
        extra = library_target(target, args)
        tests = f" {args.library_tests}"
    elif kind == "boltons":
        extra = boltons_target(target, args, work)
        tests = f" {args.library_tests}"
    else:
        extra = breaking_target(target, delay, cycles, work)
    runs_log = work / "runs.log"
    wrapper = work / "timed.sh"
    wrapper.write_text(WRAPPER.format(log=runs_log))
    wrapper.chmod(0o755)
    spec = {
        "mode": "sweep",
        "target": str(target),
        "test_command": f"{wrapper} {sys.executable} -m pytest -q{cache}{tests}",
        "max_cycles": cycles,
        "test_gate": gate,
        "commands": {"sandbox": "none"},  # the wrapper writes its log outside the worktree
        **extra,
    }
    (work / "spec.yaml").write_text(yaml.safe_dump(spec))
    checkout = args.checkout or ROOT
    subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(checkout / "Snakefile"),
         "--cores", "1", "sessions/g/done", "--configfile", str(work / "spec.yaml")],
        cwd=work, check=True, capture_output=True,
        env={**os.environ, "PYTHONPATH": str(checkout)},  # that checkout's package, no other
    )  # fmt: skip
    spans = [line.split() for line in runs_log.read_text().splitlines()]
    worktree = work / "sessions/g/worktree"
    base = git(target, "rev-parse", "HEAD").strip()  # the session's base: the target's HEAD
    fixes = [s for s in git(worktree, "log", "--format=%s", f"{base}..HEAD").splitlines()
             if s.startswith("fix:")]  # fmt: skip
    return {
        "runs": len(spans),
        "some": sum(1 for s in spans if s[2] == "some"),
        "seconds": sum(float(s[1]) - float(s[0]) for s in spans),
        "cpu": sum(float(s[3]) for s in spans),
        "fixes": fixes,
        "tree": git(worktree, "rev-parse", "HEAD^{tree}").strip(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=1.0, help="seconds added to each run")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--only", default="", help="targets to run, comma-separated")
    parser.add_argument("--library", type=Path, help="a git clone of a library to sweep")
    parser.add_argument("--library-tests", default="", help="pytest arguments for its suite")
    parser.add_argument("--select", default="", help="ruff rules added to the library's own")
    parser.add_argument("--keep", type=Path, help="an empty folder to keep the sessions in")
    parser.add_argument(
        "--gates", default="per_fix,batch", help="the gates to run, comma-separated"
    )
    parser.add_argument(
        "--checkout", type=Path, help="the autoresearch checkout the sessions run (default: this)"
    )
    parser.add_argument(
        "--pytest-cache",
        action="store_true",
        help="keep pytest's cache plugin on, so the batch gate's bisection can use --lf",
    )
    args = parser.parse_args()
    kinds = ["demo", "breaking"] + (["library", "boltons"] if args.library else [])
    if args.only:
        kinds = [k for k in kinds if k in args.only.split(",")]
    checkout = args.checkout or ROOT
    version = git(ROOT, "rev-parse", "--short", "HEAD").strip() if checkout == ROOT else "?"
    print(f"autoresearch at {checkout} ({version})")
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        for kind in kinds:
            got = {gate: run(kind, gate, tmp, args) for gate in args.gates.split(",")}
            for gate, r in got.items():
                kept = len(r["fixes"]) or 1
                print(
                    f"{kind:8s} {gate:7s}: {len(r['fixes'])} fixes kept, {r['runs']} test runs "
                    f"({r['some']} of some tests; {r['runs'] / kept:.2f} per kept fix), "
                    f"{r['seconds']:.1f} suite-seconds ({r['seconds'] / kept:.2f} per kept fix), "
                    f"{r['cpu']:.1f} CPU-seconds ({r['cpu'] / kept:.2f} per kept fix)"
                )
            if len(got) < 2:
                continue
            per, bat = got["per_fix"], got["batch"]
            ratio = (per["seconds"] / max(len(per["fixes"]), 1)) / (
                bat["seconds"] / max(len(bat["fixes"]), 1)
            )
            same = per["fixes"] == bat["fixes"] and per["tree"] == bat["tree"]
            print(
                f"{kind:8s} suite-seconds per kept fix, per_fix / batch: {ratio:.2f}x; "
                f"same fixes and final tree: {'yes' if same else 'NO'}"
            )


if __name__ == "__main__":
    main()
