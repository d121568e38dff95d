"""The files a command names: the script an interpreter is given, the Makefile recipe of a
`make` target, a package script of `npm run` (followed a few levels down).

What a measurement, guard or evaluator runs is found by tracing it (measured.py); this text
reading is the supplement that names what a trace cannot see (a recipe's own Makefile).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from autoresearch.safety import words as shell_words

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
PACKAGE_RUNNERS = {"npm", "yarn", "pnpm"}
MAX_DEPTH = 3  # a recipe that runs make that runs npm ...: far enough


def _words(command: str) -> list[str]:
    try:
        return shell_words.split(command, punctuation=True)
    except shell_words.TooLong:
        return []  # refused at the spec check; never split
    except ValueError:  # unbalanced quotes: the shell will complain; protect what we can
        return command.split()


def _segments(command: str) -> list[tuple[list[str], str | None]]:
    """The simple commands of a pipeline or list, without redirections, each with the file
    its standard input is redirected from (`< file`: data, or the script of an interpreter)."""
    segments: list[tuple[list[str], str | None]] = [([], None)]
    operand = None  # the redirection whose file operand comes next
    for word in _words(command):
        if operand is not None:
            if operand == "<":
                segments[-1] = (segments[-1][0], word)
            operand = None
        elif set(word) <= set("<>|&;()"):
            if "<" in word or ">" in word:
                operand = "<" if word == "<" else ">"
            else:
                segments.append(([], None))
        else:
            segments[-1][0].append(word)
    return [s for s in segments if s[0]]


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


def measurement_scripts(command: str, root: Path, depth: int = 0) -> list[str]:
    """Files in the target that make up the measurement: the program a pipeline step runs
    (`./bench.sh`), the script an interpreter runs (`python bench/p99.py`, `python -m
    bench.p99`, `sh < bench.sh`), the Makefile of `make bench` and the files its recipe
    names, package.json and the files a script of `npm run bench` names. Files the command
    only reads (`wc -c < dist/app.js`, `grep -c TODO src.py`) are what is being measured
    and stay editable. (Tracing the run finds more: measured.py.)"""
    found: list[str] = []
    for segment, stdin in _segments(command):
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
                if args[0] in ("-c", "-e"):
                    break
                args = args[1:]
            else:
                if args and _in_tree(root, args[0]):
                    found.append(_in_tree(root, args[0]) or "")
                elif not args and stdin and _in_tree(root, stdin):
                    found.append(_in_tree(root, stdin) or "")  # `sh < bench/p99.sh`
        elif program in ("make", "gmake"):
            found += _make_files(words[1:], root, depth)
        elif program in PACKAGE_RUNNERS:
            found += _package_files(words[1:], root, depth)
        elif _in_tree(root, words[0]):
            found.append(_in_tree(root, words[0]) or "")
    return sorted({f for f in found if f})


def _make_files(args: list[str], root: Path, depth: int) -> list[str]:
    """`make [-C dir] [-f file] [target...]`: the Makefile and what the targets' recipes run."""
    folder, makefile, targets = root, None, []
    while args:
        word = args.pop(0)
        if word in ("-C", "--directory") and args:
            folder = folder / args.pop(0)
        elif word.startswith("-C") and len(word) > 2:
            folder = folder / word[2:]
        elif word in ("-f", "--file", "--makefile") and args:
            makefile = args.pop(0)
        elif not word.startswith("-") and "=" not in word:
            targets.append(word)
    names = [makefile] if makefile else list(MAKEFILES)
    path = next((folder / n for n in names if (folder / n).is_file()), None)
    rel = _in_tree(root, os.path.relpath(path, root)) if path else None
    if rel is None or path is None:
        return []
    found = [rel]
    if depth < MAX_DEPTH:
        for line in _recipe(path.read_text(errors="replace"), targets):
            found += _under(folder, root, line, depth)
    return found


def _recipe(text: str, targets: list[str]) -> list[str]:
    """The recipe lines of `targets` (default: the first target) in a Makefile's text."""
    rules: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("\t"):
            for target in current:
                rules[target].append(line.strip().lstrip("@-+"))
            continue
        head, colon, rest = line.partition(":")
        is_rule = colon and not rest.startswith("=") and "=" not in head
        current = [t for t in head.split() if not t.startswith(".")] if is_rule else []
        for target in current:
            rules.setdefault(target, [])
    wanted = targets or list(rules)[:1]
    return [line for target in wanted for line in rules.get(target, [])]


def _package_files(args: list[str], root: Path, depth: int) -> list[str]:
    """`npm run bench` (yarn, pnpm, bun): package.json and what the script's command runs."""
    words = [w for w in args if not w.startswith("-")]
    if words and words[0] in ("run", "run-script"):
        words = words[1:]
    if not words or not (root / "package.json").is_file():
        return []
    found = ["package.json"]
    try:
        scripts = json.loads((root / "package.json").read_text()).get("scripts") or {}
    except (ValueError, AttributeError):
        return found
    if depth < MAX_DEPTH:
        for name in (f"pre{words[0]}", words[0], f"post{words[0]}"):
            if isinstance(scripts.get(name), str):
                found += measurement_scripts(scripts[name], root, depth + 1)
    return found


def _under(folder: Path, root: Path, command: str, depth: int) -> list[str]:
    """Files a command run in `folder` names, as worktree paths."""
    found = measurement_scripts(command, folder, depth + 1)
    prefix = Path(os.path.relpath(folder.resolve(), root.resolve()))
    return [(prefix / f).as_posix() for f in found]
