"""What `session_report` costs at the end of a session (`done` waits for it).

Builds synthetic sweep sessions of N cycles (decision.json, eval-results.md, results.tsv and
usage.tsv rows as a real cycle writes them) and prints, in a fresh Python each time: the
import of pandas, matplotlib and markdown, and the rendering of every page and the plot.

    python bench/bench_session_report.py [--cycles 10 100 500]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run in a fresh interpreter, so the imports are timed as the report job pays them.
MEASURE = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
start = time.perf_counter()
import pandas, matplotlib.figure, markdown
imported = time.perf_counter()
from autoresearch import modes
from autoresearch.views.session_report import SessionFacts, write_report
mode = modes.get("sweep")
layout = mode.layout(Path({session!r}))
out = layout.report_dir
views = mode.views
facts = SessionFacts("sweep", "5 passed")
write_report(layout, views.report_steps(layout), views.kept_label, facts,
             summary=out / "session.html", results=out / "results.html",
             evaluations=out / "evaluations", plot=out / "cycles.png", outcome=out / "outcome")
done = time.perf_counter()
print(f"{{imported - start:.2f}} {{done - imported:.2f}}")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, nargs="+", default=[10, 100, 500])
    args = parser.parse_args()
    print("cycles  import_s  render_s")
    with tempfile.TemporaryDirectory() as tmp:
        for cycles in args.cycles:
            session = make_session(Path(tmp), cycles)
            code = MEASURE.format(root=str(ROOT), session=str(session))
            out = subprocess.run(
                [sys.executable, "-c", code], check=True, capture_output=True, text=True
            ).stdout.split()
            print(f"{cycles:6d}  {float(out[0]):8.2f}  {float(out[1]):8.2f}")


if __name__ == "__main__":
    main()
