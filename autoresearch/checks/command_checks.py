"""`autoresearch plan`'s checks of a candidate metric command: the safety screen, the verdict on
two dry runs, and the diagnostic block that shows why.

Refused before it runs: `rm -r` of `/`, `~` or `$HOME`; a download piped or substituted into a
shell or interpreter; a fork bomb; `sudo`/`doas`/`su`; `mkfs`, `dd of=/dev/…`; any write
(redirection, `tee`, `rm`/`touch`/`mkdir`, the destination of `cp`/`mv`/`ln`) outside the target.
Rejected after two runs, at the first failing check: a run timed out or exited non-zero; the
output yields no value under the format (with `last_line`, the output must be one plain number:
`85%` → strip the %, `12ms` → strip the unit, two lines → print only the number); the two values
differ by more than the accepted noise (→ set `repeats:`); a run took over SLOW_S seconds.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

from autoresearch.measure import metrics
from autoresearch.safety import words as shell_words

DEFAULT_TOLERANCE = 0.05  # relative difference two runs may show
SLOW_S = 120.0  # refused above this per run
WARN_S = 30.0  # warned above this per run
TAIL_LINES = 5
_SAFE_SINKS = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "()", "{", "}", "\n", ";;", "|&"}
_REDIRECTS = {">", ">>", "&>", "&>>", ">|", ">&"}
_SHELLS = r"(?:ba|z|da|k|fi|c|tc)?sh|python[\d.]*|perl|ruby|node|php"
# Matched piece by piece, in linear time: one pattern spanning a whole segment was
# retried from every `sh` or `curl` of a long command (seconds at 60,000 characters).
_PIPE_TO_SHELL = re.compile(rf"\|\s*(?:sudo\s+)?(?:{_SHELLS})\b")
_SUBSTITUTED_DOWNLOAD = re.compile(r"(?:<\(|\$\(|`)\s*(?:curl|wget|fetch)\b")
_DOWNLOADER = re.compile(r"\b(?:curl|wget|fetch)\b")
_SHELL_WORD = re.compile(rf"\b(?:{_SHELLS})\b")
_SEGMENT_END = re.compile(r"[|;&\n]")
# A name starts after a non-name character (else every position of a long word is a start).
_FORK_BOMB = re.compile(
    r"(?<![^\s(){}|;&])(?P<f>[^\s(){}|;&]++)\s*\(\s*\)\s*\{[^}]*(?P=f)\s*\|\s*(?P=f)\s*&"
)
_HOME = ("~", "$HOME", "${HOME}")


@dataclass(frozen=True)
class Danger:
    kind: str
    reason: str


def dangers(command: str, target: Path | None = None) -> list[Danger]:
    """Every reason to refuse running `command` at all (empty: it may be dry-run)."""
    if len(command) > shell_words.MAX_COMMAND_CHARS:  # the patterns below backtrack on it
        return [Danger("too long", f"is {len(command)} characters long; cannot be read")]
    found: list[Danger] = []
    if _downloads_to_shell(command):
        found.append(Danger("download to shell", "runs a downloaded script (curl … | sh)"))
    if _FORK_BOMB.search(command):
        found.append(Danger("fork bomb", "defines a function that spawns itself without end"))
    try:
        tokens = shell_words.split(command, punctuation=True)
    except ValueError as e:
        return found + [Danger("unreadable", f"cannot read the command's quoting: {e}")]
    for words, redirects in _simple_commands(tokens):
        found += _command_dangers(words, target)
        for sink in redirects:
            if _outside(sink, target):
                found.append(Danger("write outside target", f"redirects output to {sink}"))
    return list(dict.fromkeys(found))


def _downloads_to_shell(command: str) -> bool:
    """`curl … | sh` (a downloader, then a pipe into a shell, in one segment) or
    `sh <(curl …)` (a shell, then a download substituted into the same segment)."""
    ends = [m.start() for m in _SEGMENT_END.finditer(command)]

    def segment_start(pos: int) -> int:
        i = bisect.bisect_left(ends, pos)
        return ends[i - 1] + 1 if i else 0

    for pipe in _PIPE_TO_SHELL.finditer(command):
        if _DOWNLOADER.search(command, segment_start(pipe.start()), pipe.start()):
            return True
    shells = [m.start() for m in _SHELL_WORD.finditer(command)]
    for sub in _SUBSTITUTED_DOWNLOAD.finditer(command):
        i = bisect.bisect_left(shells, segment_start(sub.start()))
        if i < len(shells) and shells[i] < sub.start():
            return True
    return False


def _simple_commands(tokens: list[str]) -> list[tuple[list[str], list[str]]]:
    """(words, redirection targets) per simple command of the token stream."""
    commands: list[tuple[list[str], list[str]]] = [([], [])]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in _SEPARATORS:
            commands.append(([], []))
        elif token in _REDIRECTS and i + 1 < len(tokens):
            sink = tokens[i + 1]
            if not (token == ">&" and sink.isdigit()) and sink not in _SEPARATORS:
                commands[-1][1].append(sink)
            i += 1
        elif token not in ("<", "<<", "<<<"):
            commands[-1][0].append(token)
        i += 1
    return [c for c in commands if c[0] or c[1]]


def _command_dangers(words: list[str], target: Path | None) -> list[Danger]:
    while words and re.match(r"^\w+=", words[0]):  # VAR=value prefixes
        words = words[1:]
    if not words:
        return []
    program, args = posixpath.basename(words[0]), words[1:]
    if program in ("sudo", "doas", "su"):
        return [Danger("sudo", f"runs as another user with {program}")]
    if program.startswith("mkfs") or (
        program == "dd" and any(a.startswith("of=/dev/") for a in args)
    ):
        return [Danger("disk overwrite", f"{program} writes to a device")]
    paths = [a for a in args if not a.startswith("-")]
    if program == "rm":
        recursive = any(re.match(r"^-[a-zA-Z]*[rR]", a) or a == "--recursive" for a in args)
        if recursive and any(p.rstrip("/*") in ("", *_HOME) for p in paths):
            return [Danger("rm -rf /", "deletes the root or home directory")]
    if program in ("rm", "touch", "mkdir", "rmdir", "tee", "truncate", "shred"):
        targets = paths
    elif program in ("cp", "mv", "ln", "install", "rsync"):
        targets = paths[-1:] if len(paths) > 1 else []
    elif program == "dd":
        targets = [a[3:] for a in args if a.startswith("of=")]
    else:
        targets = []
    return [
        Danger("write outside target", f"{program} writes to {p}")
        for p in targets
        if _outside(p, target)
    ]


def _outside(path: str, target: Path | None) -> bool:
    """Whether writing to `path` (as the command sees it, run in `target`) leaves the target."""
    if path in _SAFE_SINKS or path.startswith("/dev/fd/"):
        return False
    if path.startswith(_HOME):
        return True
    root = posixpath.normpath(str(target)) if target is not None else None
    if path.startswith("/"):
        full = posixpath.normpath(path)
        return root is None or not (full == root or full.startswith(root.rstrip("/") + "/"))
    relative = posixpath.normpath(path)
    return relative == ".." or relative.startswith("../")


# --- the dry runs ---


@dataclass(frozen=True)
class Run:
    exit_code: int | None
    stdout: str
    seconds: float
    timed_out: bool = False


@dataclass
class Verdict:
    command: str
    runs: list[Run]
    value: float | None = None  # the first run's value, when it had one
    values: list[float] = field(default_factory=list)
    reason: str = ""  # why it is rejected; empty when accepted
    hint: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.reason


def judge(
    command: str,
    runs: list[Run],
    fmt: str = "last_line",
    key: str | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    cwd: Path | None = None,
    target: Path | None = None,
) -> Verdict:
    """The verdict on a candidate metric command from its dry runs (two, to test determinism)."""
    verdict = Verdict(command, runs)
    refused = dangers(command, target)
    if refused:
        verdict.reason = "refused: " + "; ".join(d.reason for d in refused)
        verdict.hint = "a metric command only reads the target and prints a number"
        return verdict
    if not runs:
        raise ValueError("judge needs at least one run of the command")
    for run in runs:
        if run.timed_out:
            verdict.reason = f"timed out after {run.seconds:g} s"
            verdict.hint = "measure a smaller workload, or raise the timeout"
            return verdict
        if run.exit_code != 0:
            verdict.reason = f"exited with code {run.exit_code}"
            verdict.hint = "the command must succeed on the current code; see the last lines"
            return verdict
    for run in runs:
        value, reason, hint = _value(run.stdout, fmt, key, cwd)
        if value is None:
            verdict.reason, verdict.hint = reason, hint
            return verdict
        verdict.values.append(value)
    verdict.value = verdict.values[0]
    if len(verdict.values) < 2:
        verdict.warnings.append("ran once: whether it repeats was not checked")
    elif not agree(verdict.values[0], verdict.values[1], tolerance):
        a, b = verdict.values[:2]
        verdict.reason = (
            f"the two runs disagree: {a:g} vs {b:g} ({_spread(a, b):.0%} apart, "
            f"accepted noise {tolerance:.0%})"
        )
        verdict.hint = "set `repeats: 3` (the median is used) or accept more noise"
        return verdict
    slowest = max(run.seconds for run in runs)
    if slowest > SLOW_S:
        verdict.reason = f"too slow: {slowest:g} s per run (limit {SLOW_S:g} s)"
        verdict.hint = "measure a smaller workload: every iteration runs it"
    elif slowest > WARN_S:
        verdict.warnings.append(f"slow: {slowest:g} s per run; every iteration runs it")
    return verdict


def agree(a: float, b: float, tolerance: float) -> bool:
    """Whether two values differ by at most `tolerance`, relative to the larger magnitude."""
    return _spread(a, b) <= tolerance


def _spread(a: float, b: float) -> float:
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale else 0.0


_PLAIN_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


def _value(
    stdout: str, fmt: str, key: str | None, cwd: Path | None
) -> tuple[float | None, str, str]:
    """(value, '', '') or (None, reason, hint)."""
    if fmt == "last_line":
        lines = [line.strip() for line in stdout.splitlines() if line.strip()]
        if not lines:
            return None, "printed nothing", "print the number on stdout"
        if len(lines) > 1:
            return (
                None,
                f"prints {len(lines)} lines; the number must be the only output",
                "print only the number (e.g. `| tail -n 1`), or choose the `metric` or "
                "`regex:` format",
            )
        line = lines[0]
        if _PLAIN_NUMBER.match(line.replace(",", "")):
            return float(line.replace(",", "")), "", ""
        return None, f"the output is not a plain number: {line[:80]!r}", _number_hint(line)
    try:
        value, _raw, _passed, _notes = metrics.parse_value(stdout, fmt, key, cwd)
    except metrics.MetricError as e:
        return None, str(e).splitlines()[0], f"check the output against the `{fmt}` format"
    return value, "", ""


def _number_hint(line: str) -> str:
    match = re.search(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", line)
    if match is None:
        return "no number in it: wrong command or wrong field?"
    before, after = line[: match.start()].strip(), line[match.end() :].strip()
    if not before and after == "%":
        return "strip the % (e.g. `| tr -d %`)"
    if not before and re.fullmatch(r"[A-Za-z%/µ]+", after):
        return f"strip the unit {after!r}"
    return f"print only the number (wrong field? it would read {match.group()})"


def guard_problem(run: Run) -> str | None:
    """Why the guard cannot be used (it must pass on the current code), or None."""
    if run.timed_out:
        return f"the guard timed out after {run.seconds:g} s"
    if run.exit_code != 0:
        return f"the guard fails on the current code (exit code {run.exit_code})"
    return None


def render(verdict: Verdict, stderr_tail: str = "") -> str:
    """The diagnostic block shown to the person planning: what ran, what came out, the verdict."""
    last = verdict.runs[-1] if verdict.runs else None
    lines = [f"command:    {verdict.command}"]
    if verdict.runs:
        codes = ", ".join(str(r.exit_code) for r in verdict.runs)
        times = ", ".join(f"{r.seconds:.2f}" for r in verdict.runs)
        lines += [f"exit code:  {codes}", f"time (s):   {times}"]
    if last is not None:
        tail = [ln for ln in last.stdout.rstrip("\n").splitlines()][-TAIL_LINES:]
        lines.append("last lines: " + ("\n            ".join(tail) if tail else "(none)"))
    if stderr_tail.strip():
        lines.append("stderr:     " + "\n            ".join(stderr_tail.splitlines()[-TAIL_LINES:]))
    shown = ", ".join(f"{v:g}" for v in verdict.values) if verdict.values else "-"
    lines.append(f"value:      {shown}")
    lines.append("verdict:    " + ("accepted" if verdict.ok else f"rejected — {verdict.reason}"))
    if verdict.hint:
        lines.append(f"hint:       {verdict.hint}")
    lines += [f"warning:    {w}" for w in verdict.warnings]
    return "\n".join(lines) + "\n"
