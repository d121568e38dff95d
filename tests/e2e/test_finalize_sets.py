"""`autoresearch finalize` gives a reviewer a few honest pull requests.

One sweep session (script backend) keeps eleven fixes the way a lint sweep over a library
does: five unused imports removed (ruff F401), two unused assignments (F841), two
comparisons to None (E711), one comparison to True (E712), and one change of behaviour
(mean() of nothing). By default the mechanical fixes are grouped by kind, then by rule
family while that is more than four sets; the behaviour change is a set of its own. Each
description states its size first and every name its diff removes; a rerun makes the very
same commits; `--one-set` and `--per-commit` give one set, or one per commit.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import CALC, Workflow, git, make_repo

IMPACT = "Dead code that hides real problems and slows readers down."

MODULES = {
    "m1.py": "import os\n\n\ndef one():\n    return 1\n",
    "m2.py": "import sys\n\n\ndef two():\n    return 2\n",
    # One finding names OrderedDict; its fix removes the whole line, deque too.
    "m3.py": "from collections import OrderedDict, deque\n\n\ndef three():\n    return 3\n",
    # textwrap is still named in README.md after the fix: it is not "dead code".
    "m4.py": "import textwrap\n\n\ndef four():\n    return 4\n",
    "m5.py": "import json\n\n\ndef five():\n    return 5\n",
    "m6.py": "def six():\n    unused = 6\n    return 6\n",
    "m7.py": "def seven():\n    spare = 7\n    return 7\n",
    "m8.py": "def eight(x):\n    if x == None:\n        return 8\n    return x\n",
    "m9.py": "def nine(x):\n    if x == None:\n        return 9\n    return x\n",
    "m10.py": "def ten(flag):\n    if flag == True:\n        return 10\n    return 0\n",
}
FIXED = {
    "m1.py": "def one():\n    return 1\n",
    "m2.py": "def two():\n    return 2\n",
    "m3.py": "def three():\n    return 3\n",
    "m4.py": "def four():\n    return 4\n",
    "m5.py": "def five():\n    return 5\n",
    "m6.py": "def six():\n    return 6\n",
    "m7.py": "def seven():\n    return 7\n",
    "m8.py": MODULES["m8.py"].replace("x == None", "x is None"),
    "m9.py": MODULES["m9.py"].replace("x == None", "x is None"),
    "m10.py": MODULES["m10.py"].replace("flag == True", "flag"),
}
GUARDED = CALC.replace(
    "def mean(values):\n",
    'def mean(values):\n    if not values:\n        raise ValueError("no values")\n',
)
TESTS = (
    "import m1, m2, m3, m4, m5, m6, m7, m8, m9, m10\nfrom calc import mean\n\n\n"
    "def test_all():\n    assert mean([2, 4]) == 3 and m8.eight(None) == 8 and m10.ten(True)\n"
)
# (path, finding title, the fix's summary, the file's new text)
FIXES = [
    ("m1.py", "F401 `os` imported but unused", "Remove unused import: `os`"),
    ("m2.py", "F401 `sys` imported but unused", "Remove unused import: `sys`"),
    ("m3.py", "F401 `collections.OrderedDict` imported but unused", "Remove unused import: "
     "`OrderedDict`"),
    ("m4.py", "F401 `textwrap` imported but unused", "Remove unused import: `textwrap`"),
    ("m6.py", "F841 Local variable `unused` is assigned to but never used",
     "Remove assignment to unused variable `unused`"),
    ("m8.py", "E711 Comparison to `None` should be `cond is None`", "Replace with `cond is None`"),
    ("calc.py", "mean crashes on an empty list", "guard empty mean"),
    ("m5.py", "F401 `json` imported but unused", "Remove unused import: `json`"),
    ("m7.py", "F841 Local variable `spare` is assigned to but never used",
     "Remove assignment to unused variable `spare`"),
    ("m9.py", "E711 Comparison to `None` should be `cond is None`", "Replace with `cond is None`"),
    ("m10.py", "E712 Avoid equality comparisons to `True`", "Replace with `flag`"),
]  # fmt: skip


def script() -> dict:
    red, green = [], []
    for n, (path, title, summary) in enumerate(FIXES, 1):
        args = {"severity": "medium", "title": title, "location": f"{path}:1"}
        args |= {"issue": f"ruff flags {path}.", "impact": IMPACT}
        red.append({"tool": "report_finding", "args": args})
        content = GUARDED if path == "calc.py" else FIXED[path]
        green += [
            {"tool": "write_file", "args": {"path": path, "content": content}},
            {"tool": "finish_fix", "args": {"finding_id": f"F-{n:03d}", "summary": summary}},
        ]
    return {"red": {1: red}, "green": {1: green}}


def finalize(wf: Workflow, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "finalize", "s", *extra],
        cwd=wf.workdir,
        env=wf.env(),
        capture_output=True,
        text=True,
        timeout=900,
    )


def branches(target) -> dict[str, str]:
    out = git(target, "for-each-ref", "--format=%(refname:short) %(objectname)",
              "refs/heads/autoresearch/s/review/")  # fmt: skip
    return dict(line.split() for line in out.splitlines())


def sets_of(wf: Workflow) -> list[dict]:
    record = wf.session("s") / "review" / "branches.json"
    return json.loads(record.read_text())["sets"] if record.exists() else []


def texts(wf: Workflow) -> dict[int, str]:
    folder = wf.session("s") / "review"
    return {e["number"]: (folder / f"{e['number']}.md").read_text() for e in sets_of(wf)}


def run(session, name: str):
    """What finalize run `name` of the fixture left: its process, branches, sets, texts."""
    proc, *left = session[3][name]
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return (proc, *left)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """The session run to its end, then finalized: by default, again unchanged, with
    --per-commit and with --one-set; what each left, as it left it."""
    tmp = tmp_path_factory.mktemp("sets")
    files = {"calc.py": CALC, **MODULES, "tests/test_all.py": TESTS}
    files["README.md"] = "m4 wraps text with textwrap.\n"
    target = make_repo(tmp / "target", files)
    subprocess.run(["git", "init", "-q", "--bare", str(tmp / "remote.git")], check=True)
    git(target, "remote", "add", "origin", str(tmp / "remote.git"))
    wf = Workflow(tmp / "work")
    spec = {
        "mode": "sweep",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "max_cycles": 1,
        "teams": ["red", "green"],
        "test_gate": "per_fix",
        "agent": {"backend": "script", "script": str(wf.script(script()))},
    }
    wf.run("s", spec)
    runs = {}
    for name, extra in [
        ("kind", ()),
        ("again", ()),
        ("commit", ("--per-commit",)),
        ("one", ("--one-set",)),
    ]:
        proc = finalize(wf, *extra)
        # Each test says which run it reads (run() checks that one finished).
        runs[name] = (proc, branches(target), sets_of(wf), texts(wf))
    setup = json.loads((wf.session("s") / "setup.json").read_text())
    return wf, target, setup, runs


def test_the_session_kept_all_eleven_fixes(session):
    _, target, setup, _ = session
    kept = git(target, "rev-list", f"{setup['base_commit']}..{setup['branch']}").split()
    assert len(kept) == 11


def test_mechanical_fixes_are_grouped_by_kind_and_a_behaviour_change_stands_alone(session):
    _, tips, sets, _ = run(session, "kind")
    assert len(sets) <= 4
    files = [e["files"] for e in sets]
    # More than four kinds (F401, F841, E711, E712 and the behaviour change): by family.
    assert files == [
        ["m1.py", "m2.py", "m3.py", "m4.py", "m5.py", "m6.py", "m7.py"],
        ["m10.py", "m8.py", "m9.py"],
        ["calc.py"],
    ]
    assert all(e["tests_ok"] for e in sets)
    assert set(tips) == {e["branch"] for e in sets}


def test_no_review_branch_carries_an_empty_commit(session):
    _, target, setup, _ = session
    for name in ("kind", "commit", "one"):
        for tip in run(session, name)[1].values():
            for sha in git(target, "rev-list", f"{setup['base_commit']}..{tip}").split():
                changed = git(target, "diff-tree", "-r", "--name-only", "--no-commit-id", sha)
                assert changed.strip(), f"{sha} of {name} changes nothing"


def test_titles_say_what_each_set_does(session):
    proc, _, sets, texts = run(session, "kind")
    titles = [texts[e["number"]].splitlines()[0] for e in sets]
    assert titles == [
        "# Remove unused import; remove assignment to unused variable (F401, F841: "
        "7 changes in 7 files)",
        "# Replace with `cond is None`; replace with `flag` (E711, E712: 3 changes in 3 files)",
        "# guard empty mean",
    ]
    for title in titles:
        assert "more commit" not in title
        assert title.removeprefix("# ") in proc.stdout  # the gh pr create --title too


def test_each_description_states_its_size_first(session):
    _, target, setup, _ = session
    base = setup["base_commit"]
    _, _, sets, texts = run(session, "kind")
    for entry in sets:
        rows = git(target, "diff", "--numstat", base, entry["tip"]).splitlines()
        added = sum(int(r.split("\t")[0]) for r in rows)
        deleted = sum(int(r.split("\t")[1]) for r in rows)
        n = len(entry["commits"])
        size = (
            f"**+{added} \u2212{deleted} lines in {len(rows)} file{'s' if len(rows) > 1 else ''}"
            f", {n} commit{'s' if n > 1 else ''}.**"
        )
        assert texts[entry["number"]].splitlines()[2] == size
    # And each commit's own size beside it.
    assert "Remove unused import: `os` (+0 \u22123)" in texts[1]


def test_every_removed_name_is_listed_from_the_diff(session):
    _, _, _, texts = run(session, "kind")
    text = texts[1]
    names = re.findall(r"^- `([^`]+)` \(", text.split("## Names removed")[1], re.M)
    assert names == ["os", "sys", "OrderedDict", "deque", "textwrap", "json", "unused", "spare"]
    assert "- `deque` (import, m3.py): named nowhere else in the tree" in text
    assert "- `textwrap` (import, m4.py): still named in README.md" in text


def test_nothing_is_called_dead_code_while_a_reference_exists(session):
    _, _, _, texts = run(session, "kind")
    assert "textwrap" in texts[1]
    assert not re.search(r"\bdead\b", texts[1], re.I)


def test_a_rerun_on_an_unchanged_session_makes_the_same_commits(session):
    assert run(session, "again")[1] == run(session, "kind")[1]
    assert run(session, "again")[3] == run(session, "kind")[3]


def test_a_second_push_of_an_unchanged_session_needs_no_force(session, tmp_path):
    wf, target, _, _ = session
    remote = target.parent / "remote.git"
    pushed = []
    for _ in range(2):
        proc = finalize(wf, "--push")
        assert proc.returncode == 0, proc.stderr + proc.stdout
        assert "failed" not in proc.stdout  # a rejected (non-fast-forward) push says so
        pushed.append(git(remote, "for-each-ref", "--format=%(refname:short) %(objectname)"))
    assert pushed[0] and pushed[1] == pushed[0]
    assert pushed[0].split() == " ".join(f"{b} {t}" for b, t in branches(target).items()).split()


def test_per_commit_gives_a_set_per_commit(session):
    _, tips, sets, texts = run(session, "commit")
    assert [len(e["commits"]) for e in sets] == [1] * 11
    assert texts[1].splitlines()[0] == "# Remove unused import: `os`"


def test_one_set_gives_one_branch_with_everything(session):
    _, target, setup, _ = session
    _, tips, sets, _ = run(session, "one")
    assert len(sets) == 1 and len(sets[0]["commits"]) == 11
    title = run(session, "one")[3][1].splitlines()[0]
    assert title == "# guard empty mean; lint fixes (F401, F841, E711, E712)"
    assert git(target, "rev-parse", f"{sets[0]['tip']}^{{tree}}") == git(
        target, "rev-parse", f"{setup['branch']}^{{tree}}"
    )


# --- the pages, as a browser shows them -----------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,1600",
]


class Shown(HTMLParser):
    """What a page's DOM, as Chromium left it, shows: its text outside <pre>, the deepest
    nesting of its lists, its headings and the top-level items of each list."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.headings: list[str] = []
        self.items: list[str] = []  # every <li>'s own text, before any list inside it
        self.depth = self.deepest = self.pre = 0
        self.open: list[str] = []  # the elements whose text is being gathered

    def handle_starttag(self, tag, attrs):
        if tag == "ul":
            self.depth += 1
            self.deepest = max(self.deepest, self.depth)
            if self.open and self.open[-1] == "li":
                self.items.append(self.open_text.strip())
                self.open.pop()
        self.pre += tag == "pre"
        if tag in ("h1", "h2", "h3", "title", "li"):
            self.open.append(tag)
            self.open_text = ""

    def handle_endtag(self, tag):
        self.depth -= tag == "ul"
        self.pre -= tag == "pre"
        if self.open and self.open[-1] == tag:
            self.open.pop()
            (self.items if tag == "li" else self.headings).append(self.open_text.strip())

    def handle_data(self, data):
        if not self.pre:
            self.text.append(data)
        if self.open:
            self.open_text += data


def look(page: Path, png: Path, tmp: Path) -> Shown:
    """The page opened in headless Chromium, each run with a fresh profile: a screenshot
    to look at, and the DOM it rendered."""
    runs = []
    for n, out in enumerate((f"--screenshot={png}", "--dump-dom")):
        profile = f"--user-data-dir={tmp / f'profile-{png.stem}-{n}'}"
        runs.append(
            subprocess.run(
                [str(CHROMIUM), *FLAGS, profile, out, page.as_uri()],
                capture_output=True,
                text=True,
                timeout=300,
            )
        )
    assert png.exists() and png.stat().st_size > 0, runs[0].stderr[-2000:]
    shown = Shown()
    shown.feed(runs[1].stdout)
    assert shown.headings, runs[1].stderr[-2000:]
    return shown


SIZE = "[(]\\+\\d+ \u2212\\d+[)]"


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="no /usr/bin/chromium to look at the pages: apt-get install chromium",
)
def test_the_pages_in_a_browser_nest_lists_show_no_backticks_and_size_each_commit(
    session, tmp_path
):
    wf, _, _, _ = session
    proc = finalize(wf)  # the default sets again (the fixture's last run was --one-set)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report = wf.session("s") / "report"
    shots = tmp_path / "shots"
    shots.mkdir()
    print(f"screenshots in {shots}")
    pages = {
        "session": report / "session.html",
        "cycle": report / "evaluations" / "001.html",
        "review": report / "outcome" / "review-1.html",
        "outcome": report / "outcome" / "outcome.html",
    }
    seen = {name: look(page, shots / f"{name}.png", tmp_path) for name, page in pages.items()}
    for name, shown in seen.items():
        assert "`" not in "".join(shown.text), name
    # The review page: each commit an item, its notes a list inside it, its size beside it.
    review = seen["review"]
    assert review.deepest == 2
    commits = [i for i in review.items if re.match(r"^[0-9a-f]{12} fix: ", i)]
    assert len(commits) == 7
    assert all(re.search(SIZE + "$", item) for item in commits)
    # The cycle's page and the session's page size every kept commit beside its title.
    kept = [h for h in seen["cycle"].headings if re.match(r"^[0-9a-f]{12} fix: ", h)]
    assert len(kept) == 11 and all(re.search(SIZE + "$", h) for h in kept)
    listed = [i for i in seen["session"].items if i.startswith("cycle 001: ")]
    assert len(listed) == 11 and all(re.search(SIZE + "$", i) for i in listed)
    assert "Remove unused import: os (+0 \u22123)" in " ".join(listed)
    # The landing page: each set's size beside its title.
    sets = [i for i in seen["outcome"].items if re.match(r"^\d+\. ", i)]
    assert len(sets) == 3
    assert all(re.search(r" \(\+\d+ \u2212\d+ lines, \d+ files?\) \[tests pass\]", i) for i in sets)
    assert sets[0].startswith("1. Remove unused import; remove assignment to unused variable")
