"""rules/report.smk: the session's human files rendered for `snakemake --report`, and the
rules' code shown in it."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any

from autoresearch.engine.jobs import run_stage
from autoresearch.session.layout import SessionLayout, rel
from autoresearch.session.spec import SpecReader, load_frozen
from autoresearch.views.session_report import SessionFacts, step_label, write_report

from .common import mode_and_layout

# The job function a `run:` block calls: scripts.<module>.<function>(...)
JOB_CALL = re.compile(r"\bscripts\.(\w+)\.(\w+)\(")


def report_inputs(name: str, checkpoints: Any, read_spec: SpecReader = load_frozen) -> list[str]:
    """What the report is drawn from: the mode's end products (what `done` waits for),
    then, the loop being over, each step's evaluation and the journals many rules write
    (session.md, results.tsv, usage.tsv: `ancient`, no rule makes them)."""
    from snakemake.io import ancient

    checkpoints.session.get(name=name)
    mode, layout = mode_and_layout(name, read_spec)
    products = mode.views.done_inputs(layout, checkpoints)
    steps = [step.evaluation for step in mode.views.report_steps(layout)]
    journals = [layout.summary, layout.results, layout.usage]
    return products + [ancient(rel(p)) for p in steps + journals if p.exists()]


def outputs(layout: SessionLayout) -> list[str]:
    """The report's pages, as `done` asks for them."""
    pages = [layout.report_summary, layout.report_results, layout.report_plot]
    return [rel(p) for p in pages] + [rel(layout.report_evaluations), rel(layout.report_outcome)]


def evaluation_labels(step: str) -> dict[str, str]:
    """How the report lists one evaluation page (`001` or `h1-001`)."""
    return {"evaluation": step_label(step)}


def review_labels(number: str) -> dict[str, str]:
    """How the report lists one review set's page (made by `autoresearch finalize`)."""
    return {"review set": number}


# --- jobs ----------------------------------------------------------------------------


def session_report(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: write_report(
            env.layout,
            mode.views.report_steps(env.layout),
            mode.views.kept_label,
            SessionFacts(
                mode=mode.name,
                tests_before=str((env.record.baseline or {}).get("summary") or "not run"),
                metric=mode.views.report_metric(env),
            ),
            summary=Path(output.summary),
            results=Path(output.results),
            evaluations=Path(output.evaluations),
            plot=Path(output.plot),
            outcome=Path(output.outcome),
        ),
    )


# --- the rules' code in the report -------------------------------------------------------


def show_job_code(workflow: Any) -> None:
    """Make `snakemake --report` show each rule's `run:` block and the job function it calls.

    Snakemake 9.27's report leaves a `run:` rule's code panel empty, although it keeps the
    block's text (`rule.run_func_src`). Our rules are all `run:` blocks calling scripts/, so
    an empty panel hides every rule's code. The report's `RuleRecord.init_source` is wrapped
    when a report is made (importing the report module costs a second, so not at every
    parse); a Snakemake without these names keeps its own behaviour.
    """
    create_report = getattr(workflow, "create_report", None)
    if create_report is None:
        return

    def create_report_with_code(*args: Any, **kwargs: Any) -> Any:
        from snakemake import report

        record = getattr(report, "RuleRecord", None)
        original = getattr(record, "init_source", None)
        if original is not None and not getattr(original, "shows_job_code", False):

            def init_source(self: Any) -> None:
                original(self)
                run_src = getattr(getattr(self, "_rule", None), "run_func_src", None)
                if not self.source and run_src:
                    self.source = job_code(run_src)

            init_source.shows_job_code = True  # type: ignore[attr-defined]
            record.init_source = init_source
        _link_only_what_captions_name(report)
        return create_report(*args, **kwargs)

    workflow.create_report = create_report_with_code


# A reference in reStructuredText: `name_` or `` `a phrase`_ ``.
RST_REFERENCE = re.compile(r"`([^`]+)`_(?!\w)|([\w.+\-/:]+)_(?!\w)")


def _link_only_what_captions_name(report: Any) -> None:
    """Render each caption with link targets for the result files it names, not for all.

    Snakemake 9.27 appends a link target for every result file to every caption before
    handing it to docutils (`FileRecord.render`'s `files`), so a report of n files parses
    n x n targets: 1000 cycles' evaluation pages took 80 s. Our captions name no file
    (report/*.rst), and a caption that does keeps its links: the files its text names."""
    record = getattr(report, "FileRecord", None)
    original = getattr(record, "render", None)
    if original is None or getattr(original, "links_named_only", False):
        return

    def render(self: Any, env: Any, rst_links: str, categories: Any, files: list) -> None:
        named = set()
        if self.raw_caption is not None:
            with self.workflow.sourcecache.open(self.raw_caption) as caption:
                for phrase, word in RST_REFERENCE.findall(caption.read()):
                    named.add(" ".join((phrase or word).split()))
        original(self, env, rst_links, categories, [f for f in files if f.target in named])

    render.links_named_only = True  # type: ignore[attr-defined]
    record.render = render


def job_code(run_src: str) -> str:
    """A `run:` block, then the source of each scripts/ job function it calls."""
    parts = [inspect.cleandoc(run_src)]
    for module, function in JOB_CALL.findall(run_src):
        func = getattr(sys.modules.get(f"scripts.{module}"), function, None)
        if func is None:
            continue
        try:
            source = inspect.getsource(func)
        except (OSError, TypeError):
            continue
        parts.append(f"# scripts/{module}.py\n{source.rstrip()}")
    return "\n\n\n".join(parts) + "\n"
