"""Measuring a metric with the spec's command, and judging values against a target or a baseline.

Output formats:
  last_line         the last non-empty stdout line; its first number ("123ms", "45%" are fine)
  json_stdout       the last JSON object in stdout holding `key` (dots reach nested keys: a.b)
  json_file:<path>  a JSON file the command writes (relative to its directory); `key` as above
  metric            `METRIC name=value` lines; `key` picks the name, else the last such line
  regex:<pattern>   first capture group (or the whole match) of the pattern's last match
  evaluator         {"pass": bool, "score"?: number, "notes"?: str}; value = score, else 1.0/0.0
"""

from __future__ import annotations

import json
import math
import re
import statistics
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autoresearch.errors import SpecError
from autoresearch.gate import diagnosis
from autoresearch.measure import guard
from autoresearch.safety import commands, git, worktree_files
from autoresearch.safety.jail import Jail

FORMATS = ("last_line", "json_stdout", "json_file:<path>", "metric", "regex:<pattern>", "evaluator")
TAIL_LINES = 20
TAIL_CHARS = 4000

# A number, optionally signed, with thousands separators or an exponent. Not part of a word:
# "p99 latency 12ms" reads 12, not 99.
_NUMBER = re.compile(
    r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
)
_METRIC_LINE = re.compile(r"^\s*METRIC\s+([^\s=]+)\s*=\s*(\S+)", re.MULTILINE)
# make's own "Entering/Leaving directory" lines (`make -C dir`, recursive make) carry a path,
# not the measurement: the last line's first number would be a digit of that path.
_MAKE_DIRECTORY = re.compile(r"^\S*make(\[\d+\])?: (Entering|Leaving) directory ")


class MetricError(Exception):
    """The measurement could not produce a value; the message says why and shows the output."""


TAMPERED = "measurement tampered"  # how a Tampered error's message starts


class Tampered(MetricError):
    """The measured process changed what measures it (guard.py): no value, whatever it
    printed. The message names each name changed and where."""


@dataclass
class Measurement:
    value: float  # median of the samples
    samples: list[float]
    raw: str | dict  # what the value was read from, for the audit trail (last run)
    passed: bool | None = None  # evaluator format only
    notes: str | None = None  # evaluator format only

    def raw_shown(self, limit: int = 2000) -> str | dict:
        """`raw` as a setup's baseline.json keeps it: cut to `limit` characters when long."""
        text = self.raw if isinstance(self.raw, str) else json.dumps(self.raw)
        return self.raw if len(text) <= limit else text[:limit] + "..."


def check_format(fmt: str) -> None:
    """Raise ValueError naming the valid formats if `fmt` is not one of them."""
    name, _, arg = fmt.partition(":")
    if name in ("last_line", "json_stdout", "metric", "evaluator") and not arg:
        return
    if name in ("json_file", "regex") and arg:
        if name == "regex":
            try:
                re.compile(arg)
            except re.error as e:
                raise ValueError(f"metric format {fmt!r}: bad regular expression: {e}") from None
        return
    raise ValueError(f"unknown metric format {fmt!r}; expected one of: {', '.join(FORMATS)}")


def number_in(text: str) -> float:
    """The first number in `text`, ignoring units around it ("123ms" -> 123.0)."""
    match = _NUMBER.search(text)
    if match is None:
        raise MetricError(f"no number in {_quote(text)}")
    value = float(match.group().replace(",", ""))
    if not math.isfinite(value):
        raise MetricError(f"not a finite number: {_quote(text)}")
    return value


def parse_value(
    output: str, fmt: str = "last_line", key: str | None = None, cwd: Path | None = None
) -> tuple[float, str | dict, bool | None, str | None]:
    """(value, raw, passed, notes) read from a command's stdout; MetricError if there is none."""
    try:
        check_format(fmt)
    except ValueError as e:
        raise MetricError(str(e)) from None
    name, _, arg = fmt.partition(":")
    if name == "last_line":
        lines = [
            line.strip()
            for line in output.splitlines()
            if line.strip() and not _MAKE_DIRECTORY.match(line.strip())
        ]
        if not lines:
            raise MetricError("no output to read the value from (format last_line)")
        return number_in(lines[-1]), lines[-1], None, None
    if name == "json_stdout":
        obj = _last_json_object(output, key, "stdout")
        return _json_value(obj, key), obj, None, None
    if name == "json_file":
        obj = _last_json_object(_read_json_file(arg, cwd), key, f"json_file {arg}")
        return _json_value(obj, key), obj, None, None
    if name == "metric":
        return _metric_line_value(output, key)
    if name == "regex":
        return _regex_value(output, arg)
    return _evaluator_value(output)


def _read_json_file(relative: str, cwd: Path | None) -> str:
    path = Path(relative)
    if not path.is_absolute():
        if cwd is None:
            raise MetricError(f"json_file {relative}: no working directory to resolve it against")
        # The command wrote it in the worktree, which the target controls: the worktree
        # reader's rules (no link out, no FIFO, a size cap).
        try:
            return worktree_files.read_text(Path(cwd), relative)
        except worktree_files.Missing:
            path = Path(cwd) / path
            raise MetricError(f"json_file {relative}: the command did not write {path}") from None
        except worktree_files.Refused as err:
            raise MetricError(f"json_file {relative}: not read: {err}") from None
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        raise MetricError(f"json_file {relative}: the command did not write {path}") from None
    except OSError as e:
        raise MetricError(f"json_file {relative}: cannot read {path}: {e}") from None


def _json_objects(text: str) -> list[dict]:
    """Every top-level JSON object in the text, in order (the whole text, JSON lines, or logs)."""
    try:
        whole = json.loads(text)
    except ValueError:
        pass
    else:
        return [whole] if isinstance(whole, dict) else []
    decoder = json.JSONDecoder()
    objects = []
    start = text.find("{")
    while start != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict):
            objects.append(obj)
        start = text.find("{", end)
    return objects


def _last_json_object(text: str, key: str | None, where: str) -> dict:
    objects = _json_objects(text)
    if not objects:
        raise MetricError(f"no JSON object in {where}{_plain_line_hint(text, key)}")
    if key is None:
        return objects[-1]
    for obj in reversed(objects):
        if _lookup(obj, key) is not _MISSING:
            return obj
    raise MetricError(f"no JSON object in {where} has the key {key!r}")


_MISSING = object()


def _plain_line_hint(text: str, key: str | None) -> str:
    """What to change when the command printed `key: 12.5` (or `key=12.5`) instead of
    JSON: the commonest first try, and both ways out."""
    if not key:
        return ""
    line = re.search(rf"^\s*({re.escape(key)})\s*[:=]\s*(-?[0-9][0-9_.,eE+-]*)", text, re.M)
    if line is None:
        return ""
    return (
        f'; it printed {line.group(0).strip()!r}: print {{"{key}": {line.group(2)}}} '
        f"instead, or set the metric's format to 'regex:^{re.escape(key)}\\s*[:=]\\s*(\\S+)' "
        "(program.md: metric_format)"
    )


def _lookup(obj: Any, key: str) -> Any:
    """obj[key], where a dotted key walks nested objects (and list indexes): "a.b", "runs.0.ms"."""
    if isinstance(obj, dict) and key in obj:  # a literal key that happens to contain dots
        return obj[key]
    for part in key.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif (
            isinstance(obj, list)
            and part.lstrip("-").isdigit()
            and -len(obj) <= int(part) < len(obj)
        ):
            obj = obj[int(part)]
        else:
            return _MISSING
    return obj


def _json_value(obj: dict, key: str | None) -> float:
    if key is None:
        numbers = [v for v in obj.values() if _is_number(v)]
        if len(numbers) != 1:
            raise MetricError(
                f"the JSON object has {len(numbers)} numeric values; set the metric key to pick one"
            )
        return float(numbers[0])
    value = _lookup(obj, key)
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if _is_number(value):
        return float(value)
    if isinstance(value, str):
        return number_in(value)
    raise MetricError(f"key {key!r} holds {json.dumps(value)[:200]}, not a number")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _metric_line_value(output: str, key: str | None) -> tuple[float, dict, bool | None, str | None]:
    found = _METRIC_LINE.findall(output)
    if not found:
        raise MetricError("no `METRIC name=value` line in stdout")
    values = dict(found)  # the last line of each name wins
    if key is None:
        text = found[-1][1]
    elif key in values:
        text = values[key]
    else:
        raise MetricError(f"no `METRIC {key}=...` line in stdout (found: {', '.join(values)})")
    return number_in(text), values, None, None


def _regex_value(output: str, pattern: str) -> tuple[float, str, bool | None, str | None]:
    matches = list(re.finditer(pattern, output, re.MULTILINE))
    if not matches:
        raise MetricError(f"the pattern {pattern!r} does not match stdout")
    last = matches[-1]
    text = last.group(1) if last.re.groups else last.group(0)
    if text is None:
        raise MetricError(f"the pattern {pattern!r} matched, but its first group is empty")
    return number_in(text), text, None, None


def _evaluator_value(output: str) -> tuple[float, dict, bool | None, str | None]:
    obj = _last_json_object(output, "pass", "the evaluator's stdout")
    passed = obj["pass"]
    if not isinstance(passed, bool):
        raise MetricError(f'evaluator "pass" must be true or false, got {json.dumps(passed)}')
    score = obj.get("score")
    if score is not None and not _is_number(score):
        raise MetricError(f'evaluator "score" must be a number, got {json.dumps(score)}')
    notes = obj.get("notes")
    notes = notes if isinstance(notes, str) or notes is None else json.dumps(notes)
    value = float(score) if score is not None else (1.0 if passed else 0.0)
    return value, obj, passed, notes


class MetricCommand:
    """A spec's metric record that measures itself: its dataclass holds `command`,
    `format`, `key`, `repeats` and `timeout_s` (narrow's goal, broad's aspiration)."""

    def measure(
        self, cwd: Path, secrets: list[str] | None = None, jail: Jail | None = None
    ) -> Measurement:
        return measure(
            self.command,  # type: ignore[attr-defined]
            cwd,
            fmt=self.format,  # type: ignore[attr-defined]
            key=self.key,  # type: ignore[attr-defined]
            repeats=self.repeats,  # type: ignore[attr-defined]
            timeout_s=self.timeout_s,  # type: ignore[attr-defined]
            secrets=secrets,
            jail=jail,
        )


def checked_settings(
    raw: dict[str, Any], defaults: dict[str, Any], where: str, key: str
) -> dict[str, Any]:
    """A spec's metric section (`key`, in file `where`) with `defaults` filled in, its
    format, repeats and timeout_s checked: a one-line SpecError naming the key."""
    merged = defaults | {k: v for k, v in raw.items() if v is not None}
    try:
        check_format(str(merged["format"]))
    except ValueError as err:
        raise SpecError(f"{where}: key '{key}.format': {err}") from None
    repeats = merged["repeats"]
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise SpecError(f"{where}: key '{key}.repeats' must be a whole number >= 1")
    timeout = merged["timeout_s"]
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise SpecError(f"{where}: key '{key}.timeout_s' must be a number of seconds > 0")
    return merged


def measure(
    command: str,
    cwd: Path,
    fmt: str = "last_line",
    key: str | None = None,
    repeats: int = 1,
    timeout_s: float = 300,
    secrets: list[str] | None = None,
    jail: Jail | None = None,
) -> Measurement:
    """Run the measurement command `repeats` times; the value is the median of the samples.

    Only stdout is parsed (a tool's progress chatter on stderr must not be read as the value), but
    the end of stderr is kept so a failure can quote it. The command runs in `jail` when given.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    try:
        check_format(fmt)
    except ValueError as e:
        raise MetricError(f"measurement command `{command}`: {e}") from None
    samples: list[float] = []
    passes: list[bool] = []
    raw: str | dict = ""
    notes: str | None = None
    in_session = git.worktree_admin(Path(cwd)) is not None
    for _ in range(repeats):
        pristine(cwd)
        value, raw, passed, notes = _measure_once(command, cwd, fmt, key, timeout_s, secrets, jail)
        rewritten = _changed(cwd) if in_session else []
        if rewritten:
            pristine(cwd)  # the tree as it was measured, for whatever runs next
            more = len(rewritten) - 5
            shown = ", ".join(rewritten[:5]) + (f" and {more} more" if more > 0 else "")
            raise MetricError(
                f"measurement command `{command}` (in {cwd}) changed a file the repository "
                f"tracks ({shown}), so its value is of a tree it rewrote, not of the one "
                "measured: make it write nothing git tracks (a linter that fixes in place, "
                "such as ruff under `fix = true` in the target's config, counts only what it "
                "could not fix: give it `--no-fix`)"
            )
        samples.append(value)
        if passed is not None:
            passes.append(passed)
    return Measurement(
        value=median(samples),
        samples=samples,
        raw=raw,
        # Repeated evaluator runs pass only if every run passed: a flaky pass is not a pass.
        passed=all(passes) if passes else None,
        notes=notes,
    )


def pristine(cwd: Path) -> None:
    """Before each run of a measurement in a session worktree: the worktree as its index
    holds it (what the caller measures, committed or staged), with no untracked and no
    ignored file, so no run sees what an earlier one left (a result cached in `build/`
    makes repeats 2..n cheap). Each jailed run has a fresh /tmp and HOME of its own
    (commands.py). A folder that is not a session's worktree is left alone."""
    if git.worktree_admin(Path(cwd)) is None:
        return
    paths = _changed(cwd)
    if paths:
        git.worktree_git(cwd, "checkout-index", "-f", "-q", "--", *paths)
    git.clean(cwd)


def _changed(cwd: Path) -> list[str]:
    """The tracked files of a session worktree that differ from its index."""
    changed = git.worktree_git(cwd, "diff", "--name-only", "--no-renames", "-z")
    return [p for p in changed.split("\0") if p]


def _measure_once(
    command: str,
    cwd: Path,
    fmt: str,
    key: str | None,
    timeout_s: float,
    secrets: list[str] | None,
    jail: Jail | None,
) -> tuple[float, str | dict, bool | None, str | None]:
    with tempfile.TemporaryDirectory(prefix="autoresearch-guard-") as parent:
        # The guard's hook, from a folder the jail shows read-only, reporting through a
        # pipe only the harness reads (guard.py).
        where = guard.folder(Path(parent))
        pipe = guard.pipe()
        try:
            result = commands.run(
                guard.prefix(where) + command,
                cwd,
                timeout_s=timeout_s,
                extra_secrets=secrets,
                stdout_only=True,
                jail=None if jail is None else replace(jail, read_only=(*jail.read_only, where)),
                extra_env=guard.environment(pipe.write_fd, Path(cwd)),
                pass_fds=(pipe.write_fd,),
            )
        finally:
            pipe.close_ours()
        verdict = guard.read(pipe.finish())
    if verdict.tampered and not result.timed_out:
        raise Tampered(f"{TAMPERED}: {verdict.why()}")
    stderr = result.stderr

    def fail(what: str) -> MetricError:
        fix = None
        if result.exit_code not in (0, None):  # the diagnosis setup gives a test command too
            jailed = jail is not None and jail.mode == "bwrap"
            said = f"{result.output}\n{stderr}"
            fix = diagnosis.likely_fix(
                command, said, result.exit_code, cwd, jailed=jailed, key="the measurement command"
            )
        return MetricError(
            f"measurement command `{command}` (in {cwd}) {what}"
            + (f"; likely fix: {fix}" if fix else "")
            + f"\n{_tail(result.output, stderr)}"
        )

    if result.timed_out:
        raise fail(f"timed out after {timeout_s:g}s")
    try:
        parsed = parse_value(result.output, fmt, key, cwd)
    except MetricError as e:
        if result.exit_code != 0:
            raise fail(f"failed with exit code {result.exit_code}") from None
        raise fail(f"printed no parsable value: {e}") from None
    # An evaluator reports failure as {"pass": false} and may exit non-zero to say the same;
    # its verdict is data. Any other command that fails has not measured anything.
    if result.exit_code != 0 and not fmt.startswith("evaluator"):
        raise fail(f"failed with exit code {result.exit_code}")
    return parsed


def _tail(stdout: str, stderr: str) -> str:
    parts = []
    for label, text in (("stdout", stdout), ("stderr", stderr)):
        if text.strip():
            parts.append(f"--- last lines of {label} ---\n{_last_lines(text)}")
    return "\n".join(parts) if parts else "(the command printed nothing)"


def _last_lines(text: str) -> str:
    lines = text.rstrip("\n").splitlines()
    tail = "\n".join(lines[-TAIL_LINES:])
    if len(tail) > TAIL_CHARS:
        tail = "[...]" + tail[-TAIL_CHARS:]
    elif len(lines) > TAIL_LINES:
        tail = "[...]\n" + tail
    return tail


def _quote(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


# --- targets and comparisons ---

_COMPARATORS = {
    ">=": ">=",
    "≥": ">=",
    "<=": "<=",
    "≤": "<=",
    "==": "=",
    "=": "=",
    ">": ">",
    "<": "<",
}
_TARGET = re.compile(r"^\s*(>=|<=|==|=|>|<|≥|≤)\s*(.*?)\s*$")


@dataclass(frozen=True)
class Target:
    comparator: str  # one of >=, <=, =, >, <
    value: float
    units: str = ""  # for display only: "<= 100ms"

    def met(self, value: float) -> bool:
        if self.comparator == ">=":
            return value >= self.value
        if self.comparator == "<=":
            return value <= self.value
        if self.comparator == ">":
            return value > self.value
        if self.comparator == "<":
            return value < self.value
        return math.isclose(value, self.value, rel_tol=1e-9, abs_tol=1e-12)

    def __str__(self) -> str:
        return f"{self.comparator} {self.value:g}{self.units}"


def parse_target(text: str) -> Target:
    """'<= 100ms', '≥80%', '=0', '<200000 (bytes)' -> Target; ValueError if it is not that shape."""
    match = _TARGET.match(str(text))
    number = _NUMBER.match(match.group(2)) if match else None
    if match is None or number is None:
        raise ValueError(
            f"target {text!r} is not a comparator and a number: "
            "write e.g. '<= 100ms', '>= 80%', '= 0' (comparators: >= <= = > < ≥ ≤)"
        )
    value = float(number.group().replace(",", ""))
    if not math.isfinite(value):
        raise ValueError(f"target {text!r}: the number must be finite")
    units = match.group(2)[number.end() :].strip()
    return Target(_COMPARATORS[match.group(1)], value, units)


def direction_of(target: Target) -> str | None:
    """ "minimize" for <=/<, "maximize" for >=/>, None for = (neither way is better)."""
    if target.comparator in ("<=", "<"):
        return "minimize"
    if target.comparator in (">=", ">"):
        return "maximize"
    return None


def is_better(new: float, old: float, direction: str, min_effect: float = 0.0) -> bool:
    """Whether `new` beats `old` by more than `min_effect` (absolute); equal is never better.
    A negative `min_effect` would make an equal or worse value better: refused, never used."""
    _no_negative_effect(min_effect)
    if direction == "minimize":
        return old - new > min_effect
    if direction == "maximize":
        return new - old > min_effect
    raise ValueError(f"direction must be 'minimize' or 'maximize', got {direction!r}")


def is_closer(new: float, old: float, target: Target, min_effect: float = 0.0) -> bool:
    """Like is_better, for any target: an = target is approached by getting nearer to it."""
    _no_negative_effect(min_effect)
    direction = direction_of(target)
    if direction is not None:
        return is_better(new, old, direction, min_effect)
    return abs(old - target.value) - abs(new - target.value) > min_effect


def _no_negative_effect(min_effect: float) -> None:
    if not min_effect >= 0:  # NaN too: every comparison with it is False
        raise ValueError(f"min_effect must be >= 0 (equal is never better), got {min_effect!r}")


# --- noise ---


def median(xs: list[float]) -> float:
    if not xs:
        raise ValueError("median of no samples")
    return float(statistics.median(xs))


def mann_whitney_u_p(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation, tie and continuity
    corrected), to ask whether two sets of samples differ by more than noise."""
    if not a or not b:
        raise ValueError("the rank test needs at least one sample on each side")
    from scipy import stats  # deferred: importing scipy costs every Snakemake start ~0.5 s

    test = stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")
    return float(test.pvalue)
