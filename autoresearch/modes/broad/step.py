"""What a broad track's cycle adds to its decision: the cycle's record
(cycle_step.CycleStep), the track's status for the hypotheses table, and what was seen."""

from __future__ import annotations

from dataclasses import dataclass

from autoresearch.engine.cycle_step import CycleStep


@dataclass(frozen=True, kw_only=True)
class TrackStep(CycleStep):
    track_status: str  # in-progress | complete | aborted
    observations: str  # the cycle against its hypothesis, as eval-results.md shows it
