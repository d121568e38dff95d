"""Team briefs: the clean room by construction, overrides, and the Red variants."""

from __future__ import annotations

import re

import pytest

from autoresearch.agents.backends.base import StageLimits
from autoresearch.agents.prompts import FINDING_FIELDS, RED_CATEGORIES, BriefContext, build_brief
from autoresearch.agents.tools import TEAM_TOOLS, TOOL_SPECS

# Text that only Red (or the coordinator) may know: it must never reach Green or Refactor.
RED_ONLY = [
    "I found this by reading the parser first",  # discovery narrative
    "Suggested fix: use a lock",  # fix suggestion
    "ANGLE-lower-latency",
    "HYPOTHESIS-rewrite-in-rust",
    "ASPIRATION-be-fast",
    "TRIED-earlier-finding",
]
FINDINGS = [
    {
        "id": "F-001",
        "severity": "high",
        "title": "TITLE-off-by-one",
        "location": "src/a.py:10",
        "issue": "ISSUE-loop stops early",
        "impact": "IMPACT-last item lost",
        "discovery": RED_ONLY[0],
        "fix": RED_ONLY[1],
    },
    {
        "id": "F-002",
        "severity": "test-gap",
        "title": "TITLE-untested",
        "location": "src/b.py:3",
        "issue": "ISSUE-no test",
        "impact": "IMPACT-regressions",
    },
]
FINDING_TEXT = ["TITLE-off-by-one", "ISSUE-loop stops early", "IMPACT-last item lost", "F-001"]


def everything(team: str, **kw) -> BriefContext:
    """A context holding every kind of information, as a careless caller might pass it."""
    fields = dict(
        team=team,
        target_path="/repos/demo",
        stack="Python",
        test_command="pytest -q",
        linter="ruff check .",
        scope_text="src/**",
        branch="autoresearch/improve",
        conventions="Use dataclasses. Errors carry context.",
        cycle=3,
        tried=[RED_ONLY[5]],
        dropped_categories=["concurrency"],
        adjacent_files=["src/a.py"],
        findings=FINDINGS,
        changed_files=["src/a.py", "src/b.py"],
        angle={"name": RED_ONLY[2], "hypothesis": "h", "metric": "p99", "current": 9, "target": 5},
        hypothesis={"id": "h2", "category": "bold", "name": RED_ONLY[3], "statement": "s"},
        aspiration=RED_ONLY[4],
        experiment={"goal": "g", "direction_prose": "d", "history": [], "best": 1},
    )
    fields.update(kw)
    return BriefContext(**fields)


def text_of(brief) -> str:
    return brief.system + "\n" + brief.task


def brief(team: str, overrides=None, **kw):
    return build_brief(everything(team, **kw), overrides or {}, StageLimits(max_turns=7))


def test_green_brief_carries_the_sanitized_findings_and_nothing_else_of_red():
    b = brief("green")
    text = text_of(b)
    for secret in RED_ONLY:
        assert secret not in text
    for fragment in FINDING_TEXT + ["TITLE-untested", "src/b.py:3"]:
        assert fragment in text
    assert b.data == {"findings": [{k: f[k] for k in FINDING_FIELDS} for f in FINDINGS]}
    assert "Branch: autoresearch/improve" in b.system
    assert "Use dataclasses" in b.system


def test_refactor_brief_has_the_changed_files_and_no_finding():
    b = brief("refactor")
    text = text_of(b)
    for secret in RED_ONLY + FINDING_TEXT + ["TITLE-untested", "ISSUE-no test"]:
        assert secret not in text
    assert "- src/a.py" in b.task and "- src/b.py" in b.task
    assert b.data == {"changed_files": ["src/a.py", "src/b.py"]}


@pytest.mark.parametrize("team", ["green", "refactor", "fix", "experiment"])
def test_every_editing_team_is_told_to_keep_the_style_and_behaviour_preserving_imports(team):
    system = " ".join(brief(team).system.split())
    assert "never run a formatter" in system.lower() or "never reformat" in system.lower()
    assert "`try:` block" in system and "side effects" in system and "re-export" in system


def test_green_is_told_a_rule_the_project_ignores_is_no_issue():
    assert "lint configuration ignores" in " ".join(brief("green").system.split())


def test_strategist_and_experiment_briefs_carry_no_findings():
    for team in ("strategist", "experiment"):
        text = text_of(brief(team))
        for fragment in FINDING_TEXT + [RED_ONLY[0], RED_ONLY[5]]:
            assert fragment not in text, (team, fragment)


def test_limits_are_passed_through():
    assert brief("red").limits == StageLimits(max_turns=7)


@pytest.mark.parametrize("team", sorted(TEAM_TOOLS))
def test_briefs_only_mention_tools_the_team_has(team):
    text = text_of(build_brief(BriefContext(team=team), {}, StageLimits()))
    mentioned = {name for name in TOOL_SPECS if re.search(rf"\b{name}\b", text)}
    assert mentioned <= set(TEAM_TOOLS[team]), mentioned - set(TEAM_TOOLS[team])


def test_system_prompt_is_stable_across_cycles_and_per_stage_content_is_in_the_task():
    first = build_brief(everything("red", cycle=1, tried=[]), {}, StageLimits())
    later = build_brief(everything("red", cycle=4, tried=["x", "y"]), {}, StageLimits())
    assert first.system == later.system
    assert first.task != later.task


# -- overrides -------------------------------------------------------------------------------


def test_override_file_replaces_the_built_in_rules(tmp_path):
    custom = tmp_path / "green.md"
    custom.write_text("CUSTOM GREEN RULES for $team\n\n$target\n")
    b = brief("green", overrides={"green": str(custom)})
    assert b.system.startswith("CUSTOM GREEN RULES for green")
    assert "Test command: pytest -q" in b.system
    assert "TITLE-off-by-one" in b.task  # per-stage content is still added by code
    assert "You are the Green team" not in b.system


def test_override_for_another_team_is_ignored(tmp_path):
    b = brief("red", overrides={"green": str(tmp_path / "missing.md")})
    assert "Red team" in b.system


def test_missing_override_file_names_the_path_and_the_spec_key(tmp_path):
    missing = tmp_path / "nope" / "red.md"
    with pytest.raises(ValueError) as err:
        brief("red", overrides={"red": str(missing)})
    assert str(missing) in str(err.value) and "agent.prompts.red" in str(err.value)


# -- Red variants ----------------------------------------------------------------------------


def sweep_red(**kw):
    return brief("red", angle=None, hypothesis=None, aspiration=None, **kw)


def test_first_cycle_red_gets_every_category_and_no_tried_list():
    b = sweep_red(cycle=1, tried=[], dropped_categories=["concurrency"])
    for line in RED_CATEGORIES.values():
        assert line in b.task
    assert "Do not report again" not in b.task
    assert b.data["categories"] == list(RED_CATEGORIES)


def test_later_cycle_red_drops_fruitless_categories_focuses_near_fixes_and_lists_tried():
    b = sweep_red(cycle=3, tried=["[F-001] off-by-one in a.py"], adjacent_files=["src/a.py"])
    assert RED_CATEGORIES["concurrency"] not in b.task
    assert RED_CATEGORIES["bugs"] in b.task
    assert "earlier fixes" in b.task and "- src/a.py" in b.task
    assert "Do not report again" in b.task and "[F-001] off-by-one in a.py" in b.task


def test_narrow_red_is_scoped_to_the_angle():
    b = brief("red", hypothesis=None)
    assert RED_ONLY[2] in b.task
    assert "Metric: p99" in b.task and "Current value: 9" in b.task and "Target: 5" in b.task
    assert "leave them out" in b.task
    assert RED_CATEGORIES["bugs"] not in b.task
    assert RED_ONLY[5] in b.task  # the tried list still applies


def test_broad_red_is_scoped_to_the_hypothesis_and_asks_where_new_code_would_live():
    b = brief("red", angle=None)
    assert RED_ONLY[3] in b.task and "(bold)" in b.task and RED_ONLY[4] in b.task
    assert "new code" in b.task
    assert RED_CATEGORIES["bugs"] not in b.task


def test_strategist_brief_asks_for_three_to_five_diverse_hypotheses():
    b = brief("strategist")
    assert RED_ONLY[4] in b.task
    assert "3 to 5" in b.task
    for category in ("obvious", "bold", "creative"):
        assert category in b.system


def test_experiment_brief_shows_direction_best_and_the_last_experiments():
    history = [{"id": i, "status": "discard", "description": f"try-{i}"} for i in range(15)]
    exp = {
        "goal": "lower val_loss",
        "direction_prose": "Explore warmup schedules.",
        "history": history,
        "best": "val_loss=1.23 (experiment 4)",
        "scope_files": ["train.py"],
    }
    b = brief("experiment", experiment=exp)
    assert "lower val_loss" in b.task and "Explore warmup schedules." in b.task
    assert "val_loss=1.23" in b.task and "- train.py" in b.task
    assert "try-14" in b.task and "try-5" in b.task and "try-4" not in b.task
    assert "one atomic change" in b.task.lower()
    assert len(b.data["history"]) == 10


def test_only_a_team_judged_by_an_error_count_is_told_to_tidy():
    # The ruff backend drops what a fix leaves unused because the brief says so, not
    # because it recognises a team's name.
    assert build_brief(BriefContext(team="fix"), None, StageLimits()).tidy
    for team in ("green", "refactor", "experiment", "learn", "ship"):
        assert not build_brief(BriefContext(team=team), None, StageLimits()).tidy, team
