"""In-process gaming: what a candidate's change may not reach for without being flagged.

Each attack is a change to the file the agent may edit that would let a byte-identical,
protected measure script report a better number; each must be flagged, under the check
named. Ordinary optimisations must not be."""

from __future__ import annotations

import pytest
from conftest import make_repo

from autoresearch.modes.experiment.program import from_frozen, resolve
from autoresearch.modes.experiment.stages import check_flags
from autoresearch.safety import git as ar_git
from autoresearch.safety.tamper import (
    CHECKS,
    Flag,
    check_file,
    evaluator_files,
    refusal,
    scan,
    summary,
)
from autoresearch.session.spec import SpecError

BEFORE = (
    "def steps():\n    total = 0\n    for i in range(1000):\n        total += i\n    return 1000\n"
)


def flagged(new: str, old: str | None = BEFORE, path: str = "fast.py", **kw) -> set[str]:
    return {f.check for f in check_file(path, old, new, **kw)}


ATTACKS = {
    "builtins": [
        "import builtins\n_p = builtins.print\nbuiltins.print = lambda *a, **k: _p(1)\n",
        "import builtins as b\nb.print = lambda *a, **k: None\n",
        "from builtins import print as p\n",
        "setattr(__import__('builtins'), 'print', lambda *a: None)\n",
        "__builtins__['print'] = lambda *a: None\n",
        "globals()['__builtins__']['print'] = len\n",
        "import builtins\nsetattr(builtins, 'print', len)\n",
        "import builtins\nvars(builtins)['print'] = len\n",
    ],
    "modules": [
        "import json\njson.dumps = lambda *a, **k: '{\"ops\": 1}'\n",
        "import json as j\nj.dumps = str\n",
        "import sys\nsys.modules['json'] = object()\n",
        "import importlib\nm = importlib.import_module('json')\nm.dumps = str\n",
        "from sys import modules\nmodules['json'].dumps = str\n",
        "exec('import builtins; builtins.print = len')\n",
        "import sys\nsys.path.insert(0, '/tmp/evil')\n",
        "import os.path\nos.path.join = lambda *a: 'x'\n",
        "from json import *\n",
        "x = object()\nsetattr(x, 'y', 1)\n",
        # setattr by other names, and a module reached through an alias or its __dict__.
        "import json\nobject.__setattr__(json, 'dumps', str)\n",
        "import json\ntype(json).__setattr__(json, 'dumps', str)\n",
        "import json\njson.__dict__['dumps'] = str\n",
        "import json\njson.__dict__.update(dumps=str)\n",
        "import json\nvars(json).update(dumps=str)\n",
        "import json\nj = json\nj.dumps = str\n",
        "import sys\nsys.__dict__['modules']['json'] = None\n",
        "import unittest.mock\nunittest.mock.patch('json.dumps', str).start()\n",
        "from unittest import mock\n",
    ],
    "output": [
        "import sys\nsys.stdout = open('/dev/null', 'w')\n",
        "import sys\nsys.stdout.write('{\"ops\": 1}\\n')\n",
        "import os\nos.write(1, b'{\"ops\": 1}\\n')\n",
        "import os\nos.dup2(os.open('/dev/null', os.O_WRONLY), 1)\n",
        "import atexit\natexit.register(lambda: None)\n",
        "print('{\"ops\": 1}')\n",
        "def print(*a, **k):\n    pass\n",
        "f = open('/proc/self/fd/1', 'w')\n",
        "f = open(1, 'w')\n",
        "import subprocess\nsubprocess.run(['echo', '{\"ops\": 1}'])\n",
        "import os\nos.system('echo 1')\n",
        # print reached without a call the check sees, and fd 1 without open().
        "p = print\np('{\"ops\": 1}')\n",
        "import weakref\n\n\nclass A:\n    pass\n\n\nweakref.finalize(A(), print, 'x')\n",
        "import io\nio.FileIO(1, 'w', closefd=False).write(b'{\"ops\": 1}\\n')\n",
        "import sys\ngetattr(sys, 'stdout').write('{\"ops\": 1}\\n')\n",
        # A failing test run that exits 0 anyway, from a cleanup after its report is written.
        "import os\n\n\ndef test_x(request):\n"
        "    request.config.add_cleanup(lambda: os._exit(0))\n",
        "import sys\n\n\ndef test_x(request):\n    request.config.add_cleanup(sys.exit)\n",
        "def stop():\n    raise SystemExit(0)\n",
        "def stop():\n    raise SystemExit\n",
        "import sys\n\n\ndef stop(code):\n    sys.exit(code)\n",
        "f = open('/proc/self/mem', 'wb')\n",
    ],
    "timers": [
        "import time\ntime.perf_counter = lambda: 0.0\n",
        "import time as t\nt.monotonic = lambda: 0.0\n",
        "import time\nsetattr(time, 'time', lambda: 0.0)\n",
        "import datetime\ndatetime.datetime = None\n",
    ],
    "environment": [
        "import os\nos.environ['OPS_SCALE'] = '0'\n",
        "import os\nos.environ.update(OPS_SCALE='0')\n",
        "import os\nos.putenv('OPS_SCALE', '0')\n",
        "from os import environ\nenviron['X'] = '1'\n",
        "import os\ne = os.environ\ne['OPS_SCALE'] = '0'\n",
        "import os\ngetattr(os, 'environ')['OPS_SCALE'] = '0'\n",
        # The test run's argv names the file its report goes to.
        "import sys\nreport = [a for a in sys.argv if a.startswith('--junitxml')]\n",
    ],
    "frames": [
        "import sys\nsys._getframe(1).f_globals['ops'] = 1\n",
        "import inspect\ninspect.currentframe().f_back.f_locals['ops'] = 1\n",
        "import gc\n",
        "import ctypes\n",
        "def f():\n    return f.__globals__\n",
        "x = getattr(object(), 'f_back', None)\n",
        "len.__self__.print = len\n",  # a builtin's __self__ is the builtins module
    ],
}


@pytest.mark.parametrize(
    "check,source", [(check, src) for check, srcs in ATTACKS.items() for src in srcs]
)
def test_an_attack_on_the_measuring_process_is_flagged(check, source):
    assert check in flagged(BEFORE + source)


@pytest.mark.parametrize(
    "source",
    [
        "def steps():\n    return 500\n",
        "import functools\n\n\n@functools.lru_cache\ndef steps():\n    return 500\n",
        "import math\n\n\ndef steps():\n    return int(math.sqrt(250000))\n",
        "class Counter:\n    def __init__(self):\n        self.n = 0\n"
        "        setattr(self, 'm', 1)\n",
        "import time\n\n\ndef steps():\n    t0 = time.perf_counter()\n    return 500\n",
        "import os\n\n\ndef steps():\n    return int(os.environ.get('STEPS', '500'))\n",
        # A frozen dataclass sets its own fields; a subclass calls its parent's.
        "class A:\n    def __post_init__(self):\n        object.__setattr__(self, 'x', 1)\n",
        "class B:\n    def __setattr__(self, k, v):\n        super().__setattr__(k, v)\n",
        "import math\n\nroot = math.sqrt\n\n\ndef steps():\n    return int(root(250000))\n",
        "class A:\n    pass\n\n\nfields = A().__dict__\n",
        "import unittest\n",
        # An exit that can only fail cannot fake a pass.
        "import sys\n\n\ndef die(why):\n    sys.exit('steps: ' + why)\n",
        "def die():\n    raise SystemExit(2)\n",
    ],
)
def test_an_ordinary_optimisation_is_not_flagged(source):
    assert flagged(source) == set()


def test_only_what_the_change_adds_counts():
    old = (
        "import sys\n\n\ndef report():\n    print('x', file=sys.stderr)\n\n\n"
        "def steps():\n    return 1000\n"
    )
    assert flagged(old.replace("1000", "500"), old=old) == set()
    assert flagged(old + "print('again')\n", old=old) == {"output"}


@pytest.mark.parametrize(
    "path,check",
    [
        ("sitecustomize.py", "startup"),
        ("usercustomize.py", "startup"),
        ("evil.pth", "startup"),
        ("conftest.py", "startup"),
        ("tests/conftest.py", "startup"),
        ("pytest.ini", "startup"),
        ("json.py", "shadowing"),
        ("time/__init__.py", "shadowing"),
        ("__pycache__/fast.cpython-311.pyc", "shadowing"),
        ("fast.cpython-311-x86_64-linux-gnu.so", "shadowing"),
    ],
)
def test_a_file_that_loads_itself_or_shadows_a_module_is_flagged(path, check):
    assert check in flagged("x = 1\n", old=None, path=path)


def test_a_new_module_named_like_one_the_evaluator_imports_is_flagged():
    assert flagged("x = 1\n", old=None, path="helpers.py", evaluator_imports={"helpers"}) == {
        "shadowing"
    }
    assert flagged("x = 1\n", old=None, path="extra.py", evaluator_imports={"helpers"}) == set()


def test_a_change_to_the_evaluators_file_is_flagged():
    assert "evaluator" in flagged("print(1)\n", path="measure.py", evaluator=["measure.py"])


@pytest.mark.parametrize(
    "source",
    [
        "open('measure.py', 'w').write('print(1)')\n",
        "from pathlib import Path\nPath('./tools/measure.py').write_text('')\n",
        "import shutil\nshutil.copy('fake.py', 'measure.py')\n",
    ],
)
def test_code_that_names_a_file_of_the_evaluator_is_flagged(source):
    assert "evaluator" in flagged(BEFORE + source, evaluator=["tools/measure.py"])


def test_a_source_encoding_other_than_utf8_is_flagged():
    # Under utf-7 the comment's "+AAo-" is a line break: the interpreter runs the print.
    hidden = "# coding: utf-7\n# +AAo-print('{\"ops\": 1}')\n" + BEFORE
    assert flagged(hidden) == {"modules"}
    assert flagged("# -*- coding: utf-8 -*-\n" + BEFORE) == set()


def test_a_file_that_is_not_utf8_cannot_be_checked_and_is_flagged(tmp_path):
    repo = make_repo(tmp_path / "r", {"fast.py": BEFORE})
    wt = tmp_path / "wt"
    ar_git.add_detached_worktree(repo, wt, ar_git.head(repo))
    tampered = "# coding: latin-1\n# caf\xe9\nimport builtins\nbuiltins.print = len\n" + BEFORE
    (wt / "fast.py").write_bytes(tampered.encode("latin-1"))
    flags = scan(wt, ["fast.py"], ar_git.head(repo))
    assert [(f.check, f.detail) for f in flags] == [
        ("modules", "cannot be read as Python to check it")
    ]


def test_the_file_a_json_file_metric_reads_is_the_evaluators_whether_tracked_or_not(tmp_path):
    repo = make_repo(tmp_path / "r", {"fast.py": BEFORE, "measure.py": "print(1)\n"})
    ar_git.add_detached_worktree(repo, tmp_path / "wt", ar_git.head(repo))
    files = evaluator_files(tmp_path / "wt", ["python measure.py"], [], ["./out/result.json"])
    assert files == ["measure.py", "out/result.json"]
    source = BEFORE + "open('out/result.json', 'w').write('{\"ops\": 1}')\n"
    assert "evaluator" in flagged(source, evaluator=files)


def test_python_that_does_not_parse_cannot_be_checked_and_is_flagged():
    assert flagged("def steps(:\n") == {"modules"}


@pytest.mark.parametrize(
    "source,check",
    [
        ("console.log = () => {};\n", "output"),
        ("process.stdout.write('1');\n", "output"),
        ("Date.now = () => 0;\n", "timers"),
        ("performance.now = () => 0;\n", "timers"),
        ("globalThis.fetch = null;\n", "builtins"),
        ("process.env.X = '1';\n", "environment"),
        ("delete require.cache[k];\n", "modules"),
    ],
)
def test_javascript_reaching_for_the_process_is_flagged(source, check):
    assert check in flagged(source, old="", path="fast.js")


def test_flags_name_the_file_the_line_and_the_check():
    flags = check_file("fast.py", BEFORE, BEFORE + "import time\ntime.perf_counter = lambda: 0\n")
    assert Flag("timers", "fast.py", 7, "rebinds time.perf_counter") in flags
    assert "fast.py:7: rebinds time.perf_counter (timers)" in summary(flags)
    assert all(f.check in CHECKS for f in flags)


# --- the spec keys and the keep rule ---

BASE = {
    "goal": "g",
    "scope": ["a.py"],
    "metric": {"command": "m", "direction": "minimize"},
    "max_iterations": 3,
}


def config(tmp_path, **keys):
    return resolve({"experiment": BASE | keys}, tmp_path, "s.yaml")


@pytest.mark.parametrize(
    "keys,key",
    [({"allow_flagged": "yes"}, "allow_flagged"), ({"max_gain": 0.5}, "max_gain")]
    + [({"max_gain": "half"}, "max_gain")],
)
def test_a_bad_flag_key_names_the_file_and_the_key(tmp_path, keys, key):
    with pytest.raises(SpecError, match=rf"s\.yaml: key 'experiment\.{key}'"):
        config(tmp_path, **keys)


def test_the_flag_keys_survive_the_frozen_spec(tmp_path):
    cfg = config(tmp_path, allow_flagged=True, max_gain=" 50% ")
    assert (cfg.allow_flagged, cfg.max_gain, cfg.max_gain_share()) == (True, "50%", 0.5)
    assert from_frozen(cfg.to_spec()) == cfg


def kept(value: float, baseline: float = 100.0) -> dict:
    return {"metric_value": value, "baseline_value": baseline}


FLAG = {"check": "builtins", "path": "a.py", "line": 3, "detail": "rebinds builtins.print"}


def test_a_kept_change_beyond_max_gain_is_discarded_and_says_what_the_metric_said(tmp_path):
    cfg = config(tmp_path, max_gain="50%")
    rec = kept(40.0)  # 60% better
    status, verdict = check_flags(cfg, rec, {}, "kept", "40 beats 100")
    assert status == "discarded" and verdict.startswith("flagged, not kept: ")
    assert "improves by 60.0%, more than max_gain 50%" in verdict
    assert verdict.endswith("the metric said: 40 beats 100")
    assert [f["check"] for f in rec["flags"]] == ["gain"]


def test_a_gain_within_max_gain_and_without_flags_is_kept(tmp_path):
    cfg = config(tmp_path, max_gain="50%")
    assert check_flags(cfg, kept(60.0), {}, "kept", "ok") == ("kept", "ok")


def test_allow_flagged_keeps_a_flagged_change_and_names_its_flags(tmp_path):
    cfg = config(tmp_path, allow_flagged=True)
    status, verdict = check_flags(cfg, kept(1.0), {"flags": [FLAG]}, "kept", "1 beats 100")
    assert status == "kept"
    assert "kept although flagged (allow_flagged): a.py:3: rebinds builtins.print" in verdict


def test_a_flagged_change_is_refused_before_it_is_measured():
    assert refusal([FLAG], allowed=False).startswith("flagged, not kept: a.py:3: ")
    assert refusal([FLAG], allowed=True) is None
    assert refusal([], allowed=False) is None
