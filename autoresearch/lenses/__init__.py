"""The lenses' deterministic parts: every rule a lens applies that code, not a model, decides."""
