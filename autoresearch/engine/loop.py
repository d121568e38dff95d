"""The loop's protocol: the status words, the `Decision` every cycle ends with, the one
writer and one reader of its `decision.json`, and `decide`, the one order a step ends in.

Every mode's loop step ends the same way: the mode's judge (start at the loop's commit,
apply the change, judge it, commit through the protection check or reset), then the stop
rules, the step's results, session.md, and the decision written last (its presence marks
the cycle complete). The file keeps the keys each mode writes today; this module is the
only place that turns it into a record and back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, Self

from autoresearch.errors import SessionError
from autoresearch.session import files


class Status(StrEnum):
    """How a loop step ended. Only `kept` leaves a change on the branch."""

    BASELINE = "baseline"  # experiment 0: the base commit as measured at setup
    KEPT = "kept"
    DISCARDED = "discarded"  # measured, not strictly better
    GUARD_FAILED = "guard_failed"
    HOLDOUT_DISAGREES = "holdout_disagrees"  # the metric kept it, the private holdout did not
    # The metric improved beyond its noise; the holdout did not improve beyond its own.
    HOLDOUT_UNCONFIRMED = "holdout_unconfirmed"
    REVERTED = "reverted"  # kept by its check, undone by the protection or a gate
    REJECTED = "rejected"  # "rejected: suppression": the change hid the problem
    NOT_KEPT = "not kept"  # learn: "not kept: <why>"
    SKIPPED = "skipped"
    CRASH = "crash"
    SYNTAX_ERROR = "syntax_error"
    NO_CHANGE = "no_change"  # the agent ended without handing in a change

    @classmethod
    def read(cls, text: str) -> tuple[Status, str]:
        """The status and its detail from a decision's `status` text ("rejected:
        suppression" → REJECTED, "suppression"). Sessions written before the one spelling
        said "guard failed" and "no change": a resumed one reads them as today's words."""
        word, _, detail = text.partition(": ")
        word = _OLD_SPELLINGS.get(word, word)
        try:
            return cls(word), detail
        except ValueError:
            known = ", ".join(s.value for s in cls)
            raise ValueError(f"status {text!r} is not one of: {known}") from None


_OLD_SPELLINGS = {"guard failed": Status.GUARD_FAILED.value, "no change": Status.NO_CHANGE.value}

# The keys of a decision.json that every loop means the same by; the rest is the mode's.
_COMMON = ("cycle", "track", "start_commit", "end_commit", "status", "tests", "metric")
_COMMON += ("stop", "reason", "usage")


_ABSENT = "absent when unset"  # a field's metadata: the key is written only when set
_RECORD = "a record of its own"  # a field's metadata: its value is that Extra's JSON


class Unset:
    """The value of a `absent(null=True)` field whose key the decision does not have."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()


def absent(null: bool = False) -> Any:
    """A field of a mode's record that some of its decisions do not have (a key only some
    paths set): not required on reading, and not written while it is None. `null`: a key
    whose paths may write it as null (experiment's sequential `ci`): then absent is UNSET,
    and a None read is written back as null, so the file keeps its keys."""
    if null:
        return field(default=UNSET, metadata={_ABSENT: True})
    return field(default=None, metadata={_ABSENT: True})


def record_field(kind: type[Extra]) -> Any:
    """A field whose value is a record of its own (narrow's goal measurement): read into
    `kind` and held to its keys as the decision is, written as its JSON."""
    return field(metadata={_RECORD: kind})


@dataclass(frozen=True)
class Extra:
    """What a mode adds to its decisions, as one record: a subclass's fields are the keys the
    mode writes after the common ones. The one writer checks a decision against it (a key
    missing or unknown is an error naming the file), the one reader reads it back into it."""

    def to_json(self) -> dict[str, Any]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if _ABSENT not in f.metadata or value is not f.default:
                out[f.name] = value.to_json() if isinstance(value, Extra) else value
        return out

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], source: str | Path = "decision", within: str = ""
    ) -> Self:
        """The record of `data`'s keys; `within`: the key that holds them ("narrow."), so an
        error names the key as the file has it."""
        names = [f.name for f in fields(cls)]
        unknown = [k for k in data if k not in names]
        if unknown:
            raise SessionError(
                f"{source}: key '{within}{unknown[0]}' is not one of a {cls.__name__}'s"
            )
        required = (f.name for f in fields(cls) if f.default is f.default_factory is MISSING)
        missing = [name for name in required if name not in data]
        if missing:
            raise SessionError(f"{source}: key '{within}{missing[0]}' missing (a {cls.__name__})")
        values = dict(data)
        for f in fields(cls):
            kind = f.metadata.get(_RECORD)
            if kind is not None and not isinstance(values[f.name], Extra):
                if not isinstance(values[f.name], Mapping):
                    raise SessionError(f"{source}: key '{within}{f.name}' must be a mapping")
                values[f.name] = kind.from_json(values[f.name], source, f"{within}{f.name}.")
        return cls(**values)


@dataclass(frozen=True)
class Keys(Extra, Mapping[str, Any]):
    """A mode's keys that have no record of their own yet: kept as they were read, and read
    like the mapping they are (`decision.extra["fixed"]`)."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def to_json(self) -> dict[str, Any]:
        return dict(self.values)

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], source: str | Path = "decision", within: str = ""
    ) -> Keys:
        return cls(dict(data))


# eq=False: a decision equals the mapping it reads as (Mapping.__eq__), file or dict.
@dataclass(frozen=True, eq=False)
class Decision(Mapping[str, Any]):
    """How one cycle (or iteration) of a loop ended. Read-only; it reads like the JSON it
    is written as (`decision["end_commit"]`), so a reader needs no mode's key list."""

    cycle: int  # the cycle's or iteration's number
    track: str = ""
    start_commit: str | None = None
    end_commit: str | None = None
    status: Status | None = None  # None: the loop has no status word (sweep's cycles)
    status_detail: str = ""  # "suppression" of "rejected: suppression"
    tests: dict[str, Any] | None = None  # the test run the step was judged on
    metric: Any = None
    stop: bool = False
    reason: str | None = None  # why the loop stops (None: it goes on)
    usage: dict[str, Any] | None = None
    extra: Extra = field(default_factory=Keys)  # what the mode adds (a mapping: its Keys)
    # The on-disk keys in their order: a decision read and written again is the same file.
    keys_order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.extra, Extra):
            object.__setattr__(self, "extra", Keys(self.extra))
        object.__setattr__(self, "_json", MappingProxyType(self._build_json()))

    # --- the JSON form ---------------------------------------------------------------

    @property
    def status_text(self) -> str | None:
        if self.status is None:
            return None
        word = self.status.value
        return f"{word}: {self.status_detail}" if self.status_detail else word

    def _build_json(self) -> dict[str, Any]:
        common = {key: getattr(self, key) for key in _COMMON} | {"status": self.status_text}
        extra = self.extra.to_json()
        order = self.keys_order or (*_COMMON, *extra)
        out = {}
        for key in order:
            if key in common:
                out[key] = common[key]
            elif key in extra:
                out[key] = extra[key]
        out.update((k, v) for k, v in extra.items() if k not in out)
        return out

    def to_json(self) -> dict[str, Any]:
        """The decision as decision.json holds it (a fresh dict)."""
        return json.loads(json.dumps(dict(self._json)))

    @classmethod
    def from_json(
        cls,
        data: Mapping[str, Any],
        source: str | Path = "decision",
        extra: type[Extra] = Keys,
    ) -> Decision:
        """The record of a decision.json's (or a mode's decision dict's) keys; the mode's own
        read into `extra`, its record. A status word outside the vocabulary, or a key its
        record does not have or lacks, is an error naming the file."""
        cycle = data.get("cycle", data.get("iteration"))  # an experiment's says both
        if not isinstance(cycle, int):
            raise SessionError(f"{source}: key 'cycle' must be a cycle number")
        status, detail = None, ""
        if data.get("status") is not None:
            try:
                status, detail = Status.read(str(data["status"]))
            except ValueError as err:
                raise SessionError(f"{source}: key 'status': {err}") from None
        return cls(
            cycle=cycle,
            track=data.get("track", ""),
            start_commit=data.get("start_commit"),
            end_commit=data.get("end_commit"),
            status=status,
            status_detail=detail,
            tests=data.get("tests"),
            metric=data.get("metric"),
            stop=bool(data.get("stop", False)),
            reason=data.get("reason"),
            usage=data.get("usage"),
            extra=extra.from_json({k: v for k, v in data.items() if k not in _COMMON}, source),
            keys_order=tuple(data),
        )

    # --- reading it like the file ------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self._json[key]  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[str]:
        return iter(self._json)  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return len(self._json)  # type: ignore[attr-defined]

    @property
    def kept(self) -> bool:
        return self.status is Status.KEPT


class JsonWriter(Protocol):
    """What writes a decision's JSON: a lens's masking writer (lens/output.py)."""

    def json(self, path: Path, data: Any) -> None: ...


def write_decision(
    path: Path,
    decision: Decision | Mapping[str, Any],
    writer: JsonWriter | None = None,
    extra: type[Extra] = Keys,
) -> Decision:
    """decision.json, atomically, and last of a cycle's files: its presence means the cycle
    is complete. `writer`: the mode's masking writer, when the mode masks what it writes;
    `extra`: the mode's record of what it adds, which a decision must match to be written."""
    if isinstance(decision, Decision):
        record = decision
    else:
        record = Decision.from_json(decision, path, extra)
    if writer is not None:
        writer.json(Path(path), record.to_json())
    else:
        files.write_json(Path(path), record.to_json())
    return record


@dataclass(frozen=True)
class Judged:
    """What a mode's judge hands the loop: the step's decision before the stop rules, and
    what writes the step's results (its rows, its evaluation file) once they have spoken."""

    record: dict[str, Any]
    results: Callable[[dict[str, Any]], None] = lambda record: None


class Summary(Protocol):
    """What `decide` asks of a mode's views: session.md with the step being decided."""

    def write_summary(self, env: Any, pending: dict[str, Any] | None = None) -> None: ...


class Strategy(Protocol):
    """What `decide` asks of a mode (modes/base.py has the defaults)."""

    views: Summary

    def apply_policy(self, env: Any, decision: dict[str, Any]) -> None: ...

    def log_line(self, env: Any, decision: Decision) -> str: ...

    def decision_writer(self, env: Any) -> JsonWriter | None: ...

    decision_extra: type[Extra]


def decide(env: Any, mode: Strategy, judge: Callable[[], Judged], decision_out: Path) -> Decision:
    """A loop step's end, in one order for every loop: the mode's judge, its stop rules
    (`apply_policy` sets stop and reason), the decision held to the mode's record, the
    results, session.md, decision.json last, and the step's line in the log."""
    judged = judge()
    mode.apply_policy(env, judged.record)
    # Held to the mode's record before any of the step's files is written: a decision the
    # writer would refuse leaves no results row or session.md that speaks of it either.
    Decision.from_json(judged.record, decision_out, mode.decision_extra)
    judged.results(judged.record)
    mode.views.write_summary(env, judged.record)
    writer = mode.decision_writer(env)
    decision = write_decision(decision_out, judged.record, writer, mode.decision_extra)
    env.log(mode.log_line(env, decision))
    return decision


def read_decision(path: Path, extra: type[Extra] = Keys) -> Decision:
    """The decision a cycle's decision.json holds (the mode's keys read into `extra`)."""
    try:
        data = json.loads(Path(path).read_text())
    except ValueError as err:  # an empty or cut file, bytes that are not text
        raise SessionError(f"{path}: not a decision the harness wrote ({err})") from None
    if not isinstance(data, dict):
        raise SessionError(f"{path}: not a decision the harness wrote (no JSON object)")
    return Decision.from_json(data, path, extra)


def maybe_decision(path: Path) -> Decision | None:
    """The decision at `path`, or None when the cycle has none yet."""
    return read_decision(path) if Path(path).exists() else None
