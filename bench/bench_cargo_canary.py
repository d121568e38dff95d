"""What cargo's canary (autoresearch/gate/cargo_canary.py) costs a cargo test run: one more
test binary to build and run. A small crate (a lib with two unit tests and one integration
test) is tested with `run_tests("cargo test")` from a clean `target` (as a pristine tree has
it) and again with `target` kept, each with and without the canary; then the same for a
virtual workspace of two such crates (its canary goes into one member). Wall and the children's
CPU, median of `--rounds`.

    python bench/bench_cargo_canary.py [--rounds 3] [--only crate|workspace]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from autoresearch.gate import cargo_canary, testrun

FILES = {
    "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
    "src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n#[cfg(test)]\nmod tests {\n"
    "    #[test]\n    fn adds() { assert_eq!(super::add(1, 2), 3); }\n"
    "    #[test]\n    fn adds_zero() { assert_eq!(super::add(0, 2), 2); }\n}\n",
    "tests/it.rs": "#[test]\nfn it_adds() { assert_eq!(calc::add(2, 2), 4); }\n",
}


def one(repo: Path, clean: bool) -> tuple[float, float, str]:
    if clean:
        shutil.rmtree(repo / "target", ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = testrun.run_tests("cargo test", repo, stack="Rust", timeout_s=600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, run.summary


def workspace_files() -> dict[str, str]:
    files = {"Cargo.toml": '[workspace]\nmembers = ["crates/*"]\nresolver = "2"\n'}
    for member in ("calc", "more"):
        for name, text in FILES.items():
            # Integration tests named apart: the two members' ids would be the same.
            name = name.replace("it.rs", f"{member}_it.rs")
            files[f"crates/{member}/{name}"] = text.replace("calc", member)
    return files


def bench(label: str, files: dict[str, str], rounds: int) -> None:
    lay = cargo_canary.lay
    with tempfile.TemporaryDirectory(prefix="bench-cargo-canary-") as tmp:
        repo = Path(tmp) / "crate"
        for name, text in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        for clean in (True, False):
            for how, laid in (
                ("without canary", lambda cwd, command="": None),
                ("with canary", lay),
            ):
                cargo_canary.lay = laid
                one(repo, clean)  # warm: the first build of the toolchain's caches
                runs = [one(repo, clean) for _ in range(rounds)]
                wall = statistics.median(r[0] for r in runs)
                cpu = statistics.median(r[1] for r in runs)
                state = "clean target" if clean else "kept target "
                figures = f"wall {wall:5.2f} s, CPU {cpu:5.2f} s ({runs[0][2]})"
                print(f"{label:9} {state} {how:15} {figures}")
    cargo_canary.lay = lay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("crate", "workspace"))
    args = parser.parse_args()
    if args.only != "workspace":
        bench("crate", FILES, args.rounds)
    if args.only != "crate":
        bench("workspace", workspace_files(), args.rounds)


if __name__ == "__main__":
    main()
