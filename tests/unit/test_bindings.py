"""The names a change removes, read from the code on both sides (bindings.py)."""

from __future__ import annotations

from conftest import git, make_repo

from autoresearch.session.bindings import Removed, removed_names

PROBE = (
    "try:\n    import readline\n    HAVE_READLINE = True\nexcept ImportError:\n"
    "    HAVE_READLINE = False\n\n\ndef profile():\n    return {'readline': HAVE_READLINE}\n"
)


def change(repo, path: str, text: str) -> tuple[str, str]:
    base = git(repo, "rev-parse", "HEAD")
    (repo / path).write_text(text)
    git(repo, "commit", "-qam", "change")
    return base, git(repo, "rev-parse", "HEAD")


def test_every_name_the_diff_removes_is_found_not_only_the_one_a_title_names(tmp_path):
    repo = make_repo(tmp_path / "r", {"bench.py": "from log import sinks, logger\nX = 1\n"})
    base, tip = change(repo, "bench.py", "X = 1\n")
    assert [r.name for r in removed_names(repo, base, tip, ["bench.py"])] == ["logger", "sinks"]


def test_a_name_still_written_in_its_file_or_imported_elsewhere_is_not_unreferenced(tmp_path):
    files = {
        "eco.py": PROBE,
        "util.py": "import textwrap\nimport json\n\n\ndef f():\n    return 1\n",
        "user.py": "from util import textwrap\n",
        "other.py": "import json\n",  # its own json: no reference to util's
    }
    repo = make_repo(tmp_path / "r", files)
    base, tip = change(repo, "eco.py", PROBE.replace("    import readline\n", "    pass\n"))
    assert removed_names(repo, base, tip, ["eco.py"]) == [
        Removed("readline", "eco.py", "import", ("eco.py",))
    ]
    base, tip = change(repo, "util.py", "def f():\n    return 1\n")
    found = {r.name: r for r in removed_names(repo, base, tip, ["util.py"])}
    assert found["textwrap"].still_named_in == ("user.py",)
    assert found["json"].unreferenced


def test_code_this_python_cannot_parse_still_has_its_removed_imports_read(tmp_path):
    py2 = 'import os, sys\nfrom log import (sinks, logger)\nprint "hello"\n'
    repo = make_repo(tmp_path / "r", {"old.py": py2, "README": "text\n"})
    base, tip = change(repo, "old.py", 'import sys\nfrom log import (sinks)\nprint "hello"\n')
    found = removed_names(repo, base, tip, ["old.py", "README"])
    assert [(r.name, r.what) for r in found] == [("logger", "import"), ("os", "import")]


def test_a_file_that_names_the_module_and_the_name_apart_does_not_refer_to_it(tmp_path):
    # python-pathspec: `Optional` removed from pathspec/gitignore.py was "still named in"
    # 16 files, 14 of them Python with its own `typing.Optional` and the word "gitignore".
    files = {
        "pkg/gitignore.py": "from typing import Optional\n\nX = 1\n",
        "pkg/spec.py": "# reads a gitignore\nfrom typing import Optional\n\nY: Optional[int]\n",
        "CHANGES.rst": "- gitignore: Optional patterns.\n",
        "pkg/user.py": "from .gitignore import (\n\tX,\n\tOptional)\n",
        "pkg/dotted.py": "import pkg.gitignore\n\nZ = pkg.gitignore.Optional\n",
        "UPGRADING.rst": "`pkg.gitignore.Optional` is deprecated.\n",
        "pkg/aliased.py": "from pkg import gitignore as gi\n\nW = gi.Optional\n",
        "pkg/starred.py": "from pkg.gitignore import *\n\nV = Optional\n",
    }
    repo = make_repo(tmp_path / "r", files)
    base, tip = change(repo, "pkg/gitignore.py", "X = 1\n")
    [removed] = removed_names(repo, base, tip, ["pkg/gitignore.py"])
    # Prose may mean it in any words: CHANGES.rst stays.
    assert removed.still_named_in == (
        "CHANGES.rst",
        "UPGRADING.rst",
        "pkg/aliased.py",
        "pkg/dotted.py",
        "pkg/starred.py",
        "pkg/user.py",
    )
