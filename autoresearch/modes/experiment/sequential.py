"""The sequential keep-or-discard test: screen a candidate on a few paired samples, confirm only
the promising ones, and hold the false-keep rate at alpha over both looks.

Pure: callers hand in the samples they took (or a function that takes one pair), so the
decide stage, the noise benchmark and the unit tests all drive the same code.

The method — a two-look group-sequential one-sided test on paired differences:

* Each pair is one run of the incumbent and one of the candidate, taken together (the caller
  interleaves them and alternates which goes first, so drift and warm-up hit both sides).
  The gain of a pair is ``incumbent - candidate`` for a metric to minimise (the other way for
  one to maximise); the test asks whether the mean gain exceeds ``min_effect``.
* The incumbent was measured in earlier comparisons too. With ``pool`` (on by default) those
  earlier runs (``earlier``: the same commit, the same machine class, one block per
  comparison) join this comparison's fresh incumbent runs in a random-effects estimate of
  the incumbent's level today (incumbent.py: DerSimonian-Laird between-comparison variance,
  the prediction variance of a new block), and the candidate's Yuen trimmed mean is compared
  with it by a one-sided Welch t-test (``scipy.stats.t``): on a steady machine the
  comparison's noise shrinks toward the candidate's alone; on one that drifts the earlier
  blocks disagree with each other and with today's, and count for little.
* The drift test guards the pool: at the screen, both sides' fresh runs are compared with the
  earlier ones by Yuen's trimmed test (``scipy.stats.ttest_ind(equal_var=False, trim=TRIM)``),
  two-sided, at the strict ``drift_alpha``. When they disagree, the pool is dropped and the
  fresh pairs alone decide, by the paired t-test on the gains (``scipy.stats.ttest_1samp``),
  whose pairs share the machine's state; the step says so. Without earlier runs the paired
  test decides too.
* At every look the test's one-sided p-value is compared with that look's nominal level (the
  significance-level approach for an unknown variance).
* Every look may keep: the screen (``screen`` pairs), each confirm look ``batch`` pairs
  later, and the cap (``max_samples`` pairs). Their levels come from Lan and DeMets' error
  spending with the Pocock-type function ``alpha(t) = alpha * ln(1 + (e - 1) t)``,
  ``t = pairs / max_samples``: look k's boundary solves ``P0(no earlier keep, Z_k > c_k) =
  alpha(t_k) - alpha(t_(k-1))`` for the z-statistics of the looks, a Brownian motion sampled
  at the information fractions, by recursive numerical integration (Armitage, McPherson and
  Rowe): the chance of a keep at any look under no effect is exactly ``alpha``.
* At every look before the cap a candidate whose p-value is above ``futility_p`` is dropped
  (the default 0.5: it is not ahead). The drops are non-binding: the bound above ignores
  them, so they only lower the false-keep rate.
* The interval reported with a decision is the repeated confidence interval for the mean gain
  at the look's level (two-sided, ``1 - 2 * level``): at a look that may keep, its lower end
  clears ``min_effect`` exactly when the candidate is kept.

References: K. K. G. Lan and D. L. DeMets (1983), "Discrete sequential boundaries for clinical
trials", Biometrika 70(3):659-663; P. Armitage, C. K. McPherson and B. C. Rowe (1969),
"Repeated significance tests on accumulating data", J. R. Stat. Soc. A 132(2):235-244;
C. Jennison and B. W. Turnbull (2000), "Group Sequential
Methods with Applications to Clinical Trials", Chapman & Hall/CRC (error spending, repeated
confidence intervals, unknown variance); K. K. Yuen (1974), "The two-sample trimmed t for
unequal population variances", Biometrika 61(1):165-170; R. DerSimonian and N. Laird (1986),
"Meta-analysis in clinical trials", Controlled Clinical Trials 7(3):177-188.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from .incumbent import TRIM, Block, Estimate, level_today

MEASURE_MORE = "measure_more"
KEEP = "keep"
DISCARD = "discard"
DIRECTIONS = ("minimize", "maximize")
SPEC_KEYS = ("screen", "max_samples", "alpha", "batch", "futility_p", "pool", "drift_alpha")

PAIRED_TEST = "paired t-test"
POOLED_TEST = "Yuen-Welch trimmed t-test against the random-effects pooled incumbent"
# The incumbent's runs from earlier comparisons: one block per comparison (a flat list is one).
Earlier = Sequence[float] | Sequence[Sequence[float]]


class DesignError(ValueError):
    """A design value is out of range; `key` names the spec key to fix."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"key '{key}': {message}")
        self.key = key
        self.detail = message


@dataclass(frozen=True)
class Design:
    """How a candidate is compared: the looks, their levels, and what counts as a gain."""

    screen: int = 5  # pairs at the first look
    max_samples: int = 40  # pairs at the last look (candidate runs at most)
    alpha: float = 0.05  # one-sided false-keep rate over all looks
    batch: int | None = None  # pairs per confirm look; None takes the screen's size
    futility_p: float = 0.5  # drop before the cap when p > this; 1 never drops
    # Compare with the incumbent's earlier runs as well as the fresh ones, weighed by how well
    # the earlier comparisons agree (random effects): at or below alpha under independent
    # noise, drift and load spikes alike (bench_experiment_noise, docs/experiment.md).
    pool: bool = True
    drift_alpha: float = 0.01  # two-sided level at which fresh runs disagree with the pool
    direction: str = "minimize"
    min_effect: float | str = 0.0  # metric units, or "2%" of the incumbent's mean

    def __post_init__(self) -> None:
        def whole(key: str, value: Any, least: int) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise DesignError(key, f"must be a whole number of at least {least}, got {value!r}")

        # On 2 pairs the t-test has 1 degree of freedom: next to no power at any level.
        whole("screen", self.screen, 3)
        if isinstance(self.max_samples, bool) or not isinstance(self.max_samples, int):
            raise DesignError("max_samples", f"must be a whole number, got {self.max_samples!r}")
        if self.max_samples <= self.screen:
            raise DesignError(
                "max_samples", f"must be more than screen ({self.screen}), got {self.max_samples}"
            )
        if self.batch is None:
            object.__setattr__(self, "batch", self.screen)  # frozen: set once, here
        whole("batch", self.batch, 1)
        if not _number(self.alpha) or not 0 < self.alpha < 0.5:
            raise DesignError("alpha", f"must be a number in (0, 0.5), got {self.alpha!r}")
        if not _number(self.futility_p) or not 0 < self.futility_p <= 1:
            raise DesignError(
                "futility_p",
                f"must be a number in (0, 1] (1 = never drop), got {self.futility_p!r}",
            )
        if not isinstance(self.pool, bool):
            raise DesignError("pool", f"must be true or false, got {self.pool!r}")
        if not _number(self.drift_alpha) or not 0 < self.drift_alpha < 0.5:
            raise DesignError(
                "drift_alpha", f"must be a number in (0, 0.5), got {self.drift_alpha!r}"
            )
        if self.direction not in DIRECTIONS:
            raise DesignError("direction", f"expected minimize or maximize, got {self.direction!r}")
        _margin(self.min_effect, 1.0)  # raises on a malformed "x%"

    @classmethod
    def from_spec(
        cls,
        spec: Mapping[str, Any] | bool | None,
        direction: str = "minimize",
        min_effect: float | str = 0.0,
    ) -> Design:
        """The design of an `experiment.sequential` value: true (defaults) or a mapping."""
        if spec is True or spec is None:
            spec = {}
        if not isinstance(spec, Mapping):
            raise DesignError(
                "sequential", f"write true or a mapping of {', '.join(SPEC_KEYS)}; got {spec!r}"
            )
        unknown = sorted(set(spec) - set(SPEC_KEYS))
        if unknown:
            raise DesignError(unknown[0], f"unknown; known keys: {', '.join(SPEC_KEYS)}")
        return cls(**spec, direction=direction, min_effect=min_effect)

    def to_spec(self) -> dict[str, Any]:
        """The canonical `sequential:` mapping, every key filled in (for session.yaml)."""
        return {key: getattr(self, key) for key in SPEC_KEYS}

    @property
    def looks(self) -> tuple[int, ...]:
        """Pairs taken at each look, first (the screen) to last (the cap)."""
        middle = range(self.screen + self.batch, self.max_samples, self.batch)
        return (self.screen, *middle, self.max_samples)

    @property
    def final_level(self) -> float:
        return self.levels[-1]

    @property
    def levels(self) -> tuple[float, ...]:
        """The one-sided level each look's p-value must beat to keep, in look order."""
        return _levels(self.alpha, self.looks)

    def level_at(self, pairs: int) -> float | None:
        """The one-sided level a look's p-value must beat to keep; None between looks."""
        looks = self.looks
        return self.levels[looks.index(pairs)] if pairs in looks else None

    def margin(self, incumbent_mean: float) -> float:
        """min_effect in metric units: "2%" is 2% of the incumbent's mean."""
        return _margin(self.min_effect, incumbent_mean)


@dataclass(frozen=True)
class Step:
    """What to do after a look: take `pairs` more pairs, keep, or discard — and why."""

    action: str  # MEASURE_MORE, KEEP or DISCARD
    pairs: int  # pairs to take before asking again (MEASURE_MORE only, else 0)
    samples: int  # pairs so far: samples per side
    looks: int  # looks taken so far, this one included
    reason: str = ""
    p_value: float | None = None  # one-sided, gain > min_effect
    level: float | None = None  # what p had to beat to keep at this look
    effect: float | None = None  # mean gain per pair, metric units, good direction positive
    relative_effect: float | None = None  # effect / |incumbent mean|
    ci: tuple[float, float] | None = None  # for the mean gain, at confidence ci_level
    ci_level: float | None = None
    test: str = PAIRED_TEST  # what decided: the paired test or the pooled one
    pooled: int = 0  # earlier incumbent runs the candidate was compared with (0: none)
    drift_p: float | None = None  # the drift test's p-value (fresh runs against the pool)
    pool_dropped: bool = False  # the drift test dropped the pool: the fresh pairs decided
    between_sd: float | None = None  # the level's spread between comparisons (random effects)
    pool_weight: float | None = None  # the earlier runs' share of the incumbent's level
    incumbent_mean: float | None = None  # of the incumbent runs the test compared with

    @property
    def done(self) -> bool:
        return self.action != MEASURE_MORE

    @property
    def kept(self) -> bool:
        return self.action == KEEP

    def describe(self) -> str:
        """One line for the decision log: the reason, the interval and the samples behind it."""
        if self.ci is None or self.ci_level is None:
            return self.reason
        low, high = self.ci
        looks = f"{self.looks} look{'s' * (self.looks != 1)}"
        if self.pooled:
            runs = (
                f"{self.samples} candidate runs against {self.samples + self.pooled} of the "
                f"incumbent ({self.pooled} pooled from earlier comparisons) over {looks}"
            )
        else:
            runs = f"{self.samples} samples per side over {looks}"
        return (
            f"{self.reason}; {self.ci_level:.1%} interval for the gain [{low:.4g}, {high:.4g}]; "
            + runs
        )

    def to_record(self) -> dict[str, Any]:
        """JSON-ready fields for decision.json and experiments.jsonl."""
        data = asdict(self)
        data["ci"] = list(self.ci) if self.ci is not None else None
        return data


@dataclass
class Comparison:
    """A finished comparison: the decision and the paired samples behind it (same order)."""

    step: Step
    candidate: list[float] = field(default_factory=list)
    incumbent: list[float] = field(default_factory=list)


def next_step(
    design: Design,
    candidate: Sequence[float],
    incumbent: Sequence[float],
    earlier: Earlier = (),
) -> Step:
    """The decision after the pairs so far: candidate[i] and incumbent[i] were taken together;
    `earlier` holds the incumbent's runs from earlier comparisons (pooled with `design.pool`).

    Before the first look it asks for the screen; between looks (a resumed run) for the rest
    of the batch; at a look it keeps, discards, or asks for the next batch.
    """
    n = len(candidate)
    if len(incumbent) != n:
        raise ValueError(
            f"paired samples: {n} of the candidate but {len(incumbent)} of the incumbent"
        )
    if n > design.max_samples:
        raise ValueError(f"{n} pairs is more than the design's max_samples {design.max_samples}")
    xs, ys = [float(x) for x in candidate], [float(y) for y in incumbent]
    old = _blocks(earlier) if design.pool else []
    if not all(math.isfinite(v) for v in xs + ys + [v for block in old for v in block]):
        raise ValueError("a sample is not a finite number")
    looks = design.looks
    done = sum(1 for look in looks if look < n)
    if n not in looks:
        upcoming = next(look for look in looks if look > n)
        return Step(MEASURE_MORE, upcoming - n, n, done, "not at a look yet")
    look = done + 1
    sign = 1.0 if design.direction == "minimize" else -1.0
    level = design.level_at(n)
    at = level if level is not None else design.final_level
    drift_p, dropped = _drift(design, xs, ys, [v for block in old for v in block])
    pooled_runs = sum(len(block) for block in old)
    blocks = f"{len(old)} comparison{'s' * (len(old) != 1)}"
    if old and not dropped:
        level_now = level_today(ys, old)
        base = level_now.mean
        margin = design.margin(base)
        p, ci, effect = _pooled_test(xs, level_now, sign, margin, at)
        basis = dict(
            test=POOLED_TEST,
            pooled=pooled_runs,
            between_sd=math.sqrt(level_now.between_var),
            pool_weight=level_now.pool_weight,
        )
    else:
        gains = [sign * (y - x) for x, y in zip(xs, ys, strict=True)]
        base = statistics.fmean(ys)
        margin = design.margin(base)
        p, ci = _test(gains, margin, at)
        effect = statistics.fmean(gains)
        basis = dict(test=PAIRED_TEST, pooled=0)
    common = dict(
        samples=n,
        looks=look,
        p_value=p,
        level=level,
        effect=effect,
        relative_effect=effect / abs(base) if base else None,
        ci=ci,
        ci_level=1 - 2 * at,
        drift_p=drift_p,
        pool_dropped=dropped,
        incumbent_mean=base,
        **basis,
    )
    what = _describe(effect, base, margin)
    if basis["test"] == POOLED_TEST:
        what += (
            f"; {pooled_runs} earlier incumbent runs from {blocks} weigh "
            f"{basis['pool_weight']:.0%} in its level (sd between comparisons "
            f"{basis['between_sd']:.3g})"
        )
    if dropped:
        what += (
            f"; pool of {pooled_runs} earlier incumbent runs from {blocks} "
            f"dropped, the fresh runs disagree with it (drift test at the screen "
            f"p={drift_p:.3g} < {design.drift_alpha:g}): fresh pairs decide"
        )
    if level is not None and p < level:
        stage = {design.screen: "at the screen", design.max_samples: "at the cap"}.get(
            n, f"at look {look} ({n} pairs)"
        )
        return Step(KEEP, 0, reason=f"{what}; kept {stage}: p={p:.4g} < {level:.4g}", **common)
    if n == design.max_samples:
        why = f"within noise after {n} pairs: p={p:.4g} >= {level:.4g}"
    elif p > design.futility_p:
        why = f"dropped after {n} pairs: p={p:.4g} > {design.futility_p:g}"
    else:
        return Step(
            MEASURE_MORE, looks[look] - n, reason=f"{what}; promising, confirming", **common
        )
    return Step(DISCARD, 0, reason=f"{what}; {why}", **common)


def compare(
    design: Design,
    take_pair: Callable[[int], tuple[float, float]],
    candidate: Sequence[float] = (),
    incumbent: Sequence[float] = (),
    earlier: Earlier = (),
) -> Comparison:
    """Take pairs until the design decides. `take_pair(i)` measures pair i (0-based) and returns
    (candidate value, incumbent value); it should alternate which side runs first. Pairs
    already taken (a resumed run) are passed in and not measured again; `earlier` are the
    incumbent's runs from earlier comparisons, for the pool."""
    xs, ys = list(candidate), list(incumbent)
    while not (step := next_step(design, xs, ys, earlier)).done:
        for _ in range(step.pairs):
            x, y = take_pair(len(xs))
            xs.append(x)
            ys.append(y)
    return Comparison(step, xs, ys)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _margin(min_effect: float | str, incumbent_mean: float) -> float:
    if isinstance(min_effect, str):
        text = min_effect.strip()
        try:
            if not text.endswith("%"):
                raise ValueError
            share = float(text[:-1])
        except ValueError:
            raise DesignError(
                "min_effect", f"write a number or a percentage such as '2%', got {min_effect!r}"
            ) from None
        return abs(incumbent_mean) * share / 100
    if not _number(min_effect) or min_effect < 0:
        raise DesignError("min_effect", f"must be a number >= 0, got {min_effect!r}")
    return float(min_effect)


def _test(gains: list[float], margin: float, level: float) -> tuple[float, tuple[float, float]]:
    """One-sided p for mean gain > margin, and the two-sided 1 - 2*level interval."""
    mean = statistics.fmean(gains)
    if max(gains) == min(gains):
        # No spread (a deterministic metric): the t statistic is infinite or undefined, and
        # the sign alone is the evidence.
        return (0.0 if mean > margin else 1.0), (mean, mean)
    from scipy import stats  # deferred: importing scipy costs every Snakemake start ~0.5 s

    result = stats.ttest_1samp(gains, margin, alternative="greater")
    # The one-sided bound at 1 - level is the two-sided interval's lower end; the interval is
    # symmetric about the mean.
    low = float(result.confidence_interval(1 - level).low)
    return float(result.pvalue), (low, 2 * mean - low)


def _drift(
    design: Design, xs: list[float], ys: list[float], old: list[float]
) -> tuple[float | None, bool]:
    """(the drift test's p-value, whether it dropped the pool): taken once, at the screen,
    on both sides' fresh runs against the pool.

    Once, because a test that switches from the pool to the fresh pairs at a later look has
    had two tries at a keep, each at the full level: on a drifting machine 7-9% of the
    comparisons that switched kept a change that does nothing (docs/experiment.md). After
    the screen the random-effects estimate follows today's runs by itself (incumbent.py).
    Both sides, because with no effect the pairs' sums (what the drift test sees) are
    independent of their differences (what the paired test that then decides sees): a drop
    cannot pick the comparisons whose incumbent runs happened to be slow."""
    if not old:
        return None, False
    p = _two_sided(xs[: design.screen] + ys[: design.screen], old)
    return p, p < design.drift_alpha


def _two_sided(a: list[float], b: list[float]) -> float:
    """Yuen's trimmed test that a and b have the same (trimmed) mean: the drift test."""
    if max(a) == min(a) and max(b) == min(b):
        return 1.0 if a[0] == b[0] else 0.0  # deterministic: equal or not
    from scipy import stats

    p = float(stats.ttest_ind(a, b, equal_var=False, trim=TRIM).pvalue)
    return 1.0 if math.isnan(p) else p


def _pooled_test(
    candidate: list[float], level: Estimate, sign: float, margin: float, at: float
) -> tuple[float, tuple[float, float], float]:
    """One-sided p for (trimmed) gain > margin of the candidate over the incumbent's level
    today, the two-sided 1 - 2*at interval for the gain, and the gain (incumbent minus
    candidate when minimising): Yuen's trimmed mean of the candidate against the random-effects
    estimate, Welch-Satterthwaite degrees of freedom."""
    runs = Block.of(candidate)
    effect = sign * (level.mean - runs.mean)
    var = runs.var + level.var
    if var == 0:  # deterministic on both sides: the sign alone is the evidence
        return (0.0 if effect > margin else 1.0), (effect, effect), effect
    from scipy import stats

    df = var**2 / (runs.var**2 / max(runs.df, 1) + level.var**2 / level.df)
    se = math.sqrt(var)
    p = float(stats.t.sf((effect - margin) / se, df))
    half = float(stats.t.isf(at, df)) * se
    return p, (effect - half, effect + half), effect


def _blocks(earlier: Earlier) -> list[list[float]]:
    """The earlier runs as blocks, one per earlier comparison; a flat list is one block."""
    if all(isinstance(v, int | float) for v in earlier):
        return [[float(v) for v in earlier]] if earlier else []
    return [[float(v) for v in block] for block in earlier if len(block)]


def _describe(effect: float, base: float, margin: float) -> str:
    rel = f" ({effect / abs(base):+.2%})" if base else ""
    bar = f" (needed more than {margin:g})" if margin else ""
    return f"mean gain {effect:+.4g}{rel}{bar}"


@lru_cache(maxsize=64)
def _levels(alpha: float, looks: tuple[int, ...]) -> tuple[float, ...]:
    """Nominal one-sided levels of the looks: Lan-DeMets Pocock-type spending, each boundary
    solved on the density of the score S(t) = Z(t) sqrt(t) over the region not yet kept."""
    import numpy as np
    from scipy import integrate, optimize, stats

    cap = looks[-1]
    levels: list[float] = []
    grid = density = None
    before_t = before_spent = 0.0
    for n in looks:
        t = n / cap
        spent = alpha * math.log(1 + (math.e - 1) * t)
        share, step = spent - before_spent, math.sqrt(t - before_t)
        if density is None:
            bound = float(stats.norm.isf(share)) * math.sqrt(t)
        else:

            def crossing(b: float, g=grid, f=density, sd=step) -> float:
                return float(integrate.trapezoid(f * stats.norm.sf((b - g) / sd), g))

            bound = optimize.brentq(
                lambda b, want=share: crossing(b) - want, -20.0, 20.0, xtol=1e-12
            )
        levels.append(float(stats.norm.sf(bound / math.sqrt(t))))
        # The score's density where no look has kept yet: (nearly) all of the mass below.
        below = np.linspace(-10.0 * math.sqrt(t), bound, 501)
        if density is None:
            density = stats.norm.pdf(below / math.sqrt(t)) / math.sqrt(t)
        else:
            kernel = stats.norm.pdf((below[:, None] - grid[None, :]) / step) / step
            density = integrate.trapezoid(density[None, :] * kernel, grid, axis=1)
        grid, before_t, before_spent = below, t, spent
    return tuple(levels)
