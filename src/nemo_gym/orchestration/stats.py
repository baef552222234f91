"""Did the candidate run of a benchmark score better than the base run, beyond chance? No I/O here.

Both runs answer the same tasks, so the comparison is paired: per-task differences, not two
independent means. Two kinds of evidence are combined (see ``paired_comparison``):
an exact binomial test on how many tasks moved each way, and a paired bootstrap confidence
interval of the mean difference.

numpy is used only for the bootstrap: 10 000 resamples of 5 000 tasks take about 3.5 s in pure
Python and about 0.2 s with numpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

IMPROVED = "improved"
REGRESSED = "regressed"
NO_SIGNIFICANT_CHANGE = "no significant change"
NO_COMMON_TASKS = "no common tasks"

MCNEMAR_EXACT = "mcnemar-exact"
SIGN_TEST = "sign"

# Bootstrap indices drawn per chunk (about 2 MB): bounds memory, and is as fast as one big draw.
_CHUNK_ELEMENTS = 1 << 18


@dataclass(frozen=True)
class PairedComparison:
    """The outcome of comparing two runs over the tasks both have.

    ``delta`` and ``ci`` are candidate minus base. ``improved``/``regressed``/``unchanged`` count
    tasks whose per-task mean went up / down / stayed identical. Means, delta, CI and p-value are
    None when no task is in both runs.
    """

    n: int
    base_mean: float | None
    candidate_mean: float | None
    delta: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    test: str | None  # MCNEMAR_EXACT when every per-task value is 0 or 1, else SIGN_TEST
    verdict: str  # IMPROVED, REGRESSED, NO_SIGNIFICANT_CHANGE or NO_COMMON_TASKS
    improved: int
    regressed: int
    unchanged: int
    improved_tasks: tuple[int, ...]
    regressed_tasks: tuple[int, ...]
    only_in_base: int  # tasks left out of the comparison: a sign that one run is incomplete
    only_in_candidate: int
    confidence: float
    alpha: float
    resamples: int
    seed: int


def paired_comparison(
    base: Mapping[int, float],
    candidate: Mapping[int, float],
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
) -> PairedComparison:
    """Compare per-task scores (task index -> mean over its rollouts) of two runs.

    Verdict rule: the change is significant, and the verdict "improved" or "regressed", only when
    the exact test gives p < ``alpha`` AND the bootstrap CI of the mean delta excludes 0 on the same
    side as the majority of changed tasks. Otherwise: "no significant change".

    Why both. The exact test (McNemar's for 0/1 scores, the sign test otherwise; both a binomial
    test of the up/down counts) has an exact error rate at any n, but it sees only directions:
    many tiny gains and a few large losses make it say "improved" while the mean, the number
    people report, went down. The CI is about that mean, but a percentile bootstrap is only
    approximately right and too narrow with few tasks. Requiring both keeps the exact test's
    guarantee and a verdict that never contradicts the reported delta; if the two point opposite
    ways the evidence is conflicting and we claim nothing.

    Deterministic: tasks are taken in index order and the bootstrap draws from ``seed``. Swapping
    ``base`` and ``candidate`` negates delta and CI exactly and swaps improved and regressed.
    """
    _check_bootstrap_parameters(confidence, resamples)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    common = sorted(base.keys() & candidate.keys())
    base_values = _finite_scores(base, common, "base")
    candidate_values = _finite_scores(candidate, common, "candidate")
    deltas = [c - b for b, c in zip(base_values, candidate_values)]
    improved_tasks = tuple(t for t, d in zip(common, deltas) if d > 0)
    regressed_tasks = tuple(t for t, d in zip(common, deltas) if d < 0)
    n = len(common)
    if n == 0:
        base_mean = candidate_mean = delta = ci = p_value = test = None
        verdict = NO_COMMON_TASKS
    else:
        base_mean, candidate_mean = _mean(base_values), _mean(candidate_values)
        delta = candidate_mean - base_mean
        ci = bootstrap_mean_ci(deltas, confidence=confidence, resamples=resamples, seed=seed)
        p_value = binomial_two_sided_p(len(improved_tasks), len(regressed_tasks))
        test = MCNEMAR_EXACT if _all_zero_or_one(base_values + candidate_values) else SIGN_TEST
        verdict = _verdict(p_value, ci, len(improved_tasks), len(regressed_tasks), alpha)
    return PairedComparison(
        n=n,
        base_mean=base_mean,
        candidate_mean=candidate_mean,
        delta=delta,
        ci=ci,
        p_value=p_value,
        test=test,
        verdict=verdict,
        improved=len(improved_tasks),
        regressed=len(regressed_tasks),
        unchanged=n - len(improved_tasks) - len(regressed_tasks),
        improved_tasks=improved_tasks,
        regressed_tasks=regressed_tasks,
        only_in_base=len(base.keys() - candidate.keys()),
        only_in_candidate=len(candidate.keys() - base.keys()),
        confidence=confidence,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
    )


def binomial_two_sided_p(up: int, down: int) -> float:
    """Exact two-sided p-value that ``up`` vs ``down`` is a fair coin's split: min(1, 2·P(X ≤ k)).

    X ~ Binomial(up + down, 1/2) and k = min(up, down). This is McNemar's exact test when up/down
    are the discordant pairs and the sign test when they are the non-zero differences; ties and
    unchanged tasks carry no information about direction and are left out. Computed in integers,
    so it is exact up to the final rounding to float (a sum of float pmf terms, as scipy's
    binomtest does, drifts by ~1e-14); 1.0 when nothing changed.
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


def bootstrap_mean_ci(
    values: Sequence[float], *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``values`` (here: the per-task deltas).

    Resampling whole tasks keeps each task's base and candidate scores together: that is what makes
    the bootstrap paired. The bounds are order statistics, the k-th smallest and k-th largest of the
    resampled means with k = floor(resamples·(1 − confidence)/2), not interpolated percentiles, so
    negating every value negates the interval exactly (swapping the runs flips the verdict, never
    just nudges a bound across 0).
    """
    _check_bootstrap_parameters(confidence, resamples)
    if not values:
        raise ValueError("the bootstrap needs at least one value")
    if min(values) == max(values):  # every resample has this mean; skip the draws
        return (float(values[0]), float(values[0]))
    means = np.sort(_resampled_means(np.asarray(values, dtype=float), resamples, seed))
    k = min(math.floor(resamples * (1 - confidence) / 2 + 1e-9), (resamples - 1) // 2)
    return (float(means[k]), float(means[resamples - 1 - k]))


def _resampled_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Means of ``resamples`` draws of len(values) values with replacement, drawn in chunks.

    Chunking does not change the result: the generator's stream is consumed in the same order.
    """
    rng = np.random.default_rng(seed)
    n = len(values)
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // n)
    means = np.empty(resamples)
    for start in range(0, resamples, rows_per_chunk):
        stop = min(start + rows_per_chunk, resamples)
        indices = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = values[indices].mean(axis=1)
    return means


def _verdict(p_value: float, ci: tuple[float, float], improved: int, regressed: int, alpha: float) -> str:
    if p_value < alpha and ci[0] > 0 and improved > regressed:
        return IMPROVED
    if p_value < alpha and ci[1] < 0 and regressed > improved:
        return REGRESSED
    return NO_SIGNIFICANT_CHANGE


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)  # correctly rounded sum, however many tasks


def _all_zero_or_one(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def _finite_scores(scores: Mapping[int, float], tasks: Sequence[int], run: str) -> list[float]:
    """The scores of ``tasks`` in order; a NaN would silently count as "unchanged", so refuse it."""
    values = [float(scores[t]) for t in tasks]
    bad = next((t for t, v in zip(tasks, values) if not math.isfinite(v)), None)
    if bad is not None:
        raise ValueError(f"{run} score of task {bad} is not a finite number: {scores[bad]!r}")
    return values


def _check_bootstrap_parameters(confidence: float, resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
