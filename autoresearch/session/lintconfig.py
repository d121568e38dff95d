"""The target's own lint configuration, whichever linter it is written for.

A target that lints with flake8 says in `[flake8]` (setup.cfg, tox.ini, .flake8) or in
`[tool.flake8]` (pyproject.toml) which rules it checks, which it ignores on purpose and how
long a line may be. The ruff backend reports and fixes under ruff's rules, so a rule the
target ignores there (F401 in a package of submodule shims, E501 left to a formatter) would
come back as findings and fixes nobody asked for: it is not a finding. Ruff's own config
(pyproject.toml `[tool.ruff]`, ruff.toml, .ruff.toml) ruff reads itself; it is named here so
setup.json can say which config was read.
"""

from __future__ import annotations

import configparser
import fnmatch
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# flake8 reads the first of these files that has the section.
FLAKE8_INI = ("setup.cfg", "tox.ini", ".flake8")
CODE = re.compile(r"^[A-Z]+[0-9]*$")
TOKEN = re.compile(r"[^\s,:]+|:")
TOO_LONG = re.compile(r"\((\d+) > \d+\)")
PYTHON_FLOOR = re.compile(r"(?:>=|~=|==)\s*3\.(\d+)")  # a python_requires' 3.x lower bounds
SETUP_PY_REQUIRES = re.compile(r"python_requires\s*=\s*[\"']([^\"']+)[\"']")
RUFF_FLOOR = 7  # the oldest Python ruff's target-version can name (py37)


@dataclass
class Flake8Config:
    """The rule settings of one flake8 section: codes are prefixes, as flake8 reads them."""

    source: str  # "setup.cfg [flake8]"
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    extend_ignore: list[str] = field(default_factory=list)
    per_file_ignores: list[tuple[str, list[str]]] = field(default_factory=list)
    max_line_length: int | None = None
    exclude: list[str] = field(default_factory=list)  # files flake8 does not check at all

    def ignores(self, code: str, path: str) -> bool:
        """Whether the section ignores `code` in `path` (relative to the target's root)."""
        if _matches(code, self.ignore + self.extend_ignore):
            return True
        if any(_path_matches(path, pattern) for pattern in self.exclude):
            return True
        return any(
            _matches(code, codes) and _path_matches(path, pattern)
            for pattern, codes in self.per_file_ignores
        )

    def selects(self, code: str) -> bool:
        return not self.select or _matches(code, self.select)


@dataclass
class LintConfig:
    """What the target's lint configuration says, and where it was read."""

    ruff: str | None = None  # "pyproject.toml [tool.ruff]", or None: ruff's defaults
    flake8: Flake8Config | None = None

    def drops(self, code: str, path: str, message: str = "") -> bool:
        """Whether a ruff diagnostic is not a finding under the target's flake8 settings.
        flake8's `select` limits the rules only where the target has no ruff config: with
        both, its ruff config chooses ruff's rules (and flake8's ignores still hold)."""
        flake8 = self.flake8
        if flake8 is None or not code:
            return False
        if flake8.ignores(code, path):
            return True
        if self.ruff is None and not flake8.selects(code):
            return True
        if code == "E501" and flake8.max_line_length is not None:
            width = TOO_LONG.search(message)
            return bool(width) and int(width.group(1)) <= flake8.max_line_length
        return False

    def describe(self) -> dict[str, Any]:
        """setup.json's record: which config files were read, and the flake8 settings."""
        return {
            "ruff": self.ruff or "none (ruff's defaults)",
            "flake8": asdict(self.flake8) if self.flake8 else None,
        }


def read(root: Path) -> LintConfig:
    """The lint configuration at the target's root. A file that cannot be parsed counts as
    no config of that kind: the linter itself would refuse it."""
    return LintConfig(ruff=_ruff_source(root), flake8=_flake8(root))


def python_floor(root: Path) -> tuple[str, int] | None:
    """(where, minor) of the oldest Python 3 the target declares where ruff cannot read it:
    setup.cfg's or setup.py's `python_requires`, with no `requires-python` in
    pyproject.toml and no `target-version` in ruff's config. Without it ruff assumes a
    newer Python and its pyupgrade fixes (f-strings, `list[str]`) break the older ones."""
    pyproject = _pyproject(root)
    if (pyproject.get("project") or {}).get("requires-python"):
        return None
    tables = [((pyproject.get("tool") or {}).get("ruff")) or {}]
    for name in ("ruff.toml", ".ruff.toml"):
        try:
            tables.append(tomllib.loads((root / name).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
    if any(isinstance(t, dict) and t.get("target-version") for t in tables):
        return None
    parser = configparser.RawConfigParser()
    try:
        parser.read_string((root / "setup.cfg").read_text(encoding="utf-8"))
        declared = [("setup.cfg", parser.get("options", "python_requires", fallback=""))]
    except (OSError, UnicodeDecodeError, configparser.Error):
        declared = []
    try:
        found = SETUP_PY_REQUIRES.search((root / "setup.py").read_text(encoding="utf-8"))
        declared.append(("setup.py", found.group(1) if found else ""))
    except (OSError, UnicodeDecodeError):
        pass
    for where, text in declared:
        minors = [int(m) for m in PYTHON_FLOOR.findall(text)]
        if minors:
            return f"{where} python_requires {text.strip()}", min(minors)
    return None


def _ruff_source(root: Path) -> str | None:
    for name in ("ruff.toml", ".ruff.toml"):
        if (root / name).is_file():
            return name
    tool = _pyproject(root).get("tool") or {}
    return "pyproject.toml [tool.ruff]" if "ruff" in tool else None


def _pyproject(root: Path) -> dict[str, Any]:
    try:
        return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _flake8(root: Path) -> Flake8Config | None:
    for name in FLAKE8_INI:
        parser = configparser.RawConfigParser()
        try:
            parser.read_string((root / name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, configparser.Error):
            continue
        if parser.has_section("flake8"):
            section = {k.replace("_", "-"): v for k, v in parser.items("flake8")}
            return _settings(f"{name} [flake8]", section)
    section = (_pyproject(root).get("tool") or {}).get("flake8")
    if isinstance(section, dict):
        return _settings(
            "pyproject.toml [tool.flake8]", {k.replace("_", "-"): v for k, v in section.items()}
        )
    return None


def _settings(source: str, section: dict[str, Any]) -> Flake8Config:
    length = _text(section.get("max-line-length")).strip()
    return Flake8Config(
        source=source,
        select=_codes(section.get("select")) + _codes(section.get("extend-select")),
        ignore=_codes(section.get("ignore")),
        extend_ignore=_codes(section.get("extend-ignore")),
        per_file_ignores=_per_file(_text(section.get("per-file-ignores"))),
        max_line_length=int(length) if length.isdigit() else None,
        exclude=_globs(section.get("exclude")) + _globs(section.get("extend-exclude")),
    )


def _text(value: Any) -> str:
    """A setting as flake8's text: a TOML list is its items, an ini value loses comments."""
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return "\n".join(line.split("#", 1)[0] for line in str(value).splitlines())


def _codes(value: Any) -> list[str]:
    return [t for t in re.split(r"[\s,]+", _text(value)) if CODE.match(t)]


def _globs(value: Any) -> list[str]:
    return [t for t in re.split(r"[\s,]+", _text(value)) if t]


def _per_file(text: str) -> list[tuple[str, list[str]]]:
    """flake8's `per-file-ignores`: `pattern: CODES` pairs, spread over lines as one likes
    (`a.py:E1,W2 tests/*: F401`)."""
    pairs: list[tuple[str, list[str]]] = []
    files: list[str] = []
    codes: list[str] = []
    after_colon = False
    for token in TOKEN.findall(text):
        if token == ":":
            after_colon = True
        elif after_colon and CODE.match(token):
            codes.append(token)
        else:
            if codes:
                pairs += [(f, list(codes)) for f in files]
                files, codes = [], []
            files.append(token)
            after_colon = False
    pairs += [(f, list(codes)) for f in files if codes]
    return pairs


def _matches(code: str, prefixes: list[str]) -> bool:
    return any(code.startswith(prefix) for prefix in prefixes)


def _path_matches(path: str, pattern: str) -> bool:
    pattern = pattern.removeprefix("./").rstrip("/")
    name = path.rsplit("/", 1)[-1]
    return (
        fnmatch.fnmatch(path, pattern)
        or path.startswith(pattern + "/")
        or ("/" not in pattern and fnmatch.fnmatch(name, pattern))
    )
