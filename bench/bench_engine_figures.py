"""The engine's shape in figures (issue 23), measured on the source the same way each time.

- lines: non-blank lines of autoresearch/modes/ and of the whole package (the product);
- loop bodies: functions that build a step's `Judged` (what `loop.decide` is handed), and the
  per-mode job functions in scripts/ that hand a judge to `loop.decide`;
- final_decision: the implementations of that name (methods and scripts/ functions);
- hook points: the public methods and class attributes of Mode, Lens and LoopLens;
- the protocol: `Mode`'s public members, its parts' (views, setup), and per mode the members
  it sets on each (its own classes up to the base's) and its lines (file or folder);
- flat modules and wings: the modules at the package's top, and each wing's size;
- import depth: the longest chain of our own module-level imports from scripts/ down.

    python bench/bench_engine_figures.py [--root PATH]
"""

from __future__ import annotations

import argparse
import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASES = {
    "Mode": "autoresearch/modes/base.py",
    "Lens": "autoresearch/modes/lens/__init__.py",
    "LoopLens": "autoresearch/modes/lens/loop.py",
}


def lines(paths: list[Path]) -> int:
    return sum(1 for p in paths for line in p.read_text().splitlines() if line.strip())


def py_files(root: Path, *folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (root / f).rglob("*.py"))


def functions(path: Path) -> list[ast.FunctionDef]:
    tree = ast.parse(path.read_text())
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]


def calls(node: ast.AST, name: str) -> bool:
    """Whether `node` calls something whose last name is `name` (Judged(...), loop.decide)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            last = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if last == name:
                return True
    return False


def loop_bodies(root: Path) -> tuple[list[str], list[str]]:
    """(functions that build a Judged, scripts/ jobs that hand their own judge to decide)."""
    judges, glue = [], []
    for path in py_files(root, "autoresearch", "scripts"):
        rel = path.relative_to(root)
        for fn in functions(path):
            if calls(fn, "Judged") and str(rel) != "autoresearch/engine/loop.py":
                judges.append(f"{rel}::{fn.name}")
            if rel.parts[0] == "scripts" and calls(fn, "decide") and fn.name != "judge":
                glue.append(f"{rel}::{fn.name}")
    return judges, glue


def final_decisions(root: Path) -> list[str]:
    return [
        f"{p.relative_to(root)}::{fn.name}"
        for p in py_files(root, "autoresearch", "scripts")
        for fn in functions(p)
        if fn.name == "final_decision"
    ]


def hook_points(root: Path) -> dict[str, int]:
    """Public methods and class attributes each base class defines itself."""
    out = {}
    for cls, rel in BASES.items():
        tree = ast.parse((root / rel).read_text())
        node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
        names = set()
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(item.name)
            elif isinstance(item, ast.Assign):
                names |= {t.id for t in item.targets if isinstance(t, ast.Name)}
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                names.add(item.target.id)
        out[cls] = len({n for n in names if not n.startswith("_")})
    return out


# Run in the measured checkout's own Python path: the classes as they are, inherited members
# included (the AST sees only what a class body writes).
PROTOCOL = """
import json
from autoresearch import modes
from autoresearch.modes import base

def public(cls):
    return {n for n in dir(cls) if not n.startswith("_")}

def own(cls, top, names, mine=True):
    # (set by the mode's own class)+(by it and its bases up to the part's base)
    got = set()
    for c in cls.__mro__:
        if c is top:
            break
        got |= set(vars(c)) & names
    return f"{len(set(vars(cls)) & names) if mine else 0}+{len(got)}"

parts = {p: getattr(base, p) for p in ("Views", "Setup") if hasattr(base, p)}
out = {"Mode": len(public(base.Mode))} | {p: len(public(c)) for p, c in parts.items()}
per = {}
for name in modes.MODES:
    m = modes.get(name)
    row = {"mode": own(type(m), base.Mode, public(base.Mode))}
    for p, c in parts.items():
        row[p] = own(type(getattr(m, p.lower())), c, public(c), p.lower() in vars(type(m)))
    per[name] = row
print(json.dumps({"sizes": out, "per_mode": per}))
"""


def protocol(root: Path) -> dict:
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", PROTOCOL], cwd=root, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def mode_lines(root: Path) -> dict[str, int]:
    """Each mode's lines: its module, or its package (its strategy and the kit it runs)."""
    out = {}
    for path in sorted((root / "autoresearch/modes").iterdir()):
        if path.name in ("__init__.py", "base.py", "cycle_view.py", "__pycache__"):
            continue
        files = [path] if path.suffix == ".py" else py_files(root, str(path.relative_to(root)))
        if files:
            out[path.stem] = lines(files)
    return out


def import_depth(root: Path) -> int:
    mods: dict[str, Path] = {}
    for p in py_files(root, "autoresearch", "scripts"):
        parts = p.relative_to(root).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p

    def deps(name: str) -> set[str]:
        path = mods[name]
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        out = set()
        # Module-level imports only: a function's import is loaded on first use, not on
        # import, and may close a loop the architecture test allows.
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    out.add(t)
        return out

    graph = {m: deps(m) for m in mods}

    @cache
    def depth(m: str, seen: frozenset[str] = frozenset()) -> int:
        onward = [d for d in graph[m] if d not in seen]  # a package and its modules: no loop
        return 1 + max((depth(d, seen | {m}) for d in onward), default=0)

    return max(depth(m) for m in mods if m.startswith("scripts"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    root = parser.parse_args().root
    judges, glue = loop_bodies(root)
    finals = final_decisions(root)
    print(f"modes/ lines:            {lines(py_files(root, 'autoresearch/modes'))}")
    print(f"package lines:           {lines(py_files(root, 'autoresearch'))}")
    package = root / "autoresearch"
    flat = sorted(p.name for p in package.glob("*.py"))
    print(f"flat modules at the top: {len(flat)} ({', '.join(flat)})")
    for wing in sorted(p for p in package.iterdir() if (p / "__init__.py").exists()):
        files = py_files(root, f"autoresearch/{wing.name}")
        print(f"    {wing.name + '/':10} {len(files):3} modules {lines(files):6} lines")
    print(f"judges (build Judged):   {len(judges)}")
    for j in judges:
        print(f"    {j}")
    print(f"scripts/ decide glue:    {len(glue)}")
    for g in glue:
        print(f"    {g}")
    print(f"final_decision impls:    {len(finals)}")
    for f in finals:
        print(f"    {f}")
    for cls, n in hook_points(root).items():
        print(f"hook points {cls + ':':9} {n}")
    print(f"import depth (scripts/): {import_depth(root)}")
    shape = protocol(root)
    sizes = ", ".join(f"{k} {v}" for k, v in shape["sizes"].items())
    print(f"protocol members:        {sizes}")
    sizes_by_mode = mode_lines(root)
    print("members each mode sets (its own class+with its bases: mode / views / setup), lines:")
    for name, row in shape["per_mode"].items():
        sets = " / ".join(str(row.get(k, "-")) for k in ("mode", "Views", "Setup"))
        print(f"    {name:11} {sets:20} {sizes_by_mode.get(name, 0):6} lines")


if __name__ == "__main__":
    main()
