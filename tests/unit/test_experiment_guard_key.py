"""The guard key: `none` (in the spec, program.md or a mission's evaluator.json) turns the
default guard off; no key leaves it on; anything but a command is refused by name."""

from __future__ import annotations

import json

import pytest

from autoresearch.modes.experiment.program import from_frozen, resolve
from autoresearch.session.spec import SpecError

PROGRAM = """# Fewer steps

```yaml
target_file: fast.py
eval_command: python measure.py
metric_key: ops
direction: minimize
max_experiments: 3
{guard}
```
"""


def program(tmp_path, guard_line: str):
    (tmp_path / "fast.py").write_text("")
    (tmp_path / "program.md").write_text(PROGRAM.format(guard=guard_line))
    return resolve({"experiment": {"program": "program.md"}}, tmp_path, "s.yaml")


@pytest.mark.parametrize("line", ["guard: none", "guard: None", "guard: false"])
def test_guard_none_in_program_md_turns_the_guard_off_and_survives_freezing(tmp_path, line):
    cfg = program(tmp_path, line)
    assert (cfg.guard, cfg.guard_off) == (None, True)
    assert from_frozen(cfg.to_spec()).guard_off is True


def test_no_guard_key_leaves_the_default_guard_on(tmp_path):
    cfg = program(tmp_path, "")
    assert (cfg.guard, cfg.guard_off) == (None, False)


def test_a_guard_none_in_a_missions_evaluator_json_turns_it_off(tmp_path):
    mission = tmp_path / "m"
    mission.mkdir()
    (mission / "mission.md").write_text("# Fewer steps\n")
    (mission / "evaluator.json").write_text(json.dumps({"command": "python e.py", "guard": "none"}))
    values = {"experiment": {"mission": "m", "scope": ["fast.py"], "max_duration": "1h"}}
    cfg = resolve(values, tmp_path, "s.yaml")
    assert (cfg.guard, cfg.guard_off) == (None, True)


def test_a_guard_that_is_not_a_command_names_the_file_and_key(tmp_path):
    # The refusal names program.md, where the key is written, not the spec that names it.
    with pytest.raises(
        SpecError, match=r"program\.md \(```yaml block\): key 'experiment\.guard': 3"
    ):
        program(tmp_path, "guard: 3")


def test_an_evaluator_json_guard_that_is_not_a_command_names_the_file_and_key(tmp_path):
    mission = tmp_path / "m"
    mission.mkdir()
    (mission / "mission.md").write_text("# Fewer steps\n")
    (mission / "evaluator.json").write_text(json.dumps({"command": "python e.py", "guard": 1}))
    values = {"experiment": {"mission": "m", "scope": ["fast.py"], "max_duration": "1h"}}
    with pytest.raises(SpecError, match=r"evaluator\.json: key 'guard': 1"):
        resolve(values, tmp_path, "s.yaml")
