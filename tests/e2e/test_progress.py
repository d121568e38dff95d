"""What a run prints: our own progress lines, on the session's clock, and little else."""

from __future__ import annotations

import datetime as dt
import json
import re

from conftest import script_spec


def test_progress_lines_count_from_the_sessions_start_and_snakemakes_noise_is_left_out(
    workflow, target
):
    values = script_spec(target, workflow.script({}), workflow.workdir / "t.jsonl", max_cycles=1)
    workflow.run("s", values, target="sessions/s/session.yaml")
    setup = workflow.session("s") / "setup.json"
    record = json.loads(setup.read_text())
    began = dt.datetime.fromisoformat(record["started"])
    # As if the session had been set up two hours ago and was resumed now.
    record["started"] = (began - dt.timedelta(hours=2)).isoformat(timespec="seconds")
    setup.write_text(json.dumps(record))
    proc = workflow.run("s", values)
    assert re.search(
        r"\[s\] cycle 1/1 red started \(02:0\d:\d\d elapsed, 0 kept so far\)", proc.stderr
    )
    # Snakemake's falling step counter, its block per job and its host header stay quiet.
    for noise in ("steps (", "jobid:", "wildcards:", "Platform:"):
        assert noise not in proc.stderr, noise
    # Nor its scheduler's two lines per job, once a third of the console.
    assert "Select jobs to execute" not in proc.stderr
    assert not re.search(r"^Execute \d+ jobs", proc.stderr, re.MULTILINE), proc.stderr
