"""`autoresearch run NAME`: snakemake on the session with a command line fixed by us, its
output in sessions/_runs/NAME.log (what the Claude Code plugin is allowed to start)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

STAND_IN = """\
rule done:
    output:
        "sessions/{name}/done",
    shell:
        "echo made {wildcards.name} > {output}"
"""


def cli(folder, *args):
    return subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", *args],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "Snakefile").write_text(STAND_IN)
    return tmp_path


def test_run_starts_snakemake_on_the_session_and_logs_its_output(folder):
    dry = cli(folder, "run", "x", "--dry-run")
    assert dry.returncode == 0 and "sessions/x/done" in dry.stdout + dry.stderr
    assert not (folder / "sessions" / "x" / "done").exists()
    proc = cli(folder, "run", "x", "--cores", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (folder / "sessions/x/done").read_text() == "made x\n"
    log = (folder / "sessions/_runs/x.log").read_text()
    assert log.startswith("$ snakemake --cores 2 sessions/x/done\n") and "Finished" in log
    said = cli(folder, "status", "x", "--log")
    assert said.returncode == 0 and "Last lines of sessions/_runs/x.log:" in said.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["run", "../x"],
        ["run", "x", "--snakefile", "/tmp/evil.smk"],
        ["run", "x", "--cores", "0"],
        ["run", "x", "--cores", "1", "extra"],
    ],
    ids=["path", "snakefile", "no-cores", "extra-word"],
)
def test_run_refuses_anything_but_a_name_and_cores(folder, args):
    proc = cli(folder, *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert not (folder / "sessions").exists()
