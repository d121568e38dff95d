"""What the gate's decisive run takes from the change's start for Go, Jest and cargo runs
(overlay.py plans pytest's and lays every runner's over the candidate, docs/safety.md).

Per runner, the start's files that define or configure its tests (`Picked.defining`), the
files the change added that would take part in a run of them by themselves (`Picked.added`:
taken away for that run; the change's new tests run in the run as it left them), and the
files of the change whose runner keys are set back to the start's, the rest kept
(`Picked.written`: package.json's `jest` key and test scripts, Cargo.toml's test targets):
- go: every `_test.go` file and every file under a `testdata` folder. A `TestMain` can only
  live in a test file, so a change cannot bring one to the decisive run.
- jest: every file a test was reported from, every file under its nearest test folder
  (`__tests__`, `tests`, `test`), snapshots and manual mocks, the Jest and Babel
  configuration files (Babel's transforms every test file), and the files the configuration
  names (setup files, reporters, a results processor, a transform, an environment).
- cargo: every file under a crate's `tests/` folder, every `.cargo/config[.toml]`, and of
  each Cargo.toml the `[[test]]` targets, `autotests`, every target's `harness` and `test`
  keys (`harness = false` makes a target's own `main` print its results) and the test and
  dev profiles' `debug-assertions` and `overflow-checks`.
A start's test whose code the change edited is named (`edited`), as overlay._edited names
pytest's: a Rust unit test inside a source file too, which cannot be laid over without the
source (the change's code), so it runs as the change left it.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from autoresearch.gate import code_spans

# TestRun.source -> runner
RUNNERS = {"go-json": "go", "jest-json": "jest", "cargo": "cargo"}
JEST_SEPARATOR = " > "
_BROKEN_SUFFIX = re.compile(r" \[[^\]]*\]$")  # `file [suite failed to run]`

_JEST_CONFIG = re.compile(r"^jest\.config\.(js|ts|mjs|cjs|json)$")
_BABEL_CONFIG = re.compile(r"^(babel\.config\.(js|cjs|mjs|json)|\.babelrc(\.(js|cjs|mjs|json))?)$")
_JEST_TEST_FILE = re.compile(r"\.(test|spec)\.[mc]?[jt]sx?$")
_JEST_FOLDERS = ("__tests__", "tests", "test")
_JEST_OWN_FOLDERS = ("__snapshots__", "__mocks__")
# Scripts npm runs for `npm test`: the test script names the runner and its flags.
_TEST_SCRIPTS = ("pretest", "test", "posttest")
# A string in a Jest configuration that may name a file of the tree.
_CONFIG_STRING = re.compile(r"""["'`]((?:<rootDir>/|\./|\.\./)?[\w@.\-/]+)["'`]""")
_SCRIPT_EXTS = ("", ".js", ".cjs", ".mjs", ".ts", ".json")

_CARGO_CONFIG = re.compile(r"(^|/)\.cargo/config(\.toml)?$")
_TOML_HEADER = re.compile(r"^\s*\[(\[)?\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?$")
_TARGET_KEYS = re.compile(r"^\s*(harness|test)\s*=")
_AUTOTESTS = re.compile(r"^\s*autotests\s*=")
_TARGET_KINDS = ("lib", "bin", "bench", "example")
# The profiles a test build takes its settings from, and the settings that decide whether a
# test's assertions run (`debug-assertions = false` turns `debug_assert!` off).
_TEST_PROFILES = ("test", "dev")
_PROFILE_KEYS = ("debug-assertions", "overflow-checks")
_ASSERTS = re.compile(r"^\s*(debug-assertions|overflow-checks)\s*=")


@dataclass
class Picked:
    defining: set[str] = field(default_factory=set)  # laid over as the start had them
    added: set[str] = field(default_factory=set)  # the change's, taken away for the run
    written: dict[str, str] = field(default_factory=dict)  # path -> text laid over


Tree = dict[str, tuple[str, str]]  # path -> (mode, blob)


def runner_of(source: str) -> str | None:
    return RUNNERS.get(source)


def pick(
    runner: str,
    ids: set[str],
    at_start: Tree,
    now: Tree,
    show: Callable[[str], str],
    command: str = "",
) -> Picked:
    """The files of `runner`'s decisive run; `show(blob)` reads a blob, `command` is the
    test command (a Jest `--config` it names is laid over too)."""
    if runner == "go":
        return _go(at_start, now)
    if runner == "jest":
        return _jest(ids, at_start, now, show, command)
    return _cargo(at_start, now, show)


# Where a test's code starts, by runner: Go's `func TestX(`, a Rust `fn x(`, a Jest `test("x",`
# or `it.each(...)("x",`. A test's code runs from there to the next one's start.
_TEST_START = {
    "go": re.compile(r"^func\s+(?P<name>\w+)\s*\(", re.MULTILINE),
    "cargo": re.compile(r"^[ \t]*(?:pub\s+)?(?:async\s+)?fn\s+(?P<name>\w+)", re.MULTILINE),
    "jest": re.compile(
        r"(?<![\w.$])(?:test|it)(?:\.\w+)*(?:\([^()]*\))?\(\s*(?P<q>[\"'`])(?P<name>.*?)(?P=q)"
    ),
}
# Lines before a test's start that are part of it: attributes (`#[should_panic(...)]`),
# comments, blank lines.
_LEADING = re.compile(r"^\s*(#\[.*|//.*|/\*.*|\*.*)?$")


def edited(
    runner: str, ids: set[str], path: str, start_text: str, text: str, source: bool = False
) -> dict[str, str]:
    """The tests of the start in `path` whose code the change edited (an expected value, an
    attribute), by `path::test` (Jest: `path > describe > title`). Compared without whitespace, so a
    reformat is no edit; a comment edited inside a test's code is one. In a `source` file
    (Rust's unit tests), only a function whose attributes name a test."""
    if not path.endswith({"go": "_test.go", "cargo": ".rs"}.get(runner, "")):
        return {}
    names = _test_names(runner, ids, path)
    before, after = _tests_in(runner, start_text), _tests_in(runner, text)
    squeezed = _squeeze(text)
    found: dict[str, str] = {}
    separator = JEST_SEPARATOR if runner == "jest" else "::"
    for name in sorted(names & before.keys() & after.keys()):
        if source and not any("test" in code.split("fn", 1)[0] for code, _, _ in before[name]):
            continue  # a function of the code named like a test
        # Each of the start's tests of that name is still there as it was (a test added
        # under the same title elsewhere, or after it, edits none), and what followed it
        # up to the next test (a table it reads) is still in the file.
        codes = [code for code, _, _ in after[name]]
        for code, gap, at in before[name]:
            if code not in codes or gap not in squeezed:
                test = f"{path}{separator}{name}"
                if runner == "jest":  # its describes too: one title may be in several
                    test = JEST_SEPARATOR.join([path, *_describes(start_text, at), name])
                found[test] = "its code differs from the start's"
                break
            codes.remove(code)
    if runner == "jest":
        start_codes = [code for tests in before.values() for code, _, _ in tests]
        for hook in _jest_hooks_added(start_text, text, start_codes):
            found[path] = f"{hook}(...) added: it runs with the start's tests"
    return found


# Code a Jest file runs around its tests: a hook runs with every test of its describe (or
# of the file), a module mock replaces a module for the whole file (Jest hoists it).
_JEST_HOOK = re.compile(
    r"(?<![\w.$])(?P<hook>beforeEach|beforeAll|afterEach|afterAll"
    r"|jest\.(?:mock|doMock|unmock|setMock|spyOn|replaceProperty|useFakeTimers))\s*\("
)
_DESCRIBE = re.compile(r"(?<![\w.$])describe(?:\.\w+)*(?:\([^()]*\))?\(")


def _describes(text: str, at: int) -> list[str]:
    """The titles of the describes holding offset `at`, the outermost first, as Jest's ids
    name them."""
    titles = []
    for match in _DESCRIBE.finditer(text, 0, at):
        end = code_spans.own_end("jest", text, match.end() - 1, len(text))
        title = _TITLE.match(text, match.end())
        if end is not None and at < end and title:
            titles.append(title.group("title"))
    return titles


_TITLE = re.compile(r"\s*(?P<q>[\"'`])(?P<title>.*?)(?P=q)")


def _jest_hooks_added(start_text: str, text: str, start_codes: list[str]) -> list[str]:
    """The hooks and mocks of `text` beyond the start's that reach one of the start's tests:
    any module mock, a hook at the top of the file or in a describe holding a start test (a
    new describe of new tests may have hooks of its own)."""
    before = _hook_counts(start_text)
    if all(n <= before.get(hook, 0) for hook, n in _hook_counts(text).items()):
        return []  # no hook more than the start had: nothing to place
    describes = []
    for match in _DESCRIBE.finditer(text):
        end = code_spans.own_end("jest", text, match.end() - 1, len(text))
        if end is not None:
            describes.append((match.start(), end, _squeeze(text[match.start() : end])))

    def reaches(at: int, hook: str) -> bool:
        if hook.startswith("jest."):
            return True
        inner = [d for d in describes if d[0] < at < d[1]]
        if not inner:
            return True
        body = min(inner, key=lambda d: d[1] - d[0])[2]
        return any(code in body for code in start_codes)

    after = _hook_counts(text, reaches)
    return sorted(hook for hook, n in after.items() if n > before.get(hook, 0))


def _hook_counts(text: str, counted: Callable[[int, str], bool] | None = None) -> dict[str, int]:
    """How many of each Jest hook and mock `text` calls (those at an offset `counted` takes)."""
    found: dict[str, int] = {}
    for match in _JEST_HOOK.finditer(text):
        hook = match.group("hook")
        if counted is None or counted(match.start(), hook):
            found[hook] = found.get(hook, 0) + 1
    return found


def _test_names(runner: str, ids: set[str], path: str) -> set[str]:
    """The names of the start's tests as their code names them: Go's top-level test function
    (`TestX` of `pkg::TestX/sub`), a Rust test function, a Jest test's title (those of `path`)."""
    if runner == "go":
        return {i.split("::", 1)[-1].split("/", 1)[0] for i in ids}
    if runner == "cargo":
        return {i.rsplit("::", 1)[-1] for i in ids}
    parts = [i.split(JEST_SEPARATOR) for i in ids]
    return {p[-1] for p in parts if len(p) > 1 and p[0] == path}


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _bracket(runner: str, text: str, match: re.Match[str]) -> int:
    """Where the test's own brackets start: a Jest call's `(` before the title (past an
    `.each(...)`), a Go or Rust function's parameters."""
    if runner == "jest":
        return text.rfind("(", match.start(), match.start("q"))
    return match.end() - 1 if runner == "go" else match.end()


def _tests_in(runner: str, text: str) -> dict[str, list[tuple[str, str, int]]]:
    """Each test's code by its name (a list: one name may be used twice), without whitespace
    and without the closing brackets it ends in, with what follows it up to the next test
    (empty where the test's own end could not be found: its code then runs to there), and
    where it starts."""
    starts = []
    for match in _TEST_START[runner].finditer(text):
        at = match.start()
        line = text.rfind("\n", 0, at) + 1
        if not text[line:at].strip():
            at = line
            # Attributes and comments just above a test belong to it, not to the one before.
            while at > 0:
                above = text.rfind("\n", 0, at - 1) + 1
                if not _LEADING.match(text[above : at - 1]):
                    break
                at = above
        starts.append((at, match.group("name"), _bracket(runner, text, match)))
    tests: dict[str, list[tuple[str, str, int]]] = {}
    for n, (at, name, bracket) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(text)
        own = code_spans.own_end(runner, text, bracket, end) if bracket >= at else None
        own = end if own is None else own
        code = _squeeze(text[at:own]).rstrip("});,")
        tests.setdefault(name, []).append((code, _squeeze(text[own:end]), at))
    return tests


def _visible(path: str) -> bool:
    return "node_modules" not in PurePosixPath(path).parts


# --- go ---


def _go_defines(path: str) -> bool:
    p = PurePosixPath(path)
    return p.name.endswith("_test.go") or "testdata" in p.parts[:-1]


def _go(at_start: Tree, now: Tree) -> Picked:
    return Picked(
        {p for p in at_start if _go_defines(p)},
        {p for p in now if p not in at_start and _go_defines(p)},
    )


# --- jest ---


def _jest_runner_file(path: str) -> bool:
    name = PurePosixPath(path).name
    return bool(_JEST_CONFIG.match(name) or _BABEL_CONFIG.match(name))


def _jest_folder(path: str) -> str | None:
    """The nearest test folder holding `path`."""
    parts = PurePosixPath(path).parts[:-1]
    for n in range(len(parts), 0, -1):
        if parts[n - 1] in _JEST_FOLDERS:
            return "/".join(parts[:n])
    return None


def _jest_own(path: str) -> bool:
    """A file Jest runs or reads by where it lies: a test file by its name or folder, a
    snapshot, a manual mock (one beside node_modules mocks a package with no call naming it)."""
    p = PurePosixPath(path)
    folders = p.parts[:-1]
    return bool(
        _JEST_TEST_FILE.search(p.name)
        or "__tests__" in folders
        or any(f in _JEST_OWN_FOLDERS for f in folders)
    )


def _jest(
    ids: set[str], at_start: Tree, now: Tree, show: Callable[[str], str], command: str
) -> Picked:
    files = {_BROKEN_SUFFIX.sub("", i.split(JEST_SEPARATOR, 1)[0]) for i in ids}
    reported = {f for f in files if f in at_start}
    folders = {folder for f in reported if (folder := _jest_folder(f))}

    def under(path: str) -> bool:
        return any(path.startswith(d + "/") for d in folders)

    start_paths = [p for p in at_start if _visible(p)]
    defining = reported | {p for p in start_paths if under(p) or _jest_own(p)}
    configs = {p for p in start_paths if _jest_runner_file(p)}
    packages = {p for p in start_paths if PurePosixPath(p).name == "package.json"}
    # A configuration the command or a test script names (`jest --config ci/jest.js`).
    configs |= _named_files("package.json", _quoted_words(command), at_start)
    for path in packages:
        keys = _package_keys(show(at_start[path][1]))
        scripts = " ".join(str(keys.get(f"scripts.{name}", "")) for name in _TEST_SCRIPTS)
        configs |= _named_files(path, _quoted_words(scripts), at_start)
        defining |= _named_files(path, json.dumps(keys.get("jest")), at_start)
    defining |= configs
    for path in configs:
        defining |= _named_files(path, show(at_start[path][1]), at_start)
    added = {
        p
        for p in now
        if p not in at_start and _visible(p) and (_jest_runner_file(p) or _jest_own(p) or under(p))
    }
    written: dict[str, str] = {}
    for path in now:
        if PurePosixPath(path).name != "package.json" or not _visible(path):
            continue
        if now[path] == at_start.get(path):
            continue  # as the start had it
        start_text = show(at_start[path][1]) if path in at_start else "{}"
        merged = _package_with_start_keys(show(now[path][1]), start_text)
        if merged is not None:
            written[path] = merged
    return Picked(defining, added, written)


def _named_files(config: str, text: str, at_start: Tree) -> set[str]:
    """The files of the start a Jest configuration's strings name, relative to its folder
    (`./setup.js`, `<rootDir>/jest/flip`, with or without the extension)."""
    folder = PurePosixPath(config).parent
    found: set[str] = set()
    for name in _CONFIG_STRING.findall(text):
        rel = name.removeprefix("<rootDir>/")
        parts: list[str] = []
        for part in (folder / rel).parts:
            if part == "..":
                if not parts:
                    break
                parts.pop()
            elif part != ".":
                parts.append(part)
        else:
            base = "/".join(parts)
            for ext in _SCRIPT_EXTS:
                if base + ext in at_start:
                    found.add(base + ext)
                    break
    return found


def _quoted_words(command: str) -> str:
    """A command's words (and a flag's value after `=`) each in quotes, as a configuration
    writes its strings."""
    words = re.split(r"[\s=]+", command)
    return " ".join(json.dumps(w) for w in words if w)


def _package_keys(text: str) -> dict[str, Any]:
    """The keys of a package.json that configure a test run: `jest`, and the test scripts."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    keys: dict[str, Any] = {}
    if "jest" in data:
        keys["jest"] = data["jest"]
    scripts = data.get("scripts")
    if isinstance(scripts, dict):
        keys |= {f"scripts.{s}": scripts[s] for s in _TEST_SCRIPTS if s in scripts}
    return keys


def _package_with_start_keys(text: str, start_text: str) -> str | None:
    """The change's package.json with its `jest` key and test scripts as the start had them
    (the rest, its dependencies, the change's); None when they already are. A package.json
    that does not parse is laid over whole by the start's."""
    start, now = _package_keys(start_text), _package_keys(text)
    if start == now:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return start_text
    if not isinstance(data, dict):
        return start_text
    data.pop("jest", None)
    if "jest" in start:
        data["jest"] = start["jest"]
    scripts = data.get("scripts") if isinstance(data.get("scripts"), dict) else {}
    for name in _TEST_SCRIPTS:
        scripts.pop(name, None)
        if f"scripts.{name}" in start:
            scripts[name] = start[f"scripts.{name}"]
    if scripts or "scripts" in data:
        data["scripts"] = scripts
    return json.dumps(data, indent=2) + "\n"


# --- cargo ---


def _cargo(at_start: Tree, now: Tree, show: Callable[[str], str]) -> Picked:
    manifests = (PurePosixPath(p) for p in at_start)
    crates = {str(p.parent) for p in manifests if p.name == "Cargo.toml"}
    folders = {"tests" if c == "." else f"{c}/tests" for c in crates}

    def defines(path: str) -> bool:
        return bool(_CARGO_CONFIG.search(path)) or any(path.startswith(d + "/") for d in folders)

    written: dict[str, str] = {}
    for path in now:
        if PurePosixPath(path).name == "Cargo.toml" and now[path] != at_start.get(path, now[path]):
            merged = _manifest_with_start_targets(show(now[path][1]), show(at_start[path][1]))
            if merged is not None:
                written[path] = merged
    return Picked(
        {p for p in at_start if defines(p)},
        {p for p in now if p not in at_start and defines(p)},
        written,
    )


def _test_targets(text: str) -> dict[str, Any] | None:
    """What of a Cargo.toml decides which test binaries run and how: its `[[test]]`
    targets, `autotests`, every target's `harness` and `test` keys, and whether the test
    build checks assertions and overflows. None when it does not parse."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    package = data.get("package") if isinstance(data.get("package"), dict) else {}
    found: dict[str, Any] = {"test": data.get("test"), "autotests": package.get("autotests")}
    for kind in _TARGET_KINDS:
        entries = data.get(kind)
        entries = [entries] if isinstance(entries, dict) else entries
        keys = []
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and ("harness" in entry or "test" in entry):
                keys.append([entry.get("name"), entry.get("harness"), entry.get("test")])
        found[kind] = sorted(keys, key=json.dumps)
    profiles = data.get("profile") if isinstance(data.get("profile"), dict) else {}
    for name in _TEST_PROFILES:
        profile = profiles.get(name) if isinstance(profiles.get(name), dict) else {}
        found[f"profile.{name}"] = {k: profile[k] for k in _PROFILE_KEYS if k in profile}
    return found


def _manifest_with_start_targets(text: str, start_text: str) -> str | None:
    """The change's Cargo.toml with its test targets as the start had them (its
    dependencies and the rest the change's); None when they already are. Where the
    change's text cannot be mended line by line into exactly the start's targets (a key
    written inline, a table the start had keys in), the start's Cargo.toml whole."""
    start = _test_targets(start_text)
    if _test_targets(text) == start:
        return None
    kept: list[str] = []
    section, array = "", False
    for line in text.splitlines():
        header = _TOML_HEADER.match(line)
        if header:
            section, array = header.group(2).strip(), bool(header.group(1))
        if section == "test" and array:
            continue  # every [[test]] of the change: the start's come after
        if section in _TARGET_KINDS and _TARGET_KEYS.match(line):
            continue
        if section == "package" and _AUTOTESTS.match(line):
            continue
        if section in (f"profile.{name}" for name in _TEST_PROFILES) and _ASSERTS.match(line):
            continue
        kept.append(line)
    own: list[str] = []
    section, array = "", False
    for line in start_text.splitlines():
        header = _TOML_HEADER.match(line)
        if header:
            section, array = header.group(2).strip(), bool(header.group(1))
        if section == "test" and array:
            own.append(line)
    merged = "\n".join(kept).rstrip("\n") + "\n" + ("\n" + "\n".join(own) + "\n" if own else "")
    return merged if _test_targets(merged) == start else start_text
