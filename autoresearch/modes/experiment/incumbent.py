"""What the incumbent measures today: its fresh runs and its earlier comparisons' runs
combined by a one-way random-effects model, so a pool taken on a machine that has moved
since counts for as little as the spread between comparisons says it should.

Each earlier comparison's incumbent runs are a block, and so are this comparison's fresh
runs. A block's level is its trimmed mean (BLOCK_TRIM cut from each end) with Yuen's squared
standard error, from one run's winsorized variance pooled over all the blocks (the machine's
noise, the same in each). The blocks may differ by more than that noise (the machine drifts
between iterations): the between-block variance tau^2 is estimated by DerSimonian and
Laird's method of moments. Today's level is then predicted from the earlier blocks with the
random-effects prediction variance ``1 / sum(w) + tau^2`` (a new block has its own random
effect; Higgins, Thompson and Spiegelhalter), and combined with the fresh block by inverse
variance. With no spread between blocks the pool counts in full; with a spread as large as
the noise it counts for little and the fresh runs decide, with no threshold in between.

References: R. DerSimonian and N. Laird (1986), "Meta-analysis in clinical trials",
Controlled Clinical Trials 7(3):177-188; J. P. T. Higgins, S. G. Thompson and D. J.
Spiegelhalter (2009), "A re-evaluation of random-effects meta-analysis", J. R. Stat. Soc. A
172(1):137-159; K. K. Yuen (1974), Biometrika 61(1):165-170.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# The share trimmed from each end of a side: a candidate's 40 runs shed their 4 slowest and
# their 4 fastest, so a few load spikes cannot move its level.
TRIM = 0.1
# An incumbent block is trimmed harder: a block of 5 runs sheds its slowest and its fastest,
# so one spike in one comparison cannot shift the pool that every later candidate meets.
BLOCK_TRIM = 0.2


@dataclass(frozen=True)
class Block:
    """One set of runs taken together: its trimmed mean, the squared standard error of that
    mean (Yuen), and its degrees of freedom."""

    mean: float
    var: float
    df: int

    @classmethod
    def of(cls, values: Sequence[float], spread: float | None = None, trim: float = TRIM) -> Block:
        """`spread`: the runs' winsorized variance when known better than from `values`
        alone (pooled over the blocks of one machine)."""
        xs = sorted(float(v) for v in values)
        n, cut = len(xs), int(trim * len(xs))
        kept = n - 2 * cut
        if spread is None:
            spread = winsorized_variance(xs, trim)
        var = (n - 1) * spread / (kept * (kept - 1)) if kept > 1 else 0.0
        return cls(statistics.fmean(xs[cut : n - cut]), var, max(kept - 1, 0))


def winsorized_variance(values: Sequence[float], trim: float = TRIM) -> float:
    """The variance with the `trim` share at each end replaced by the nearest value kept."""
    xs = sorted(values)
    n, cut = len(xs), int(trim * len(xs))
    if n < 2:
        return 0.0
    wins = [xs[cut]] * cut + xs[cut : n - cut] + [xs[n - cut - 1]] * cut
    return statistics.variance(wins)


@dataclass(frozen=True)
class Estimate:
    """The incumbent's level today and the squared standard error of it."""

    mean: float
    var: float
    df: float  # Welch-Satterthwaite degrees of freedom of `var`
    between_var: float  # tau^2: the variance of the level from block to block
    pool_weight: float  # the earlier blocks' share of `mean` (0: the fresh runs alone)


def between_variance(blocks: Sequence[Block]) -> float:
    """DerSimonian and Laird's moment estimate of tau^2 over `blocks` (0 when the blocks
    agree as well as their noise says they should)."""
    if len(blocks) < 2:
        return 0.0
    weights = [1 / b.var for b in blocks]
    total = sum(weights)
    centre = sum(w * b.mean for w, b in zip(weights, blocks, strict=True)) / total
    q = sum(w * (b.mean - centre) ** 2 for w, b in zip(weights, blocks, strict=True))
    scale = total - sum(w * w for w in weights) / total
    return max(0.0, (q - (len(blocks) - 1)) / scale)


def level_today(fresh: Sequence[float], earlier: Sequence[Sequence[float]]) -> Estimate:
    """Today's level from the `fresh` runs and the `earlier` blocks (each one comparison's
    incumbent runs; blocks of fewer than two runs are left out)."""
    runs = [[float(v) for v in fresh]] + [[float(v) for v in b] for b in earlier if len(b) >= 2]
    # The noise of one run is the machine's, the same in every block: estimated once from all
    # the runs about their own block's level. Weights from each block's own variance would be
    # noisy on 5 runs and favour the blocks that happened to look steady.
    residuals = [v - Block.of(b, 0.0, BLOCK_TRIM).mean for b in runs for v in b]
    spread = winsorized_variance(residuals, BLOCK_TRIM)
    now, *old = [Block.of(b, spread, BLOCK_TRIM) for b in runs]
    if not old or now.var == 0:
        return Estimate(now.mean, now.var, max(now.df, 1), 0.0, 0.0)
    tau2 = between_variance([now, *old])
    weights = [1 / (b.var + tau2) for b in old]
    pooled = sum(w * b.mean for w, b in zip(weights, old, strict=True)) / sum(weights)
    # As a prediction of a new block (today's), the pool carries tau^2 once more.
    predict = 1 / sum(weights) + tau2
    share = (1 / predict) / (1 / predict + 1 / now.var)
    var = 1 / (1 / predict + 1 / now.var)
    mean = share * pooled + (1 - share) * now.mean
    # Satterthwaite: the noise is estimated on all the runs; with a spread between blocks,
    # the pool's part has only as many df as there are blocks to estimate tau^2 from.
    within = sum(len(b) - 1 for b in runs)
    old_df = within if tau2 == 0 else len(old)
    parts = ((share**2) * predict, old_df), (((1 - share) ** 2) * now.var, within)
    df = var**2 / sum(v * v / d for v, d in parts)
    return Estimate(mean, var, df, tau2, share)
