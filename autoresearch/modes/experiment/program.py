"""The experiment spec: program.md (or a mission folder) merged under `experiment:`.

program.md holds a ```yaml block (the configuration, frozen when the session starts) and
free prose (the research direction, re-read every iteration). Its keys may use common
names (target_file, eval_command, metric_key, ...) or ours; the session spec's
`experiment:` keys override it. A mission folder (`experiment.mission`) is the other
input: mission.md (prose, optionally a ```yaml block) and evaluator.json (the command
that prints the evaluator contract). `resolve` returns one `ExperimentConfig` or raises
spec.SpecError naming the missing or wrong key.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autoresearch.measure import metrics
from autoresearch.safety import child_env, worktree_files
from autoresearch.session import spec

from ...errors import SpecError
from . import sequential

_YAML_BLOCK = re.compile(r"^```ya?ml[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([dhms]?)", re.IGNORECASE)
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1, "": 1}

# The names program.md files commonly use -> ours ("metric.x" lands in the nested metric mapping).
SEED_ALIASES = {
    "eval_command": "metric.command",
    "metric_key": "metric.key",
    "metric_format": "metric.format",
    "direction": "metric.direction",
    "max_experiments": "max_iterations",
    "experiment_timeout": "verify_timeout_s",
    "cooldown_seconds": "cooldown_s",
    "max_runtime": "max_duration",
}
# The pause between iterations when program.md or a mission folder says none, as the
# format documents it; a spec's own `experiment:` keys keep 0.
FORMAT_COOLDOWN_S = 5.0
MISSION_FILE = "mission.md"
EVALUATOR_FILE = "evaluator.json"
# `guard: none` turns the guard off; with no guard key the target's tests are the guard.
GUARD_OFF = "none"
CONTRACT_FIELDS = {"pass", "score", "notes"}
# A mission stops on its runtime ceiling only: a failing evaluation is data, and neither
# a run of discards nor a plateau ends it (the spec may still set these keys).
MISSION_DEFAULTS = {"stuck_after": 0, "plateau_window": 0, "crash_loop_after": 0}


@dataclass
class ExperimentConfig:
    goal: str
    scope: list[str]
    command: str
    direction: str
    format: str = "json_stdout"
    key: str | None = None
    verify_timeout_s: float = 300.0
    guard: str | None = None
    guard_timeout_s: float | None = None  # None: the verify timeout
    guard_off: bool = False  # `guard: none`: the spec turned the default guard off
    # The default guard (guard.py): the target's test command, judged by test identity as
    # the test gate judges; {"stack", "allow_test_removal"}. None: judged by its exit code.
    guard_tests: dict[str, Any] | None = None
    baseline_command: str | None = None
    max_iterations: int | None = None
    max_duration_s: float | None = None
    target: str | None = None  # "<= 100"; a bare number gets the direction's comparator
    cooldown_s: float = 0.0
    repeats: int = 1
    min_effect: float | str = 0.0  # absolute, or "2%" of the incumbent
    rank_test_alpha: float | None = None
    # The sequential keep test (sequential.py): the canonical mapping of its
    # keys, or None for the fixed-repeats rules above.
    sequential: dict[str, Any] | None = None
    remeasure_every: int | None = None
    keep_policy: str = "score_improvement"
    # None = the keep policy's default (score_improvement: 10 / 20; pass_only: off, since
    # a failing evaluation is data, not a reason to stop).
    stuck_after: int | None = None
    plateau_window: int | None = None
    plateau_min_gain: float = 0.01
    crash_loop_after: int | None = 5
    duplicate_threshold: float = 0.85
    program: str | None = None
    research: str = ""  # inline research direction when there is no program.md
    parallel: int = 1  # candidates per iteration, each proposed and measured as its own job
    resources: dict[str, Any] = field(default_factory=dict)  # of the measuring job
    mission: str | None = None  # a mission folder (mission.md, evaluator.json)
    output: str | None = None  # mirror the run into <output>/runs/<run-id>/ at the end
    # A change that reaches into the measuring process (tamper.py) is not kept unless this
    # is true; an improvement beyond max_gain ("50%") is such a flag too.
    allow_flagged: bool = False
    max_gain: str | None = None
    # The branch the kept commits land on (None: autoresearch/experiment/<name>), and
    # whether a change that is not kept is saved as a ref (stages.preserve).
    git_branch: str | None = None
    preserve_on_fail: bool = False
    # A second evaluator the agent never sees (holdout.py); its files, found at setup.
    holdout: str | None = None
    holdout_timeout_s: float | None = None
    holdout_files: list[str] = field(default_factory=list)
    # A metric gain beyond its noise must be matched by a holdout gain beyond its own
    # (holdout.py); false: the holdout need only be no worse than noise.
    holdout_confirms: bool = True

    @property
    def guard_timeout(self) -> float:
        return self.guard_timeout_s or self.verify_timeout_s

    @property
    def stuck_limit(self) -> int | None:
        if self.stuck_after is not None:
            return self.stuck_after or None
        return 10 if self.keep_policy == "score_improvement" else None

    @property
    def plateau_limit(self) -> int | None:
        if self.plateau_window is not None:
            return self.plateau_window or None
        return 20 if self.keep_policy == "score_improvement" else None

    def target_obj(self) -> metrics.Target | None:
        if self.target is None:
            return None
        return metrics.parse_target(self.target)

    def min_effect_abs(self, incumbent: float) -> float:
        """min_effect in the metric's units: "2%" is 2% of the incumbent's value."""
        if isinstance(self.min_effect, str):
            return abs(incumbent) * float(self.min_effect.rstrip("% ")) / 100
        return float(self.min_effect)

    def max_gain_share(self) -> float | None:
        """max_gain as a share of the incumbent ("50%" -> 0.5), or None without one."""
        return None if self.max_gain is None else float(self.max_gain.rstrip("% ")) / 100

    def sequential_design(self) -> sequential.Design | None:
        """The sequential keep test's design, or None when the spec does not ask for one."""
        if self.sequential is None:
            return None
        return sequential.Design.from_spec(self.sequential, self.direction, self.min_effect)

    def to_spec(self) -> dict[str, Any]:
        """The canonical `experiment:` mapping that is frozen into session.yaml."""
        data = asdict(self)
        metric = {k: data.pop(k) for k in ("command", "format", "key", "direction")}
        data["max_duration"] = data.pop("max_duration_s")
        return {"metric": metric, **{k: v for k, v in data.items() if v is not None}}

    def research_file(self, target: Path) -> Path | None:
        """Where the research prose lives now: program.md, or the mission's mission.md."""
        if self.program:
            return target / self.program
        if self.mission:
            return target_path(self.mission, target) / MISSION_FILE
        return None

    def human_files(self) -> list[str]:
        """The inputs inside the target that are the human's: the agent never changes them."""
        if self.program:
            return [self.program]
        if self.mission and not Path(self.mission).is_absolute():
            folder = self.mission.rstrip("/")
            return [f"{folder}/{MISSION_FILE}", f"{folder}/{EVALUATOR_FILE}"]
        return []


def split_program(text: str) -> tuple[dict[str, Any], str, str]:
    """(yaml config, research prose, title) of a program.md."""
    match = _YAML_BLOCK.search(text)
    config: dict[str, Any] = {}
    prose = text
    if match:
        try:
            loaded = yaml.safe_load(match.group(1)) or {}
        except yaml.YAMLError as err:
            raise SpecError(f"program.md: the ```yaml block is not valid YAML: {err}") from None
        if not isinstance(loaded, dict):
            raise SpecError("program.md: the ```yaml block must be a mapping of keys to values")
        config = loaded
        prose = text[: match.start()] + text[match.end() :]
    title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), "")
    lines = [line for line in prose.strip().splitlines() if line.strip() != f"# {title}"]
    return config, "\n".join(lines).strip(), title


def research_text(program_path: Path | None, fallback: str = "", root: Path | None = None) -> str:
    """The prose of program.md as it is now (re-read every iteration). A file under `root` (a
    checkout or worktree) is read by the worktree reader's rules: a link out is not followed."""
    if program_path is None:
        return fallback
    if root is not None and program_path.is_relative_to(root):
        text = worktree_files.read_if_any(root, program_path.relative_to(root).as_posix())
        return split_program(text)[1] if text is not None else fallback
    if program_path.is_file():
        return split_program(program_path.read_text(errors="replace"))[1]
    return fallback


def parse_duration(value: Any, where: str) -> float | None:
    """'2h', '90m', '1h30m', '45s', 7200 -> seconds."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value <= 0:
            raise SpecError(f"{where}: must be more than 0 seconds, got {value}")
        return float(value)
    text = str(value).strip().replace(" ", "")
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts).lower() != text.lower():
        raise SpecError(f"{where}: {value!r} is not a duration; write e.g. 7200, '2h', '90m'")
    return sum(float(n) * _UNITS[u.lower()] for n, u in parts)


@dataclass
class Layer:
    """One file's `experiment:` keys, in spec names, and where each came from: the file to
    name in an error, and the key as that file writes it (program.md's `max_experiments`)."""

    values: dict[str, Any]
    origin: str
    written: dict[str, str] = field(default_factory=dict)  # dotted spec key -> its own name
    # "spec": the session spec's `experiment:`; "file": program.md or mission.md, whose keys
    # are `experiment:` keys or common names for them; "own": evaluator.json's own keys.
    kind: str = "file"

    def label(self, dotted: str) -> str:
        """The key an error names: the spec key, and the file's own name when it differs."""
        own = self.written.get(dotted)
        if self.kind == "own":
            return f"'{own or dotted}'"
        if self.kind == "file" and own is not None and own != dotted:
            return f"'{own}' (experiment.{dotted})"
        return f"'experiment.{dotted}'"

    def unknown(self, dotted: str) -> str:
        """An unknown key as the file writes it: it has no spec name."""
        return f"experiment.{dotted}" if self.kind == "spec" else self.written.get(dotted, dotted)


def _normalise(raw: dict[str, Any], origin: str) -> Layer:
    """Common program.md names -> ours; an unknown key stays as written, for the schema to
    refuse (a typo must not pass)."""
    layer = Layer({}, origin)
    metric: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "metric" and isinstance(value, dict):
            metric.update(value)
            continue
        name = SEED_ALIASES.get(key, key)
        if name.startswith("metric."):
            metric[name.split(".", 1)[1]] = value
        elif name == "target_file":
            layer.values["scope"] = [value] if isinstance(value, str) else value
        else:
            layer.values[name] = value
        layer.written[name.replace("target_file", "scope")] = key
    if metric:
        layer.values["metric"] = metric
    return layer


def _merge(layers: list[Layer]) -> tuple[dict[str, Any], dict[str, Layer]]:
    """The layers merged, the later over the earlier (`metric` key by key), and which layer
    set each dotted key."""
    merged: dict[str, Any] = {}
    where: dict[str, Layer] = {}
    for layer in layers:
        for key, value in copy.deepcopy(layer.values).items():
            if key == "metric" and isinstance(merged.get("metric"), dict):
                merged["metric"] = {**merged["metric"], **value}
                where |= {f"metric.{k}": layer for k in value}
            else:
                merged[key] = value
                where[key] = layer
    return merged, where


def _check_schema(merged: dict[str, Any], where: dict[str, Layer], fallback: Layer) -> None:
    """config/schema.yaml's `experiment:` keys are the one statement of what each key
    takes; the refusal names the file that set the key and the key as that file writes it."""
    import jsonschema  # costly to import; only a session that starts gets here

    schema = spec.schema()["properties"]["experiment"]
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(merged), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return
    err = errors[0]
    path = [str(p) for p in err.absolute_path]
    if err.validator == "additionalProperties":
        known = list(err.schema.get("properties") or {})
        extra = next((k for k in err.instance if k not in known), "?")
        path.append(str(extra))
    dotted = ".".join(path)
    layer = next((where[d] for d in _parents(dotted) if d in where), fallback)
    # The schema's word on what the key takes, where it has one, says what to write.
    about = err.schema.get("description") if isinstance(err.schema, dict) else None
    if err.validator == "additionalProperties":
        hint = difflib.get_close_matches(str(extra), known + list(SEED_ALIASES), n=1)
        maybe = f"; did you mean '{hint[0]}'?" if hint else f" ({about})" if about else ""
        raise SpecError(f"{layer.origin}: unknown key '{layer.unknown(dotted)}'{maybe}")
    said = f"{err.instance!r}; {about}" if about else f"{err.message}{spec.did_you_mean(err)}"
    raise SpecError(f"{layer.origin}: key {layer.label(dotted)}: {said}")


def _parents(dotted: str) -> list[str]:
    """'metric.key' -> ['metric.key', 'metric']."""
    parts = dotted.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)]


def resolve(values: dict[str, Any], target: Path, spec_file: str) -> ExperimentConfig:
    """The experiment configuration of a merged session spec; SpecError names what is wrong."""
    section = values.get("experiment")
    if section is not None and not isinstance(section, dict):
        raise SpecError(f"{spec_file}: key 'experiment' must be a mapping")
    high = _normalise(dict(section or {}), spec_file)
    high.kind = "spec"
    layers, title = [], ""
    program = high.values.get("program")
    mission = high.values.get("mission")
    if mission and program:
        raise SpecError(
            f"{spec_file}: keys 'experiment.program' and 'experiment.mission' are both set; "
            "keep one (a mission folder replaces program.md)"
        )
    if program:
        layers, title = _program_layer(str(program), target, spec_file)
    if mission:
        layers, title = _mission_layers(str(mission), target, spec_file)
    merged, where = _merge([*layers, high])
    _check_schema(merged, where, high)

    def fail(key: str, text: str) -> SpecError:
        layer = next((where[d] for d in _parents(key) if d in where), high)
        return SpecError(f"{layer.origin}: key {layer.label(key)}{text}")

    merged.setdefault("goal", title or None)
    metric = merged.get("metric") or {}
    if not merged.get("scope"):
        merged["scope"] = list((values.get("scope") or {}).get("include") or [])

    def need(value: Any, key: str, hint: str) -> Any:
        if value in (None, "", []):
            raise SpecError(
                f"{spec_file}: required key 'experiment.{key}' is not set ({hint}); "
                "nothing was started"
            )
        return value

    goal = need(merged.get("goal"), "goal", "one line: what the experiments aim at")
    scope = need(
        merged.get("scope"), "scope", "the files the agent may change; program.md: target_file"
    )
    scope = [scope] if isinstance(scope, str) else scope
    command = need(metric.get("command"), "metric.command", "program.md: eval_command")
    keep_policy = merged.get("keep_policy", "score_improvement")
    fmt = metric.get("format") or ("evaluator" if keep_policy == "pass_only" else "json_stdout")
    try:
        metrics.check_format(fmt)
    except ValueError as err:
        raise fail("metric.format", f": {err}") from None
    if keep_policy == "pass_only" and fmt != "evaluator":
        raise fail(
            "keep_policy",
            ": pass_only needs experiment.metric.format: evaluator (it keeps a change when "
            "the evaluator passes)",
        )
    target_text = None if merged.get("target") is None else str(merged["target"])
    direction = metric.get("direction")
    if direction is None and fmt == "evaluator":
        direction = "maximize"  # an evaluator's score: higher is better
    if direction is None and target_text is not None:
        try:
            direction = metrics.direction_of(metrics.parse_target(target_text))
        except ValueError:
            direction = None
    direction = need(direction, "metric.direction", "minimize or maximize; program.md: direction")
    if target_text is not None:
        if re.fullmatch(r"\s*[-+]?[\d.,eE+-]+\s*", target_text):
            target_text = f"{'<=' if direction == 'minimize' else '>='} {target_text.strip()}"
        try:
            metrics.parse_target(target_text)
        except ValueError as err:
            raise fail("target", f": {err}") from None
    where_duration = where.get("max_duration", high)
    max_duration = parse_duration(
        merged.get("max_duration"),
        f"{where_duration.origin}: key {where_duration.label('max_duration')}",
    )
    if mission and max_duration is None:
        raise SpecError(
            f"{spec_file}: required key 'experiment.max_runtime' is not set (a mission runs "
            "until its runtime ceiling, e.g. '8h'; max_iterations may bound it further)"
        )
    if merged.get("max_iterations") is None and max_duration is None:
        raise SpecError(
            f"{spec_file}: required key 'experiment.max_iterations' or 'experiment.max_duration' "
            "is not set (an unattended run needs a bound; program.md: max_experiments)"
        )
    min_effect = merged.get("min_effect", 0.0)
    design = _sequential(merged, keep_policy, direction, min_effect, fail)
    if (program or mission) and merged.get("cooldown_s") is None:
        merged["cooldown_s"] = FORMAT_COOLDOWN_S
    repeats = merged.get("repeats", 1)
    alpha = merged.get("rank_test_alpha")
    if alpha is not None and repeats < 5:
        raise fail(
            "rank_test_alpha",
            f" needs experiment.repeats >= 5 (a rank test on {repeats} samples cannot "
            "reach significance)",
        )
    # The schema has checked each number; the float keys are frozen as floats.
    numbers = {
        key: kind(merged[key]) for key, kind in NUMBER_KEYS.items() if merged.get(key) is not None
    }
    guard, guard_off = _guard(merged.get("guard"), fail)
    max_gain = merged.get("max_gain")
    git_branch = _git_branch(merged.get("git_branch"), fail)
    holdout, holdout_timeout = merged.get("holdout"), merged.get("holdout_timeout_s")
    if holdout_timeout is not None and holdout is None:
        raise fail("holdout_timeout_s", ": set only with a holdout command")
    return ExperimentConfig(
        goal=str(goal).strip(),
        scope=[str(s) for s in scope],
        command=str(command),
        direction=direction,
        format=fmt,
        key=metric.get("key"),
        guard=guard,
        guard_off=guard_off,
        baseline_command=merged.get("baseline_command") or None,
        max_duration_s=max_duration,
        target=target_text,
        repeats=repeats,
        min_effect=min_effect,
        rank_test_alpha=float(alpha) if alpha is not None else None,
        sequential=design.to_spec() if design is not None else None,
        keep_policy=keep_policy,
        program=program,
        research=str(merged.get("research") or ""),
        parallel=merged.get("parallel", 1),
        resources=dict(merged.get("resources") or {}),
        mission=str(mission) if mission else None,
        output=merged.get("output"),
        allow_flagged=merged.get("allow_flagged", False),
        holdout_confirms=merged.get("holdout_confirms", True),
        max_gain=max_gain.strip() if max_gain is not None else None,
        git_branch=git_branch,
        preserve_on_fail=merged.get("preserve_on_fail", False),
        holdout=holdout.strip() if holdout else None,
        holdout_timeout_s=float(holdout_timeout) if holdout_timeout else None,
        **numbers,
    )


# The numeric keys frozen as their kind (a float key written 120 is frozen as 120.0).
NUMBER_KEYS: dict[str, type] = {
    "max_iterations": int,
    "verify_timeout_s": float,
    "guard_timeout_s": float,
    "cooldown_s": float,
    "remeasure_every": int,
    "stuck_after": int,
    "plateau_window": int,
    "plateau_min_gain": float,
    "crash_loop_after": int,
    "duplicate_threshold": float,
}


def _git_branch(value: Any, fail: Callable[[str, str], SpecError]) -> str | None:
    """program.md's git_branch: a name git accepts for a branch, or None."""
    if value is None:
        return None
    ok = value.strip() == value
    if ok:
        proc = subprocess.run(
            ["git", "check-ref-format", "--branch", value],
            capture_output=True,
            text=True,
            env=child_env.for_tool(),
        )
        ok = proc.returncode == 0 and proc.stdout.strip() == value
    if not ok:
        raise fail(
            "git_branch",
            f": {value!r} is not a branch name git accepts (e.g. autoresearch/faster-parser)",
        )
    if not value.startswith("autoresearch/"):
        # The harness's git may move only its own branches (safety/git.py's OWNED_REFS).
        raise fail(
            "git_branch",
            f": {value!r} is not under autoresearch/, the only branches the harness's git "
            f"may move (e.g. autoresearch/{value})",
        )
    return value


def refuse_holdout(layer: Layer) -> None:
    """program.md and mission.md are the agent's to read: a holdout named there is not one."""
    for key in ("holdout", "holdout_timeout_s"):
        if key in layer.values:
            raise SpecError(
                f"{layer.origin}: key '{key}': the agent reads this file, so a holdout named "
                "here would not be private; set experiment.holdout in the session spec (or "
                "`holdout` in the mission's evaluator.json)"
            )


def target_path(value: str, target: Path) -> Path:
    """A folder the spec names (a mission, the output): absolute, or relative to the
    target's checkout."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else target / path


def _program_layer(program: str, target: Path, spec_file: str) -> tuple[list[Layer], str]:
    """program.md's ```yaml block (under the session spec's keys) and its title."""
    if Path(program).is_absolute() or ".." in Path(program).parts:
        raise SpecError(
            f"{spec_file}: key 'experiment.program': {program!r} must be a path inside the target"
        )
    path = target / program
    try:
        text = worktree_files.read_text(target, program)
    except worktree_files.Missing:
        raise SpecError(
            f"{spec_file}: key 'experiment.program': {path} does not exist; write it "
            "(see docs/experiment.md) or remove the key and set the experiment keys directly"
        ) from None
    except worktree_files.Refused as err:
        raise SpecError(f"{spec_file}: key 'experiment.program': not read: {err}") from None
    config, _, title = split_program(text)
    layer = _normalise(config, f"{path} (```yaml block)")
    layer.values.pop("program", None)
    refuse_holdout(layer)
    return [layer], title


def _mission_layers(mission: str, target: Path, spec_file: str) -> tuple[list[Layer], str]:
    """The configuration a mission folder gives (under the session spec's keys) and its
    goal line: the mission's stop rules, evaluator.json's command, and mission.md's
    ```yaml block if any."""
    where = f"{spec_file}: key 'experiment.mission'"
    if not Path(mission).is_absolute() and ".." in Path(mission).parts:
        raise SpecError(f"{where}: {mission!r} must be inside the target or absolute")
    folder = target_path(mission, target)
    if not folder.is_dir():
        raise SpecError(f"{where}: {folder} is not a folder")
    for name in (MISSION_FILE, EVALUATOR_FILE):
        if not (folder / name).is_file():
            raise SpecError(
                f"{where}: {folder / name} does not exist; a mission folder holds "
                f"{MISSION_FILE} and {EVALUATOR_FILE} (see docs/experiment.md)"
            )
    config, prose, title = split_program((folder / MISSION_FILE).read_text(errors="replace"))
    told = _normalise(config, f"{folder / MISSION_FILE} (```yaml block)")
    refuse_holdout(told)
    for key in ("program", "mission"):
        told.values.pop(key, None)
    evaluator = evaluator_layer(folder / EVALUATOR_FILE)
    evaluator.values = MISSION_DEFAULTS | evaluator.values
    evaluator.values["metric"] = {"format": "evaluator"} | evaluator.values["metric"]
    goal = title or next((line.strip("# ").strip() for line in prose.splitlines() if line), "")
    return [evaluator, told], goal[:200]


# evaluator.json's keys -> the spec keys they set (contract and description are its own).
EVALUATOR_NAMES = {
    "command": "metric.command",
    "format": "metric.format",
    "key": "metric.key",
    "direction": "metric.direction",
    "timeout_s": "verify_timeout_s",
    "guard": "guard",
    "holdout": "holdout",  # the private evaluator (holdout.py)
    "holdout_timeout_s": "holdout_timeout_s",
}


def evaluator_layer(path: Path) -> Layer:
    """evaluator.json as spec keys; SpecError names its bad key."""
    try:
        data = json.loads(path.read_text(errors="replace"))
    except ValueError as err:
        raise SpecError(f"{path}: not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: must be a JSON object with at least a 'command'")
    unknown = sorted(set(data) - set(EVALUATOR_NAMES) - {"contract", "description"})
    if unknown:
        known = sorted([*EVALUATOR_NAMES, "contract", "description"])
        raise SpecError(f"{path}: unknown key '{unknown[0]}'; known keys: {', '.join(known)}")
    command = data.get("command")
    if not isinstance(command, str) or not command.strip():
        raise SpecError(
            f"{path}: required key 'command' is not set (the shell command, run in the "
            'worktree, that prints {"pass": bool, "score"?: number, "notes"?: str})'
        )
    contract = data.get("contract")
    if contract is not None:
        fields = set(contract) if isinstance(contract, dict) else None
        if fields is None or "pass" not in fields or fields - CONTRACT_FIELDS:
            raise SpecError(
                f"{path}: key 'contract' must be an object naming 'pass' and optionally "
                "'score' and 'notes' (what the command prints)"
            )
    layer = Layer({"metric": {}}, str(path), kind="own")
    for key, name in EVALUATOR_NAMES.items():
        if data.get(key) is not None:
            top, _, sub = name.partition(".")
            (layer.values["metric"] if sub else layer.values)[sub or top] = data[key]
            layer.written[name] = key
    return layer


def _guard(value: Any, fail: Callable[[str, str], SpecError]) -> tuple[str | None, bool]:
    """(the guard command or None, whether the spec turned the guard off): `none` (or
    false) turns it off; no key leaves the default, the target's tests (guard.py)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, False
    if value is False or (isinstance(value, str) and value.strip().lower() == GUARD_OFF):
        return None, True
    if value is True:
        raise fail("guard", f": {value!r}; write a shell command, or {GUARD_OFF} for no guard")
    return value, False


# Design keys that are the experiment's own (or the section itself), not under `sequential:`.
_OWN_KEYS = {
    "sequential": "sequential",
    "direction": "metric.direction",
    "min_effect": "min_effect",
}


def _sequential(
    merged: dict[str, Any],
    keep_policy: str,
    direction: str,
    min_effect: float | str,
    fail: Callable[[str, str], SpecError],
) -> sequential.Design | None:
    """The `sequential:` key checked on its own and against the fixed-repeats keys."""
    value = merged.get("sequential")
    if value is None or value is False:
        return None
    try:
        design = sequential.Design.from_spec(value, direction, min_effect)
    except sequential.DesignError as err:
        raise fail(_OWN_KEYS.get(err.key, f"sequential.{err.key}"), f": {err.detail}") from None
    # The design sets how many samples each side gets; the fixed-repeats rules would
    # contradict it.
    for key in ("repeats", "rank_test_alpha"):
        if merged.get(key) is not None:
            raise fail(
                key,
                ": remove it when experiment.sequential is set (the sequential design sets "
                "the samples per side)",
            )
    if keep_policy == "pass_only":
        raise fail(
            "sequential", ": needs keep_policy score_improvement (pass_only has no score to test)"
        )
    return design


def from_frozen(section: dict[str, Any]) -> ExperimentConfig:
    """The config back from session.yaml's canonical `experiment:` mapping (no re-validation)."""
    data = copy.deepcopy(section)
    metric = data.pop("metric")
    data["max_duration_s"] = data.pop("max_duration", None)
    data.pop("run_id", None)
    return ExperimentConfig(**metric, **data)
