"""The package's size per wing (issue 36: at most 30,000 lines), for a checkout or two.

Counts every line of the `.py` files (the issue's measure, `cat | wc -l`) and the non-blank
ones, per wing and per mode folder, and for the whole package; with `--before PATH`, the
same for a second checkout (e.g. a `git archive` of the base) and the difference.

    python bench/bench_wing_lines.py [--root PATH] [--before PATH]
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sizes(root: Path) -> dict[str, tuple[int, int]]:
    """Place -> (all lines, non-blank lines): each wing, each mode folder, the package."""
    package = root / "autoresearch"
    places = [p for p in sorted(package.iterdir()) if (p / "__init__.py").exists()]
    places += [p for p in sorted((package / "modes").iterdir()) if p.is_dir()]
    found: dict[str, tuple[int, int]] = {}
    for place in [*places, package]:
        texts = [f.read_text() for f in place.rglob("*.py")]
        every = sum(len(t.splitlines()) for t in texts)
        filled = sum(1 for t in texts for line in t.splitlines() if line.strip())
        found[str(place.relative_to(root)) if place != package else "package"] = (every, filled)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--before", type=Path, help="a second checkout to compare against")
    args = parser.parse_args()
    after = sizes(args.root)
    before = sizes(args.before) if args.before else {}
    print(f"{'place':32} {'lines':>7} {'non-blank':>9}" + ("  before   change" if before else ""))
    for place, (every, filled) in after.items():
        row = f"{place:32} {every:7} {filled:9}"
        if place in before:
            row += f"  {before[place][0]:6} {every - before[place][0]:+7}"
        print(row)


if __name__ == "__main__":
    main()
