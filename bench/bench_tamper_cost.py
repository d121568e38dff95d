"""What the tamper screen's reading costs: the CPU of `tamper.check_file` over every code
file of a tree, each screened as a change that adds a blank line to it (both versions read),
best of `--rounds`.

    python bench/bench_tamper_cost.py TREE [TREE ...] [--rounds 3] [--checkout DIR]

`--checkout` imports the screen from another checkout of this repository (an export of
main, for the figure before a change), so that both are timed on the same files.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

SUFFIXES = (".py", ".go", ".rs", ".js", ".mjs", ".cjs", ".ts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    sys.path.insert(0, str(args.checkout))
    from autoresearch.safety import tamper

    for top in args.trees:
        files = [p for p in sorted(top.rglob("*")) if p.is_file() and p.name.endswith(SUFFIXES)]
        texts = [(str(p.relative_to(top)), p.read_text(errors="replace")) for p in files]
        best = float("inf")
        for _ in range(args.rounds):
            start = time.process_time()
            for path, text in texts:
                tamper.check_file(path, text, text + "\n", profile="gate")
            best = min(best, time.process_time() - start)
        size = sum(len(t) for _, t in texts) / 1e6
        per = 1000 * best / max(len(texts), 1)
        print(
            f"{top} [{args.checkout}]: {len(texts)} files, {size:.2f} MB: "
            f"{best:.2f} s CPU (best of {args.rounds}), {per:.1f} ms a file"
        )


if __name__ == "__main__":
    main()
