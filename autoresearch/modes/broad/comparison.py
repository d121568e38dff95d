"""Broad mode's comparison: ranking the tracks, naming the winner, comparison.md.

Best first: a green suite with a kept change, most fixes kept, the less obvious category
on a tie, then the smaller diff, then proposal order. comparison.md says which of these
decided between the winner and the runner-up, calls the last three a tie-break, and names
the tracks that ended on the same tree (their changes are the same, whoever "won").
"""

from __future__ import annotations

from typing import Any

# Ties go to the less obvious idea: that is the result only the experiment could give.
CATEGORY_PREFERENCE = {"bold": 0, "creative": 0, "wildcard": 1, "adjacent": 1, "obvious": 2}
# rank_key's criteria in its order; from the third on, the tracks tied on what counts.
CRITERIA = (
    "a green suite with a kept change",
    "fixes kept",
    "category",
    "diff size",
    "proposal order",
)
FIRST_TIE_BREAK = 2


def ranking(results: list[dict[str, Any]], target: str) -> dict[str, Any]:
    """The ranking, the winner (a credible track only), the runner-up, why, and the merge
    command; every track's record under `tracks`."""
    ranked = sorted(results, key=rank_key)
    best = ranked[0] if ranked else None
    winner = best if best and best["tests_pass"] and best["fixes_kept"] > 0 else None
    return {
        "ranking": [r["id"] for r in ranked],
        "winner": {"id": winner["id"], "branch": winner["branch"]} if winner else None,
        "runner_up": ranked[1]["id"] if winner and len(ranked) > 1 else None,
        "why": why(winner, ranked) if winner else no_winner_reason(ranked),
        "merge_command": f"git -C {target} merge {winner['branch']}" if winner else None,
        "decided_by": decided_by(ranked) if winner else None,
        "same_trees": same_trees(ranked),
        "tracks": {r["id"]: r for r in results},
    }


def decided_by(ranked: list[dict[str, Any]]) -> dict[str, Any]:
    """Which criterion put the first track ahead of the second: the first element of
    rank_key where they differ. `tie` when it is a tie-break (category, diff size, order)."""
    if len(ranked) < 2:
        return {"criterion": "the only track", "tie": False, "text": "the only track that ran"}
    first, second = rank_key(ranked[0]), rank_key(ranked[1])
    index = next(i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a != b)
    criterion = CRITERIA[index]
    tie = index >= FIRST_TIE_BREAK
    if not tie:
        text = f"decided by {criterion}"
    else:
        tied_on = name_list(list(CRITERIA[1:index]))
        text = f"tie on {tied_on}, decided by {criterion}"
    text += f" ({ranked[0]['id']} over {ranked[1]['id']})"
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


def rank_key(r: dict[str, Any]) -> tuple:
    """Best first: a green suite with a kept change, most fixes kept, the less obvious
    category on a tie, then the smaller diff, then proposal order."""
    credible = r["tests_pass"] and r["fixes_kept"] > 0
    return (
        not credible,
        -r["fixes_kept"],
        CATEGORY_PREFERENCE.get(r["category"], 1),
        r["diff_lines"],
        int(r["id"][1:]),
    )


def why(winner: dict[str, Any], ranked: list[dict[str, Any]]) -> str:
    parts = [
        f"{winner['id']} [{winner['category']}] kept {winner['fixes_kept']} test-gated fixes "
        f"with the suite green ({winner['test_summary']}), in {winner['commits']} commits "
        f"touching {len(winner['files_changed'])} files ({winner['diff_lines']} lines changed)."
    ]
    rivals = [r for r in ranked[1:] if r["tests_pass"] and r["fixes_kept"] == winner["fixes_kept"]]
    for rival in rivals:
        if CATEGORY_PREFERENCE.get(rival["category"], 1) > CATEGORY_PREFERENCE.get(
            winner["category"], 1
        ):
            parts.append(
                f"It ties with {rival['id']} [{rival['category']}] on fixes kept; the less "
                "obvious category wins a tie, since only the experiment could produce it."
            )
        elif rival["diff_lines"] > winner["diff_lines"]:
            parts.append(
                f"It ties with {rival['id']} on fixes kept and category; its diff is smaller "
                f"({winner['diff_lines']} against {rival['diff_lines']} lines)."
            )
        else:
            parts.append(
                f"It ties with {rival['id']} on fixes kept, category and diff size; the "
                "hypothesis proposed first is ranked first."
            )
    others = [r for r in ranked[1:] if r not in rivals]
    if others:
        parts.append(
            "Ahead of "
            + ", ".join(
                f"{r['id']} ({r['fixes_kept']} fixes kept, tests "
                f"{'pass' if r['tests_pass'] else 'FAIL'}, {r['status']})"
                for r in others
            )
            + "."
        )
    return " ".join(parts)


def no_winner_reason(ranked: list[dict[str, Any]]) -> str:
    return (
        "No track kept a test-gated change with its suite green, so there is nothing to merge. "
        "Every branch is kept for inspection."
        if ranked
        else "No track ran."
    )


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
