"""Which files make up narrow mode's measurement, so that no agent can edit them.

A goal met by editing the benchmark is no goal met: the script a measurement command
runs, the Makefile of `make bench`, and (by default) the target's tests are protected.
"""

from __future__ import annotations

from pathlib import Path

from ... import words as shell_words
from .goal import Goal

# What counts as a test file when `goal.protect_tests` is on (an agent must not
# make the goal "met" by weakening them).
TEST_GLOBS = [
    "tests",
    "test",
    "spec",
    "__tests__",
    "test_*.py",
    "*_test.py",
    "conftest.py",
    "*_test.go",
    "*.test.*",
    "*.spec.*",
    "*_spec.rb",
]
# Words that run the program named after them: the script they run is the measurement.
INTERPRETERS = {
    "python",
    "python3",
    "bash",
    "sh",
    "zsh",
    "node",
    "deno",
    "bun",
    "ruby",
    "perl",
    "php",
    "Rscript",
    "julia",
    "lua",
}
# Words that only wrap the real command: `time`, `uv run python x.py`, `timeout 60 ./b.sh`.
WRAPPERS = {"time", "nice", "env", "exec", "command", "nohup", "timeout"}
RUNNERS = {"uv": "run", "poetry": "run", "pipenv": "run", "pdm": "run", "hatch": "run"}
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")


def _words(command: str) -> list[str]:
    try:
        return shell_words.split(command, punctuation=True)
    except shell_words.TooLong:
        return []  # refused at the spec check; never split
    except ValueError:  # unbalanced quotes: the shell will complain; protect what we can
        return command.split()


def _segments(command: str) -> list[list[str]]:
    """The simple commands of a pipeline or list, without redirections (`< file` is data)."""
    segments: list[list[str]] = [[]]
    skip_next = False
    for word in _words(command):
        if skip_next:
            skip_next = False
        elif set(word) <= set("<>|&;()"):
            if "<" in word or ">" in word:
                skip_next = True  # the redirection's file operand
            else:
                segments.append([])
        else:
            segments[-1].append(word)
    return [s for s in segments if s]


def _in_tree(root: Path, word: str) -> str | None:
    """`word` as a worktree-relative file path, if it names a file inside the worktree."""
    if not word or word.startswith("-") or "=" in word.split("/")[0]:
        return None
    path = (root / word).resolve()
    base = root.resolve()
    if path.is_file() and path.is_relative_to(base):
        return path.relative_to(base).as_posix()
    return None


def _strip_wrappers(words: list[str]) -> list[str]:
    while words:
        head = Path(words[0]).name
        if "=" in words[0] and not words[0].startswith("="):  # FOO=1 cmd
            words = words[1:]
        elif head in WRAPPERS:
            words = words[1:]
            while words and (words[0].startswith("-") or words[0][:1].isdigit()):
                words = words[1:]  # options and `timeout 60`
        elif head in RUNNERS and len(words) > 1 and words[1] == RUNNERS[head]:
            words = words[2:]
        else:
            return words
    return words


def measurement_scripts(command: str, root: Path) -> list[str]:
    """Files in the target that make up the measurement: the program a pipeline step runs
    (`./bench.sh`), the script an interpreter runs (`python bench/p99.py`, `python -m
    bench.p99`), and the Makefile of `make bench`. Files the command only reads (`wc -c <
    dist/app.js`, `grep -c TODO src.py`) are what is being measured and stay editable."""
    found: list[str] = []
    for segment in _segments(command):
        words = _strip_wrappers(segment)
        if not words:
            continue
        program = Path(words[0]).name
        hit = _in_tree(root, words[0]) if "/" in words[0] else None
        if hit:
            found.append(hit)
        elif program in INTERPRETERS or program.startswith("python3."):
            args = words[1:]
            while args and args[0].startswith("-"):
                if args[0] == "-m" and len(args) > 1:
                    module = args[1].replace(".", "/")
                    for candidate in (f"{module}.py", f"{module}/__main__.py"):
                        if _in_tree(root, candidate):
                            found.append(candidate)
                    break
                args = args[1:]
            else:
                if args and _in_tree(root, args[0]):
                    found.append(_in_tree(root, args[0]) or "")
        elif program == "make":
            found += [m for m in MAKEFILES if (root / m).is_file()]
        elif _in_tree(root, words[0]):
            found.append(_in_tree(root, words[0]) or "")
    return sorted({f for f in found if f})


def protected_paths(goal: Goal, root: Path, existing: list[str]) -> list[str]:
    extra = measurement_scripts(goal.command, root)
    if goal.protect_tests:
        extra += TEST_GLOBS
    return list(dict.fromkeys([*existing, *extra]))
