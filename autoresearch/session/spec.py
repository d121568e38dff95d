"""The session spec: layered merge with provenance, schema validation, freezing.

Precedence, lowest first: config/config.yaml < the target's .autoresearch.yml <
config/sessions/<name>.yaml < --config. Every leaf value remembers which file
set it, so a validation error can name the file and the key to fix.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autoresearch.errors import SessionError, SpecError
from autoresearch.safety import worktree_files
from autoresearch.session.files import write_text

SESSION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
TARGET_CONFIG = ".autoresearch.yml"
DEFAULT_TEAMS = ["red", "green", "refactor"]
# Keys a target's .autoresearch.yml may set.
TARGET_KEYS = {
    "test_command",
    "linter_command",
    "scope",
    "include",
    "exclude",
    "max_cycles",
    "teams",
    "mode",
    "protected",
}
# Bounds on what a spec file may hold (a target's .autoresearch.yml is not ours): a 5 MB
# command took setup minutes to split into words, and no shell takes an argument that long.
MAX_SPEC_FILE_BYTES = 8 << 20  # a few seconds of YAML parsing
MAX_STRING_CHARS = 64 << 10


@dataclass
class Spec:
    """A merged spec and where each of its leaf keys came from."""

    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def source_of(self, dotted: str) -> str:
        while dotted:
            if dotted in self.sources:
                return self.sources[dotted]
            dotted = dotted.rpartition(".")[0]
        return "config/config.yaml"


def workflow_root() -> Path:
    """The checkout holding the Snakefile: the package's parent when installed editable."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / "Snakefile").exists() else Path.cwd()


def check_session_name(name: str) -> None:
    if not SESSION_NAME.match(name):
        raise SpecError(
            f"session name {name!r} is not allowed: use letters, digits, '.', '_' and '-' "
            "(no '/', no spaces), starting with a letter or digit"
        )


def read_yaml(path: Path, what: str) -> dict[str, Any]:
    size = path.stat().st_size
    if size > MAX_SPEC_FILE_BYTES:
        raise SpecError(
            f"{path}: {what} is {size} bytes; a spec file may hold at most {MAX_SPEC_FILE_BYTES}"
        )
    return parse_yaml(path.read_text(), path, what)


def parse_yaml(text: str, path: Path, what: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise SpecError(f"{path}: {what} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: {what} must be a mapping of keys to values")
    return data


def _merge_into(base: dict, layer: dict, sources: dict, origin: str, prefix: str = "") -> None:
    for key, value in layer.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(base.get(key), dict) and value:
            _merge_into(base[key], value, sources, origin, dotted + ".")
        else:
            base[key] = copy.deepcopy(value)
            sources[dotted] = origin


def _target_layer(target: Path, spec: Spec) -> dict[str, Any]:
    path = target / TARGET_CONFIG
    # The target's file, read by the worktree reader's rules: a link out is not followed.
    try:
        text = worktree_files.read_text(
            target, TARGET_CONFIG, max_bytes=MAX_SPEC_FILE_BYTES, errors="strict"
        )
    except worktree_files.Missing:
        return {}
    except worktree_files.Refused as err:
        raise SpecError(f"{path}: the target's config is not read: {err}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: the target's config is not UTF-8 text") from None
    layer = parse_yaml(text, path, "the target's config")
    unknown = set(layer) - TARGET_KEYS
    if unknown:
        spec.warnings.append(f"{path}: ignoring unknown keys {sorted(unknown)}")
    layer = {k: v for k, v in layer.items() if k in TARGET_KEYS}
    # A flat include/exclude becomes our scope mapping.
    for key in ("include", "exclude"):
        if key in layer:
            layer.setdefault("scope", {})[key] = layer.pop(key)
    teams = layer.get("teams")
    if teams is not None and (
        not isinstance(teams, list) or "red" not in teams or "green" not in teams
    ):
        spec.warnings.append(
            f"{path}: teams {teams!r} is invalid (red and green are required); "
            f"using the default teams {DEFAULT_TEAMS}"
        )
        layer.pop("teams")
    return layer


def load(
    name: str,
    root: Path | None = None,
    overrides: dict[str, Any] | None = None,
    origins: dict[str, str] | None = None,
) -> Spec:
    """Merge the layers for session `name` and validate the result. `origins` names where
    each overriding key came from (`--configfile PATH` or `--config`)."""
    check_session_name(name)
    root = root or workflow_root()
    spec = Spec(values={})
    _merge_into(spec.values, read_yaml(root / "config/config.yaml", "the defaults"), {}, "")
    session_file = root / "config" / "sessions" / f"{name}.yaml"
    session_layer = read_yaml(session_file, "the session spec") if session_file.is_file() else {}
    overrides = dict(overrides or {})

    target_value = overrides.get("target", session_layer.get("target"))
    if target_value:
        target = resolve_target(str(target_value))
        if target.is_dir():
            _merge_into(
                spec.values, _target_layer(target, spec), spec.sources, str(target / TARGET_CONFIG)
            )
    rel_session = f"config/sessions/{name}.yaml"
    _merge_into(spec.values, session_layer, spec.sources, rel_session)
    _merge_into(spec.values, overrides, spec.sources, "--config")
    for dotted, origin in (origins or {}).items():
        if spec.sources.get(dotted) == "--config":
            spec.sources[dotted] = origin
    cli_file = next(iter(sorted(set((origins or {}).values()))), "--config")
    if not session_layer and not overrides:
        raise SpecError(
            f"no spec for session {name!r}: create {rel_session} "
            f"(`autoresearch new {name} --target PATH`) or pass --config target=PATH"
        )
    validate(spec, root, default_file=rel_session if session_layer else cli_file)
    return spec


def resolve_target(value: str) -> Path:
    """A relative target is relative to the working directory (where sessions/ is)."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else (Path.cwd() / path)


def schema(root: Path | None = None) -> dict[str, Any]:
    """config/schema.yaml: what every spec key takes, stated once."""
    return yaml.safe_load(((root or workflow_root()) / "config" / "schema.yaml").read_text())


def validate(spec: Spec, root: Path, default_file: str) -> None:
    import jsonschema  # costly to import; only a session that starts needs it

    check_lengths(spec, spec.values)  # first: the schema's patterns would scan a huge value
    validator = jsonschema.Draft202012Validator(schema(root))
    errors = sorted(validator.iter_errors(spec.values), key=lambda e: list(e.absolute_path))
    if not errors:
        check_values(spec)
        check_places(spec, root)
        return
    err = errors[0]
    dotted = ".".join(str(p) for p in err.absolute_path)
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        key = f"{dotted}.{missing}" if dotted else missing
        raise SpecError(f"{default_file}: required key '{key}' is not set")
    if err.validator == "additionalProperties":
        known = list(err.schema.get("properties") or {})
        extra = next((k for k in err.instance if k not in known), "?")
        key = f"{dotted}.{extra}" if dotted else extra
        origin = spec.sources.get(key) or default_file
        prefix = f"{dotted}." if dotted else ""
        # A key of a section one level down, written a level too high (`experiment.command`
        # for `experiment.metric.command`), is that key, whatever key it happens to resemble.
        nested = [f"{child}.{extra}" for child in known if extra in nested_keys(err.schema, child)]
        hint = nested or difflib.get_close_matches(str(extra), known, n=1)
        maybe = f"; did you mean '{prefix}{hint[0]}'?" if hint else ""
        raise SpecError(f"{origin}: unknown key '{key}'{maybe}")
    origin = spec.source_of(dotted)
    raise SpecError(f"{origin}: key '{dotted}': {err.message}{did_you_mean(err)}")


def nested_keys(schema: dict[str, Any], child: str) -> dict[str, Any]:
    """The keys of section `child` of an object schema (none when it is no section)."""
    sub = (schema.get("properties") or {}).get(child) or {}
    return sub.get("properties") or {} if isinstance(sub, dict) else {}


def did_you_mean(err: Any) -> str:
    """For a value not among an enum's: the closest allowed one, as keys get it."""
    allowed = err.validator_value if err.validator == "enum" else None
    if not isinstance(err.instance, str) or not isinstance(allowed, list):
        return ""
    close = difflib.get_close_matches(err.instance, [str(a) for a in allowed], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_lengths(spec: Spec, value: Any, dotted: str = "") -> None:
    """Every string of the spec (keys too, and items of lists) is at most MAX_STRING_CHARS."""
    if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        raise SpecError(
            f"{spec.source_of(dotted)}: key '{dotted}' is {len(value)} characters long; "
            f"at most {MAX_STRING_CHARS} are allowed"
        )
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{dotted}.{key}" if dotted else str(key)
            if len(str(key)) > MAX_STRING_CHARS:
                raise SpecError(f"{spec.source_of(dotted)}: a key under '{dotted}' is too long")
            check_lengths(spec, item, name)
    elif isinstance(value, list):
        for item in value:
            check_lengths(spec, item, dotted)


def check_places(spec: Spec, root: Path) -> None:
    """`worktree_root` lies outside the target, this workflow's checkout and `sessions/`: in
    the target, the user's checkout would show the worktrees as untracked files; in ours (or
    under sessions/), our configs would lie above them, and the jail hides sessions/."""
    setting, target = spec.values.get("worktree_root"), spec.values.get("target")
    if not setting:
        return
    store = Path(os.path.normpath(Path(setting).expanduser().absolute())).resolve()
    around = [(Path(root).resolve(), "this workflow's checkout")]
    around.append(((Path.cwd() / "sessions").resolve(), "the sessions/ folder"))
    if target:
        around.insert(0, (resolve_target(str(target)).resolve(), f"the target {target}"))
    for place, what in around:
        if store == place or place in store.parents:
            raise SpecError(
                f"{spec.source_of('worktree_root')}: key 'worktree_root': {setting} is inside "
                f"{what}; choose a folder outside it (or null for the default)"
            )


def check_values(spec: Spec) -> None:
    """What the schema cannot say: the teams a cycle needs, globs that can match."""
    teams = spec.values.get("teams")
    if teams is not None:
        missing = [t for t in ("red", "green") if t not in teams]
        if missing:
            raise SpecError(
                f"{spec.source_of('teams')}: key 'teams': {teams} leaves out "
                f"{' and '.join(missing)}; a cycle needs red and green (refactor is optional)"
            )
    from autoresearch.safety.child_env import problem as pass_env_problem
    from autoresearch.safety.sandbox import glob_match

    passed = (spec.values.get("commands") or {}).get("pass_env")
    if passed:
        problem = pass_env_problem(passed, spec.values.get("secrets") or ())
        if problem:
            raise SpecError(
                f"{spec.source_of('commands.pass_env')}: key 'commands.pass_env': {problem}"
            )
    for key in ("protected", "test_support", "scope.include", "scope.exclude"):
        section, _, leaf = key.rpartition(".")
        patterns = (spec.values.get(section) or {}).get(leaf) if section else spec.values.get(key)
        for pattern in patterns or []:
            problem = _glob_problem(pattern, glob_match)
            if problem:
                raise SpecError(
                    f"{spec.source_of(key)}: key '{key}': pattern {pattern!r} {problem}; use a "
                    "path relative to the target, with * ? ** and [...]"
                )


def _glob_problem(pattern: str, glob_match: Any) -> str | None:
    text = pattern.strip()
    if not text.strip("./"):
        return "is empty"
    if text.startswith("/") or ".." in Path(text).parts:
        return "points outside the target"
    try:
        glob_match("x", text)
    except (re.error, ValueError) as err:
        return f"is not a valid glob ({err})"
    return None


def freeze(spec: Spec, path: Path) -> None:
    """Write the merged spec once; later edits to the layers cannot change it."""
    # Round-trip through JSON: Snakemake reads a JSON --configfile into OrderedDicts,
    # which yaml.safe_dump refuses.
    plain = json.loads(json.dumps(spec.values))
    write_text(path, yaml.safe_dump(plain, sort_keys=False))


class _Setting:
    """A value of the frozen spec at a dotted key (`budget.max_cost_usd`), as `kind` makes
    it, `default` where the key is unset."""

    def __init__(self, dotted: str, kind: Callable[[Any], Any] | None = None, default: Any = None):
        self.keys, self.kind, self.default = dotted.split("."), kind, default

    def __get__(self, spec: SessionSpec | None, owner: type) -> Any:
        if spec is None:
            return self  # the class's own attribute
        value: Any = spec
        for key in self.keys:
            value = (value or {}).get(key)
        value = self.default if value is None else value
        return value if self.kind is None else self.kind(value)


class SessionSpec(dict):
    """A frozen spec, with typed accessors for the values the engine reads everywhere.

    Still a mapping: each mode reads its own section (`goal`, `experiment`, ...) by key.
    """

    @property
    def mode(self) -> str:
        return self["mode"]

    @property
    def agent(self) -> dict[str, Any]:
        return self["agent"]

    @property
    def backend(self) -> str:
        return self["agent"]["backend"]

    @property
    def teams(self) -> list[str]:
        return list(self.get("teams") or DEFAULT_TEAMS)

    @property
    def refactor_on(self) -> bool:
        return "refactor" in self.teams

    @property
    def test_timeout_s(self) -> float:
        return self["test_timeout_s"]

    max_cycles = _Setting("max_cycles")
    budget_usd = _Setting("budget.max_cost_usd")  # the whole session's; None: no limit
    stage_budget_usd = _Setting("budget.max_cost_usd_per_stage")
    secrets = _Setting("secrets", list, ())
    protected = _Setting("protected", list, ())
    allow_failing_baseline = _Setting("allow_failing_baseline", bool)
    # A change may make a test that passed stop being reported (deleted, renamed, skipped,
    # deselected); the ids removed are recorded.
    allow_test_removal = _Setting("allow_test_removal", bool)
    # A change may edit the code of a test that existed where it started (its expected value,
    # its body); without it such a change is not kept (overlay.py).
    allow_test_edits = _Setting("allow_test_edits", bool)
    # Files outside the test folders the tests need as the start had them (overlay.py).
    test_support = _Setting("test_support", tuple, ())
    # Checks of the tamper screen (tamper.CHECKS) whose flags do not stop a change.
    allow_tamper_flags = _Setting("allow_tamper_flags", frozenset, ())
    # per_fix (the suite runs on each change before it is committed) or batch (once at the
    # stage's end, with a bisection when it fails).
    test_gate = _Setting("test_gate", default="batch")
    # evaluate.rerun: test every tree afresh, even one tested before (flaky suites).
    rerun_tests = _Setting("evaluate.rerun", bool)
    scope_include = _Setting("scope.include", list, ())
    scope_exclude = _Setting("scope.exclude", list, ())

    @property
    def scope_text(self) -> str:
        parts = [f"include {p}" for p in self.scope_include]
        parts += [f"exclude {p}" for p in self.scope_exclude]
        return ", ".join(parts) or "all files"


# libyaml's loader where PyYAML has it: the frozen spec is read by every job (once: its
# StageEnv holds it) and by the input functions Snakemake calls as it updates the DAG.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_frozen(path: Path) -> SessionSpec:
    """The spec frozen into session.yaml at setup; SessionError naming it when unreadable."""
    try:
        values = yaml.load(Path(path).read_text(), Loader=_LOADER)
    except (OSError, ValueError, yaml.YAMLError) as err:
        why = " ".join(str(err).split())
        raise SessionError(f"{path}: not the frozen spec setup wrote ({why})") from None
    if not isinstance(values, dict):
        raise SessionError(f"{path}: not the frozen spec setup wrote (no mapping of keys)")
    return SessionSpec(values)


# How the input functions read a frozen spec: `load_frozen`, or a run's `FrozenSpecs.read`.
SpecReader = Callable[[Path], SessionSpec]


class FrozenSpecs:
    """The frozen specs one Snakemake run's input functions read, each parsed once.

    Snakemake asks the input functions again each time it updates the DAG: a sweep cycle
    asked `green`'s, `evaluate`'s and `done`'s twice each, six parses of session.yaml a
    cycle (~0.7 ms each). One instance belongs to one workflow (rules/common.smk makes it
    and hands its `read` to those functions), and serves the thread that made it, the one
    that parses the workflow and updates its DAG. Jobs never share it: each parses its own
    spec once (jobs.open_stage; its StageEnv holds it), and a call from any other thread is
    a fresh parse, kept nowhere. The input functions only read what they are given.

    A file of another identity (device, inode, size or modification time) is parsed afresh:
    setup writes session.yaml once, by a rename, and nothing rewrites it."""

    def __init__(self) -> None:
        self._owner = threading.get_ident()
        self._parsed: dict[Path, tuple[tuple[int, int, int, int], SessionSpec]] = {}

    def read(self, path: Path) -> SessionSpec:
        """`load_frozen(path)`, parsed once per version of the file for the owning thread."""
        path = Path(path)
        if threading.get_ident() != self._owner:
            return load_frozen(path)
        try:
            # Taken before the read: a file changed in between is parsed again next time.
            stat = path.stat()
        except OSError:
            return load_frozen(path)  # its error names the file
        key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        held = self._parsed.get(path)
        if held is None or held[0] != key:
            held = (key, load_frozen(path))
            self._parsed[path] = held
        return held[1]
