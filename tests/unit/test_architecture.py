"""The package's shape, as docs/architecture.md describes it, checked on the source."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from autoresearch import modes
from autoresearch.agents.backends.base import TEAMS

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("autoresearch", "scripts")
MODE_NAMES = tuple(modes.MODES)
# Two vocabularies that share words (fix, learn, ship, experiment): a mode is what a session
# is for, a team is who does a stage's work. Dispatching on a team is the engine's business.
TEAM_NAMES = frozenset(TEAMS)
# The folders the modes' loops live in, but the default one ("cycles" is also a plain count
# in records): comparing with one asks which mode is running.
LOOP_WORDS = frozenset(modes.get(name).loop for name in MODE_NAMES) - {"cycles"}
# What code outside modes/ may import of them: the registry and the hooks' base class.
MODE_PUBLIC = ("autoresearch.modes", "autoresearch.modes.base")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module of ours that `name` imports, at the top or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def test_the_import_graph_has_no_cycle():
    found = modules()
    graph = {name: imports_of(name, path, set(found)) for name, path in found.items()}
    # A package imports its own __init__ first: not an edge of its own making.
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def _subject(node: ast.expr) -> list[str]:
    """The dotted names of an operand: `self.mode.loop` -> ["self", "mode", "loop"]."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return parts[::-1]


def _strings(node: ast.expr) -> list[str]:
    """A string operand, or the strings of a literal tuple/list/set (`x in ("a", "b")`)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _about_a_team(operands: list[ast.expr]) -> bool:
    return any(_subject(op)[-1:] == ["team"] for op in operands)


def mode_branches(tree: ast.AST) -> list[int]:
    """Lines that ask which mode is running: a comparison with a mode's name or its loop's
    word, any comparison of a mode's attribute (or of a loop) with a string, or a table
    keyed by mode names. A team's name is not a mode's, even when spelled alike."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            words = [w for op in operands for w in _strings(op)]
            if _about_a_team(operands):
                words = [w for w in words if w not in TEAM_NAMES]
            names = [w for w in words if w in MODE_NAMES]
            loops = [w for w in words if w in LOOP_WORDS]
            asks_a_mode = words and any(
                "mode" in _subject(op)[:-1] or _subject(op)[-1:] == ["loop"] for op in operands
            )
            if names or loops or asks_a_mode:
                lines.append(node.lineno)
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            by_team = all(k in TEAM_NAMES for k in keys) and any(k not in MODE_NAMES for k in keys)
            if sum(k in MODE_NAMES for k in keys) >= 2 and not by_team:
                lines.append(node.lineno)
    return lines


def mode_rule_names(tree: ast.AST, own: str = "") -> list[int]:
    """Lines naming a mode's own rule or file by its prefix (`"experiment_"`), but `own`'s."""
    prefixes = tuple(f"{name}_" for name in MODE_NAMES if name != own)
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith(prefixes)
    ]


def own_mode(name: str) -> str:
    """The mode a rule's Python half (`scripts/<x>.py`) belongs to, if it is one."""
    return name.removeprefix("scripts.") if name.startswith("scripts.") else ""


def test_only_the_modes_know_which_mode_a_session_is_in():
    offenders = []
    for name, path in modules().items():
        if name.startswith("autoresearch.modes"):
            continue
        text = path.read_text()
        tree = ast.parse(text)
        for number in mode_branches(tree) + mode_rule_names(tree, own_mode(name)):
            line = text.splitlines()[number - 1].strip()
            offenders.append(f"{path.relative_to(ROOT)}:{number}: {line}")
    assert not offenders, "\n".join(offenders)


def test_the_check_tells_a_mode_from_a_team_and_sees_stand_ins():
    """The check's own cases: what it must flag and what it must leave alone."""
    flagged = [
        'mode.loop == "iterations"',
        'self.mode.name == "learn"',
        'spec.mode in ("fix", "ship")',
        'x == "fixes"',
        'layout.loop != "cycles"',
        '{"sweep": 1, "narrow": 2}',
        '{"fix": 1, "ship": 2}',  # mode names only: a mode table, whatever it is called
        'team == "sweep"',  # not a team: a mode's name
    ]
    left_alone = [
        'team in ("green", "fix")',
        'team == "ship" or team == "learn"',
        'brief.team == "ship"',
        '{"red": 1, "fix": 2, "learn": 3}',  # keyed by teams
        'name == "cycles"',
    ]
    for source in flagged:
        assert mode_branches(ast.parse(source)), source
    for source in left_alone:
        assert not mode_branches(ast.parse(source)), source
    assert mode_rule_names(ast.parse('log.removeprefix("experiment_")'))
    assert not mode_rule_names(ast.parse('rule = "experiment_measure"'), own="experiment")


def mode_imports(name: str, path: Path, known: set[str]) -> list[str]:
    """The modes' internals that `name` (outside modes/) imports. A rule's Python half
    (`scripts/<x>.py`) may import its own mode `autoresearch.modes.<x>`."""
    own = f"autoresearch.modes.{own_mode(name)}" if own_mode(name) else ""
    return sorted(
        target
        for target in imports_of(name, path, known)
        if target.startswith("autoresearch.modes.")
        and target not in MODE_PUBLIC
        and not (own and (target == own or target.startswith(own + ".")))
    )


def test_nothing_outside_the_modes_imports_a_modes_internals():
    found = modules()
    offenders = [
        f"{path.relative_to(ROOT)} imports {target}"
        for name, path in found.items()
        if not name.startswith("autoresearch.modes")
        for target in mode_imports(name, path, set(found))
    ]
    assert not offenders, "\n".join(offenders)


# Every checkpoint that decides a step of a loop, one per loop folder (broad: per track).
DECIDE_CHECKPOINTS = {
    "evaluate",
    "broad_evaluate",
    "experiment_decide",
    "fix_decide",
    "learn_write",
    "ship_prepare",
    "lens_check",
}


def decision_rules() -> dict[str, str]:
    """Every rule that writes a step's decision.json, and the job its `run:` calls."""
    out = {}
    for path in sorted((ROOT / "rules").glob("*.smk")):
        for block in path.read_text().split("\n\n"):
            heads = [ln for ln in block.splitlines() if ln.startswith(("rule ", "checkpoint "))]
            if not heads or "decision.json" not in block:
                continue
            head = heads[0]
            rule = head.split()[1].rstrip(":")
            run = block.split("run:", 1)[1].strip().splitlines()[0] if "run:" in block else ""
            out[rule] = run.split("(")[0].strip()
    return out


def test_every_loop_step_is_decided_by_the_one_job():
    # One job ends every loop: the mode's judge, then loop.decide. A rule with its own job
    # is a second loop body, however much it resembles the first; so is a wrapper of it.
    rules = decision_rules()
    assert set(rules) == DECIDE_CHECKPOINTS
    own = {rule: job for rule, job in rules.items() if job != "scripts.step.decide"}
    assert not own, own


def script_functions() -> list[tuple[str, ast.FunctionDef]]:
    return [
        (f"{path.relative_to(ROOT)}::{node.name}", node)
        for path in sorted((ROOT / "scripts").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
    ]


def calls_named(node: ast.AST, name: str) -> bool:
    """Whether `node` calls something whose last name is `name` (loop.decide, Judged)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) == name:
                return True
    return False


def test_no_job_hands_the_loop_a_judge_of_its_own():
    # A mode's judge is its hook (`Mode.judge`): a job function that builds a Judged, or
    # calls loop.decide itself, is a loop body outside the modes.
    offenders = [
        where
        for where, fn in script_functions()
        if calls_named(fn, "Judged")
        or (calls_named(fn, "decide") and where != "scripts/step.py::decide")
    ]
    assert not offenders, offenders


def rule_blocks() -> dict[str, str]:
    """Every rule and checkpoint of rules/*.smk, by name: its text."""
    out = {}
    for path in sorted((ROOT / "rules").glob("*.smk")):
        for block in path.read_text().split("\n\n"):
            block = block.strip()
            if block.startswith(("rule ", "checkpoint ")):
                out[block.split()[1].rstrip(":")] = block
    return out


def test_the_rules_wait_for_the_final_decision_through_one_input_function():
    # Mode.final_decision is the one implementation; the rules reach it through one input
    # function that asks the session's own mode, not a wrapper per mode that names one.
    askers = [where for where, fn in script_functions() if calls_named(fn, "final_decision")]
    assert askers == ["scripts/common.py::final_decision_of"], askers
    common = (ROOT / "rules" / "common.smk").read_text()
    defined = [line for line in common.splitlines() if line.startswith("def ")]
    assert [d for d in defined if "final_decision" in d] == ["def final_decision(product):"]
    waiting = {
        rule: block
        for rule, block in rule_blocks().items()
        if rule in ("experiment_report", "experiment_plot", "goal_progress_plot")
        or rule in ("broad_track_end", "security_fix")
    }
    assert len(waiting) == 5
    for rule, block in waiting.items():
        # Each names the file it makes, so a session whose mode makes no such file is
        # refused before the loop runs (scripts.common.made_by).
        inputs = block.split("input:", 1)[1].split("output:", 1)[0]
        product = re.search(r'^\s*decision=final_decision\("([^"]+)"\),$', inputs, re.M)
        assert product, (rule, inputs)
        outputs = block.split("output:", 1)[1].split("log:", 1)[0]
        assert f'"sessions/{{name}}/{product.group(1)}"' in outputs, rule


# The rules whose jobs open no session's stage: setup makes the session, an example target
# is made before it, and a bad name's rule refuses to run.
NO_STAGE = {"session", "example_repo", "invalid_session_name"}


def test_every_job_is_handed_what_its_rule_declares():
    # A job reads its session through its rule's input, output and log (the audit-hook
    # trace of tests/e2e/test_job_inputs.py holds it to that): every run: block hands them
    # to its job, and every stage's rule declares what each stage reads of the session
    # (the spec, the setup records, the loop's history: the input function `state`).
    text = "\n\n".join(p.read_text() for p in sorted((ROOT / "rules").glob("*.smk")))
    blocks = [
        b.strip() for b in text.split("\n\n") if b.strip().startswith(("rule ", "checkpoint "))
    ]
    overrides = [b.strip() for b in text.split("\n\n") if b.strip().startswith("use rule ")]
    assert len(blocks) > 30 and overrides
    for block in blocks:
        name = block.split()[1].rstrip(":")
        call = block.rsplit("\n    run:", 1)[1].strip()
        if name == "invalid_session_name":
            assert call.startswith("raise "), call
            continue
        handed = re.match(r"scripts\.\w+\.\w+\((?:wildcards, )?input, output, log\b", call)
        assert handed, (name, call)
        # No params: Snakemake imports pandas, where it is installed, to record a job's.
        assert "\n    params:" not in block, name
        if name not in NO_STAGE:
            assert "unpack(state(" in block.split("input:", 1)[1].split("output:", 1)[0], name
    for block in overrides:  # a `use rule ... with: input:` replaces the rule's inputs
        if "input:" in block:
            assert "unpack(state(" in block.split("input:", 1)[1].split("output:", 1)[0], block
    # and a job run without a stage (setup, an example) is handed its declaration too
    unhanded = [
        where
        for where, fn in script_functions()
        for call in ast.walk(fn)
        if isinstance(call, ast.Call)
        and getattr(call.func, "id", "") == "run_job"
        and not (len(call.args) == 3 and calls_named(call.args[2], "of"))
    ]
    assert not unhanded, unhanded


# What every lens whose iterations commit reads the same way, written once (lens/changing.py).
SHARED_LOOP_END = ("decisions", "end_commit", "stopped", "kept_count", "progress")


def test_the_lenses_that_commit_read_their_loops_end_from_one_place():
    from autoresearch.modes.lens.changing import ChangingLens

    committing = [n for n in MODE_NAMES if isinstance(modes.get(n), ChangingLens)]
    assert sorted(committing) == ["fix", "learn", "ship"]
    copies = [
        f"{name}.{hook}"
        for name in committing
        for hook in SHARED_LOOP_END
        if hook in type(modes.get(name)).__dict__
    ]
    assert not copies, copies


def test_the_package_is_in_wings_each_saying_what_it_owns():
    """At most 12 modules at the package's top; every other module lives in a wing (a
    subpackage) whose __init__ opens with a docstring saying what it owns."""
    package = ROOT / "autoresearch"
    flat = sorted(p.name for p in package.glob("*.py"))
    assert len(flat) <= 12, flat
    wings = sorted(p for p in package.iterdir() if p.is_dir() and p.name != "__pycache__")
    for wing in wings:
        if not any(wing.glob("*.py")):
            continue  # a folder of data (none today), not a wing
        init = wing / "__init__.py"
        assert init.exists(), f"{wing.name}/ has modules but no __init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.split()) >= 8, f"{wing.name}/__init__.py says nothing of its wing"


PROTOCOL_MAX = 25


def public(cls: type) -> set[str]:
    """The public members a class offers, inherited ones included (what a mode can set)."""
    return {n for n in dir(cls) if not n.startswith("_")}


def protocol_problem(mode_class: type) -> str | None:
    members = public(mode_class)
    if len(members) > PROTOCOL_MAX:
        return f"Mode has {len(members)} members (at most {PROTOCOL_MAX}): {sorted(members)}"
    return None


def test_the_loop_protocol_is_small():
    """`Mode` is what a loop needs (judge, stop rules, the record type, Red's inputs, where
    the loop ends); what is shown of the history and what is set up around the loop are
    parts of their own (`mode.views`, `mode.setup`), never members of the protocol."""
    from autoresearch.modes.base import Mode, Setup, Views

    assert protocol_problem(Mode) is None, protocol_problem(Mode)
    parts = (public(Views) | public(Setup)) - public(Mode)
    for name in modes.MODES:
        mode = modes.get(name)
        stray = public(type(mode)) & parts
        assert not stray, f"{name} sets hooks of its views or setup on the mode: {stray}"
        assert isinstance(mode.views, Views) and isinstance(mode.setup, Setup)


def test_a_hook_added_to_the_protocol_fails_the_count(monkeypatch):
    # The protocol is at its bound: a view hook put back on Mode is one member too many.
    from autoresearch.modes.base import Mode

    monkeypatch.setattr(Mode, "summary_sections", lambda self, env, d: "", raising=False)
    assert "at most 25" in (protocol_problem(Mode) or "")
