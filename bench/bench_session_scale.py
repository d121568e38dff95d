"""A long session, built synthetically: the CPU of `snakemake --report` and the memory of
a Snakemake process as the cycles grow.

A real sweep session of 3 cycles is run first (the script backend, `true` as the test
command: seconds). It is then extended to N cycles by copying its second cycle: each
cycle's files (decision.json with its number, the stage records), its evaluation page,
its rows of results.tsv, usage.tsv and timings.tsv, and Snakemake's metadata of its
outputs (paths renumbered), so Snakemake sees a finished session of N cycles, as if it
had run them. For each N it prints, in a fresh process each time:

  - `snakemake --report`: CPU seconds (user + system) and peak RSS.

    python bench/bench_session_scale.py [--cycles 10 100 1000 2000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--keep", type=Path, help="work in this (new) folder and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
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


if __name__ == "__main__":
    main()
