"""A long session, built synthetically: the CPU of `snakemake --report` and the memory of
a Snakemake process as the cycles grow.

A real sweep session of 3 cycles is run first (the script backend, `true` as the test
command: seconds). It is then extended to N cycles by copying its second cycle: each
cycle's files (decision.json with its number, the stage records), its evaluation page,
its rows of results.tsv, usage.tsv and timings.tsv, and Snakemake's metadata of its
outputs (paths renumbered), so Snakemake sees a finished session of N cycles, as if it
had run them. For each N it prints, in a fresh process each time:

  - `snakemake --report`: CPU seconds (user + system) and peak RSS.

With `--rss-cycles`, the memory of the process that runs a session: a real sweep of the
largest N cycles (script backend, `true` as the test command) runs in one Snakemake
process, and its RSS is read when each listed cycle's decision is on disk. It runs twice,
side by side: as the workflow runs it (finished jobs taken out of Snakemake's DAG,
engine/finished_jobs.py) and with that pruning turned off (what Snakemake alone keeps).
A cycle takes about 1.5 s on a quiet machine, so 2000 cycles take most of an hour.

    python bench/bench_session_scale.py [--cycles 10 100 1000 2000] [--keep DIR]
    python bench/bench_session_scale.py --cycles --rss-cycles 500 1000 2000
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench")]

import bench_sweep_overhead as sweep  # noqa: E402

SEED_CYCLES = 3  # the real session: cycle 2 is the one copied, 3 the last (stop)
SESSION = "sessions/bench"


def seed(tmp: Path) -> Path:
    """The real 3-cycle session; returns the Snakemake work folder."""
    sweep.make_target(tmp / "target")
    sweep.make_script(tmp / "script.yaml", SEED_CYCLES)
    sweep.make_spec(tmp / "spec.yaml", tmp / "target", tmp / "script.yaml", SEED_CYCLES)
    work = tmp / "work"
    work.mkdir()
    subprocess.run(
        sweep.command(tmp / "spec.yaml", "bench"), cwd=work, check=True, capture_output=True
    )
    return work


def _meta_name(path: str) -> str:
    return base64.urlsafe_b64encode(path.encode()).decode()


def _renumber(text: str, old: int, new: int) -> str:
    """`cycles/002/` -> `cycles/NNN/` and the cycle before it likewise."""
    for o, n in ((old, new), (old - 1, new - 1)):
        text = text.replace(f"cycles/{o:03d}/", f"cycles/{n:03d}/")
    return text


def extend(work: Path, spec: Path, cycles: int) -> None:
    """Copies of cycle 2 as cycles 3..N-1, the seed's last cycle as cycle N."""
    session = work / SESSION
    meta = work / ".snakemake" / "metadata"
    last = session / "cycles" / f"{SEED_CYCLES:03d}"
    templates = {n: session / "cycles" / f"{n:03d}" for n in (2, SEED_CYCLES)}
    saved = {n: Path(tempfile.mkdtemp()) / "c" for n in templates}
    for n, folder in templates.items():
        shutil.copytree(folder, saved[n])
    shutil.rmtree(last)
    evaluations = session / "report" / "evaluations"
    page = (evaluations / "002.html").read_text()
    metas = {}
    for n in templates:
        for f in saved[n].iterdir():
            rel = f"{SESSION}/cycles/{n:03d}/{f.name}"
            found = meta / _meta_name(rel)
            if found.exists():
                metas[(n, f.name)] = found.read_text()
    tables = {}
    for name in ("results.tsv", "usage.tsv", "timings.tsv"):
        lines = (session / name).read_text().splitlines(keepends=True)
        tables[name] = (lines[0], [row for row in lines[1:] if "\t002\t" in f"\t{row}"])
        (session / name).write_text("".join(r for r in lines if "\t003\t" not in f"\t{r}"))
    for cycle in range(SEED_CYCLES, cycles + 1):
        source = SEED_CYCLES if cycle == cycles else 2
        folder = session / "cycles" / f"{cycle:03d}"
        shutil.copytree(saved[source], folder)
        decision = json.loads((folder / "decision.json").read_text())
        decision["cycle"] = cycle
        (folder / "decision.json").write_text(json.dumps(decision, indent=2) + "\n")
        (evaluations / f"{cycle:03d}.html").write_text(page.replace("002", f"{cycle:03d}"))
        for f in folder.iterdir():
            text = metas.get((source, f.name))
            if text is not None:
                rel = f"{SESSION}/cycles/{cycle:03d}/{f.name}"
                (meta / _meta_name(rel)).write_text(_renumber(text, source, cycle))
        for name, (_, rows) in tables.items():
            with (session / name).open("a") as handle:
                handle.writelines(re.sub(r"(^|\t)002\t", rf"\g<1>{cycle:03d}\t", r) for r in rows)
    # Outputs newer than their inputs, in the order they were made.
    now = time.time()
    for i, path in enumerate(sorted(session.rglob("*"), key=_made_order)):
        try:
            os.utime(path, (now + i * 1e-4, now + i * 1e-4), follow_symlinks=False)
        except OSError:
            pass
    data = yaml.safe_load(spec.read_text())
    data["max_cycles"] = cycles
    spec.write_text(yaml.safe_dump(data))
    for n in saved.values():
        shutil.rmtree(n.parent)


def _made_order(path: Path) -> tuple:
    parts = path.parts
    if "cycles" in parts:
        at = parts.index("cycles")
        return (1, parts[at + 1] if len(parts) > at + 1 else "", str(path))
    late = any(p in ("report", "done") for p in parts)
    return (2 if late else 0, "", str(path))


def measure(work: Path, spec: Path, *extra: str) -> tuple[float, float]:
    """(CPU seconds, peak RSS MiB) of one Snakemake process."""
    out = work / "time.txt"
    args = ["/usr/bin/time", "-o", str(out), "-f", "%U %S %M"]
    args += sweep.command(spec, "bench", *extra)
    subprocess.run(args, cwd=work, check=True, capture_output=True)
    user, system, kib = out.read_text().split()[-3:]
    return float(user) + float(system), int(kib) / 1024


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def rss_child(tmp: Path, marks: list[int], pruned: bool) -> None:
    """In this process: a real sweep of max(marks) cycles; prints `cycle rss_mib` as each
    mark's decision lands."""
    cycles = max(marks)
    sweep.make_target(tmp / "target")
    sweep.make_script(tmp / "script.yaml", cycles)
    sweep.make_spec(tmp / "spec.yaml", tmp / "target", tmp / "script.yaml", cycles)
    work = tmp / "work"
    work.mkdir()
    os.chdir(work)
    if not pruned:
        from autoresearch.engine import finished_jobs

        finished_jobs.install = lambda workflow: False  # what Snakemake alone keeps
    out = os.fdopen(os.dup(1), "w", buffering=1)  # Snakemake's console stays apart

    def watch() -> None:
        for mark in sorted(marks):
            decision = work / SESSION / "cycles" / f"{mark:03d}" / "decision.json"
            while not decision.exists():
                time.sleep(0.2)
            gc.collect()
            jobs = sum(type(o) is Job for o in gc.get_objects())
            line = f"{mark} {rss_mib():.1f} {jobs}"
            print(line, file=out)
            with (tmp / "marks.txt").open("a") as marks_file:  # read while it runs
                print(line, file=marks_file)

    from snakemake.jobs import Job

    threading.Thread(target=watch, daemon=True).start()
    from snakemake.cli import main as snakemake

    argv = sweep.command(tmp / "spec.yaml", "bench")[3:]
    try:
        snakemake(argv)
    except SystemExit as end:
        if end.code:
            sys.exit(f"the session failed (exit {end.code}); its files are in {tmp}")


def rss_table(tmp: Path, marks: list[int]) -> None:
    """Both runs at once (the same machine load), then one row per mark."""
    tmp.mkdir(parents=True)
    runs = {}
    for name, pruned in (("pruned", True), ("unpruned", False)):
        args = [sys.executable, __file__, "--rss-child", str(tmp / name), "--rss-cycles"]
        args += [str(m) for m in marks] + (["--unpruned"] if not pruned else [])
        log = (tmp / f"{name}.log").open("w")
        runs[name] = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
    figures = {name: proc.communicate()[0] for name, proc in runs.items()}
    for name, proc in runs.items():
        if proc.returncode:
            sys.exit(f"{name} run failed: see {tmp / (name + '.log')}")
    table = {
        name: {line.split()[0]: line.split()[1:] for line in text.splitlines()}
        for name, text in figures.items()
    }
    print("RSS (MiB) and live Snakemake jobs of the process running the session")
    print("cycles  rss_pruned  jobs_pruned  rss_unpruned  jobs_unpruned (Snakemake alone)")
    for mark in sorted(marks):
        (rss, jobs), (rss_u, jobs_u) = table["pruned"][str(mark)], table["unpruned"][str(mark)]
        print(f"{mark:6d}  {float(rss):10.0f}  {jobs:>11}  {float(rss_u):12.0f}  {jobs_u:>13}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, nargs="*", default=[10, 100, 1000])
    parser.add_argument("--keep", type=Path, help="work in this (new) folder and keep it")
    parser.add_argument("--rss-cycles", type=int, nargs="+", help="RSS of a real run at these")
    parser.add_argument("--rss-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--unpruned", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        args.rss_child.mkdir(parents=True)
        rss_child(args.rss_child, args.rss_cycles, pruned=not args.unpruned)
        return
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        if args.cycles:
            seed(tmp / "seed")
            print("cycles  report_cpu_s  report_rss_mib")
        for cycles in sorted(args.cycles):
            place = tmp / f"c{cycles}"
            shutil.copytree(tmp / "seed", place, symlinks=True)
            spec = place / "spec.yaml"
            extend(place / "work", spec, cycles)
            report = measure(place / "work", spec, "--report", str(place / "report.html"))
            print(f"{cycles:6d}  {report[0]:12.2f}  {report[1]:14.0f}", flush=True)
            if not args.keep:
                shutil.rmtree(place)
        if args.rss_cycles:
            rss_table(tmp / "rss", args.rss_cycles)


if __name__ == "__main__":
    main()
