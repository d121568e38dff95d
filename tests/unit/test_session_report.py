"""The session report's pages, its per-cycle table and plot, and the modes' steps for it."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import git, make_repo

from autoresearch import modes
from autoresearch.agents.ledger import COLUMNS as USAGE_COLUMNS
from autoresearch.session.files import write_json
from autoresearch.session.layout import SessionLayout
from autoresearch.views.session_report import (
    MetricChange,
    ReportStep,
    SessionFacts,
    Table,
    add_review_sets,
    cycle_figure,
    cycle_table,
    frame_html,
    inline,
    markdown_html,
    nest_lists,
    page,
    plain,
    read_tsv,
    results_page,
    spend_of,
    step_label,
    write_report,
)
from scripts.report import job_code

ROOT = Path(__file__).resolve().parents[2]

RESULTS = (
    "cycle\tteam\tstatus\ttests_pass\tdescription\tfiles_changed\ttimestamp\ttrack\ttokens\tcost_usd\n"
    "001\tred\tok\tTrue\t4 findings\t\t2026-01-01T00:00:00Z\t\t120\t0.01\n"
    "001\tgreen\tok\tTrue\t2 fixed, 1 skipped\t2\t2026-01-01T00:01:00Z\t\t300\t0.02\n"
)


def usage_tsv(path: Path, rows: list[tuple[str, str, str, float]]) -> None:
    """usage.tsv with one row per (track, cycle, team, cost)."""
    lines = ["\t".join(USAGE_COLUMNS)]
    for track, cycle, team, cost in rows:
        values = dict.fromkeys(USAGE_COLUMNS, "0") | {
            "track": track,
            "cycle": cycle,
            "team": team,
            "model": "m",
            "cost_usd": f"{cost:.6f}",
            "stop_reason": "finished",
            "timestamp": "t",
        }
        lines.append("\t".join(values[c] for c in USAGE_COLUMNS))
    path.write_text("\n".join(lines) + "\n")


def step(cycle: int, track: str = "", kept: int = 1, **tests) -> ReportStep:
    fields = {"tests_pass": True, "tests_passed": 5, "tests_failed": 0} | tests
    return ReportStep(track=track, cycle=cycle, evaluation=Path("missing.md"), kept=kept, **fields)


@pytest.fixture
def layout(tmp_path) -> SessionLayout:
    layout = SessionLayout(tmp_path / "sessions" / "s")
    layout.root.mkdir(parents=True)
    return layout


# --- pages ---------------------------------------------------------------------------------


def test_session_md_becomes_html_with_its_headings_lists_and_tables():
    text = (
        "# Session\n\n## Cycles\n- Cycle 1: 2 fixed\n\n| ID | Status |\n|---|---|\n| h1 | done |\n"
    )
    out = markdown_html(text)
    assert "<h2>Cycles</h2>" in out
    assert "<li>Cycle 1: 2 fixed</li>" in out
    assert "<td>h1</td>" in out and "<th>Status</th>" in out


def test_a_list_nested_by_two_spaces_renders_nested():
    out = markdown_html("- `abc` fix one\n  - why it was made\n  - where\n- `def` fix two\n")
    # Two items at the top, each with its own list: never one flat list of four.
    assert out.count("<ul>") == 2
    assert re.search(r"<li><code>abc</code> fix one\s*<ul>\s*<li>why it was made</li>", out)


def test_a_list_indented_under_a_paragraph_stays_a_list_and_never_becomes_code():
    out = markdown_html("Files:\n\n  - a.py\n  - b.py\n\nDone.\n\n  - c.py\n")
    assert "<code>" not in out and out.count("<ul>") == 2 and "<li>c.py</li>" in out


def test_a_list_nested_by_four_spaces_and_fenced_code_are_left_as_they_are():
    assert markdown_html("- one\n    - two\n").count("<ul>") == 2
    fenced = "```\n  - not a list\n```\n"
    assert nest_lists("- one\n  - two\n" + fenced) == "- one\n    - two\n" + fenced


def test_code_spans_render_as_code_and_never_as_backticks():
    assert inline("Remove unused import: `os` <b>") == (
        "Remove unused import: <code>os</code> &lt;b&gt;"
    )
    assert plain("Remove `os`") == "Remove os"
    assert "<title>s: Remove os</title>" in page("s: Remove `os`", "")


def test_agent_text_with_html_or_a_link_is_shown_as_text_not_made_live():
    out = markdown_html(
        "- F-001 <script>alert(1)</script> in [docs](javascript:alert(2))\n\n<iframe src=x>\n"
    )
    assert "<script" not in out and "<iframe" not in out and "<a " not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out


def test_every_page_is_written_and_each_step_has_its_evaluation_page(layout, tmp_path):
    layout.summary.write_text("# Autoresearch session: s\n\n## Mode\nsweep\n")
    layout.results.write_text(RESULTS)
    evaluation = layout.cycle(1, "h2") / "eval-results.md"
    evaluation.parent.mkdir(parents=True)
    evaluation.write_text("# Evaluation: h2 cycle 001\n\n## Decision\ncontinue\n")
    steps = [
        ReportStep("h2", 1, evaluation, kept=2, tests_pass=True),
        ReportStep("h2", 2, layout.cycle(2, "h2") / "eval-results.md", kept=0, tests_pass=False),
    ]
    out = tmp_path / "report"
    write_report(
        layout,
        steps,
        "fixes kept",
        SessionFacts("sweep", "5 passed"),
        summary=out / "session.html",
        results=out / "results.html",
        evaluations=out / "evaluations",
        plot=out / "cycles.png",
        outcome=out / "outcome",
    )
    assert "<h2>Mode</h2>" in (out / "session.html").read_text()
    assert sorted(p.name for p in (out / "evaluations").iterdir()) == ["h2-001.html", "h2-002.html"]
    assert "<h2>Decision</h2>" in (out / "evaluations" / "h2-001.html").read_text()
    assert "(no evaluation)" in (out / "evaluations" / "h2-002.html").read_text()
    assert (out / "cycles.png").read_bytes().startswith(b"\x89PNG")


def test_a_session_without_a_finished_cycle_still_gets_every_page(layout, tmp_path):
    layout.summary.write_text("# Autoresearch session: s\n")
    out = tmp_path / "report"
    write_report(
        layout,
        [],
        "fixes kept",
        SessionFacts("sweep", "5 passed"),
        summary=out / "session.html",
        results=out / "results.html",
        evaluations=out / "evaluations",
        plot=out / "cycles.png",
        outcome=out / "outcome",
    )
    assert "(no cycle finished)" in (out / "results.html").read_text()
    assert (out / "evaluations").is_dir() and not any((out / "evaluations").iterdir())
    assert (out / "cycles.png").read_bytes().startswith(b"\x89PNG")


def test_results_page_shows_every_row_of_results_and_usage(layout, tmp_path):
    layout.results.write_text(RESULTS)
    usage_tsv(layout.usage, [("", "001", "red", 0.01), ("", "001", "green", 0.02)])
    table = cycle_table([step(1, kept=2)], layout.usage)
    page = results_page(layout, table, "fixes kept", spend_of(layout.usage))
    assert "4 findings" in page and "2 fixed, 1 skipped" in page  # results.tsv
    assert page.count("<td>finished</td>") == 2  # usage.tsv, one row per agent run
    assert "2 fixes kept over 1 cycle(s); agent cost $0.0300" in page
    assert "<th>track</th>" not in page.split("<h2>results.tsv</h2>")[0]  # one loop: no track


def test_step_labels_name_the_cycle_and_a_broad_track():
    assert step_label("003") == "cycle 003"
    assert step_label("h2-003") == "h2, cycle 003"
    assert step(3, "h2").name == "h2-003" and step(3).name == "003"


# --- the tables, as pandas wrote them --------------------------------------------------------

# What pandas' `to_html(index=False, border=0, float_format="{:.4f}")` wrote for this table
# before the report stopped using it: the pages must read the same without it.
AS_PANDAS_WROTE = """<table class="dataframe">
  <thead>
    <tr style="text-align: right;">
      <th>s</th>
      <th>&lt;i&gt;</th>
      <th>f</th>
    </tr>
  </thead>
  <tbody>
    <tr>
      <td>a</td>
      <td>1</td>
      <td>0.5000</td>
    </tr>
    <tr>
      <td>lead</td>
      <td>22</td>
      <td>1.2346</td>
    </tr>
    <tr>
      <td>trail</td>
      <td>333</td>
      <td>NaN</td>
    </tr>
    <tr>
      <td>&lt;b&gt;&amp;"'</td>
      <td>0</td>
      <td>0.0000</td>
    </tr>
    <tr>
      <td></td>
      <td>-5</td>
      <td>-0.0000</td>
    </tr>
    <tr>
      <td>x\\ny</td>
      <td>1000000000000</td>
      <td>100000000000000000000.0000</td>
    </tr>
  </tbody>
</table>"""


def test_a_table_is_written_cell_for_cell_as_pandas_wrote_it():
    cells = [
        ("a", 1, 0.5),
        ("  lead", 22, 1.23456789),
        ("trail  ", 333, float("nan")),
        ("<b>&\"'", 0, 1e-9),
        ("", -5, -0.00004),
        ("x\ny", 10**12, 1e20),
    ]
    rows = [{"s": s, "<i>": i, "f": f} for s, i, f in cells]
    assert frame_html(Table(["s", "<i>", "f"], rows), "(empty)") == AS_PANDAS_WROTE
    assert frame_html(Table(["s"], []), "(none <yet>)") == "<p>(none &lt;yet&gt;)</p>"


def test_a_session_table_is_read_as_written_every_cell_a_string(tmp_path):
    path = tmp_path / "t.tsv"
    # A quoted cell (the csv module quotes a tab or a quote), a blank line, a short row.
    path.write_text('a\tb\tc\n"x\ty"\t"say ""hi"""\t3\n\nonly\n')
    table = read_tsv(path)
    assert table.columns == ["a", "b", "c"]
    assert table.rows == [{"a": "x\ty", "b": 'say "hi"', "c": "3"}, {"a": "only", "b": "", "c": ""}]
    assert read_tsv(tmp_path / "missing.tsv").rows == []


def test_a_report_and_the_budget_left_import_no_pandas(layout):
    # Snakemake imports pandas itself when it is installed; none of ours may need it.
    probe = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from autoresearch.agents.ledger import session_totals
from autoresearch.session.layout import SessionLayout
from autoresearch.views.session_report import ReportStep, SessionFacts, write_report
layout = SessionLayout(Path({str(layout.root)!r}))
out = layout.report_dir
step = ReportStep("", 1, layout.root / "eval.md", 1, True, 5, 0)
write_report(layout, [step], "fixes kept", SessionFacts("sweep", "5 passed"),
             summary=out / "session.html", results=out / "results.html",
             evaluations=out / "evaluations", plot=out / "cycles.png", outcome=out / "outcome")
session_totals(layout.root)
print("pandas" in sys.modules, (out / "cycles.png").exists())
"""
    layout.summary.write_text("# s\n")
    layout.results.write_text(RESULTS)
    usage_tsv(layout.usage, [("", "001", "red", 0.01)])
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "True"]


def test_the_package_does_not_install_pandas():
    # Installed, pandas is imported by Snakemake at every session's start (a third of a
    # second of CPU, to record the setup checkpoint's params), though nothing uses it.
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = [
        *dependencies["dependencies"],
        *sum(dependencies["optional-dependencies"].values(), []),
    ]
    assert not [d for d in listed if re.match(r"pandas\b", d)]


# --- the per-cycle table -------------------------------------------------------------------


def test_each_cycles_cost_is_the_sum_of_its_agent_runs_track_by_track(layout):
    usage_tsv(
        layout.usage,
        [
            ("h1", "001", "red", 0.25),
            ("h1", "001", "green", 0.5),
            ("h2", "001", "red", 2.0),
            ("h1", "002", "red", 0.125),
        ],
    )
    table = cycle_table([step(1, "h1"), step(2, "h1"), step(1, "h2")], layout.usage)
    cost = {(r.track, r.cycle): (r.cost_usd, r.agent_runs) for r in table}
    assert cost == {("h1", 1): (0.75, 2), ("h1", 2): (0.125, 1), ("h2", 1): (2.0, 1)}


def test_a_cycle_no_agent_ran_in_costs_nothing(layout):
    usage_tsv(layout.usage, [("", "001", "red", 0.5)])
    table = cycle_table([step(1), step(2)], layout.usage)
    assert [r.cost_usd for r in table] == [0.5, 0.0]
    assert [r.agent_runs for r in table] == [1, 0]


def test_tests_column_says_the_verdict_and_the_counts(layout):
    steps = [
        step(1),
        step(2, tests_pass=False, tests_passed=3, tests_failed=2),
        step(3, tests_passed=None, tests_failed=None),
        step(4, tests_pass=None, tests_passed=None, tests_failed=None),
    ]
    table = cycle_table(steps, layout.usage)
    assert [r.tests for r in table] == [
        "pass (5 passed)",
        "FAIL (3 passed, 2 failed)",
        "pass",
        "not run",
    ]


# --- the plot ------------------------------------------------------------------------------


def bar_shapes(ax) -> list[tuple[float, float]]:
    """(centre, height) of every bar of a panel, in the order they were drawn."""
    shapes = []
    for collection in ax.collections:
        for path in collection.get_paths():
            xs, ys = path.vertices[:, 0], path.vertices[:, 1]
            shapes.append((round((xs.min() + xs.max()) / 2, 6), round(ys.max() - ys.min(), 6)))
    return shapes


def bar_heights(ax) -> list[float]:
    return [height for _, height in bar_shapes(ax)]


def test_plot_shows_kept_fixes_tests_and_cost_for_every_cycle(layout):
    usage_tsv(layout.usage, [("", "001", "red", 0.5), ("", "002", "green", 0.25)])
    steps = [step(1, kept=3), step(2, kept=0, tests_pass=False, tests_passed=4, tests_failed=1)]
    fig = cycle_figure(cycle_table(steps, layout.usage), "fixes kept", "s", spend_of(layout.usage))
    kept_ax, tests_ax, cost_ax = fig.axes
    assert bar_heights(kept_ax) == [3, 0]
    assert bar_heights(tests_ax) == [5, 4, 0, 1]  # passed, then failed stacked on top
    assert bar_heights(cost_ax) == [0.5, 0.25]
    for ax, top in ((kept_ax, 3), (tests_ax, 5), (cost_ax, 0.5)):  # every bar in view
        bottom, ceiling = ax.get_ylim()
        assert bottom == 0 and ceiling >= top
    left, right = cost_ax.get_xlim()
    assert left <= 0.6 and right >= 2.4
    assert kept_ax.get_ylabel() == "fixes kept"
    assert "$0.7500" in cost_ax.get_title()


def test_plot_draws_one_bar_per_track_in_each_cycle(layout):
    steps = [step(1, "h1", kept=1), step(2, "h1", kept=2), step(1, "h2", kept=4)]
    fig = cycle_figure(cycle_table(steps, layout.usage), "fixes kept", "s", spend_of(layout.usage))
    kept_ax = fig.axes[0]
    assert sorted(bar_shapes(kept_ax)) == [(0.8, 1), (1.2, 4), (1.8, 2)]  # h1 left of h2
    assert [t.get_text() for t in kept_ax.get_legend().get_texts()] == ["h1", "h2"]


def test_plot_without_test_counts_colours_each_step_by_its_verdict(layout):
    from matplotlib.colors import to_hex

    steps = [
        step(n, tests_pass=ok, tests_passed=None, tests_failed=None)
        for n, ok in ((1, True), (2, False), (3, None))
    ]
    table = cycle_table(steps, layout.usage)
    tests_ax = cycle_figure(table, "changes kept", "s", spend_of(layout.usage)).axes[1]
    colours = [to_hex(c) for c in tests_ax.collections[0].get_facecolors()]
    assert colours == [to_hex("tab:green"), to_hex("tab:red"), to_hex("tab:gray")]
    labels = [t.get_text() for t in tests_ax.get_legend().get_texts()]
    assert labels == ["suite passed", "suite failed", "no test ran"]  # every colour named


# --- the modes' steps ----------------------------------------------------------------------


def decision(cycle: int, track: str = "", fixed: int = 1, tests_pass: bool = True) -> dict:
    return {
        "cycle": cycle,
        "track": track,
        "fixed": [{"id": f"F-{i}"} for i in range(fixed)],
        "tests_pass": tests_pass,
        "tests": {"passed": 6, "failed": 0 if tests_pass else 1},
        "stop": False,
    }


def test_a_sweeps_steps_are_its_cycles_with_their_fixes_and_tests(layout):
    write_json(layout.decision(1), decision(1, fixed=3))
    write_json(layout.decision(2), decision(2, fixed=0, tests_pass=False))
    steps = modes.get("sweep").views.report_steps(layout)
    assert [(s.cycle, s.kept, s.tests_pass, s.tests_failed) for s in steps] == [
        (1, 3, True, 0),
        (2, 0, False, 1),
    ]
    assert steps[0].evaluation == layout.cycle(1) / "eval-results.md"


def test_a_broad_sessions_steps_are_every_tracks_cycles(layout):
    hypotheses = [
        {"id": h, "category": "obvious", "name": h, "statement": "s"} for h in ("h1", "h2")
    ]
    write_json(layout.approved, {"hypotheses": hypotheses})
    write_json(layout.decision(1, "h1"), decision(1, "h1", fixed=2))
    write_json(layout.decision(1, "h2"), decision(1, "h2", fixed=1))
    write_json(layout.decision(2, "h2"), decision(2, "h2", fixed=0))
    steps = modes.get("broad").views.report_steps(layout)
    assert [(s.name, s.kept) for s in steps] == [("h1-001", 2), ("h2-001", 1), ("h2-002", 0)]
    assert steps[2].evaluation == layout.cycle(2, "h2") / "eval-results.md"


def test_an_experiments_steps_are_its_iterations_kept_or_not_with_their_guard(tmp_path):
    experiment = modes.get("experiment")
    layout = experiment.layout(tmp_path / "sessions" / "e")
    baseline = {"value": 10.0, "samples": [10.0], "passed": None}
    write_json(
        layout.experiment_setup,
        {"started_at": "t", "base_commit": "abc", "baseline": baseline},
    )
    for n, status, guard in ((1, "kept", True), (2, "discarded", False), (3, "crash", None)):
        write_json(layout.decision(n), {"iteration": n, "status": status, "guard_ok": guard})
    steps = experiment.views.report_steps(layout)
    assert [(s.cycle, s.kept, s.tests_pass) for s in steps] == [
        (1, 1, True),
        (2, 0, False),
        (3, 0, None),
    ]
    assert (
        steps[0].evaluation == tmp_path / "sessions" / "e" / "iterations" / "001" / "evaluation.md"
    )
    assert experiment.views.kept_label == "changes kept"


# --- the rules' code in the report ---------------------------------------------------------


def test_a_run_blocks_code_is_shown_with_the_job_function_it_calls():
    import scripts.cycle  # noqa: F401 - the rules file imports it before a report is made

    code = job_code("        scripts.cycle.red(wildcards, input, output, log)\n")
    assert code.startswith("scripts.cycle.red(wildcards, input, output, log)\n")
    assert "# scripts/cycle.py\ndef red(wildcards" in code
    assert "teams.red(" in code


def test_a_run_block_calling_no_job_function_is_shown_alone():
    code = job_code('    raise ValueError(f"invalid session name {wildcards.badname!r}")\n')
    assert code == 'raise ValueError(f"invalid session name {wildcards.badname!r}")\n'


def test_every_rule_with_a_run_block_calls_a_job_function_the_report_can_show():
    """A rule whose job function cannot be found would show its one-line call alone."""
    root = Path(__file__).resolve().parents[2]
    calls = set()
    for smk in (root / "rules").glob("*.smk"):
        calls |= set(re.findall(r"scripts\.(\w+)\.(\w+)\(wildcards", smk.read_text()))
    assert len(calls) > 10
    for module, function in sorted(calls):
        importlib.import_module(f"scripts.{module}")  # as rules/common.smk does
        code = job_code(f"scripts.{module}.{function}(wildcards, output, log)\n")
        assert f"def {function}(" in code, f"scripts/{module}.py: {function}"


def test_html_pages_have_a_title_and_a_charset():
    html = page("s: <session.md>", markdown_html("# x\n"))
    assert '<meta charset="utf-8">' in html
    assert "<title>s: &lt;session.md&gt;</title>" in html


# --- the outcome, the kept diffs, what was spent ---------------------------------------------


def usage_rows(path: Path, rows: list[dict[str, str]]) -> None:
    """usage.tsv rows as a backend writes them: zero unless given."""
    lines = ["\t".join(USAGE_COLUMNS)]
    for row in rows:
        values = dict.fromkeys(USAGE_COLUMNS, "0") | {"track": "", "team": "red"} | row
        lines.append("\t".join(values[c] for c in USAGE_COLUMNS))
    path.write_text("\n".join(lines) + "\n")


# What the model-free ruff backend records: a run per team, no request, nothing spent.
KEYLESS = [{"cycle": c, "model": "ruff", "cost_usd": "0.000000"} for c in ("001", "002")]
# A model without a price in the spec: its rows have tokens and an empty cost.
UNPRICED = [
    {"cycle": "001", "model": "new-model", "requests": "3", "input_tokens": "900", "cost_usd": ""},
    {"cycle": "002", "model": "new-model", "requests": "2", "output_tokens": "80", "cost_usd": ""},
]


def write_session(layout: SessionLayout, steps: list[ReportStep], facts: SessionFacts) -> Path:
    """Every page of the report, under the session's report folder."""
    layout.summary.write_text("# Autoresearch session: s\n")
    out = layout.report_dir
    write_report(
        layout,
        steps,
        "fixes kept",
        facts,
        summary=out / "session.html",
        results=out / "results.html",
        evaluations=out / "evaluations",
        plot=out / "cycles.png",
        outcome=layout.report_outcome,
    )
    return layout.report_outcome / "outcome.html"


def test_a_keyless_sessions_plot_has_no_cost_axis(layout):
    usage_rows(layout.usage, KEYLESS)
    spend = spend_of(layout.usage)
    fig = cycle_figure(cycle_table([step(1), step(2)], layout.usage), "fixes kept", "s", spend)
    assert [ax.get_ylabel() for ax in fig.axes] == ["fixes kept", "tests"]
    assert "no model was called" in fig.axes[0].get_title()
    assert spend.text == "nothing: no model was called"


def test_an_unpriced_model_is_not_priced_never_zero_dollars(layout):
    usage_rows(layout.usage, UNPRICED)
    spend = spend_of(layout.usage)
    assert spend.text == "not priced: 5 request(s) to new-model not priced (no price in the spec)"
    table = cycle_table([step(1), step(2)], layout.usage)
    fig = cycle_figure(table, "fixes kept", "s", spend)
    assert [ax.get_ylabel() for ax in fig.axes] == ["fixes kept", "tests", "tokens"]
    assert bar_heights(fig.axes[2]) == [900, 80]  # what was measured: tokens, not a cost
    page = results_page(layout, table, "fixes kept", spend)
    assert "$0" not in page and "cost (USD)" not in page.split("<h2>results.tsv</h2>")[0]


def test_a_priced_and_an_unpriced_model_show_the_cost_and_what_is_not_priced(layout):
    priced = {"cycle": "001", "model": "m", "requests": "1", "cost_usd": "0.500000"}
    usage_rows(layout.usage, [priced, UNPRICED[1]])
    spend = spend_of(layout.usage)
    assert spend.text == "$0.5000, and 2 request(s) to new-model not priced (no price in the spec)"
    table = cycle_table([step(1), step(2)], layout.usage)
    fig = cycle_figure(table, "fixes kept", "s", spend)
    assert fig.axes[2].get_ylabel() == "cost (USD)"
    assert bar_heights(fig.axes[2]) == [0.5, 0.0]


def test_the_outcome_states_mode_stop_kept_tests_metric_and_cost(layout):
    usage_rows(layout.usage, KEYLESS)
    steps = [step(1, kept=2), step(2, kept=1, stopped="max_cycles reached (2)", tests_passed=6)]
    facts = SessionFacts("narrow", "5 passed", MetricChange("lint warnings", 12, 4, "target <= 5"))
    text = write_session(layout, steps, facts).read_text()
    for line in (
        "<strong>Mode:</strong> narrow",
        "<strong>Stopped:</strong> max_cycles reached (2), after 2 cycles",
        "<strong>Kept:</strong> 3 fixes kept over 2 cycles",
        "<strong>Tests:</strong> before: 5 passed; after: pass (6 passed)",
        "<strong>Metric:</strong> lint warnings: before 12, after 4 (target &lt;= 5)",
        "<strong>Cost:</strong> nothing: no model was called",
        "autoresearch finalize s",  # no review set yet: how to make them
    ):
        assert line in text
    # Each evaluation is linked by the path the report registers it under.
    for name in ("001", "002"):
        assert f"results[&quot;sessions/s/report/evaluations/{name}.html&quot;]" in text


def test_a_broad_outcome_says_each_tracks_stop_and_tests(layout):
    steps = [
        step(1, "h1", kept=2, stopped="no findings left"),
        step(1, "h2", kept=0),
        step(2, "h2", kept=1, stopped="max_cycles reached (2)", tests_pass=False, tests_failed=1),
    ]
    text = write_session(layout, steps, SessionFacts("broad", "5 passed")).read_text()
    assert "h1: no findings left, after 1 cycle; h2: max_cycles reached (2), after 2 cycles" in text
    assert "3 fixes kept over 3 cycles (h1 2, h2 1)" in text
    assert "after: h1: pass (5 passed); h2: FAIL (5 passed, 1 failed)" in text


def review_set(layout: SessionLayout, number: int, title: str, **entry) -> dict:
    folder = layout.root / "review"
    folder.mkdir(exist_ok=True)
    (folder / f"{number}.md").write_text(f"# {title}\n\n## Tests\n\n- Verdict: kept\n")
    branch = f"autoresearch/s/review/{number}-x"
    return {"number": number, "branch": branch, "tests_ok": True} | entry


def test_finalizes_review_sets_become_pages_linked_from_the_outcome(layout):
    outcome = write_session(layout, [step(1)], SessionFacts("sweep", "5 passed"))
    sets = [review_set(layout, 1, "Drop os"), review_set(layout, 2, "Typing", only_valid_with=[1])]
    write_json(layout.root / "review" / "branches.json", {"sets": sets})
    add_review_sets(layout)
    text = outcome.read_text()
    assert "results[&quot;sessions/s/report/outcome/review-1.html&quot;]" in text
    assert ">1. Drop os</a> [tests pass]" in text
    assert ">2. Typing</a> [only valid together with set(s) 1]" in text
    assert "autoresearch finalize s" not in text
    assert "<h1>Drop os</h1>" in (layout.report_outcome / "review-1.html").read_text()
    # A rerun of finalize with one set: the other page and its link go.
    write_json(layout.root / "review" / "branches.json", {"sets": sets[:1]})
    (layout.root / "review" / "2.md").unlink()
    add_review_sets(layout)
    assert not (layout.report_outcome / "review-2.html").exists()
    assert "review-2.html" not in outcome.read_text()


def test_agent_text_in_a_review_set_is_shown_as_text_on_the_landing_page(layout):
    outcome = write_session(layout, [step(1)], SessionFacts("sweep", "5 passed"))
    title = "<img src=x onerror=alert(1)> `a` [x](javascript:alert(2))"
    sets = [review_set(layout, 1, title, branch="b<script>")]
    write_json(layout.root / "review" / "branches.json", {"sets": sets})
    add_review_sets(layout)
    text = outcome.read_text()
    assert "<img" not in text and "<script" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    page = (layout.report_outcome / "review-1.html").read_text()
    assert "<img" not in page and "<a " not in page


def test_a_report_made_before_outcomes_is_left_alone_by_finalize(layout):
    write_json(layout.root / "review" / "branches.json", {"sets": []})
    add_review_sets(layout)
    assert not layout.report_outcome.exists()


def commit(repo: Path, path: str, text: str, message: str) -> str:
    (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def test_a_cycles_page_holds_the_diff_of_each_commit_it_kept(layout, tmp_path):
    repo = make_repo(tmp_path / "target", {"app.py": "import os\nimport sys\nX = 1\n"})
    start = git(repo, "rev-parse", "HEAD")
    commit(repo, "app.py", "import sys\nX = 1\n", "fix: [F-001] drop os")
    end = commit(
        repo, "app.py", "X = 1  # <script>alert(1)</script>\n", "fix: [F-002] drop sys <b>"
    )
    commit(repo, "app.py", "X = 2\n", "fix: [F-003] a later cycle's")
    evaluation = layout.cycle(1) / "eval-results.md"
    evaluation.parent.mkdir(parents=True)
    evaluation.write_text("# Evaluation: cycle 001\n\n## Fixed\n- [F-001] drop os\n")
    steps = [ReportStep("", 1, evaluation, 2, True, commits=(start, end), repo=repo)]
    write_session(layout, steps, SessionFacts("sweep", "5 passed"))
    page = (layout.report_dir / "evaluations" / "001.html").read_text()
    assert "<h2>Fixed</h2>" in page  # the evaluation, then what it kept
    assert "2 commit(s), oldest first" in page
    # Each commit's heading: its id, its subject (code spans as code), its size.
    first = 'drop os <span class="size">(+0 \u22121)</span></h3>'
    assert page.index(first) < page.index('drop sys &lt;b&gt; <span class="size">(+1 \u22122)')
    assert "-import os" in page and "-import sys" in page
    assert "<script" not in page and "+X = 1  # &lt;script&gt;" in page  # the diff is text
    assert "F-003" not in page and "X = 2" not in page  # after the cycle's end: not its own


def test_a_cycle_that_kept_nothing_says_so_on_its_page(layout, tmp_path):
    repo = make_repo(tmp_path / "target", {"app.py": "X = 1\n"})
    head = git(repo, "rev-parse", "HEAD")
    steps = [ReportStep("", 1, Path("missing.md"), 0, True, commits=(head, head), repo=repo)]
    write_session(layout, steps, SessionFacts("sweep", "5 passed"))
    page = (layout.report_dir / "evaluations" / "001.html").read_text()
    assert "Nothing: the branch is where the step started" in page


def test_the_results_page_says_the_cpu_of_the_harness_and_of_its_commands_jailed_included(
    layout,
):
    layout.timings.write_text(
        "stage\ttrack\tcycle\twall_s\tcpu_s\tcommands_cpu_s\tfinished\tjailed_cpu_s\n"
        "green\t\t001\t10.0\t0.5\t4.0\tyes\t3.5\n"
        "red\t\t001\t2.0\t0.25\t0.5\tyes\t0.0\n"
        "green\t\t002\t8.0\t0.5\t2.0\tyes\t1.5\n"
    )
    table = cycle_table([step(1), step(2)], layout.usage)
    page = results_page(layout, table, "fixes kept", spend_of(layout.usage))
    cpu = page.split("<h2>Time and CPU</h2>")[1].split("<h2>")[0]
    assert "Harness CPU 1.2 s; the commands it ran 6.5 s CPU, of which 5.0 s in the jail" in cpu
    green = cpu.split("<td>green</td>")[1].split("</tr>")[0]
    assert [c.strip("<td>/ \n") for c in green.split("</td>")][:4] == [
        "18.0000",
        "1.0000",
        "6.0000",
        "5.0000",
    ]


def test_a_timings_file_from_before_the_jailed_cpu_counts_it_as_none(layout):
    layout.timings.write_text(
        "stage\ttrack\tcycle\twall_s\tcpu_s\tcommands_cpu_s\tfinished\n"
        "red\t\t001\t2.0\t0.25\t0.5\tyes\n"
    )
    page = results_page(
        layout, cycle_table([step(1)], layout.usage), "kept", spend_of(layout.usage)
    )
    assert "the commands it ran 0.5 s CPU, of which 0.0 s in the jail" in page


def test_a_caption_gets_link_targets_only_for_the_files_it_names():
    from types import SimpleNamespace

    from scripts.report import _link_only_what_captions_name

    seen = []

    class FileRecord:
        def __init__(self, caption):
            self.raw_caption = caption
            self.workflow = SimpleNamespace(sourcecache=SimpleNamespace(open=_opener))

        def render(self, env, rst_links, categories, files):
            seen.append([f.target for f in files])

    report = SimpleNamespace(FileRecord=FileRecord)
    _link_only_what_captions_name(report)
    _link_only_what_captions_name(report)  # wrapped once, not twice
    files = [SimpleNamespace(target=f"{n:03d}.html") for n in range(1, 1001)]
    FileRecord("Each cycle's evaluation.").render(None, "", {}, files)
    FileRecord("See 002.html_ and `the 7th <007.html>`_ or `010.html`_.").render(
        None, "", {}, files
    )
    FileRecord(None).render(None, "", {}, files)
    assert seen == [[], ["002.html", "010.html"], []]


def _opener(text):
    import io

    return io.StringIO(text)
