"""The learn lens's doc validation: every reference a doc makes is checked against the worktree,
generated docs carry a marker, and staleness is measured from commit dates."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from autoresearch.modes.learn.doc_checks import (
    MARKER,
    check_doc,
    config_keys_of,
    freshness,
    heading_slugs,
    is_generated,
    mermaid_problem,
    referenced_files,
    score,
    staleness_days,
    with_marker,
)
from autoresearch.modes.learn.docs import docs_of

PACKAGE = '''\
"""The shop."""

from shop.money import Money as Money

RATE = 0.2


class Cart:
    limit: int = 10

    def __init__(self):
        self.items = []

    def total(self):
        return sum(self.items)


def checkout(cart):
    return cart.total()
'''


@pytest.fixture
def worktree(tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text(PACKAGE)
    (tmp_path / "shop" / "money.py").write_text("class Money:\n    pass\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## Getting started\n")
    (tmp_path / "Makefile").write_text("test:\n\tpytest\n")
    return tmp_path


def failures(report):
    return [(c.kind, c.subject, c.reason) for c in report.failures]


def test_a_doc_whose_references_all_exist_passes_every_check(worktree):
    text = (
        "# Architecture\n\n"
        "`shop.checkout` takes a `shop.Cart`; `shop.Cart.total` and `shop.Cart.items`\n"
        "hold the sum, `shop.money.Money` the amounts and `shop.RATE` the tax\n"
        "(see `shop/money.py`, `Makefile`).\n"
        "Read the [guide](guide.md#getting-started) and [below](#architecture).\n"
    )
    report = check_doc("docs/architecture.md", text, worktree)
    assert failures(report) == []
    assert {c.kind for c in report.checks} == {"size", "symbol", "path", "link"}
    assert report.score == 1.0


def test_a_doc_naming_a_missing_symbol_fails_and_passes_once_it_exists(worktree):
    text = "Call `shop.refund` to give money back.\n"
    report = check_doc("docs/a.md", text, worktree)
    assert failures(report) == [("symbol", "shop.refund", "no refund in shop")]
    (worktree / "shop" / "__init__.py").write_text(PACKAGE + "\n\ndef refund():\n    pass\n")
    assert failures(check_doc("docs/a.md", text, worktree)) == []


def test_a_missing_method_names_its_class(worktree):
    report = check_doc("docs/a.md", "`shop.Cart.empty()` clears it.\n", worktree)
    assert failures(report) == [("symbol", "shop.Cart.empty", "no empty in shop.Cart")]


def test_a_missing_file_fails(worktree):
    report = check_doc("docs/a.md", "See `shop/tax.py` and `setup.cfg`.\n", worktree)
    assert [f[1] for f in failures(report)] == ["shop/tax.py", "setup.cfg"]


def test_a_file_the_code_makes_is_named_by_the_code_and_passes(worktree):
    # A session's files exist in no checkout: the code that writes them is the reference.
    code = 'OUT = "sessions/{name}/summary.md"\n\n\ndef path(n):\n    return f"{n:03d}/plan.json"\n'
    (worktree / "shop" / "out.py").write_text(code)
    text = "It writes `summary.md`, `cycles/NNN/plan.json` and `tally.md`.\n"
    report = check_doc("docs/a.md", text, worktree)
    assert [f[1] for f in failures(report)] == ["tally.md"]
    assert "no code names it" in failures(report)[0][2]


def test_a_file_rewritten_within_one_clock_tick_is_judged_by_its_new_text(worktree):
    # Same size, same modification time: only the text tells the versions apart. An agent
    # that drops the code naming a file must not pass on the strings of the old version.
    out = worktree / "shop" / "out.py"
    out.write_text('OUT = "summary.md"\n')
    text = "It writes `summary.md`.\n"
    assert failures(check_doc("docs/a.md", text, worktree)) == []
    before = out.stat()
    out.write_text('OUT = "summery.md"\n')
    os.utime(out, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert out.stat().st_size == before.st_size
    assert [f[1] for f in failures(check_doc("docs/a.md", text, worktree))] == ["summary.md"]


def test_a_path_inside_a_package_and_a_kind_of_file_are_not_missing(worktree):
    (worktree / "shop" / "lens").mkdir()
    (worktree / "shop" / "lens" / "loop.py").write_text("")
    text = "The loop is `lens/loop.py` (in `shop/`); each run writes a `.json`.\n"
    assert failures(check_doc("docs/a.md", text, worktree)) == []
    assert failures(check_doc("docs/a.md", "See `lens/step.py`.\n", worktree))


def test_a_path_with_a_line_past_the_end_fails(worktree):
    report = check_doc("docs/a.md", "See `shop/money.py:2` and `shop/money.py:9`.\n", worktree)
    assert failures(report) == [
        ("path", "shop/money.py:9", "shop/money.py has 2 lines, not line 9")
    ]


def test_paths_made_at_run_time_can_be_ignored(worktree):
    text = "Results land in `sessions/demo/done`.\n"
    assert failures(check_doc("docs/a.md", text, worktree))
    assert failures(check_doc("docs/a.md", text, worktree, ignore=["sessions/*"])) == []


def test_commands_placeholders_and_foreign_names_are_not_checked(worktree):
    text = "Run `make test` with `<name>`, `os.path.join`, `*.py`, `$HOME`, `https://x.org/a`.\n"
    report = check_doc("docs/a.md", text, worktree)
    assert [c.kind for c in report.checks] == ["size"]


def test_code_in_fences_is_not_checked(worktree):
    text = "```python\nfrom shop import refund  # `shop.refund`\n```\n"
    assert failures(check_doc("docs/a.md", text, worktree)) == []


def test_config_keys_are_checked_against_the_given_config(worktree):
    keys = config_keys_of({"agent": {"backend": "ruff", "models": [{"name": "x"}]}, "mode": "x"})
    assert keys == {"agent", "agent.backend", "agent.models", "agent.models.name", "mode"}
    text = "Set `agent.backend`, `agent.models.name` or `agent.colour`.\n"
    report = check_doc("docs/a.md", text, worktree, config_keys=keys)
    assert failures(report) == [("config-key", "agent.colour", "no config key agent.colour")]


def test_broken_links_and_anchors_fail(worktree):
    text = "[a](missing.md) [b](guide.md#nowhere) [c](#nope) [d](https://example.com/x)\n"
    report = check_doc("docs/a.md", text, worktree)
    assert [f[2] for f in failures(report)] == [
        "link target missing.md does not exist",
        "no heading #nowhere in guide.md",
        "no heading #nope in docs/a.md",
    ]


def test_a_link_outside_the_worktree_fails(worktree):
    report = check_doc("docs/a.md", "[x](../../etc/passwd)\n", worktree)
    assert failures(report)[0][0] == "link"


def test_a_doc_over_the_size_limit_fails(worktree):
    report = check_doc("docs/a.md", "line\n" * 11, worktree, max_lines=10)
    assert failures(report) == [("size", "docs/a.md", "11 lines, more than the limit of 10")]


def test_mermaid_blocks_are_checked(worktree):
    good = "```mermaid\nflowchart LR\n  A[Spec] --> B(Run)\n  subgraph S\n  B --> C\n  end\n```\n"
    bad = "```mermaid\nflowchart LR\n  A[Spec --> B\n```\n"
    assert failures(check_doc("docs/a.md", good, worktree)) == []
    assert failures(check_doc("docs/a.md", bad, worktree)) == [
        ("mermaid", "block at line 1", "unclosed '['")
    ]


@pytest.mark.parametrize(
    "block,problem",
    [
        (["flowchart TD", "A --> B"], None),
        (["%% comment", "sequenceDiagram", "loop every minute", "A->>B: ping", "end"], None),
        (["graph TD", 'A["a (quoted"] --> B'], None),
        (["flowchat TD", "A --> B"], "unknown Mermaid diagram type 'flowchat'"),
        (["flowchart TD"], "the flowchart diagram has nothing in it"),
        (["flowchart TD", "subgraph X", "A --> B"], "1 blocks opened but 0 closed with `end`"),
        (
            ["sequenceDiagram", "alt ok", "A->>B: x", "else", "A->>B: y"],
            "1 blocks opened but 0 closed with `end`",
        ),
        (["flowchart TD", "A --> B)"], "unbalanced ')'"),
        ([], "empty Mermaid block"),
    ],
)
def test_mermaid_problem(block, problem):
    assert mermaid_problem(block) == problem


def test_score_is_the_share_of_checks_passed(worktree):
    good = check_doc("docs/a.md", "`shop.checkout` `shop/money.py`\n", worktree)
    bad = check_doc("docs/b.md", "`shop.nothing`\n", worktree)
    # a: size, symbol, path all pass; b: size passes, symbol fails.
    assert score([good, bad]) == pytest.approx(4 / 5)
    assert score([]) == 1.0


def test_heading_slugs_follow_github_anchors():
    text = "# Getting Started!\n## API: `mask()`\n## Getting Started!\n"
    assert heading_slugs(text) == {"getting-started", "api-mask", "getting-started-1"}


def test_the_marker_tells_a_generated_doc_from_a_person_written_one():
    assert not is_generated("# Notes by a person\n")
    generated = with_marker("# Overview\n")
    assert generated == f"---\n{MARKER}\n---\n\n# Overview\n"
    assert is_generated(generated)
    assert with_marker(generated) == generated


def test_the_marker_joins_existing_front_matter():
    doc = with_marker("---\ntitle: Overview\n---\n# Overview\n")
    assert doc == f"---\ntitle: Overview\n{MARKER}\n---\n# Overview\n"
    assert is_generated(doc)


def test_a_marker_outside_the_front_matter_does_not_count():
    assert not is_generated(f"# Notes\n\n{MARKER}\n")


def test_referenced_files_are_the_code_a_doc_describes(worktree):
    text = "`shop.Cart.total`, `shop.money.Money`, `Makefile`, `shop/nothing.py`, `make test`\n"
    assert referenced_files(text, worktree) == ["shop/__init__.py", "shop/money.py", "Makefile"]


def test_staleness_days_run_from_the_doc_to_the_latest_code_change():
    doc = datetime(2025, 1, 1, tzinfo=UTC)
    code = [doc - timedelta(days=3), doc + timedelta(days=10), doc + timedelta(days=2)]
    assert staleness_days(doc, code) == 10.0
    assert staleness_days(doc, [doc - timedelta(days=1)]) == 0.0
    assert staleness_days(doc, []) == 0.0


@pytest.mark.parametrize(
    "days,label", [(0, "fresh"), (6.9, "fresh"), (7, "stale"), (30, "stale"), (31, "very stale")]
)
def test_freshness_bands(days, label):
    assert freshness(days) == label


ROOT = Path(__file__).resolve().parents[2]
# References of our own docs that no checker can confirm: a user's spec and script named
# as examples, and a class written as a path.
OWN_DOCS_KNOWN = {
    ("docs/architecture.md", "modes/lens/output.Writer"),
    ("docs/architecture.md", "rules/tidy.smk"),  # the twelfth mode's own file, an example
    ("docs/experiment.md", "config/sessions/opt.yaml"),
    ("docs/narrow.md", "config/sessions/latency.yaml"),
    ("docs/narrow.md", "./bench.sh"),
}


def test_this_repositorys_own_docs_pass_every_check_but_the_known_examples(tmp_path):
    # As a learn session sees the checkout: its tracked files, none of a run's sessions/.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, tmp_path / name)
    found = set()
    for doc in docs_of(tmp_path, "docs"):
        report = check_doc(doc, (tmp_path / doc).read_text(), tmp_path)
        found |= {(doc, c.subject) for c in report.failures}
    assert found == OWN_DOCS_KNOWN
