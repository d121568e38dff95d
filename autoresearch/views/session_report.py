"""The report a user opens: a finished session's human files as pages for `snakemake --report`.

session.md, results.tsv and usage.tsv are rewritten by many rules, so none can be one rule's
report() output; the `session_report` rule renders them here, once the session has ended.
The outcome (how the session ended, in a few lines) is a fragment the report's landing page
embeds (report/workflow.rst); `autoresearch finalize` adds its review sets to it later.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoresearch.errors import UserError
from autoresearch.safety import git
from autoresearch.session.files import read_json, write_bytes, write_json, write_text
from autoresearch.session.layout import SessionLayout

if TYPE_CHECKING:
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
pre.diff { background: #f8f8f8; border: 1px solid #ddd; padding: 0.5em; overflow-x: auto; }
"""
DIFF_LINES = 400  # a kept commit's diff on its cycle's page, at most; the rest is in git


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
    stopped: str | None = None  # why the loop ended at this step; None: it went on
    commits: tuple[str, str] | None = None  # (start, end) of what the step left on its branch
    repo: Path | None = None  # where those commits are read: the loop's worktree or the target

    @property
    def name(self) -> str:
        """The step's page name: `001`, or `h1-001` for a track's cycle."""
        return f"{self.track}-{self.cycle:03d}" if self.track else f"{self.cycle:03d}"


@dataclass(frozen=True)
class MetricChange:
    """A session's metric at setup and at its end, as its mode measured them."""

    label: str
    before: float
    after: float | None  # None: not measurable at the end
    goal: str = ""  # how it is judged: "target <= 90", "minimize"


@dataclass(frozen=True)
class SessionFacts:
    """What the outcome states besides the steps: the mode, the tests at setup, the metric."""

    mode: str
    tests_before: str
    metric: MetricChange | None = None


@dataclass
class Outcome:
    """How a session ended, as the report's landing page states it (outcome.json)."""

    name: str
    lines: list[list[str]]  # [what, text]: mode, stopped, kept, tests, metric, cost
    evaluations: list[str] = field(default_factory=list)  # step names, each with its page


def step_label(name: str) -> str:
    """What the report lists a step page as: `cycle 001`, or `h1, cycle 001`."""
    track, _, cycle = name.rpartition("-")
    return f"{track}, cycle {cycle}" if track else f"cycle {cycle}"


def write_report(
    layout: SessionLayout,
    steps: list[ReportStep],
    kept_label: str,
    facts: SessionFacts,
    *,
    summary: Path,
    results: Path,
    evaluations: Path,
    plot: Path,
    outcome: Path,
) -> None:
    """Every page of the session's report: session.md, the tables, each step, the plot, and
    the outcome the landing page embeds (with the review sets, when finalize made them)."""
    table = cycle_table(steps, layout.usage)
    spend = spend_of(layout.usage)
    body = markdown_html(layout.summary.read_text()) + kept_list_html(steps)
    write_text(summary, page(f"{layout.name}: session.md", body))
    write_text(results, results_page(layout, table, kept_label, spend))
    for step in steps:
        write_text(evaluations / f"{step.name}.html", evaluation_page(layout, step))
    if not steps:
        evaluations.mkdir(parents=True, exist_ok=True)  # the rule's folder, empty
    write_bytes(plot, png(cycle_figure(table, kept_label, layout.name, spend)))
    result = outcome_of(layout, steps, kept_label, facts, spend)
    result.evaluations = [report_path(layout, evaluations / f"{s.name}.html") for s in steps]
    write_json(outcome / OUTCOME_RECORD, asdict(result))
    write_outcome(layout, outcome, result)


# --- pages ---------------------------------------------------------------------------------


def page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(plain(title))}'
        f"</title><style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


CODE_SPAN = re.compile(r"`([^`\n]+)`")


def inline(text: str) -> str:
    """One line of agent or git text as HTML: escaped, its `code` spans as <code>, never
    as literal backticks."""
    parts = CODE_SPAN.split(text)
    return "".join(
        f"<code>{html.escape(part)}</code>" if i % 2 else html.escape(part)
        for i, part in enumerate(parts)
    )


def plain(text: str) -> str:
    """A line for where no markup goes (a page's <title>): its code spans unquoted."""
    return CODE_SPAN.sub(r"\1", text)


LIST_ITEM = re.compile(r"^( *)([-*+]|\d+\.)\s")
FENCE = re.compile(r"^\s*(```|~~~)")


def nest_lists(text: str) -> str:
    """Each list item indented by 4 spaces a level, as the markdown renderer needs: a list
    nested by 2 spaces (as GitHub allows) would otherwise come out as one flat list. A
    level is any deeper indent under an item of the same list; a line at the margin that
    is no item ends the list. Fenced code is left as it is."""
    out, fenced, levels = [], False, []
    for line in text.split("\n"):
        fenced ^= bool(FENCE.match(line))
        match = None if fenced else LIST_ITEM.match(line)
        if match:
            indent = len(match.group(1))
            while levels and levels[-1] > indent:
                levels.pop()
            if not levels or levels[-1] < indent:
                levels.append(indent)
            line = " " * (4 * (len(levels) - 1)) + line[indent:]
        elif not fenced and line.strip() and not line[:1].isspace():
            levels = []
        out.append(line)
    return "\n".join(out)


def markdown_html(text: str) -> str:
    """Markdown (headings, lists, tables) as HTML, with any raw HTML or link shown as text."""
    import markdown

    md = markdown.Markdown(extensions=["tables"])
    md.preprocessors.deregister("html_block")
    for name in INERT_MARKDOWN:
        md.inlinePatterns.deregister(name)
    return md.convert(nest_lists(text))


def evaluation_page(layout: SessionLayout, step: ReportStep) -> str:
    """A step's evaluation, then what it kept on the branch: each commit with its diff."""
    text = step.evaluation.read_text() if step.evaluation.exists() else "(no evaluation)\n"
    body = markdown_html(text) + kept_html(step)
    return page(f"{layout.name}: {step_label(step.name)}", body)


def kept_html(step: ReportStep) -> str:
    """The commits a step left on its branch (start..end in git, so a fix taken out again
    shows nothing), each with its diff; nothing when the mode names no range."""
    if step.commits is None or step.repo is None:
        return ""
    start, end = step.commits
    head = "\n<h2>Kept on the branch</h2>\n"
    span = f"<code>git log -p {html.escape(start[:12])}..{html.escape(end[:12])}</code>"
    try:
        # One git call per step, not one per commit: a long session keeps hundreds.
        log = git.git(
            step.repo,
            "log",
            "--reverse",
            "--stat",
            "--patch",
            "--format=%x00%H %s",
            f"{start}..{end}",
        )
    except (git.GitError, UserError, OSError) as e:
        return f"{head}<p>The commits of {span} cannot be read: {html.escape(str(e))}</p>\n"
    commits = []
    for chunk in log.split("\0")[1:]:
        first, _, diff = chunk.partition("\n")
        sha, _, subject = first.partition(" ")
        commits.append((sha, subject, diff.strip("\n")))
    if not commits:
        return f"{head}<p>Nothing: the branch is where the step started ({span} is empty).</p>\n"
    sizes = commit_sizes(step.repo, start, end)
    parts = [f"{head}<p>{len(commits)} commit(s), oldest first ({span}).</p>"]
    for sha, subject, diff in commits:
        lines = diff.splitlines()
        if len(lines) > DIFF_LINES:
            more = len(lines) - DIFF_LINES
            lines = [*lines[:DIFF_LINES], f"... {more} more lines: git show {sha[:12]}"]
        parts.append(
            f"<h3><code>{html.escape(sha[:12])}</code> {inline(subject)} "
            f'<span class="size">{html.escape(sizes.get(sha, ""))}</span></h3>\n'
            f'<pre class="diff">{html.escape(chr(10).join(lines) or "(no change)")}</pre>'
        )
    return "\n".join(parts) + "\n"


def commit_sizes(repo: Path, start: str, end: str) -> dict[str, str]:
    """Each commit of start..end by id: `+A −D` lines (a binary file counts no line), so a
    whole-file rewrite never passes for a one-line fix. Read once per range of two commit
    ids (the step's page and the session's list both ask): what git says of them is fixed."""
    key = (start, end)
    if key not in _SIZES:
        sizes = _commit_sizes(repo, start, end)
        if not sizes or not all(re.fullmatch(r"[0-9a-f]{40}", c) for c in key):
            return sizes  # a failed read is not kept
        _SIZES[key] = sizes
    return dict(_SIZES[key])


_SIZES: dict[tuple[str, str], dict[str, str]] = {}


def _commit_sizes(repo: Path, start: str, end: str) -> dict[str, str]:
    try:
        log = git.git(repo, "log", "--numstat", "--format=%x00%H", f"{start}..{end}")
    except (git.GitError, UserError, OSError):
        return {}
    chunks = [chunk.strip("\n").partition("\n") for chunk in log.split("\0")[1:]]
    return {sha: f"({size_of(numstat).text})" for sha, _, numstat in chunks}


@dataclass(frozen=True)
class Size:
    """Lines added and removed, and files changed, by a diff (`git diff --numstat`)."""

    added: int
    deleted: int
    files: int

    @property
    def text(self) -> str:
        return f"+{self.added} \u2212{self.deleted}"  # the sign a reader knows from a review


def size_of(numstat: str) -> Size:
    """A numstat's totals; a binary file counts as a file of no lines."""
    rows = [row.split("\t", 2) for row in numstat.splitlines() if row.strip()]
    count = lambda n: int(n) if n.isdigit() else 0  # noqa: E731
    return Size(sum(count(r[0]) for r in rows), sum(count(r[1]) for r in rows), len(rows))


def kept_list_html(steps: list[ReportStep]) -> str:
    """The session page's list of every kept commit, its title and its size, per step."""
    items = []
    for step in steps:
        if step.commits is None or step.repo is None:
            continue
        start, end = step.commits
        try:
            log = git.git(step.repo, "log", "--reverse", "--format=%H %s", f"{start}..{end}")
        except (git.GitError, UserError, OSError):
            continue
        sizes = commit_sizes(step.repo, start, end)
        for line in log.splitlines():
            sha, _, subject = line.partition(" ")
            items.append(
                f"<li>{html.escape(step_label(step.name))}: <code>{html.escape(sha[:12])}</code> "
                f"{inline(subject)} {html.escape(sizes.get(sha, ''))}</li>"
            )
    if not items:
        return ""
    return "\n<h2>Kept commits</h2>\n<ul>\n" + "\n".join(items) + "\n</ul>\n"


# --- the tables: small TSVs, read with the csv module ------------------------------------
# A session's tables are a few hundred rows at most; pandas cost a third of a second to
# import at every session's end and added nothing the csv module does not do here.


@dataclass(frozen=True)
class Table:
    """A session table as written (every cell a string, an empty cell empty), or a table
    made from one: its columns, in order, and one dict a row."""

    columns: list[str]
    rows: list[dict[str, Any]]


def read_tsv(path: Path) -> Table:
    """A session table as written: every cell a string, an empty cell empty (not NaN); a
    blank line is no row, and a short row's missing cells are empty."""
    if not path.exists():
        return Table([], [])
    with path.open(newline="") as handle:
        lines = [line for line in csv.reader(handle, delimiter="\t") if line]
    if not lines:
        return Table([], [])
    columns = lines[0]
    # A long row's cells past the header are no column's: left out.
    padded = (cells + [""] * (len(columns) - len(cells)) for cells in lines[1:])
    rows = [dict(zip(columns, cells, strict=False)) for cells in padded]
    return Table(columns, rows)


@dataclass(frozen=True)
class CycleRow:
    """One step of the per-cycle table: what it kept, its tests, what its agent runs cost."""

    track: str
    cycle: int
    kept: int
    tests: str
    tests_pass: bool | None
    tests_passed: int | None
    tests_failed: int | None
    cost_usd: float = 0.0
    tokens: int = 0
    agent_runs: int = 0


def cycle_table(steps: list[ReportStep], usage_path: Path) -> list[CycleRow]:
    """One row per step: track, cycle, kept, tests, and what its agent runs cost (usage.tsv)."""
    cost: dict[tuple[str, int], list[float]] = {}
    tokens: dict[tuple[str, int], int] = {}
    for row in read_tsv(usage_path).rows:
        key = (row["track"], int(row["cycle"]))
        # An unpriced run's empty cost is unknown: it adds nothing to a sum (spend_of says so).
        cost.setdefault(key, []).append(_number(row["cost_usd"]))
        tokens[key] = (
            tokens.get(key, 0) + _count(row, "input_tokens") + _count(row, "output_tokens")
        )
    # A step no agent ran in (nothing left to fix) cost nothing.
    return [
        CycleRow(
            track=s.track,
            cycle=s.cycle,
            kept=s.kept,
            tests=tests_text(s),
            tests_pass=s.tests_pass,
            tests_passed=s.tests_passed,
            tests_failed=s.tests_failed,
            cost_usd=math.fsum(cost.get((s.track, s.cycle), ())),
            tokens=tokens.get((s.track, s.cycle), 0),
            agent_runs=len(cost.get((s.track, s.cycle), ())),
        )
        for s in steps
    ]


def _number(text: str) -> float:
    """A cell as a number; an empty or unreadable one as 0."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if math.isnan(value) else value


def _count(row: dict[str, Any], column: str) -> int:
    """A count cell as a whole number (an empty, unreadable or infinite one as 0)."""
    value = _number(row.get(column, ""))
    return int(value) if math.isfinite(value) else 0


@dataclass(frozen=True)
class Spend:
    """What the session's agent runs cost (usage.tsv): the priced runs' sum, and the runs
    of a model without a price, whose cost is unknown (never $0)."""

    usd: float
    priced: int  # usage rows with a price that used a model (tokens, requests or a cost)
    unpriced: int  # usage rows of a model without a price
    unpriced_requests: int = 0
    unpriced_models: tuple[str, ...] = ()

    @property
    def called(self) -> bool:
        """Whether any model was called: a model-free backend (ruff) never is."""
        return bool(self.priced or self.unpriced)

    @property
    def text(self) -> str:
        if not self.called:
            return "nothing: no model was called"
        missing = (
            f"{self.unpriced_requests} request(s) to {', '.join(self.unpriced_models)} not "
            "priced (no price in the spec)"
        )
        if not self.priced:
            return f"not priced: {missing}"
        return f"${self.usd:.4f}" + (f", and {missing}" if self.unpriced else "")


def spend_of(usage_path: Path) -> Spend:
    usage = read_tsv(usage_path).rows
    unpriced = [row for row in usage if row["cost_usd"].strip() == ""]
    priced = [row for row in usage if row["cost_usd"].strip() != ""]
    used = lambda row: sum(_count(row, c) for c in ("requests", "input_tokens", "output_tokens"))  # noqa: E731
    calls = [row for row in priced if _number(row["cost_usd"]) > 0 or used(row) > 0]
    return Spend(
        usd=math.fsum(_number(row["cost_usd"]) for row in priced),
        priced=len(calls),
        unpriced=len(unpriced),
        unpriced_requests=sum(_count(row, "requests") for row in unpriced),
        unpriced_models=tuple(sorted({row["model"] for row in unpriced})),
    )


def tests_text(step: ReportStep) -> str:
    if step.tests_pass is None:
        return "not run"
    verdict = "pass" if step.tests_pass else "FAIL"
    if step.tests_passed is None:
        return verdict
    failed = f", {step.tests_failed} failed" if step.tests_failed else ""
    return f"{verdict} ({step.tests_passed} passed{failed})"


def results_page(
    layout: SessionLayout, table: list[CycleRow], kept_label: str, spend: Spend
) -> str:
    """The per-cycle summary, then results.tsv and usage.tsv as tables."""
    shown = {
        "track": "track",
        "cycle": "cycle",
        "kept": kept_label,
        "tests": "tests",
        "cost_usd": "cost (USD)",
        "agent_runs": "agent runs",
    }
    if not any(row.track for row in table):
        del shown["track"]
    if not spend.priced:
        del shown["cost_usd"]  # nothing priced: a column of zeros says $0
    per_cycle = Table(
        list(shown.values()),
        [{shown[key]: getattr(row, key) for key in shown} for row in table],
    )
    parts = [
        f"<h1>{html.escape(layout.name)}: results</h1>",
        "<h2>Per cycle</h2>",
        f"<p>{sum(row.kept for row in table)} {html.escape(kept_label)} over {len(table)} "
        f"cycle(s); agent cost {html.escape(spend.text)} (usage.tsv, at the spec's prices).</p>",
        frame_html(per_cycle, "(no cycle finished)"),
        "<h2>Time and CPU</h2>",
        cpu_html(layout.timings),
        "<h2>results.tsv</h2>",
        "<p>One row per team per cycle, as the session recorded it.</p>",
        frame_html(read_tsv(layout.results), "(empty)"),
        "<h2>usage.tsv</h2>",
        "<p>One row per agent run: tokens and cost.</p>",
        frame_html(read_tsv(layout.usage), "(no agent run recorded)"),
    ]
    return page(f"{layout.name}: results", "\n".join(parts))


TIMING_COLUMNS = {
    "wall_s": "wall s",
    "cpu_s": "harness CPU s",
    "commands_cpu_s": "commands CPU s",
    "jailed_cpu_s": "of which in the jail",
}


def cpu_html(timings: Path) -> str:
    """What the stages took (timings.tsv), summed per stage: wall seconds, the harness's own
    CPU, and the CPU of the commands it ran (tests, git, metrics), those run in the jail
    included (their part apart: rusage never sees a jail's processes)."""
    rows = read_tsv(timings).rows
    if not rows:
        return "<p>(no stage timed)</p>"
    # Per stage, in the order stages first appear. A session begun before the jailed CPU
    # was counted has no such column: 0 there.
    spent: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        stage = spent.setdefault(row["stage"], {column: [] for column in TIMING_COLUMNS})
        for column in TIMING_COLUMNS:
            stage[column].append(_number(row.get(column, "0")))
    sums = [
        {"stage": name, **{TIMING_COLUMNS[c]: math.fsum(v) for c, v in columns.items()}}
        for name, columns in spent.items()
    ]
    total = {c: math.fsum(row[shown] for row in sums) for c, shown in TIMING_COLUMNS.items()}
    return (
        f"<p>Harness CPU {total['cpu_s']:.1f} s; the commands it ran "
        f"{total['commands_cpu_s']:.1f} s CPU, of which {total['jailed_cpu_s']:.1f} s in the "
        f"jail; {total['wall_s']:.1f} s of stage wall time (timings.tsv).</p>\n"
        + frame_html(Table(["stage", *TIMING_COLUMNS.values()], sums), "(no stage timed)")
    )


def frame_html(table: Table, empty: str) -> str:
    """A table as HTML, cell for cell as pandas' `to_html(index=False, border=0)` wrote it
    (the report's pages stayed the same when pandas went): a float with four decimals."""
    if not table.rows or not table.columns:
        return f"<p>{html.escape(empty)}</p>"
    head = "".join(f"      <th>{_cell(c)}</th>\n" for c in table.columns)
    body = "".join(
        "    <tr>\n"
        + "".join(f"      <td>{_cell(row[c])}</td>\n" for c in table.columns)
        + "    </tr>\n"
        for row in table.rows
    )
    return (
        '<table class="dataframe">\n  <thead>\n    <tr style="text-align: right;">\n'
        f"{head}    </tr>\n  </thead>\n  <tbody>\n{body}  </tbody>\n</table>"
    )


def _cell(value: Any) -> str:
    """One cell's text: a control character shown as its escape, the text escaped (quotes
    need none between tags) and stripped, a float with four decimals."""
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:.4f}"
    text = str(value)
    for char, shown in (("\t", "\\t"), ("\r", "\\r"), ("\n", "\\n")):
        text = text.replace(char, shown)
    return html.escape(text, quote=False).strip()


# --- the outcome (the landing page) ---------------------------------------------------------

OUTCOME_RECORD = "outcome.json"  # the outcome's lines, for finalize to render it again
OUTCOME_PAGE = "outcome.html"  # the fragment report/workflow.rst embeds on the landing page


@dataclass(frozen=True)
class ReviewPage:
    """One review set `autoresearch finalize` wrote, as a page of the report."""

    number: int
    title: str
    branch: str
    state: str  # "tests pass", "FAILS ALONE", "only valid together with set 2"
    path: str  # the page as the report registers it
    size: str = ""  # "+A −D lines, N files"; "" from a finalize that did not record it


def outcome_of(
    layout: SessionLayout,
    steps: list[ReportStep],
    kept_label: str,
    facts: SessionFacts,
    spend: Spend,
) -> Outcome:
    """The session's end in a few lines: mode, why it stopped, what it kept, the tests
    and the metric before and after, and the cost."""
    tracks = list(dict.fromkeys(s.track for s in steps))
    last = {s.track: s for s in steps}  # a track's steps are in order: its last one
    count = {t: sum(1 for s in steps if s.track == t) for t in tracks}

    def per_track(text) -> str:
        if not tracks:
            return text(None)
        if tracks == [""]:
            return text(last[""])
        return "; ".join(f"{t}: {text(last[t])}" for t in tracks)

    def stopped(step: ReportStep | None) -> str:
        if step is None:
            return "no cycle finished"
        return f"{step.stopped or 'finished'}, after {plural(count[step.track], 'cycle')}"

    kept = sum(s.kept for s in steps)
    by_track = ", ".join(f"{t} {sum(s.kept for s in steps if s.track == t)}" for t in tracks)
    kept_line = f"{kept} {kept_label} over {plural(len(steps), 'cycle')}"
    if len(tracks) > 1:
        kept_line += f" ({by_track})"
    tests_after = per_track(lambda s: "not run" if s is None else tests_text(s))
    return Outcome(
        name=layout.name,
        lines=[
            ["Mode", facts.mode],
            ["Stopped", per_track(stopped)],
            ["Kept", kept_line],
            ["Tests", f"before: {facts.tests_before}; after: {tests_after}"],
            ["Metric", metric_text(facts.metric)],
            ["Cost", spend.text],
        ],
    )


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def metric_text(metric: MetricChange | None) -> str:
    if metric is None:
        return "none: this mode measures no metric, its tests decide"
    after = "not measurable" if metric.after is None else f"{metric.after:g}"
    goal = f" ({metric.goal})" if metric.goal else ""
    return f"{metric.label}: before {metric.before:g}, after {after}{goal}"


def report_path(layout: SessionLayout, path: Path) -> str:
    """A page as the report registers it: relative to the working directory sessions/ is in
    (the same wherever the caller runs, `autoresearch finalize` too)."""
    return str(Path(path).absolute().relative_to(layout.root.absolute().parent.parent))


def view_link(path: str, text: str) -> str:
    """A landing-page link that opens a page of the report in its viewer (Snakemake's report
    keeps each page's address in `results`, and `app` shows it)."""
    where = json.dumps(path)
    shown = f"{{content: 'html', contentPath: results[{where}].data_uri, resultPath: {where}}}"
    js = f"app.setView({shown})"
    return f'<a href="javascript:{html.escape(js)}">{html.escape(text)}</a>'


def write_outcome(layout: SessionLayout, folder: Path, outcome: Outcome) -> None:
    """The outcome fragment, with the review sets finalize wrote (each a page here)."""
    write_text(folder / OUTCOME_PAGE, outcome_fragment(outcome, review_pages(layout, folder)))


def add_review_sets(layout: SessionLayout) -> None:
    """After `autoresearch finalize`: its review sets as pages of the session's report and
    links on its landing page. A report made before outcomes existed is left as it is."""
    folder = layout.report_outcome
    saved = read_json(folder / OUTCOME_RECORD)
    if saved is not None:
        write_outcome(layout, folder, Outcome(**saved))


def review_pages(layout: SessionLayout, folder: Path) -> list[ReviewPage]:
    """review/<n>.md as review-<n>.html pages (a rerun's old pages go first)."""
    for old in folder.glob("review-*.html"):
        old.unlink()
    review = layout.root / "review"
    found = []
    for entry in (read_json(review / "branches.json") or {}).get("sets", []):
        number = int(entry["number"])
        source = review / f"{number}.md"
        if not source.exists():
            continue
        text = source.read_text()
        title = text.splitlines()[0].lstrip("#").strip() if text.strip() else f"set {number}"
        target = folder / f"review-{number}.html"
        write_text(target, page(f"{layout.name}: review set {number}", markdown_html(text)))
        needs = entry.get("only_valid_with") or []
        state = "tests pass" if entry.get("tests_ok") else "FAILS ALONE"
        if needs:
            state = "only valid together with set(s) " + ", ".join(str(n) for n in needs)
        branch = str(entry.get("branch", ""))
        size = entry.get("size") or {}
        said = (
            f"+{size['added']} \u2212{size['deleted']} lines, {plural(size['files'], 'file')}"
            if {"added", "deleted", "files"} <= set(size)
            else ""
        )
        found.append(ReviewPage(number, title, branch, state, report_path(layout, target), said))
    return found


def outcome_fragment(outcome: Outcome, reviews: list[ReviewPage]) -> str:
    """HTML for the landing page: every text escaped, every link one of ours."""
    rows = "\n".join(
        f"<li><strong>{html.escape(what)}:</strong> {inline(text)}</li>"
        for what, text in outcome.lines
    )
    pages = ", ".join(view_link(p, step_label(Path(p).stem)) for p in outcome.evaluations)
    if reviews:
        sets = "\n".join(
            f"<li>{view_link(r.path, f'{r.number}. {plain(r.title)}')} "
            f"{'(' + html.escape(r.size) + ') ' if r.size else ''}[{html.escape(r.state)}] "
            f"<code>{html.escape(r.branch)}</code></li>"
            for r in reviews
        )
        review_part = f"<p><strong>Review sets:</strong></p>\n<ul>\n{sets}\n</ul>"
    else:
        review_part = (
            "<p><strong>Review sets:</strong> none yet: "
            f"<code>autoresearch finalize {html.escape(outcome.name)}</code> makes them, "
            "then make the report again.</p>"
        )
    return (
        f'<div class="autoresearch-outcome" id="outcome-{html.escape(outcome.name)}">\n'
        f"<h2>Session {html.escape(outcome.name)}: the outcome</h2>\n<ul>\n{rows}\n</ul>\n"
        f"<p><strong>Evaluations:</strong> {pages or '(no cycle finished)'}</p>\n"
        f"{review_part}\n</div>\n"
    )


# --- the plot ------------------------------------------------------------------------------

OUTSIDE = {"loc": "upper left", "bbox_to_anchor": (1.01, 1)}  # legends beside, not on, bars


def cycle_figure(table: list[CycleRow], kept_label: str, name: str, spend: Spend) -> Figure:
    """Panels over the cycles, one bar per track: what was kept, the tests, and what the
    agents cost. Only what was measured: without a priced model call there is no cost
    panel (a model without a price shows its tokens; a model-free backend, nothing)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    spent = "cost_usd" if spend.priced else "tokens" if spend.called else None
    fig = Figure(figsize=(8, 6.5 if spent else 4.6), dpi=100)
    axes = list(fig.subplots(3 if spent else 2, 1, sharex=True))
    kept_ax, tests_ax = axes[:2]
    spent_ax = axes[2] if spent else None
    tracks = sorted({row.track for row in table}) or [""]
    width = 0.8 / len(tracks)
    counted = bool(table) and all(row.tests_passed is not None for row in table)
    # White edges keep adjacent tracks' bars apart, until bars are too thin to have edges.
    edge = 0.5 if len({row.cycle for row in table}) * len(tracks) <= 60 else 0.0
    for i, track in enumerate(tracks):
        rows = [row for row in table if row.track == track]
        xs = [row.cycle + (i - (len(tracks) - 1) / 2) * width for row in rows]
        colour = f"C{i}"
        bars(kept_ax, xs, [row.kept for row in rows], width, [colour], edge)
        if spent_ax is not None:
            bars(spent_ax, xs, [getattr(row, spent) for row in rows], width, [colour], edge)
        if counted:
            passed = [int(row.tests_passed or 0) for row in rows]
            bars(tests_ax, xs, passed, width, ["tab:green"], edge)
            failed = [int(row.tests_failed or 0) for row in rows]
            bars(tests_ax, xs, failed, width, ["tab:red"], edge, bottom=passed)
        else:
            colours = [_pass_colour(row.tests_pass) for row in rows]
            bars(tests_ax, xs, [1] * len(xs), width, colours, edge)
    kept_ax.set_ylabel(kept_label)
    title = f"{name}: per cycle"
    kept_ax.set_title(title if spent else f"{title} (agent cost: {spend.text})")
    kept_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    tests_ax.set_ylabel("tests")
    if counted:
        tests_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        legend = [_patch("tab:green", "passed"), _patch("tab:red", "failed")]
    else:
        tests_ax.set_yticks([])
        legend = [_patch("tab:green", "suite passed"), _patch("tab:red", "suite failed")]
        if any(row.tests_pass is None for row in table):
            legend.append(_patch("tab:gray", "no test ran"))
    tests_ax.legend(handles=legend, fontsize="small", **OUTSIDE)
    if spent_ax is not None and spent == "cost_usd":
        spent_ax.set_ylabel("cost (USD)")
        spent_ax.set_title(f"agent cost: {spend.text}", fontsize="small")
    elif spent_ax is not None:
        spent_ax.set_ylabel("tokens")
        spent_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        spent_ax.set_title(f"agent tokens (in + out); cost {spend.text}", fontsize="small")
    axes[-1].set_xlabel("cycle")
    # Whole cycle numbers only; a tick per cycle would cost seconds on a long session.
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes:
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
