"""The report a user opens: a finished session's human files as pages for `snakemake --report`.

session.md, results.tsv and usage.tsv are rewritten by many rules, so none can be one rule's
report() output; the `session_report` rule renders them here, once the session has ended.
"""

from __future__ import annotations

import html
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .files import write_bytes, write_text
from .layout import SessionLayout

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

# Agent-written text (finding titles, hypotheses) reaches these pages: raw HTML and links in
# it are shown as text, never made live in a page the user opens in a browser.
INERT_MARKDOWN = (
    "html",
    "link",
    "image_link",
    "reference",
    "image_reference",
    "short_reference",
    "short_image_ref",
    "automail",
)

STYLE = """
body { font-family: sans-serif; margin: 1.5em; line-height: 1.4; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
code { background: #f4f4f4; padding: 0 0.2em; }
"""


@dataclass(frozen=True)
class ReportStep:
    """One finished step of a session's loop (a cycle, a track's cycle, an iteration)."""

    track: str  # "" for a session's one loop, else broad's hypothesis id
    cycle: int
    evaluation: Path  # the step's own evaluation document (markdown)
    kept: int  # fixes (or changes) the step kept on the branch
    tests_pass: bool | None  # None: the step ran no tests
    tests_passed: int | None = None  # None: the test run gave no counts
    tests_failed: int | None = None

    @property
    def name(self) -> str:
        """The step's page name: `001`, or `h1-001` for a track's cycle."""
        return f"{self.track}-{self.cycle:03d}" if self.track else f"{self.cycle:03d}"


def step_label(name: str) -> str:
    """What the report lists a step page as: `cycle 001`, or `h1, cycle 001`."""
    track, _, cycle = name.rpartition("-")
    return f"{track}, cycle {cycle}" if track else f"cycle {cycle}"


def write_report(
    layout: SessionLayout,
    steps: list[ReportStep],
    kept_label: str,
    *,
    summary: Path,
    results: Path,
    evaluations: Path,
    plot: Path,
) -> None:
    """Every page of the session's report: session.md, the tables, each step, the plot."""
    table = cycle_table(steps, layout.usage)
    write_text(summary, markdown_page(f"{layout.name}: session.md", layout.summary.read_text()))
    write_text(results, results_page(layout, table, kept_label))
    for step in steps:
        text = step.evaluation.read_text() if step.evaluation.exists() else "(no evaluation)\n"
        title = f"{layout.name}: {step_label(step.name)}"
        write_text(evaluations / f"{step.name}.html", markdown_page(title, text))
    if not steps:
        evaluations.mkdir(parents=True, exist_ok=True)  # the rule's folder, empty
    write_bytes(plot, png(cycle_figure(table, kept_label, layout.name)))


# --- pages ---------------------------------------------------------------------------------


def page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}'
        f"</title><style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def markdown_html(text: str) -> str:
    """Markdown (headings, lists, tables) as HTML, with any raw HTML or link shown as text."""
    import markdown

    md = markdown.Markdown(extensions=["tables"])
    md.preprocessors.deregister("html_block")
    for name in INERT_MARKDOWN:
        md.inlinePatterns.deregister(name)
    return md.convert(text)


def markdown_page(title: str, text: str) -> str:
    return page(title, markdown_html(text))


def read_tsv(path: Path) -> pd.DataFrame:
    """A session table as written: every cell a string, an empty cell empty (not NaN)."""
    import pandas as pd

    if not path.exists():
        return pd.DataFrame()
    return pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)


STEP_COLUMNS = ["track", "cycle", "kept", "tests", "tests_pass", "tests_passed", "tests_failed"]


def cycle_table(steps: list[ReportStep], usage_path: Path) -> pd.DataFrame:
    """One row per step: track, cycle, kept, tests, and what its agent runs cost (usage.tsv)."""
    import pandas as pd

    rows = pd.DataFrame(
        [
            {
                "track": s.track,
                "cycle": s.cycle,
                "kept": s.kept,
                "tests": tests_text(s),
                "tests_pass": s.tests_pass,
                "tests_passed": s.tests_passed,
                "tests_failed": s.tests_failed,
            }
            for s in steps
        ],
        columns=STEP_COLUMNS,
    )
    usage = read_tsv(usage_path)
    if usage.empty:
        rows["cost_usd"] = 0.0
        rows["agent_runs"] = 0
        return rows
    usage = usage.assign(
        cycle=usage["cycle"].astype(int), cost_usd=pd.to_numeric(usage["cost_usd"])
    )
    spent = (
        usage.groupby(["track", "cycle"])
        .agg(cost_usd=("cost_usd", "sum"), agent_runs=("team", "size"))
        .reset_index()
    )
    # A step no agent ran in (nothing left to fix) cost nothing.
    out = rows.merge(spent, on=["track", "cycle"], how="left")
    return out.fillna({"cost_usd": 0.0, "agent_runs": 0}).astype({"agent_runs": int})


def tests_text(step: ReportStep) -> str:
    if step.tests_pass is None:
        return "not run"
    verdict = "pass" if step.tests_pass else "FAIL"
    if step.tests_passed is None:
        return verdict
    failed = f", {step.tests_failed} failed" if step.tests_failed else ""
    return f"{verdict} ({step.tests_passed} passed{failed})"


def results_page(layout: SessionLayout, table: pd.DataFrame, kept_label: str) -> str:
    """The per-cycle summary, then results.tsv and usage.tsv as tables."""
    shown = table[["track", "cycle", "kept", "tests", "cost_usd", "agent_runs"]].rename(
        columns={"kept": kept_label, "cost_usd": "cost (USD)", "agent_runs": "agent runs"}
    )
    if not table["track"].astype(bool).any():
        shown = shown.drop(columns="track")
    usage = read_tsv(layout.usage)
    total = float(table["cost_usd"].sum())
    parts = [
        f"<h1>{html.escape(layout.name)}: results</h1>",
        "<h2>Per cycle</h2>",
        f"<p>{int(table['kept'].sum())} {html.escape(kept_label)} over {len(table)} "
        f"cycle(s); agent cost ${total:.4f} (usage.tsv, at the spec's prices).</p>",
        frame_html(shown, "(no cycle finished)"),
        "<h2>results.tsv</h2>",
        "<p>One row per team per cycle, as the session recorded it.</p>",
        frame_html(read_tsv(layout.results), "(empty)"),
        "<h2>usage.tsv</h2>",
        "<p>One row per agent run: tokens and cost.</p>",
        frame_html(usage, "(no agent run recorded)"),
    ]
    return page(f"{layout.name}: results", "\n".join(parts))


def frame_html(frame: pd.DataFrame, empty: str) -> str:
    if frame.empty:
        return f"<p>{html.escape(empty)}</p>"
    return frame.to_html(index=False, border=0, float_format=lambda v: f"{v:.4f}")


# --- the plot ------------------------------------------------------------------------------

OUTSIDE = {"loc": "upper left", "bbox_to_anchor": (1.01, 1)}  # legends beside, not on, bars


def cycle_figure(table: pd.DataFrame, kept_label: str, name: str) -> Figure:
    """Three panels over the cycles: what was kept, the tests, the cost; one bar per track."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(8, 6.5), dpi=100)
    kept_ax, tests_ax, cost_ax = fig.subplots(3, 1, sharex=True)
    tracks = sorted(set(table["track"])) or [""]
    width = 0.8 / len(tracks)
    counted = table["tests_passed"].notna().all() and not table.empty
    # White edges keep adjacent tracks' bars apart, until bars are too thin to have edges.
    edge = 0.5 if table["cycle"].nunique() * len(tracks) <= 60 else 0.0
    for i, track in enumerate(tracks):
        rows = table[table["track"] == track]
        xs = list(rows["cycle"] + (i - (len(tracks) - 1) / 2) * width)
        colour = f"C{i}"
        bars(kept_ax, xs, list(rows["kept"]), width, [colour], edge)
        bars(cost_ax, xs, list(rows["cost_usd"]), width, [colour], edge)
        if counted:
            passed = [int(n) for n in rows["tests_passed"]]
            bars(tests_ax, xs, passed, width, ["tab:green"], edge)
            failed = [int(n) for n in rows["tests_failed"]]
            bars(tests_ax, xs, failed, width, ["tab:red"], edge, bottom=passed)
        else:
            colours = [_pass_colour(ok) for ok in rows["tests_pass"]]
            bars(tests_ax, xs, [1] * len(xs), width, colours, edge)
    kept_ax.set_ylabel(kept_label)
    kept_ax.set_title(f"{name}: per cycle")
    kept_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    tests_ax.set_ylabel("tests")
    if counted:
        tests_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        legend = [_patch("tab:green", "passed"), _patch("tab:red", "failed")]
    else:
        tests_ax.set_yticks([])
        legend = [_patch("tab:green", "suite passed"), _patch("tab:red", "suite failed")]
    tests_ax.legend(handles=legend, fontsize="small", **OUTSIDE)
    total = float(table["cost_usd"].sum())
    cost_ax.set_ylabel("cost (USD)")
    unpriced = "" if total else " (no priced model call)"
    cost_ax.set_title(f"agent cost, total ${total:.4f}{unpriced}", fontsize="small")
    cost_ax.set_xlabel("cycle")
    # Whole cycle numbers only; a tick per cycle would cost seconds on a long session.
    cost_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in (kept_ax, tests_ax, cost_ax):
        ax.autoscale_view()
        ax.set_ylim(bottom=0)
    if len(tracks) > 1:
        handles = [_patch(f"C{i}", track) for i, track in enumerate(tracks)]
        kept_ax.legend(handles=handles, title="track", fontsize="small", **OUTSIDE)
    fig.tight_layout()
    return fig


def bars(
    ax,
    xs: list[float],
    heights: list[float],
    width: float,
    colours: list[str],
    edge: float,
    bottom: list[float] | None = None,
) -> None:
    """Bars as one collection: `ax.bar` adds an artist per bar, seconds on a long session."""
    from matplotlib.collections import PolyCollection

    bottom = bottom or [0] * len(xs)
    half = width / 2
    rects = [
        [(x - half, b), (x - half, b + h), (x + half, b + h), (x + half, b)]
        for x, h, b in zip(xs, heights, bottom, strict=True)
    ]
    ax.add_collection(
        PolyCollection(rects, facecolors=colours, edgecolors="white", linewidths=edge)
    )
    ax.update_datalim([(x, b + h) for x, h, b in zip(xs, heights, bottom, strict=True)])
    ax.update_datalim([(x - half, 0) for x in xs] + [(x + half, 0) for x in xs])


def _pass_colour(passed: bool | None) -> str:
    if passed is None:
        return "tab:gray"  # the step ran no tests
    return "tab:green" if passed else "tab:red"


def _patch(colour: str, label: str):
    from matplotlib.patches import Patch

    return Patch(color=colour, label=label)


def png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()
