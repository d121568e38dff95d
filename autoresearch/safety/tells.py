"""Python code that tells a test run from a real one (the tamper screen's `testrun` check).

The report plugin hides pytest's own variables, but the process still shows it is a test
run in many ways: the runner's modules are loaded, the command line names it, the jail's
user and HOME are not a person's, CI sets variables, the caller's file is a test's. Code
under test that switches on any of these can pass its tests and do something else for
users. What is read here, in a module's syntax tree (aliases resolved by tamper.py's reader):

- a *runner's name* (`pytest`, `_pytest`, `py.test`, `unittest`, `doctest`, `nose`,
  `xdist`) or a *test run's variable* (`CI`, `GITHUB_ACTIONS`, `PYTEST_*`, `TOX_ENV_NAME`,
  ...) given to a call, used as a key or compared: `find_spec("pytest")`,
  `sys.modules.get("_pytest")`, `"CI" in os.environ`, `os.getenv("CI")`. Strings made of
  literal parts are put together first (`"py" + "test"`, a module constant, a reversed
  literal). A message naming pytest in a sentence is not a name.
- a *value of the run's surroundings* — the program's name (`sys.argv[0]`,
  `sys.orig_argv`, `__main__`), the user (`os.getuid()`, `getpass.getuser()`, `pwd`),
  HOME (`os.environ["HOME"]`, `expanduser("~")`, `Path.home()`), the host's name —
  compared or searched with a constant (`== 65534`, `.startswith("/tmp")`, `re.search`),
  directly or through a name it was given; HOME's contents listed. Reading HOME to build a
  path, asking whether it is set (`is None`, `== ""`), comparing it with another value (a
  path under it), putting the user in a folder's name and a CLI's own arguments
  (`sys.argv[1:]`) are what honest code does, and are not flagged: the jail's HOME is
  set, so only what it is or holds can tell.
- the *caller's stack* read (`inspect.stack`, `inspect.currentframe`,
  `traceback.extract_stack`), and `__name__`, `__file__` or a frame's file compared with
  text holding "test".

Code under `if __name__ == "__main__":` never runs under a test and is not read. A test
file may do all of this (a test skips on CI); tamper.counts keeps the flag to other code.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# A runner's name as one word of a short text: "pytest", "/usr/bin/py.test", "-m pytest".
RUNNER_WORD = re.compile(
    r"(?<![A-Za-z0-9])(_?py\.?test|unittest|doctest|nose2?|xdist)(?![A-Za-z0-9])", re.I
)
# Variables a runner, a test tool or a CI service sets. Short, common words are flagged only
# where the environment is read with them (`row["CI"]` is a table's column).
RUN_VARIABLE = re.compile(
    r"(PYTEST|TOX|NOX|JEST|VITEST|MOCHA|RUST_TEST|GOTEST)_\w+|GITHUB_ACTIONS|GITLAB_CI|"
    r"TRAVIS|CIRCLECI|JENKINS_URL|BUILDKITE|TF_BUILD|APPVEYOR|TEAMCITY_VERSION|"
    r"CONTINUOUS_INTEGRATION|BUILD_NUMBER|RUNNING_TESTS|UNDER_TEST"
)
SHORT_VARIABLES = frozenset("CI TEST TESTS TESTING UNITTEST".split())
# Variables whose value shows where and as whom the process runs.
SURROUNDING_VARIABLES = frozenset("HOME USER LOGNAME USERNAME HOSTNAME SHELL PWD TMPDIR".split())
ENVIRON = frozenset({"os.environ", "os.environb", "posix.environ"})
GETENV = frozenset({"os.getenv", "os.getenvb"})
# Calls whose result is the user, HOME or the host.
SURROUNDING_CALLS = frozenset(
    "os.getuid os.geteuid os.getgid os.getegid os.getlogin os.getresuid getpass.getuser "
    "pwd.getpwuid pwd.getpwnam os.path.expanduser pathlib.Path.home socket.gethostname "
    "platform.node os.uname".split()
)
# Reads of the caller's stack: where a test's file and function name are.
STACK_CALLS = frozenset(
    "inspect.stack inspect.currentframe inspect.getouterframes inspect.trace "
    "traceback.extract_stack traceback.walk_stack traceback.format_stack "
    "traceback.print_stack sys._current_frames".split()
)
# Names and attributes that hold a module's, a file's or a frame's name.
CODE_NAMES = frozenset("__name__ __file__ __spec__ __module__ __qualname__".split())
CODE_ATTRIBUTES = CODE_NAMES | frozenset(
    "co_filename co_name co_qualname filename function".split()
)
# Calls that keep what they are given recognisable (a value wrapped in them still tells);
# a folder made of the program's path (`dirname(sys.argv[0])`) is how scripts find files.
WRAPPERS = frozenset(
    "str repr bool len any all sorted list set tuple hasattr getattr os.fspath "
    "os.path.basename os.path.realpath os.path.abspath os.path.normpath os.listdir "
    "os.scandir".split()
)
# Methods and functions that search or compare text.
TEXT_TESTS = frozenset(
    "startswith endswith find rfind index rindex count __contains__ __eq__ __ne__ match "
    "fullmatch search findall".split()
)
LISTINGS = frozenset("os.listdir os.scandir os.walk glob.glob glob.iglob".split())
SEARCHES = frozenset("re.search re.match re.fullmatch re.findall fnmatch.fnmatch".split())
MAX_NAME = 40  # a runner's name is a short text of one or two words, not a message

Use = tuple[str, str, int | None]


def tells(tree: ast.Module, qual: Callable[[ast.AST], str | None]) -> list[Use]:
    """The `testrun` uses of a module; `qual` gives the dotted name an expression stands
    for, aliases resolved (tamper's reader)."""
    index = _index(tree)
    reader = _Tells(qual, index)
    for node, scope in index.checked:
        reader.tainted = reader.tainted_in(scope)
        reader.check(node)
    return sorted(reader.uses, key=lambda use: use[2] or 0)


@dataclass
class _Index:
    """What one walk of a module's tree finds: the nodes to check, each with the module or
    function body it is in; the assignments each body makes itself (not those of
    functions inside it); the body each function is in; and the names given a value in
    one place only, anywhere: `K = "py" + "test"` lets `K in sys.modules` be read as the
    literal it is, and `t = "/tmp"` in a function `home.startswith(t)`."""

    checked: list[tuple[ast.AST, ast.AST]] = field(default_factory=list)
    owned: dict[int, list[ast.Assign | ast.AnnAssign]] = field(default_factory=dict)
    parent: dict[int, ast.AST] = field(default_factory=dict)
    constants: dict[str, ast.AST] = field(default_factory=dict)


def _index(tree: ast.Module) -> _Index:
    index = _Index()
    values: dict[str, ast.AST] = {}
    seen: Counter[str] = Counter()
    todo: list[tuple[ast.AST, ast.AST]] = [(tree, tree)]
    while todo:
        node, scope = todo.pop()
        children: Iterable[ast.AST] = ast.iter_child_nodes(node)
        if isinstance(node, _CHECKED):
            index.checked.append((node, scope))
        elif isinstance(node, _BINDS):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                index.owned.setdefault(id(scope), []).append(node)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in _names(target):
                    seen[name.id] += 1
                    if isinstance(node, ast.Assign) and target is name:
                        values[name.id] = node.value
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            index.parent[id(node)] = scope
            scope = node
        elif isinstance(node, ast.If) and _is_main_guard(node.test):
            children = node.orelse  # never runs under a test
        for child in children:
            todo.append((child, scope))
    index.constants = {name: value for name, value in values.items() if seen[name] == 1}
    return index


_BINDS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr)
_CHECKED = (ast.Call, ast.Compare, ast.Subscript)


def _names(target: ast.AST) -> list[ast.Name]:
    """The names an assignment's target binds (`a, (b, *c) = ...`)."""
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, ast.Tuple | ast.List):
        return [n for element in target.elts for n in _names(element)]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return []


class _Tells:
    def __init__(self, qual: Callable[[ast.AST], str | None], index: _Index) -> None:
        self.qual = qual
        self.index = index
        self.constants = index.constants
        self.uses: list[Use] = []
        # Names given a value of the surroundings in scope, each with what it was given.
        self.tainted: dict[str, str] = {}
        self._tainted: dict[int, dict[str, str]] = {}

    def use(self, detail: str, node: ast.AST) -> None:
        self.uses.append(("testrun", detail, getattr(node, "lineno", None)))

    def check(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            self.check_call(node)
        elif isinstance(node, ast.Compare):
            self.check_compare(node)
        elif isinstance(node, ast.Subscript):
            self.check_subscript(node)

    def tainted_in(self, scope: ast.AST) -> dict[str, str]:
        """The names a body and the bodies around it give a value of the surroundings
        (all of a body's, so a comparison above its assignment is seen too); a function's
        names mean nothing in another function."""
        known = self._tainted.get(id(scope))
        if known is not None:
            return known
        outer = self.index.parent.get(id(scope))
        self.tainted = dict(self.tainted_in(outer)) if outer is not None else {}
        for _ in range(2):  # a name given another tainted name's value: `d = basename(root)`
            for sub in self.index.owned.get(id(scope), ()):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                what = self.surrounding(sub.value) if sub.value is not None else None
                for target in targets:
                    if what and isinstance(target, ast.Name) and target.id not in self.tainted:
                        self.tainted[target.id] = what
        self._tainted[id(scope)] = self.tainted
        return self.tainted

    # --- what a string is --------------------------------------------------------------

    def text(self, node: ast.AST, depth: int = 0) -> str | None:
        """The string a literal expression stands for, or None."""
        if depth > 8:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            value = node.value
            return value.decode("latin-1") if isinstance(value, bytes) else value
        if isinstance(node, ast.Name) and node.id in self.constants:
            return self.text(self.constants[node.id], depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.text(node.left, depth + 1), self.text(node.right, depth + 1)
            return left + right if left is not None and right is not None else None
        if isinstance(node, ast.JoinedStr):
            parts = [self.text(v, depth + 1) for v in node.values]
            return "".join(parts) if all(p is not None for p in parts) else None  # type: ignore[arg-type]
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            base = self.text(node.value, depth + 1)
            bounds = [node.slice.lower, node.slice.upper, node.slice.step]
            numbers = [_number(b) for b in bounds]
            literal = all(b is None or n is not None for b, n in zip(bounds, numbers, strict=True))
            if base is not None and literal:
                lower, upper, step = numbers
                return base[lower:upper:step] if step != 0 else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = self.text(node.func.value, depth + 1)
            if base is not None and node.func.attr in ("lower", "upper", "strip") and not node.args:
                return getattr(base, node.func.attr)()
            if node.func.attr == "join" and base is not None and node.args:
                items = node.args[0]
                if isinstance(items, ast.List | ast.Tuple):
                    parts = [self.text(e, depth + 1) for e in items.elts]
                    if all(p is not None for p in parts):
                        return base.join(parts)  # type: ignore[arg-type]
        return None

    def names_runner(self, node: ast.AST, environ: bool) -> str | None:
        """What a literal names, when it is a runner or a test run's variable."""
        value = self.text(node)
        if value is None or len(value) > MAX_NAME or len(value.split()) > 2:
            return None
        if RUNNER_WORD.search(value):
            return f"names {value!r}, a test runner"
        if RUN_VARIABLE.fullmatch(value) or (environ and value in SHORT_VARIABLES):
            return f"reads the variable {value!r}"
        return None

    # --- where a runner's name or a run's variable is used -----------------------------

    def check_call(self, node: ast.Call) -> None:
        func = self.qual(node.func) or ""
        if func in STACK_CALLS:
            self.use(f"reads the caller's stack ({func})", node)
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        environ = func in GETENV or (receiver is not None and self.is_environ(receiver))
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if named := self.names_runner(arg, environ):
                self.use(named, node)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if method in TEXT_TESTS and receiver is not None:
            self.compared([receiver, *node.args], node)
        elif func in SEARCHES:
            self.compared(list(node.args), node)
        # What HOME holds: the jail's is a new, empty folder.
        listed = node.args[0] if func in LISTINGS and node.args else None
        if method in ("iterdir", "glob", "rglob") and func not in LISTINGS:
            listed = receiver
        if listed is not None and (what := self.surrounding(listed)) and "HOME" in what.upper():
            self.use(f"lists {what}", node)

    def check_subscript(self, node: ast.Subscript) -> None:
        if named := self.names_runner(node.slice, self.is_environ(node.value)):
            self.use(named, node)

    def check_compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        environ = any(self.is_environ(o) for o in operands)
        for operand in operands:
            if named := self.names_runner(operand, environ):
                self.use(named, node)
        self.compared(operands, node)

    def compared(self, operands: list[ast.AST], node: ast.AST) -> None:
        """Operands compared or searched together: a value of the surroundings against a
        constant (`os.getuid() == 65534`, `home.startswith("/tmp")`), or a name of code
        beside text holding "test", tells. Against another value it is what honest code
        does: a path under HOME shortened to `~`, a file's owner compared with the user."""
        for operand in operands:
            what = self.surrounding(operand)
            if what and any(self.literal(o) for o in operands if o is not operand):
                self.use(f"compares {what} with a constant", node)
                return
        texts = [self.text(o) or "" for o in operands]
        if any("test" in t.lower() for t in texts) and any(map(self.names_code, operands)):
            self.use("compares a module's, file's or frame's name with 'test'", node)

    def literal(self, node: ast.AST) -> bool:
        """A constant written in the code that a value can be told by: text, a number, a
        container of them. None, an empty text or an empty container only ask whether the
        value is set, and the jail sets HOME and the user as any session does."""
        text = self.text(node)
        if text is not None or _number(node) is not None:
            return bool(text) or text is None
        if isinstance(node, ast.Constant):
            return node.value is not None
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return bool(node.elts) and all(self.literal(e) for e in node.elts)
        if isinstance(node, ast.Name) and node.id in self.constants:
            return self.literal(self.constants[node.id])
        return False

    # --- what an expression reads ------------------------------------------------------

    def is_environ(self, node: ast.AST) -> bool:
        """`os.environ` or a copy of it (`dict(os.environ)`, `os.environ.copy()`)."""
        for sub in ast.walk(node):
            if self.qual(sub) in ENVIRON:
                return True
        return False

    def surrounding(self, node: ast.AST) -> str | None:
        """What value of the run's surroundings `node` is, seen through wrappers, methods,
        attributes and subscripts (`os.path.basename(sys.argv[0]).lower()`); not through
        a call that builds something else of it (`os.path.join(HOME, ...)`)."""
        qual = self.qual(node)
        if isinstance(node, ast.Name) and node.id in self.tainted:
            return f"{node.id} ({self.tainted[node.id]})"
        if qual in ("sys.orig_argv", "__main__") or (qual or "").startswith("__main__."):
            return qual
        if isinstance(node, ast.Subscript):
            base = self.qual(node.value)
            key = node.slice
            if base == "sys.argv" and isinstance(key, ast.Constant) and key.value in (0, -1):
                return f"sys.argv[{key.value}]"
            if self.is_environ(node.value) and self.text(key) in SURROUNDING_VARIABLES:
                return f"${self.text(key)}"
            return self.surrounding(node.value)
        if isinstance(node, ast.Attribute):
            return self.surrounding(node.value)
        if isinstance(node, ast.Call):
            func = self.qual(node.func) or ""
            if func == "os.path.expanduser":  # HOME itself, not a path the caller gave
                home = self.text(node.args[0]) if node.args else None
                return "HOME (os.path.expanduser)" if (home or "").startswith("~") else None
            if func in SURROUNDING_CALLS:
                return f"{func}()"
            first = node.args[0] if node.args else None
            if (func in GETENV or func.endswith("environ.get")) and first is not None:
                if self.text(first) in SURROUNDING_VARIABLES:
                    return f"${self.text(first)}"
            if func in WRAPPERS and first is not None:
                return self.surrounding(first)
            if isinstance(node.func, ast.Attribute):
                return self.surrounding(node.func.value)  # a method of it: sys.argv[0].lower()
        return None

    def names_code(self, node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in CODE_NAMES:
                return True
            if isinstance(sub, ast.Attribute) and sub.attr in CODE_ATTRIBUTES:
                return True
        return False


def _number(node: ast.AST | None) -> int | None:
    """An integer literal, negative ones included (`-1` is a unary minus in the tree)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return -inner if inner is not None else None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _is_main_guard(test: ast.AST) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )
