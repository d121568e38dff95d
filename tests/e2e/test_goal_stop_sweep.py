"""Stop 7 through Snakemake: a sweep whose goal (in words) is satisfied stops by itself."""

from __future__ import annotations


def vote(verdict):
    return [{"tool": "cast_vote", "args": {"verdict": verdict, "reason": f"it is {verdict}"}}]


def test_a_sweep_on_a_clean_target_stops_after_one_cycle_with_goal_satisfied(workflow, target):
    workflow.run_script(target, {"red": {"*": []}}, max_cycles=5)
    reason = "goal satisfied: a cycle over the whole scope found nothing at or above medium"
    assert workflow.decision("s", 1)["reason"].startswith(reason)
    assert f"stopped: {reason}" in (workflow.session("s") / "done").read_text()
    assert not (workflow.session("s") / "cycles/002").exists()


def test_a_judge_panel_needs_two_rounds_in_a_row_and_every_vote_is_kept(workflow, target):
    script = {"red": {"*": []}, "judge": {1: vote("met"), 2: vote("met")}}
    workflow.run_script(target, script, max_cycles=5, judge={"panel": 3}, goal="calc is tidy")
    first, second = workflow.decision("s", 1), workflow.decision("s", 2)
    assert not first["stop"] and first["goal_check"].startswith("the judge panel said met in 1")
    assert [v["vote"] for v in first["judge_votes"]] == ["met", "met", "met"]
    assert second["reason"].endswith("the judge panel said met two rounds in a row")
    briefs = workflow.transcript(workflow.workdir / "t.jsonl")
    judges = [b for b in briefs if b["team"] == "judge"]
    assert len(judges) == 6
    assert all("calc is tidy" in b["task"] and "it is met" not in b["task"] for b in judges)


def test_a_round_voted_not_met_breaks_the_streak(workflow, target):
    script = {"red": {"*": []}, "judge": {1: vote("not met"), 2: vote("met")}}
    workflow.run_script(target, script, max_cycles=5, judge={"panel": 3})
    second = workflow.decision("s", 2)
    assert not second["reason"].startswith("goal satisfied")
    assert second["goal_check"].startswith("the judge panel said met in 1 of 2")
