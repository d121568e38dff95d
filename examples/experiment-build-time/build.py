"""A stand-in build: "compiles" every module under src/ (each takes a fixed 25 ms, as a
compiler process would) into build/, and prints {"build_seconds": ...} as JSON."""

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import build_config

COMPILE_S = 0.025


def compile_module(source: Path, out: Path) -> Path:
    time.sleep(COMPILE_S)  # the compiler's own work, which no setting here makes faster
    target = out / (source.stem + ".o")
    target.write_text(source.read_text().upper())
    return target


def build() -> list[Path]:
    out = Path("build")
    out.mkdir(exist_ok=True)
    sources = sorted(Path("src").glob("*.c"))
    with ThreadPoolExecutor(max_workers=build_config.JOBS) as pool:
        return list(pool.map(lambda s: compile_module(s, out), sources))


if __name__ == "__main__":
    start = time.perf_counter()
    build()
    print(json.dumps({"build_seconds": round(time.perf_counter() - start, 4)}))
