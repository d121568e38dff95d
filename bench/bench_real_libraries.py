"""Sweep sessions, through Snakemake, on real Go, Rust and Jest libraries nobody tuned the gate
for: the scripted backend hands in honest changes a maintainer would accept and dishonest ones
(a broken function with its test weakened), one finding each, `test_gate: per_fix`; each
change's record (kept, or refused and why) and what grading cost (the runs of the change as it
left its tests, and the graded runs with the start's tests laid over it, from test-runs.jsonl).

The changes are in bench/real_libraries/<name>.py. Each library is cloned from `--clones DIR`
(DIR/owner+name, a clone or a bare repository) at the commit below; the Rust crates lose their
dev-dependencies (crates.io is out of reach) and ms gets a `jest` key, each in a commit of
its own. The Jest suites need chai and expect.js where the jail can read them (`--node-path`,
a node_modules folder outside /tmp, passed as NODE_PATH).

    python bench/bench_real_libraries.py --clones /tmp/nonpy/mirrors --node-path
        /opt/deps/node_modules [--only uuid,ms] [--jest PATH] [--work /tmp/real-libs]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conftest import Workflow, script_spec  # noqa: E402


@dataclass(frozen=True)
class Library:
    repo: str
    commit: str
    command: str  # `{jest}` is the Jest binary
    prepare: str = ""  # what to do to the clone first (its own commit)


LIBRARIES = {
    "uuid": Library("google+uuid", "2d3c2a9cc518326daf99a383f07c4d3c44317e4d", "go test ./..."),
    "uuid_tables": Library(
        "google+uuid", "2d3c2a9cc518326daf99a383f07c4d3c44317e4d", "go test ./..."
    ),
    "itoa": Library(
        "dtolnay+itoa", "1577ed901354d0d7448ac162328f9dbf5183124c", "cargo test --offline", "rust"
    ),
    "dissimilar": Library(
        "dtolnay+dissimilar",
        "a4e3cb224d9099ec92d7c94b1204a1ccb69795da",
        "cargo test --offline",
        "rust",
    ),
    "arg": Library("vercel+arg", "07b9cadc447bfeddbe9a6b252ee1e6671833ba23", "{jest}"),
    "ms": Library("vercel+ms", "1a13a88f8c74604a96be3f4930fefe9765ea3613", "{jest}", "jest"),
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def clone(library: Library, clones: Path, into: Path) -> Path:
    source = clones / library.repo
    source = source / "repo" if (source / "repo").is_dir() else source
    git(into.parent, "clone", "-q", str(source), into.name)
    git(into, "checkout", "-q", "-B", "main", library.commit)
    if library.prepare == "rust":
        manifest = into / "Cargo.toml"
        text = manifest.read_text()
        text = re.sub(r"\[dependencies\]\nno-panic[^\n]*\n\n", "", text)
        text = re.sub(r"\[target\.'cfg\(not\(miri\)\)'\.dev-dependencies\]\n[^\[]*", "", text)
        text = re.sub(r"\[\[bench\]\]\n[^\[]*", "", text)
        manifest.write_text(text)
        shutil.rmtree(into / "benches", ignore_errors=True)
    elif library.prepare == "jest":
        package = json.loads((into / "package.json").read_text())
        package["scripts"]["test"] = "jest"
        package["jest"] = {"testMatch": ["**/tests.js"]}
        (into / "package.json").write_text(json.dumps(package, indent=2) + "\n")
    if library.prepare:
        git(into, "add", "-A")
        git(into, "-c", "user.name=bench", "-c", "user.email=b@x", "commit", "-qm", "offline")
    return into


def changes_of(name: str, target: Path) -> list[tuple[str, str, dict[str, str]]]:
    namespace: dict = {}
    exec((ROOT / "bench" / "real_libraries" / f"{name}.py").read_text(), namespace)
    return namespace["changes"](lambda path: (target / path).read_text())


def session(name: str, target: Path, command: str, work: Path, node_path: str) -> dict:
    workflow = Workflow(work)
    workflow.extra_env["NODE_PATH"] = node_path
    changes = changes_of(name, target)
    red, green = [], []
    for n, (title, where, files) in enumerate(changes, 1):
        args = {"severity": "medium", "title": title, "location": where, "issue": title,
                "impact": "maintainability"}  # fmt: skip
        red.append({"tool": "report_finding", "args": args})
        green += [
            {"tool": "write_file", "args": {"path": p, "content": c}} for p, c in files.items()
        ]
        green.append({"tool": "finish_fix", "args": {"finding_id": f"F-{n:03d}", "summary": title}})
    spec = script_spec(
        target, workflow.script({"red": {1: red}, "green": {1: green}}), work / "t.jsonl",
        teams=["red", "green"], max_cycles=1, max_findings=len(changes), test_gate="per_fix",
        test_command=command, commands={"pass_env": ["NODE_PATH"]},
    )  # fmt: skip
    spec["agent"]["max_turns"] = 400
    began = time.perf_counter()
    workflow.run("s", spec, timeout=3600)
    wall = time.perf_counter() - began
    decision = workflow.decision("s", 1)
    titles = {f"F-{n:03d}": title for n, (title, _, _) in enumerate(changes, 1)}
    records = [(titles[e["id"]], "kept", "") for e in decision["fixed"]]
    records += [(titles[e["id"]], "refused", e["reason"]) for e in decision["skipped"]]
    runs = [json.loads(line) for line in (workflow.session("s") / "test-runs.jsonl").open()]
    graded = [r["run"]["duration_s"] for r in runs if r["overlay"]]
    as_left = [r["run"]["duration_s"] for r in runs if not r["overlay"]]
    return {"wall": wall, "records": records, "graded": graded, "as_left": as_left}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clones", type=Path, required=True)
    parser.add_argument("--node-path", default="")
    parser.add_argument(
        "--jest", default=os.environ.get("JEST") or str(ROOT / ".jest/node_modules/.bin/jest")
    )
    parser.add_argument("--only", default=",".join(LIBRARIES))
    parser.add_argument("--work", type=Path, default=Path("/tmp/real-libraries"))
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    for name in args.only.split(","):
        library = LIBRARIES[name]
        target = clone(library, args.clones, args.work / f"{name}-target")
        command = library.command.format(jest=args.jest)
        found = session(name, target, command, args.work / f"{name}-work", args.node_path)
        shown = command.replace(args.jest, "jest")
        print(f"== {name} ({library.repo.replace('+', '/')} at {library.commit[:7]}, "
              f"`{shown}`): session {found['wall']:.0f} s")  # fmt: skip
        for title, fate, reason in found["records"]:
            print(f"  {fate:8} {title}" + (f"\n           {reason[:400]}" if reason else ""))
        plain, laid = found["as_left"], found["graded"]
        share = 100 * sum(laid) / max(sum(plain), 1e-9)
        print(f"  runs as left: {len(plain)}, {sum(plain):.1f} s; graded (start's tests laid "
              f"over): {len(laid)}, {sum(laid):.1f} s (+{share:.0f}%)")  # fmt: skip


if __name__ == "__main__":
    main()
