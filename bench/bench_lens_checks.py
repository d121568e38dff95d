"""Cost of the lenses' deterministic checks, on this repository's own files: the secret masker
(every written file passes it), the finding check, the doc check and the diff check.

Prints throughput and how many spans the masker replaced in the project's own source and docs
(its own test fixtures excluded): each one there is a false positive.

    python bench/bench_lens_checks.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

from autoresearch.checks import finding_schema
from autoresearch.modes.learn import doc_checks
from autoresearch.modes.lens import masking, suppressions

ROOT = Path(__file__).resolve().parent.parent


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat

    files = sorted((ROOT / "autoresearch").rglob("*.py")) + sorted((ROOT / "docs").glob("*.md"))
    files += [ROOT / "README.md"]
    text = "\n".join(p.read_text() for p in files)
    seconds = best_of(repeat, lambda: masking.mask(text))
    _, replaced = masking.mask(text)
    print(f"mask: {len(text) / 1e6 / seconds:.2f} MB/s over {len(text) / 1e3:.0f} kB")
    print(f"mask: {replaced} spans replaced in the project's own source and docs")

    findings = [
        {
            "title": f"finding {i}",
            "category": "bug",
            "location": f"autoresearch/measure/metrics.py:{1 + i % 300}",
        }
        for i in range(1000)
    ]
    seconds = best_of(repeat, lambda: finding_schema.check(findings, finding_schema.FIX, ROOT))
    print(f"finding check: {seconds / len(findings) * 1e6:.0f} µs per finding (1000 findings)")

    docs = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]

    def check_docs() -> None:
        for doc in docs:
            doc_checks.check_doc(str(doc.relative_to(ROOT)), doc.read_text(), ROOT)

    seconds = best_of(repeat, check_docs)
    print(f"doc check: {seconds / len(docs) * 1e3:.1f} ms per doc ({len(docs)} docs)")

    first = subprocess.run(
        ["git", "rev-list", "--max-parents=0", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()[0]
    diff = subprocess.run(
        ["git", "diff", first, "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    seconds = best_of(repeat, lambda: suppressions.check(diff))
    print(f"diff check: {len(diff) / 1e6 / seconds:.2f} MB/s over a {len(diff) / 1e3:.0f} kB diff")


if __name__ == "__main__":
    main()
