"""What `session_report` costs at the end of a session (`done` waits for it).

Builds synthetic sweep sessions of N cycles (decision.json, eval-results.md, results.tsv and
usage.tsv rows as a real cycle writes them) and prints, in a fresh Python each time, the CPU
(user + system, which the machine's load leaves alone) of: the report's whole process
(start-up, every import, every page and the plot), the libraries' imports alone (what the
report module leaves to its first call: matplotlib, markdown, pandas where a checkout still
uses it), and which of pandas and matplotlib the process ended up with.

    python bench/bench_session_report.py [--cycles 10 100 500] [--checkout PATH] [--repeat N]

`--checkout PATH` reports another checkout's package (a "before": `git archive <commit> |
tar -x -C PATH`) with this interpreter; run it with a virtualenv that has what that
checkout needs (`--python`), and the rounds alternate before and after.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run in a fresh interpreter, so the imports are counted as the report job pays them.
MEASURE = """
import resource, sys
sys.path.insert(0, {root!r})
from pathlib import Path

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

from autoresearch import modes
from autoresearch.views.session_report import SessionFacts, write_report
before = cpu()
before_modules = set(sys.modules)
mode = modes.get("sweep")
layout = mode.layout(Path({session!r}))
out = layout.report_dir
views = mode.views
facts = SessionFacts("sweep", "5 passed")
write_report(layout, views.report_steps(layout), views.kept_label, facts,
             summary=out / "session.html", results=out / "results.html",
             evaluations=out / "evaluations", plot=out / "cycles.png", outcome=out / "outcome")
done = cpu()
libraries = [m for m in ("pandas", "matplotlib") if m in sys.modules and m not in before_modules]
print(f"{{done:.3f}} {{done - before:.3f}} {{','.join(libraries) or '-'}}")
"""

RESULTS_HEADER = (
    "cycle\tteam\tstatus\ttests_pass\tdescription\tfiles_changed\ttimestamp\ttrack\ttokens"
    "\tcost_usd\n"
)
USAGE_HEADER = (
    "track\tcycle\tteam\tmodel\trequests\tinput_tokens\toutput_tokens\tcache_write_tokens"
    "\tcache_read_tokens\tcost_usd\tstop_reason\ttimestamp\n"
)


def make_session(root: Path, cycles: int) -> Path:
    session = root / "sessions" / f"bench{cycles}"
    results, usage, summary = [RESULTS_HEADER], [USAGE_HEADER], ["# Autoresearch session\n"]
    for n in range(1, cycles + 1):
        cycle = session / "cycles" / f"{n:03d}"
        cycle.mkdir(parents=True)
        fixed = [
            {"id": f"F-{n}-{i}", "key": "E1 x", "commit": "c", "summary": "s"} for i in range(3)
        ]
        decision = {
            "cycle": n,
            "track": "",
            "fixed": fixed,
            "tests_pass": True,
            "tests": {"passed": 120, "failed": 0},
            "stop": n == cycles,
        }
        (cycle / "decision.json").write_text(json.dumps(decision))
        fixes = "".join(f"- [{f['id']}] {f['summary']}\n" for f in fixed)
        (cycle / "eval-results.md").write_text(
            f"# Evaluation: cycle {n:03d}\n\n## Fixed\n{fixes}\n## Decision\ncontinue\n"
        )
        for team in ("red", "green", "refactor"):
            results.append(f"{n:03d}\t{team}\tok\tTrue\t3 fixed\t2\tt\t\t1000\t0.05\n")
            usage.append(f"\t{n:03d}\t{team}\tm\t4\t900\t100\t0\t0\t0.050000\tfinished\tt\n")
        summary.append(f"- Cycle {n}: 3 fixed, tests pass\n")
    (session / "results.tsv").write_text("".join(results))
    (session / "usage.tsv").write_text("".join(usage))
    (session / "session.md").write_text("".join(summary))
    return session


def measure(root: Path, python: str, session: Path) -> list[str]:
    code = MEASURE.format(root=str(root), session=str(session))
    run = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True)
    return run.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--checkout", type=Path, help="a before: another checkout's package")
    parser.add_argument("--python", default=sys.executable, help="the before's interpreter")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    sides = [("after", ROOT, sys.executable)]
    if args.checkout:
        sides.insert(0, ("before", args.checkout.resolve(), args.python))
    print("side    cycles  process_cpu_s  report_cpu_s  libraries imported by the report")
    with tempfile.TemporaryDirectory() as tmp:
        for cycles in args.cycles:
            session = make_session(Path(tmp), cycles)
            for _ in range(args.repeat):
                for side, root, python in sides:  # paired: before, after, before, after
                    total, report, libraries = measure(root, python, session)
                    print(
                        f"{side:6s}  {cycles:6d}  {float(total):13.2f}  {float(report):12.2f}  "
                        f"{libraries}"
                    )


if __name__ == "__main__":
    main()
