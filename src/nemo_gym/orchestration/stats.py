"""Did the candidate run of a benchmark score better than the base run, beyond chance? No I/O here.

Both runs answer the same tasks, so the comparison is paired: per-task differences, not two
independent means. A task is the unit (its repeats are averaged first: repeats of one task are not
independent samples); where related tasks form a group, the group is the unit (clustered).

Which test, and why (figures from ``benchmarks/suite_statistics.py``, seeded):

- Every per-task value 0 or 1 (one repeat of a pass/fail metric): McNemar's exact test, a binomial
  test of the tasks that flipped each way. Exact at any number of tasks.
- Otherwise (repeats averaged, graded scores): a paired t-test on the per-task differences, whose
  size it uses. The sign test used before saw only directions: on 200 tasks x 16 repeats it found
  a true drop of 0.03 in 66 % of trials where the t-test finds it in 74 %.
- Fewer than ``PERMUTATION_BELOW`` units: the t-test leans on the central limit theorem, which a
  handful of skewed differences does not reach, so a sign-flip permutation test of the mean
  difference takes its place (exact under the null of "the same model": each difference is then
  symmetric about 0). Enumerated when 2^n is small, else drawn (seeded).

The confidence interval of the mean delta comes from the same differences (a t interval, with the
clustered standard error where there are groups), so the verdict, the CI and the smallest
detectable drop (``PairedComparison.detectable_drop``) tell one story. A verdict over several
benchmarks at once needs their p-values adjusted together: ``adjust``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

IMPROVED = "improved"
REGRESSED = "regressed"
NO_SIGNIFICANT_CHANGE = "no significant change"
NO_COMMON_TASKS = "no common tasks"


class Test(str, Enum):
    """The test behind a p-value."""

    MCNEMAR_EXACT = "mcnemar-exact"
    PAIRED_T = "paired-t"
    CLUSTERED_T = "clustered-t"
    PERMUTATION = "sign-flip permutation"


class Correction(str, Enum):
    """How the p-values of benchmarks judged together are adjusted."""

    HOLM = "holm"  # family-wise error (any false alarm) <= alpha: for gates
    BH = "bh"  # false discovery rate <= alpha (Benjamini-Hochberg): for exploring
    NONE = "none"  # each benchmark on its own

    @property
    def label(self) -> str:
        """Its name as a sentence says it: ``Holm``, ``Benjamini-Hochberg``, ``no correction``."""
        return {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no correction"}[self.value]


MCNEMAR_EXACT = Test.MCNEMAR_EXACT
PAIRED_T = Test.PAIRED_T
CLUSTERED_T = Test.CLUSTERED_T
PERMUTATION = Test.PERMUTATION

# Below this many units (tasks, or groups) the p-value comes from the permutation test.
PERMUTATION_BELOW = 30
# Sign patterns enumerated up to this many (2^16); above it drawn, this many, from the seed.
EXACT_PERMUTATIONS = 1 << 16
DRAWN_PERMUTATIONS = 20_000
DEFAULT_POWER = 0.8

# Bootstrap indices drawn per chunk (about 2 MB): bounds memory, and is as fast as one big draw.
_CHUNK_ELEMENTS = 1 << 18


@dataclass(frozen=True)
class PairedComparison:
    """The outcome of comparing two runs over the tasks both have.

    ``delta`` and ``ci`` are candidate minus base. ``improved``/``regressed``/``unchanged`` count
    tasks whose per-task mean went up / down / stayed identical. ``standard_error`` and ``df`` are
    those of the mean delta (clustered by group when ``groups`` is set). Means, delta, CI and
    p-value are None when no task is in both runs.
    """

    n: int
    base_mean: float | None
    candidate_mean: float | None
    delta: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    test: Test | None
    verdict: str  # at ``alpha`` on this benchmark alone: IMPROVED, REGRESSED, NO_SIGNIFICANT_CHANGE, NO_COMMON_TASKS
    improved: int
    regressed: int
    unchanged: int
    improved_tasks: tuple[int, ...]
    regressed_tasks: tuple[int, ...]
    only_in_base: int  # tasks left out of the comparison: a sign that one run is incomplete
    only_in_candidate: int
    confidence: float
    alpha: float
    standard_error: float | None = None
    df: int | None = None
    groups: int | None = None  # clusters the standard error was computed over; None: tasks
    value_range: float = 1.0  # the spread of the scores seen, for the detectable drop's floor
    seed: int = 0

    def detectable_drop(self, alpha: float | None = None, power: float = DEFAULT_POWER) -> float | None:
        """The smallest change this pair detects with probability ``power`` at a two-sided level
        ``alpha`` (default: the comparison's): (t_{1-alpha/2} + t_{power}) x the standard error.

        Where the count of tasks decides (McNemar's test, or nothing moved: the observed standard
        error is 0, yet 10 tasks cannot show a drop of 0.01), never below ``floor_drop``.
        """
        if self.n == 0 or self.standard_error is None or self.df is None:
            return None
        return minimum_detectable_effect(
            self.standard_error,
            self.df,
            self.groups or self.n,
            self.value_range,
            alpha or self.alpha,
            power,
            counts_only=self.test is Test.MCNEMAR_EXACT,
        )

    def significant(self, p_value: float | None) -> str:
        """The verdict a (possibly adjusted) p-value gives this comparison's delta."""
        return verdict_of(p_value, self.delta, self.alpha)


def paired_comparison(
    base: Mapping[int, float],
    candidate: Mapping[int, float],
    *,
    confidence: float = 0.95,
    seed: int = 0,
    alpha: float = 0.05,
    groups: Mapping[int, str] | None = None,
) -> PairedComparison:
    """Compare per-task scores (task index -> mean over its rollouts) of two runs.

    The verdict is "improved" or "regressed" when the test's p < ``alpha``, in the direction of the
    mean delta (the number people report); otherwise "no significant change". ``groups`` (task ->
    group) clusters the standard error by group: related tasks are not independent evidence.

    Deterministic (the drawn permutations come from ``seed``). Swapping ``base`` and ``candidate``
    negates delta and CI exactly and swaps improved and regressed.
    """
    _check_level("confidence", confidence)
    _check_level("alpha", alpha)
    common = sorted(base.keys() & candidate.keys())
    base_values = _finite_scores(base, common, "base")
    candidate_values = _finite_scores(candidate, common, "candidate")
    deltas = [c - b for b, c in zip(base_values, candidate_values)]
    counted = _counted(common, deltas, base, candidate, confidence, alpha, seed)
    if not common:
        return counted
    base_mean, candidate_mean = _mean(base_values), _mean(candidate_values)
    delta = candidate_mean - base_mean
    units = _units(common, deltas, groups)
    se, df = clustered_standard_error(units, len(common))
    scores = base_values + candidate_values
    test, p_value = _test(units, len(common), scores, counted.improved, counted.regressed, seed)
    half = _t_quantile(1 - (1 - confidence) / 2, df) * se
    spread = max(scores) - min(scores)
    return replace(
        counted,
        base_mean=base_mean,
        candidate_mean=candidate_mean,
        delta=delta,
        ci=(delta - half, delta + half),
        p_value=p_value,
        test=test,
        verdict=verdict_of(p_value, delta, alpha),
        standard_error=se,
        df=df,
        groups=len(units) if groups is not None else None,
        value_range=spread if spread > 0 else 1.0,
    )


def _counted(
    tasks: Sequence[int],
    deltas: Sequence[float],
    base: Mapping[int, float],
    candidate: Mapping[int, float],
    confidence: float,
    alpha: float,
    seed: int,
) -> PairedComparison:
    """The comparison's counts (tasks up, down, unchanged, in one run only), nothing tested yet."""
    improved = tuple(t for t, d in zip(tasks, deltas) if d > 0)
    regressed = tuple(t for t, d in zip(tasks, deltas) if d < 0)
    return PairedComparison(
        n=len(tasks),
        base_mean=None,
        candidate_mean=None,
        delta=None,
        ci=None,
        p_value=None,
        test=None,
        verdict=NO_COMMON_TASKS,
        improved=len(improved),
        regressed=len(regressed),
        unchanged=len(tasks) - len(improved) - len(regressed),
        improved_tasks=improved,
        regressed_tasks=regressed,
        only_in_base=len(base.keys() - candidate.keys()),
        only_in_candidate=len(candidate.keys() - base.keys()),
        confidence=confidence,
        alpha=alpha,
        seed=seed,
    )


def verdict_of(p_value: float | None, delta: float | None, alpha: float) -> str:
    if p_value is None or delta is None:
        return NO_COMMON_TASKS
    if p_value < alpha and delta > 0:
        return IMPROVED
    if p_value < alpha and delta < 0:
        return REGRESSED
    return NO_SIGNIFICANT_CHANGE


@dataclass(frozen=True)
class Unit:
    """An independent unit of evidence: one task, or one group of related tasks."""

    delta_sum: float  # its tasks' differences added up
    tasks: int


def _units(tasks: Sequence[int], deltas: Sequence[float], groups: Mapping[int, str] | None) -> list[Unit]:
    """Each task is a unit, or each group is (a task missing from ``groups`` is a group of its own)."""
    if groups is None:
        return [Unit(d, 1) for d in deltas]
    members: dict[object, list[float]] = {}
    for task, d in zip(tasks, deltas):
        members.setdefault(groups.get(task, ("task", task)), []).append(d)
    return [Unit(math.fsum(values), len(values)) for values in members.values()]


def clustered_standard_error(units: Sequence[Unit], n: int) -> tuple[float, int]:
    """The standard error of the mean difference over ``n`` tasks, and its degrees of freedom.

    SE^2 = G/(G-1) x sum over units of (u_g - n_g x mean)^2 / n^2, the cluster-robust variance of a
    mean (Cameron & Miller); with one task per unit it is the sample variance over n, the ordinary
    paired standard error. df = G - 1 (at least 1).
    """
    g = len(units)
    if g < 2:
        return 0.0, 1
    mean = math.fsum(u.delta_sum for u in units) / n
    residual = math.fsum((u.delta_sum - u.tasks * mean) ** 2 for u in units)
    return math.sqrt(g / (g - 1) * residual) / n, g - 1


def _test(units: Sequence[Unit], n: int, values: Sequence[float], up: int, down: int, seed: int) -> tuple[Test, float]:
    clustered = len(units) != n
    if not clustered and all(v in (0.0, 1.0) for v in values):
        return Test.MCNEMAR_EXACT, binomial_two_sided_p(up, down)
    if len(units) < PERMUTATION_BELOW:
        return Test.PERMUTATION, sign_flip_p([u.delta_sum for u in units], seed)
    se, df = clustered_standard_error(units, n)
    mean = math.fsum(u.delta_sum for u in units) / n
    test = Test.CLUSTERED_T if clustered else Test.PAIRED_T
    if se == 0:
        return test, 1.0 if mean == 0 else 0.0
    return test, _t_two_sided_p(mean / se, df)


def sign_flip_p(units: Sequence[float], seed: int = 0) -> float:
    """Two-sided p of the mean difference under random signs (each unit as likely up as down when
    the two runs are the same model): exact over every sign pattern when there are few enough,
    else from ``DRAWN_PERMUTATIONS`` seeded draws (scipy's permutation test)."""
    import numpy as np
    from scipy.stats import permutation_test

    data = np.asarray(units, dtype=float)
    if len(data) < 2 or not np.any(data):
        return 1.0  # one unit's sign is as likely either way: p = 2/2
    result = permutation_test(
        (data,),
        lambda x, axis: np.abs(np.sum(x, axis=axis)),
        permutation_type="samples",
        vectorized=True,
        n_resamples=EXACT_PERMUTATIONS if 2 ** len(data) <= EXACT_PERMUTATIONS else DRAWN_PERMUTATIONS,
        alternative="greater",
        rng=np.random.default_rng(seed),
    )
    return float(min(1.0, result.pvalue))


def minimum_detectable_effect(
    se: float,
    df: int,
    units: int,
    value_range: float,
    alpha: float,
    power: float = DEFAULT_POWER,
    *,
    counts_only: bool = False,
) -> float:
    """The smallest true change a two-sided test at ``alpha`` detects with probability ``power``,
    given the standard error of the mean change: (t_{1-alpha/2, df} + t_{power, df}) x se.

    Where the formula says too little, the count of units decides (``floor_drop``): a test that
    sees only counts (McNemar's: ``counts_only``) cannot call a change of fewer than k tasks, and
    an observed standard error of 0 (nothing moved) says nothing of the variance under a change.
    Fewer units than k: nothing is detectable, and the figure is over the whole range.
    """
    _check_level("alpha", alpha)
    _check_level("power", power)
    floor = floor_drop(units, value_range, alpha)
    if units < fewest_units(alpha):
        return floor
    formula = (_t_quantile(1 - alpha / 2, df) + _t_quantile(power, df)) * se
    return max(formula, floor) if counts_only or se == 0 else formula


def fewest_units(alpha: float) -> int:
    """The fewest units all moving one way that a fair coin's chance, 2 x 0.5^k, puts below alpha."""
    return math.floor(math.log2(2 / alpha)) + 1


def floor_drop(units: int, value_range: float, alpha: float) -> float:
    """The smallest mean change a count of units can show at ``alpha``: ``fewest_units`` of them
    moving the whole range one way. Over the whole range when there are fewer units than that."""
    return value_range * fewest_units(alpha) / max(units, 1)


def adjust(p_values: Sequence[float], correction: Correction) -> list[float]:
    """The p-values of benchmarks judged together, adjusted so that comparing each with alpha
    controls the family's error: Holm's step-down (any false alarm at most alpha) or
    Benjamini-Hochberg's step-up (the expected share of false alarms at most alpha)."""
    m = len(p_values)
    if correction is Correction.NONE or m == 0:
        return [float(p) for p in p_values]
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    if correction is Correction.HOLM:
        running = 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (m - rank) * p_values[i]))
            adjusted[i] = running
        return adjusted
    running = 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, m * p_values[i] / (rank + 1))
        adjusted[i] = min(1.0, max(running, p_values[i]))  # m*p/m may round an ulp below p
    return adjusted


def family_alpha(alpha: float, family: int, correction: Correction) -> float:
    """The per-benchmark level a benchmark must reach in the worst case (Holm's and BH's first step:
    alpha / m): the level at which a detectable drop is quoted."""
    if correction is Correction.NONE or family <= 1:
        return alpha
    return alpha / family


def binomial_two_sided_p(up: int, down: int) -> float:
    """Exact two-sided p-value that ``up`` vs ``down`` is a fair coin's split: min(1, 2·P(X ≤ k)).

    X ~ Binomial(up + down, 1/2) and k = min(up, down). This is McNemar's exact test when up/down
    are the discordant pairs; unchanged tasks carry no information about direction and are left
    out. Computed in integers, so it is exact up to the final rounding to float (a sum of float pmf
    terms, as scipy's binomtest does, drifts by ~1e-14); 1.0 when nothing changed.
    """
    if up < 0 or down < 0:
        raise ValueError(f"counts must be non-negative, got {up} and {down}")
    trials, k = up + down, min(up, down)
    if trials == 0:
        return 1.0
    return min(1.0, _binomial_coefficients_up_to(trials, k) / 2 ** (trials - 1))  # 2·tail/2^trials


def _binomial_coefficients_up_to(trials: int, k: int) -> int:
    """C(trials, 0) + … + C(trials, k), each term from the last: ~200x faster than k comb() calls."""
    term = total = 1
    for i in range(k):
        term = term * (trials - i) // (i + 1)  # exact: C(trials, i+1)
        total += term
    return total


def _t_quantile(q: float, df: int) -> float:
    from scipy.special import stdtrit  # scipy's Student t, without importing scipy.stats

    return float(stdtrit(df, q))


def _t_two_sided_p(t: float, df: int) -> float:
    from scipy.special import stdtr

    return float(min(1.0, 2 * stdtr(df, -abs(t))))


def bootstrap_mean_ci(
    values: Sequence[float], *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``values`` (the view's bands over a sweep's tasks).

    The bounds are order statistics, the k-th smallest and k-th largest of the resampled means with
    k = floor(resamples·(1 − confidence)/2), not interpolated percentiles, so negating every value
    negates the interval exactly.
    """
    _check_level("confidence", confidence)
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    if not values:
        raise ValueError("the bootstrap needs at least one value")
    if min(values) == max(values):  # every resample has this mean; skip the draws
        return (float(values[0]), float(values[0]))
    import numpy as np

    means = np.sort(_resampled_means(np.asarray(values, dtype=float), resamples, seed))
    k = min(math.floor(resamples * (1 - confidence) / 2 + 1e-9), (resamples - 1) // 2)
    return (float(means[k]), float(means[resamples - 1 - k]))


def _resampled_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Means of ``resamples`` draws of len(values) values with replacement, drawn in chunks.

    Chunking does not change the result: the generator's stream is consumed in the same order.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    n = len(values)
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // n)
    means = np.empty(resamples)
    for start in range(0, resamples, rows_per_chunk):
        stop = min(start + rows_per_chunk, resamples)
        indices = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = values[indices].mean(axis=1)
    return means


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)  # correctly rounded sum, however many tasks


def _finite_scores(scores: Mapping[int, float], tasks: Sequence[int], run: str) -> list[float]:
    """The scores of ``tasks`` in order; a NaN would silently count as "unchanged", so refuse it."""
    values = [float(scores[t]) for t in tasks]
    bad = next((t for t, v in zip(tasks, values) if not math.isfinite(v)), None)
    if bad is not None:
        raise ValueError(f"{run} score of task {bad} is not a finite number: {scores[bad]!r}")
    return values


def _check_level(name: str, value: float) -> None:
    if not 0 < value < 1:
        raise ValueError(f"{name} must be between 0 and 1, got {value}")
