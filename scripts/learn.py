"""rules/learn.smk's Python half: the learn lens's loop, by name.

`learn_write` is a loop step, so its job is the one decide job (scripts/step.py) and its
inputs come from the input functions every loop shares (`state`, `previous_step`, in
rules/common.smk); what the lens does is autoresearch/modes/learn/.
"""

from __future__ import annotations

LOOP = "learn"  # the folder of its steps: sessions/<name>/learn/NNN/
