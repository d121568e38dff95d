"""Broad mode's comparison: ranking the tracks, naming the winner, comparison.md.

Best first by CRITERIA; comparison.md says which criterion decided between the winner and
the runner-up, calls every criterion after the first that counts a tie-break, and names the
tracks that ended on the same tree (docs/broad.md, "Comparison and winner").
"""

from __future__ import annotations

from typing import Any

from autoresearch.measure.metrics import is_better

# Ties go to the less obvious idea: that is the result only the experiment could give.
CATEGORY_PREFERENCE = {"bold": 0, "creative": 0, "wildcard": 1, "adjacent": 1, "obvious": 2}
# rank_key's criteria in its order. The first is a gate; the first that counts is the
# metric when the spec has one, else fixes kept; those after it are tie-breaks.
CRITERIA = (
    "a green suite with a kept change",
    "the aspiration metric",
    "the judges' votes",
    "fixes kept",
    "category",
    "diff size",
    "proposal order",
)
METRIC, JUDGES, FIXES = 1, 2, 3
NO_WINNER = (
    "No track kept a test-gated change with its suite green, so there is nothing to merge. "
    "Every branch is kept for inspection."
)
NONE_RAN = "No track ran."
# Without a metric or a judge panel nothing measures the aspiration: said at setup, in
# comparison.md and comparison.json, so a count of fixes is never read as its answer.
UNRANKED = (
    "ranked by fixes kept: set `aspiration_metric` or `aspiration_judge` to rank by the aspiration"
)


def ranking(
    results: list[dict[str, Any]],
    target: str,
    metric: dict[str, Any] | None = None,
    judged: bool = False,
) -> dict[str, Any]:
    """The ranking, the winner (a credible track only), the runner-up, why, and the merge
    command; every track's record under `tracks`. `metric` (label, direction, base value):
    the spec's aspiration metric; `judged`: a judge panel voted on each track (judges.py)."""
    ranked = sorted(results, key=lambda r: rank_key(r, metric, judged))
    best = ranked[0] if ranked else None
    winner = best if best and best["tests_pass"] and best["fixes_kept"] > 0 else None
    return {
        "ranking": [r["id"] for r in ranked],
        "winner": {"id": winner["id"], "branch": winner["branch"]} if winner else None,
        "runner_up": ranked[1]["id"] if winner and len(ranked) > 1 else None,
        "why": why(winner, ranked, metric, judged)
        if winner
        else (NO_WINNER if ranked else NONE_RAN),
        "merge_command": f"git -C {target} merge {winner['branch']}" if winner else None,
        "decided_by": decided_by(ranked, metric, judged) if winner else None,
        "same_trees": same_trees(ranked),
        "aspiration_metric": metric,
        "judged": judged,
        **({} if metric or judged else {"ranked_by": UNRANKED}),
        "tracks": {r["id"]: r for r in results},
    }


def decided_by(
    ranked: list[dict[str, Any]], metric: dict[str, Any] | None = None, judged: bool = False
) -> dict:
    """Which criterion put the first track ahead of the second: the first element of
    rank_key where they differ. `tie` when the first criterion that counts tied."""
    if len(ranked) < 2:
        return {"criterion": "the only track", "tie": False, "text": "the only track that ran"}
    first, second = rank_key(ranked[0], metric, judged), rank_key(ranked[1], metric, judged)
    index = next(i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a != b)
    criterion = CRITERIA[index]
    primary = METRIC if metric else JUDGES if judged else FIXES
    tie = index > primary
    if not tie:
        text = f"decided by {criterion}"
    else:
        # Without a judge panel its criterion is not there: never named as tied.
        tied = [
            c for i, c in enumerate(CRITERIA) if primary <= i < index and (judged or i != JUDGES)
        ]
        if metric and metric_value(ranked[0]) is None:
            # Two failed measurements are no equal numbers: say there was none.
            tied[0] = "the aspiration metric (neither could be measured)"
        text = f"tie on {name_list(tied)}, decided by {criterion}"
    text += f" ({ranked[0]['id']} over {ranked[1]['id']}"
    if index == METRIC:
        text += f": {shown_value(ranked[0])} against {shown_value(ranked[1])}"
    if index == JUDGES:
        text += f": {shown_votes(ranked[0])} against {shown_votes(ranked[1])}"
    text += ")"
    if ranked[0].get("tree") and ranked[0]["tree"] == ranked[1].get("tree"):
        text += "; both ended on the same tree, so the choice changes nothing in the code"
    return {"criterion": criterion, "tie": tie, "text": text}


def same_trees(ranked: list[dict[str, Any]]) -> list[list[str]]:
    """Groups of tracks, in rank order, whose branches ended on the same tree."""
    groups: dict[str, list[str]] = {}
    for r in ranked:
        if r.get("tree"):
            groups.setdefault(r["tree"], []).append(r["id"])
    return [ids for ids in groups.values() if len(ids) > 1]


def name_list(ids: list[str]) -> str:
    return ids[0] if len(ids) == 1 else ", ".join(ids[:-1]) + f" and {ids[-1]}"


def shown_votes(r: dict[str, Any]) -> str:
    j = r.get("judges") or {}
    return f"{j.get('met', 0)} of {j.get('panel', 0)} judges met"


def judge_rank(r: dict[str, Any], judged: bool) -> float:
    """The share of judges who found the change serves the aspiration, best first."""
    return -float((r.get("judges") or {}).get("score", 0.0)) if judged else 0.0


def metric_value(r: dict[str, Any]) -> float | None:
    """The track's aspiration metric on its tip; None when it was not measured or failed."""
    return (r.get("aspiration_metric") or {}).get("value")


def shown_value(r: dict[str, Any]) -> str:
    value = metric_value(r)
    if value is not None:
        return f"{value:g}"
    error = (r.get("aspiration_metric") or {}).get("error")
    # A table cell: the quoted output must not open a column.
    return f"measurement failed ({error.replace('|', '/')})" if error else "not measured"


def shown_base(metric: dict[str, Any]) -> str:
    return "not measured" if metric.get("base") is None else f"{metric['base']:g}"


def metric_rank(r: dict[str, Any], metric: dict[str, Any] | None) -> tuple:
    """Measured tracks by value in the metric's direction, then every track without a
    value (failed or not measured): a failure is never ranked as a number."""
    if not metric:
        return (0, 0.0)
    value = metric_value(r)
    if value is None:
        return (1, 0.0)
    return (0, value if metric["direction"] == "minimize" else -value)


def rank_key(
    r: dict[str, Any], metric: dict[str, Any] | None = None, judged: bool = False
) -> tuple:
    """Best first, by CRITERIA in their order."""
    credible = r["tests_pass"] and r["fixes_kept"] > 0
    return (
        not credible,
        metric_rank(r, metric),
        judge_rank(r, judged),
        -r["fixes_kept"],
        CATEGORY_PREFERENCE.get(r["category"], 1),
        r["diff_lines"],
        int(r["id"][1:]),
    )


def why(
    winner: dict[str, Any],
    ranked: list[dict[str, Any]],
    metric: dict[str, Any] | None = None,
    judged: bool = False,
) -> str:
    parts = [
        f"{winner['id']} [{winner['category']}] kept {winner['fixes_kept']} test-gated fixes "
        f"with the suite green ({winner['test_summary']}), in {winner['commits']} commits "
        f"touching {len(winner['files_changed'])} files ({winner['diff_lines']} lines changed)."
    ]
    if metric:
        parts.append(
            f"Its aspiration metric ({metric['label']}, {metric['direction']}) reads "
            f"{shown_value(winner)} on its tip, {shown_base(metric)} on the base."
        )
        value, base = metric_value(winner), metric.get("base")
        if None not in (value, base) and not is_better(value, base, metric["direction"]):
            parts.append("No track improved on the base's value.")
    # Rivals: credible too, and level with the winner up to fixes kept.
    level = rank_key(winner, metric, judged)[: FIXES + 1]
    rivals = [r for r in ranked[1:] if rank_key(r, metric, judged)[: FIXES + 1] == level]
    ahead = ["the aspiration metric"] * bool(metric) + ["the judges' votes"] * judged
    tied = [*ahead, "fixes kept"]
    for rival in rivals:
        if CATEGORY_PREFERENCE.get(rival["category"], 1) > CATEGORY_PREFERENCE.get(
            winner["category"], 1
        ):
            parts.append(
                f"It ties with {rival['id']} [{rival['category']}] on {name_list(tied)}; the less "
                "obvious category wins a tie, since only the experiment could produce it."
            )
        elif rival["diff_lines"] > winner["diff_lines"]:
            parts.append(
                f"It ties with {rival['id']} on {name_list([*tied, 'category'])}; its diff is "
                f"smaller ({winner['diff_lines']} against {rival['diff_lines']} lines)."
            )
        else:
            parts.append(
                f"It ties with {rival['id']} on {name_list([*tied, 'category', 'diff size'])}; the "
                "hypothesis proposed first is ranked first."
            )
    others = [r for r in ranked[1:] if r not in rivals]
    if others:
        parts.append(
            "Ahead of "
            + ", ".join(
                f"{r['id']} ("
                + (f"aspiration metric {shown_value(r)}, " if metric else "")
                + f"{r['fixes_kept']} fixes kept, tests "
                f"{'pass' if r['tests_pass'] else 'FAIL'}, {r['status']})"
                for r in others
            )
            + "."
        )
    return " ".join(parts)


def render_comparison(
    name: str,
    aspiration: str | None,
    base_commit: str,
    target: str,
    ranked: list[dict[str, Any]],
    data: dict[str, Any],
) -> str:
    lines = [
        f"# Comparison: {name}",
        "",
        f"Aspiration: {aspiration or '(none given)'}",
        f"Base commit: {base_commit}",
        f"Target: {target}",
        "",
        "## Ranking",
        "",
        *([f"Note: {UNRANKED}.", ""] if data.get("ranked_by") else []),
        "| Rank | ID | Category | Name | Status | Cycles | Commits | Fixes kept | "
        "Files changed | Lines changed | Tests |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in enumerate(ranked, 1):
        lines.append(
            f"| {n} | {r['id']} | {r['category']} | {r['name']} | {r['status']} | "
            f"{r['cycles']} | {r['commits']} | {r['fixes_kept']} | {len(r['files_changed'])} | "
            f"{r['diff_lines']} | {'pass' if r['tests_pass'] else 'FAIL'} ({r['test_summary']}) |"
        )
    metric = data.get("aspiration_metric")
    if metric:
        lines += ["", "## Aspiration metric", ""]
        lines += [
            f"`{metric['command']}` ({metric['label']}, {metric['direction']}), measured in the "
            "jail on a pristine checkout of each tip; it ranks the tracks ahead of fixes kept.",
            "",
            "| ID | Value | Against the base |",
            "|---|---|---|",
            f"| base | {shown_base(metric)} | |",
        ]
        for r in ranked:
            value = metric_value(r)
            delta = (
                "" if value is None or metric["base"] is None else f"{value - metric['base']:+g}"
            )
            lines.append(f"| {r['id']} | {shown_value(r)} | {delta} |")
    if data.get("judged"):
        lines += ["", "## Judges", ""]
        lines += [
            "Each judge saw one change's diff and the aspiration, never the track's id, "
            "hypothesis or branch, and voted on its own whether the change serves the "
            "aspiration; the share of `met` ranks the tracks"
            + (" after the aspiration metric." if metric else " ahead of fixes kept."),
            "",
            "| ID | Shown as | Met | Not met | Vote |",
            "|---|---|---|---|---|",
        ]
        for r in ranked:
            j = r.get("judges") or {}
            lines.append(
                f"| {r['id']} | change {j.get('change', '?')} | {j.get('met', 0)} | "
                f"{j.get('not_met', 0)} | {j.get('label', 'not judged')} |"
            )
        for r in ranked:
            j = r.get("judges") or {}
            lines += ["", f"{r['id']} (change {j.get('change', '?')}):"]
            for v in j.get("votes") or []:
                said = v["vote"] or f"no vote ({v.get('stop')})"
                lines.append(f"- judge {v['judge']}: {said}: {v['reason'] or '(no reason)'}")
    winner = data["winner"]
    lines += ["", "## Winner", ""]
    if winner:
        decided = data.get("decided_by") or {}
        lines += [f"**{winner['id']}** on branch `{winner['branch']}`.", ""]
        if decided:
            lines += [f"Chosen by: {decided['text']}.", ""]
        lines.append(data["why"])
        if data["runner_up"]:
            lines += ["", f"Runner-up: {data['runner_up']}."]
        lines += [
            "",
            "## Merge",
            "",
            "With the branch you want it on checked out in the target (main, or a review "
            "branch), run:",
            "",
            "```",
            data["merge_command"],
            "```",
        ]
    else:
        lines += ["No winner.", "", data["why"]]
    for ids in data.get("same_trees") or []:
        lines += [
            "",
            f"{name_list(ids)} ended on the same tree: their branches hold the same code, so "
            "which of them ranks first changes nothing in what would be merged.",
        ]
    lines += ["", "## Tracks", ""]
    winner_files = set(data["tracks"][winner["id"]]["files_changed"]) if winner else set()
    for r in ranked:
        lines += [
            f"### {r['id']} [{r['category']}] {r['name']}",
            f"- Hypothesis: {r['statement']}",
            f"- Branch: `{r['branch']}` (kept; never deleted)",
            f"- Status: {r['status']} after {r['cycles']} cycles: {r['reason']}",
            f"- Commits: {r['commits']} ({r['fixes_kept']} fixes kept, "
            f"{r['refactor_changes']} refactors, {r['reverted']} reverted, {r['skipped']} skipped)",
            f"- Files changed: {', '.join(r['files_changed']) or 'none'}",
            f"- Tests: {'pass' if r['tests_pass'] else 'FAIL'} ({r['test_summary']})",
            f"- Observations: Red reported {r['findings']} findings over {r['cycles']} cycles.",
        ]
        if metric:
            lines.append(f"- Aspiration metric: {shown_value(r)} (base {shown_base(metric)})")
        if r["fixed"]:
            lines.append("- Fixes: " + "; ".join(r["fixed"]))
        own = sorted(set(r["files_changed"]) - winner_files)
        if winner and r["id"] != winner["id"] and own:
            lines.append(
                f"- Worth a look even though it lost: it changed files the winner did not "
                f"touch ({', '.join(own)})."
            )
        lines.append("")
    return "\n".join(lines)
