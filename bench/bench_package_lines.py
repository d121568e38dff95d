"""The package's size as issue 36 counts it (all lines of autoresearch/**/*.py), per wing
and per mode, at two commits side by side.

    python bench/bench_package_lines.py [BEFORE [AFTER]]   (default: HEAD~1 and the working tree)
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sizes(ref: str | None) -> Counter[str]:
    """Lines per group: each wing (autoresearch/<wing>/), each mode (modes/<mode>), the
    flat top modules, and the total."""
    if ref is None:
        names = [str(p.relative_to(ROOT)) for p in (ROOT / "autoresearch").rglob("*.py")]
        text = {n: (ROOT / n).read_text() for n in names}
    else:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", ref, "autoresearch"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        names = [n for n in listed if n.endswith(".py")]
        text = {n: _show(ref, n) for n in names}
    counts: Counter[str] = Counter()
    for name, body in text.items():
        lines = len(body.splitlines())
        parts = name.split("/")
        counts["total"] += lines
        counts[parts[1] + "/" if len(parts) > 2 else "(top)"] += lines
        if parts[1] == "modes":
            mode = (
                parts[2].removesuffix(".py") if len(parts) > 3 or parts[2] != "base.py" else "base"
            )
            counts[f"  modes/{mode}"] += lines
    return counts


def _show(ref: str, name: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{ref}:{name}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def main() -> None:
    before = sys.argv[1] if len(sys.argv) > 1 else "HEAD~1"
    after = sys.argv[2] if len(sys.argv) > 2 else None
    a, b = sizes(before), sizes(after)
    print(f"{'lines':24} {before:>10} {after or 'worktree':>10} {'change':>7}")
    for key in sorted(a.keys() | b.keys(), key=lambda k: (k == "total", k.strip())):
        print(f"{key:24} {a[key]:>10} {b[key]:>10} {b[key] - a[key]:>+7}")


if __name__ == "__main__":
    main()
