"""The tamper screen's readers for code that is not Python: Go, Rust and JavaScript read
line by line, and the configuration their test runners load by themselves (a Jest config
or package.json's `jest` key, Cargo.toml, `.cargo/config`, a build script).

What is flagged is what a change could pass its tests by without being right: code outside
the tests that tells a test run from a real one (Go's `testing.Testing()` or its `-test.*`
flags, a `.test` binary's name; Rust's `cfg!(test)`, `cfg(not(test))`, the harness's
variables and flags; Jest's worker variable, `NODE_ENV === "test"`, `typeof jest`), code
that takes the test binary's output (Go's `os.Stdout =`, `Dup2` on fd 1 or 2; Rust's
`libc::dup2`), a new or edited Go `TestMain` in a test file (it runs the package's tests
and can rewrite what they print), and runner configuration that loads code of the change
(a Jest reporter, results processor, setup file or runner; a cargo `runner`,
`harness = false`, a build script). Code is read with its strings and comments taken out
(so `fmt.Fprintf(os.Stdout, "x=%d")` assigns nothing); the strings are read on their own.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import PurePosixPath

from autoresearch.safety.tells import RUN_VARIABLE, SHORT_VARIABLES

Use = tuple[str, str, int | None]  # (check, detail, line), as tamper.py's readers give

SCRIPT_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx")
# JavaScript as tamper.py has read it: what each line adds, on the raw text.
LINE_CHECKS = (
    (
        re.compile(r"\b(globalThis|global)\s*\.|\bObject\.defineProperty\s*\(\s*globalThis"),
        "builtins",
    ),
    (re.compile(r"\bconsole\.\w+\s*=(?!=)|process\.(stdout|stderr)"), "output"),
    (re.compile(r"\b(Date|performance|process\.hrtime)(\.\w+)?\s*=(?!=)|\.now\s*=(?!=)"), "timers"),
    (re.compile(r"\bprocess\.env\b[^=\n]*=(?!=)|\bdelete\s+process\.env"), "environment"),
    (re.compile(r"\brequire\.cache\b|\bModule\._|\beval\s*\(|new\s+Function\s*\("), "modules"),
)
# An assignment's `=` (not `==`, `!=`, `<=`, `>=`, `:=`, `+=`, `=>`).
ASSIGN = re.compile(r"(?<![=!<>:+\-*/%&|^])=(?![=>])")

# --- Go ---------------------------------------------------------------------------------
GO_TESTING = re.compile(r"\btesting\.(Testing|Verbose|Short|CoverMode|Coverage|MainStart)\s*\(")
GO_STD = re.compile(r"\bos\.Std(out|err)\b")
GO_STD_ADDRESS = re.compile(r"&\s*(os\.Std(out|err))\b")
GO_DUP = re.compile(r"\b(syscall|unix)\.Dup[23]\s*\(")
GO_NEWFILE = re.compile(r"\bos\.NewFile\s*\(\s*(uintptr\s*\(\s*)?[12]\b")
GO_ARGS = re.compile(r"\bos\.(Args|Executable)\b")
# A test binary's flag (`test.v`, `-test.run`) or its name (`calc.test`, `.test.exe`).
GO_TEST_TEXT = re.compile(r"^-{0,2}test\.[a-z]\w*$|\.test(\.exe)?$")
# An import under another name (`import t "testing"`) or into the file's own names
# (`import . "os"`): the names the checks above read, by package.
GO_IMPORT = re.compile(
    r'^\s*(?:import\s+)?([A-Za-z_]\w*|\.)\s+"(testing|os|syscall|flag|golang\.org/x/sys/unix)"',
    re.M,
)
GO_NAMES = {
    "testing": "Testing Verbose Short CoverMode Coverage MainStart",
    "os": "Stdout Stderr Args Executable NewFile",
    "syscall": "Dup2 Dup3",
    "unix": "Dup2 Dup3",
    "flag": "Lookup",
}

# --- Rust -------------------------------------------------------------------------------
RUST_CFG_MACRO = re.compile(r"\bcfg!\s*\([^;{}]*\btest\b")
RUST_CFG_NOT_TEST = re.compile(r"#!?\[\s*cfg\s*\([^\]]*\bnot\s*\(\s*[^\]]*\btest\b")
# cfg_attr(test, ...) that changes what an item is (`path = "fake.rs"`, a link name); one
# that derives a trait or allows a lint for tests is what crates do.
RUST_CFG_ATTR = re.compile(
    r"#!?\[\s*cfg_attr\s*\([^\],]*\btest\b[^\],]*,\s*(?!(derive|allow|expect|warn|deny|doc)\b)"
)
RUST_TEST_ONLY = re.compile(r"#\[\s*(test|cfg\s*\([^\]]*\btest\b[^\]]*)\]")
RUST_DUP = re.compile(r"\b(libc|unistd|nix::unistd)::dup[23]\s*\(|\bset_output_capture\b")
RUST_ARGS = re.compile(r"\benv::(args|args_os)\b|\bcurrent_exe\s*\(")
RUST_HARNESS_FLAG = re.compile(
    r"^--(test-threads|nocapture|show-output|include-ignored|report-time|ensure-time)\b"
)
RUST_TEST_VARIABLE = re.compile(r"^(RUST_TEST_\w+|__RUST_TEST\w*)$")
RUST_TEST_DIRS = frozenset({"tests", "benches"})

# --- JavaScript -------------------------------------------------------------------------
JS_ENV_NAME = re.compile(r"\bprocess\.env\.(\w+)")
JS_PROPERTY = re.compile(r"\.\s*([A-Z][A-Z0-9_]+)\b")
JS_TYPEOF = re.compile(
    r"\btypeof\s+(jest|vi|describe|it|test|expect|beforeAll|afterAll|beforeEach|afterEach|"
    r"mocha|jasmine)\b"
)
JS_GLOBAL_RUNNER = re.compile(r"\b(globalThis|global|window)\.(jest|vi|expect|describe)\b")
JS_PROCESS = re.compile(r"\bprocess\.(argv|execArgv|title|mainModule)\b|\brequire\.main\b")
JS_RUNNER_WORD = re.compile(r"\b(jest|vitest|mocha|jasmine|ava)\b", re.I)
JS_SURROUNDINGS = re.compile(r"\bprocess\.(getuid|geteuid)\s*\(|\b(userInfo|homedir)\s*\(")
JS_COMPARES = re.compile(r"[=!]==?|\b(startsWith|endsWith|includes|indexOf|match|test)\s*\(")

# --- runner configuration ---------------------------------------------------------------
JEST_CONFIGS = frozenset(f"jest.config.{ext}" for ext in "js ts mjs cjs json".split())
# Keys of a Jest config that load code of the project or change what a module is.
JEST_CODE_KEYS = re.compile(
    r"\b(reporters|testResultsProcessor|setupFiles|setupFilesAfterEnv|globalSetup|"
    r"globalTeardown|testRunner|runner|testEnvironment|testSequencer|transform|"
    r"moduleNameMapper|resolver|snapshotResolver|watchPlugins|preset|projects)\b"
)
JS_RUNNER_KEYS = ("jest", "mocha", "vitest", "ava")
CARGO_LINE = re.compile(
    r"^\s*(harness|runner|build|test|bench|autotests|autobenches)\s*=|^\s*\[\[(test|bench)\]\]"
)
CARGO_SECTION = re.compile(r"^\s*\[\s*profile\.(test|dev|bench)\b")


def is_config_path(path: str) -> bool:
    """A runner configuration or build script of Jest or cargo, loaded by itself."""
    p = PurePosixPath(path)
    cargo_config = p.parent.name == ".cargo" and p.name in ("config", "config.toml")
    return cargo_config or p.name in JEST_CONFIGS or p.name in ("Cargo.toml", "build.rs")


def config_line(path: str, old: str | None, new: str | None) -> int | None:
    """Where a change to one of `is_config_path`'s files reaches the runner: 0 for the
    whole file (new, removed, or one whose every key runs: `.cargo/config`, a build
    script), the first changed line that loads code (a Jest key, a cargo `runner`,
    `harness`, a test target or the test profile), None when no such line changed."""
    if old is None or new is None:
        return 0
    name = PurePosixPath(path).name
    changed = _changed(old, new)
    if name in JEST_CONFIGS:
        return next((n for n, text in changed if JEST_CODE_KEYS.search(text)), None)
    if name == "Cargo.toml":
        sections = _sections(new.splitlines())
        for number, text in changed:
            if CARGO_LINE.search(text) or CARGO_SECTION.search(sections[number - 1]):
                return number
        return None
    return changed[0][0] if changed else None


def package_json_line(old: str, new: str) -> int | None:
    """The line of package.json where a change to its Jest (mocha, vitest, ava) key
    loads code: the first changed line naming a code-loading key, else the first changed
    line. None when those keys are equal; ValueError when a side is not JSON."""
    before, after = json.loads(old), json.loads(new)
    if not isinstance(before, dict) or not isinstance(after, dict):
        raise ValueError("package.json is not an object")
    if all(before.get(k) == after.get(k) for k in JS_RUNNER_KEYS):
        return None
    changed = _changed(old, new)
    keyed = next((n for n, text in changed if JEST_CODE_KEYS.search(text)), None)
    return keyed or (changed[0][0] if changed else 1)


def _changed(old: str, new: str) -> list[tuple[int, str]]:
    """(line number in `new`, text) of each line added or changed, or of where a removed
    line was. A line that only gained or lost a trailing comma (a key added after it) is
    not a change of its own."""
    import difflib

    old_lines, new_lines = old.splitlines(), new.splitlines()
    was, now = {_bare(t) for t in old_lines}, {_bare(t) for t in new_lines}
    out: list[tuple[int, str]] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            out += [(j + 1, new_lines[j]) for j in range(j1, j2) if _bare(new_lines[j]) not in was]
            at = min(j1 + 1, len(new_lines)) or 1
            out += [(at, old_lines[i]) for i in range(i1, i2) if _bare(old_lines[i]) not in now]
    return sorted(out, key=lambda item: item[0])


def _bare(text: str) -> str:
    return text.strip().rstrip(",")


def _sections(lines: list[str]) -> list[str]:
    current, out = "", []
    for text in lines:
        if text.strip().startswith("["):
            current = text
        out.append(current)
    return out


# --- reading one version of a file -------------------------------------------------------


def is_code_path(path: str) -> bool:
    return path.endswith((".go", ".rs", *SCRIPT_SUFFIXES))


def code_uses(path: str, source: str, test_file: bool) -> list[Use]:
    """Every checked thing one version of a Go, Rust or JavaScript file reaches for.
    `test_file`: a test of its language (`_test.go`, `tests/`, `*.test.js`)."""
    if path.endswith(".go"):
        return go_uses(source, test_file)
    if path.endswith(".rs"):
        parts = PurePosixPath(path).parts[:-1]
        return rust_uses(source, test_file or any(p in RUST_TEST_DIRS for p in parts))
    return js_uses(source)


def go_uses(source: str, test_file: bool) -> list[Use]:
    code, literals = _scan(source, quotes="\"`'", multiline="`")
    code = _go_unaliased(source, code)
    uses: list[Use] = []
    if test_file:  # a test captures os.Stdout and reads flags as tests do; TestMain aside
        return uses
    for number, text in enumerate(code, 1):
        if match := GO_TESTING.search(text):
            detail = f"calls testing.{match.group(1)}(), which tells a test"
            uses.append(("testrun", detail, number))
        for statement in re.split(r"[;{}]", text):  # `f := func() { os.Stdout = w }`
            assign = ASSIGN.search(statement)
            for std in GO_STD.finditer(statement[: assign.start()] if assign else ""):
                detail = f"reassigns {std.group(0)}, which carries the test's output"
                uses.append(("output", detail, number))
        for std in GO_STD_ADDRESS.finditer(text):  # p := &os.Stdout; *p = w
            detail = f"addresses {std.group(1)}, which carries the test's output"
            uses.append(("output", detail, number))
        if match := GO_DUP.search(text):
            call = match.group(0).rstrip("( ")
            uses.append(("output", f"calls {call}, which can take the test's output", number))
        if GO_NEWFILE.search(text):
            uses.append(("output", "opens os.NewFile on fd 1 or 2", number))
    for number, text in literals:
        if GO_TEST_TEXT.search(text):
            uses.append(("testrun", f"names {text!r}, the test binary's flag or name", number))
    args = {n for n, text in enumerate(code, 1) if GO_ARGS.search(text)}
    for number, text in literals:
        if number in args and "test" in text.lower() and not GO_TEST_TEXT.search(text):
            uses.append(("testrun", f"reads os.Args for {text!r}", number))
    return uses


def _go_unaliased(source: str, code: list[str]) -> list[str]:
    """The code with each package the checks read called by its own name again:
    `t.Testing()` after `import t "testing"` is `testing.Testing()`, `Stdout = w` after
    `import . "os"` is `os.Stdout = w`."""
    for match in GO_IMPORT.finditer(source):
        alias, package = match.group(1), match.group(2).rsplit("/", 1)[-1]
        if alias == package:
            continue
        if alias == ".":
            names = "|".join(GO_NAMES[package].split())
            pattern = re.compile(rf"(?<![\w.])({names})\b")
        else:
            pattern = re.compile(rf"(?<![\w.]){re.escape(alias)}\.(\w)")
        code = [pattern.sub(rf"{package}.\1", text) for text in code]
    return code


def go_test_hooks(old: str | None, new: str) -> list[Use]:
    """A TestMain or an `init` the change adds or edits in a Go test file: TestMain runs
    the package's tests and sees everything they print, and a test file's `init` runs in
    the test binary before any test (it can take the output over the same way), so either
    can rewrite the tests' verdict."""
    before, after = _go_hooks(old or ""), _go_hooks(new)
    uses: list[Use] = []
    for name, (line, digest) in sorted(after.items()):
        if before.get(name, (0, ""))[1] == digest:
            continue
        verb = "defines" if name not in before else "changes"
        what = GO_HOOKS[name]
        uses.append(("runner", f"{verb} {name} in a test file, which {what}", line))
    return uses


GO_HOOKS = {
    "TestMain": "runs the package's tests",
    "init": "runs before the package's tests",
}
GO_HOOK = re.compile(r"^func\s+(TestMain|init)\s*\(")


def _go_hooks(source: str) -> dict[str, tuple[int, str]]:
    """Each hook's name: (its first line, a digest of every body of that name), gofmt's
    layout assumed: from `func init(` at the start of a line to the first `}` alone on
    one, or the same line when it closes there."""
    code, literals = _scan(source, quotes="\"`'", multiline="`")
    bodies: dict[str, list[str]] = {}
    first: dict[str, int] = {}
    for number, text in enumerate(code, 1):
        match = GO_HOOK.match(text)
        if not match:
            continue
        name = match.group(1)
        end = number - 1
        if not (text.rstrip().endswith("}") and text.count("{") == text.count("}")):
            rest = range(number, len(code))
            end = next((i for i in rest if code[i].rstrip() == "}"), len(code) - 1)
        texts = [t for n, t in literals if number <= n <= end + 1]
        bodies.setdefault(name, []).append("\n".join(code[number - 1 : end + 1] + texts))
        first.setdefault(name, number)
    return {
        name: (first[name], hashlib.sha256("\0".join(parts).encode()).hexdigest())
        for name, parts in bodies.items()
    }


def rust_uses(source: str, test_file: bool) -> list[Use]:
    code, literals = _scan(source, quotes="\"'", multiline='"', rust=True)
    uses: list[Use] = []
    if test_file:
        return uses
    tested = _rust_test_lines(code)
    for number, text in enumerate(code, 1):
        if RUST_CFG_NOT_TEST.search(text):
            uses.append(("testrun", "uses cfg(not(test)), which tells a test build", number))
        if RUST_CFG_ATTR.search(text):
            uses.append(("testrun", "uses cfg_attr(test, ...), which tells a test build", number))
        if number in tested:
            continue
        if RUST_CFG_MACRO.search(text):
            uses.append(("testrun", "uses cfg!(test), which tells a test build", number))
        if match := RUST_DUP.search(text):
            call = match.group(0).rstrip("( ")
            uses.append(("output", f"calls {call}, which can take the test's output", number))
    args = {n for n, text in enumerate(code, 1) if RUST_ARGS.search(text)}
    for number, text in literals:
        if number in tested:
            continue
        if RUST_TEST_VARIABLE.match(text):
            uses.append(("testrun", f"reads the variable {text!r}", number))
        elif RUST_HARNESS_FLAG.match(text):
            uses.append(("testrun", f"names {text!r}, the test harness's flag", number))
        elif number in args and ("test" in text.lower() or "deps" in text):
            uses.append(("testrun", f"reads the command line for {text!r}", number))
    return uses


def _rust_test_lines(code: list[str]) -> set[int]:
    """Lines of items compiled for tests only: what follows `#[cfg(test)]` or `#[test]`,
    to the end of its braces (or its `;`)."""
    tested: set[int] = set()
    depth, pending, until = 0, False, None
    for number, text in enumerate(code, 1):
        if until is not None or pending:
            tested.add(number)
        if RUST_TEST_ONLY.search(text) and not RUST_CFG_NOT_TEST.search(text):
            pending = until is None
            tested.add(number)
        for char in text:
            if char == "{":
                if pending:
                    until, pending = depth, False
                depth += 1
            elif char == "}":
                depth -= 1
                if until is not None and depth == until:
                    until = None
            elif char == ";" and pending and until is None:
                pending = False
    return tested


def js_uses(source: str) -> list[Use]:
    uses: list[Use] = []
    lines = source.splitlines()
    for number, text in enumerate(lines, 1):
        for pattern, check in LINE_CHECKS:
            for match in pattern.finditer(text):
                uses.append((check, f"uses {match.group(0).strip()}", number))
    code, literals = _scan(source, quotes="\"'`", multiline="`")
    texts: dict[int, list[str]] = {}
    for number, text in literals:
        texts.setdefault(number, []).append(text)
    for number, text in enumerate(code, 1):
        here = texts.get(number, [])
        environ = "process.env" in text
        names = [m.group(1) for m in JS_ENV_NAME.finditer(text)]
        names += [t for t in here if environ or RUN_VARIABLE.fullmatch(t)]
        # const e = process.env; e.JEST_WORKER_ID: a runner's variable by any road.
        names += [
            m.group(1) for m in JS_PROPERTY.finditer(text) if RUN_VARIABLE.fullmatch(m.group(1))
        ]
        for name in names:
            if RUN_VARIABLE.fullmatch(name) or name in SHORT_VARIABLES:
                uses.append(("testrun", f"reads the variable {name!r}", number))
            elif name == "NODE_ENV" and any(t.lower() == "test" for t in here):
                uses.append(("testrun", "compares NODE_ENV with 'test'", number))
        if match := JS_TYPEOF.search(text) or JS_GLOBAL_RUNNER.search(text):
            uses.append(("testrun", f"asks whether {match.group(0)} is defined", number))
        if JS_PROCESS.search(text) and any(JS_RUNNER_WORD.search(t) for t in here):
            uses.append(("testrun", "reads the command line for a test runner", number))
        if JS_SURROUNDINGS.search(text) and JS_COMPARES.search(text):
            uses.append(("testrun", "compares the user or HOME", number))
    return uses


def _scan(
    source: str, quotes: str, multiline: str, rust: bool = False
) -> tuple[list[str], list[tuple[int, str]]]:
    """The code's lines with comments taken out and each string literal emptied (its
    line breaks kept, so line numbers hold), and (line, text) of each literal."""
    out: list[str] = []
    literals: list[tuple[int, str]] = []
    line, at = 1, 0
    for match in _scanner(quotes, multiline, rust).finditer(source):
        line += source.count("\n", at, match.start())
        out.append(source[at : match.start()])
        token = match.group(0)
        breaks = token.count("\n")
        if token.startswith(("//", "/*")):
            out.append("\n" * breaks)
        else:
            raw = match.group("raw")  # r#"...": closed by "#
            opening, closing = (raw, '"' + raw[1:-1]) if raw else (token[0], token[0])
            body = token[len(opening) :]
            literals.append((line, body[: -len(closing)] if body.endswith(closing) else body))
            out.append(opening[-1] * 2 + "\n" * breaks)
        line += breaks
        at = match.end()
    out.append(source[at:])
    return "".join(out).split("\n"), literals


_SCANNERS: dict[tuple[str, str, bool], re.Pattern[str]] = {}


def _scanner(quotes: str, multiline: str, rust: bool) -> re.Pattern[str]:
    """One pattern for every comment and literal of a language: a line comment, a block
    comment, Rust's raw strings (`r#"..."#`) and characters (not its lifetimes), and each
    quote, to its end or, for a one-line string left open, its line's end."""
    key = (quotes, multiline, rust)
    if key not in _SCANNERS:
        parts = [r"//[^\n]*", r"/\*[\s\S]*?(?:\*/|\Z)"]
        if rust:
            parts.append(r'(?<![\w])(?P<raw>r(?P<hashes>#*)")[\s\S]*?(?:"(?P=hashes)|\Z)')
            parts.append(r"'(?:\\.[^'\n]*|[^\\'\n])'")
        else:
            parts.append(r"(?P<raw>(?!))")
        for quote in quotes:
            if rust and quote == "'":
                continue
            if quote == "`":  # Go's raw strings, JavaScript's templates
                parts.append(r"`[^`]*(?:`|\Z)")
            elif quote in multiline:
                parts.append(rf"{quote}(?:\\[\s\S]|[^{quote}\\])*(?:{quote}|\Z)")
            else:
                parts.append(rf"{quote}(?:\\.|[^{quote}\\\n])*(?:{quote}|(?=\n)|\Z)")
        _SCANNERS[key] = re.compile("|".join(parts))
    return _SCANNERS[key]
