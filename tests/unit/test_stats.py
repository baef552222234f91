"""paired_comparison: exact p-values, a deterministic paired bootstrap CI, and a verdict that needs
both. Reference values were computed once with scipy 1.17.1 and are hard-coded, so these tests
do not need scipy; each names the call that produced it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemo_gym.orchestration import stats
from nemo_gym.orchestration.stats import (
    IMPROVED,
    MCNEMAR_EXACT,
    NO_COMMON_TASKS,
    NO_SIGNIFICANT_CHANGE,
    REGRESSED,
    SIGN_TEST,
    binomial_two_sided_p,
    bootstrap_mean_ci,
    paired_comparison,
)

# (up, down, scipy.stats.binomtest(min(up, down), up + down, 0.5).pvalue)
SCIPY_BINOMTEST = [
    (0, 1, 1.0),
    (1, 0, 1.0),
    (0, 5, 0.0625),
    (1, 9, 0.021484375),
    (3, 10, 0.09228515625),
    (5, 5, 1.0),
    (7, 3, 0.34375),
    (20, 40, 0.01348929373119186),
    (100, 130, 0.05561357778139238),
    (0, 20, 1.9073486328125e-06),
    (240, 300, 0.011050481081929898),
    (2000, 2100, 0.12206497999113655),
    (0, 1074, 1e-323),  # subnormal: the integer computation still gets it
    (1, 1100, 0.0),  # below the smallest float
]


def runs(base: list[float], candidate: list[float]) -> tuple[dict[int, float], dict[int, float]]:
    return dict(enumerate(base)), dict(enumerate(candidate))


# --- the exact test ---------------------------------------------------------------------------


@pytest.mark.parametrize(("up", "down", "scipy_p"), SCIPY_BINOMTEST)
def test_binomial_p_matches_scipy_binomtest(up: int, down: int, scipy_p: float) -> None:
    # scipy sums float pmf terms (~1e-14 relative drift); ours is exact integer arithmetic.
    assert binomial_two_sided_p(up, down) == pytest.approx(scipy_p, rel=1e-12, abs=0)


def test_binomial_p_of_no_changes_is_one() -> None:
    assert binomial_two_sided_p(0, 0) == 1.0


def test_binomial_p_refuses_negative_counts() -> None:
    with pytest.raises(ValueError):
        binomial_two_sided_p(-1, 3)


@given(st.integers(0, 300), st.integers(0, 300))
def test_binomial_p_is_a_symmetric_probability_that_falls_as_the_split_widens(up: int, down: int) -> None:
    p = binomial_two_sided_p(up, down)
    assert 0.0 <= p <= 1.0
    assert p == binomial_two_sided_p(down, up)
    if up >= down:
        assert binomial_two_sided_p(up + 1, down) <= p


def test_mcnemar_exact_on_binary_scores() -> None:
    # 10 tasks 0 -> 1, 3 tasks 1 -> 0, 20 unchanged (10 both right, 10 both wrong).
    base = [0.0] * 10 + [1.0] * 3 + [1.0] * 10 + [0.0] * 10
    candidate = [1.0] * 10 + [0.0] * 3 + [1.0] * 10 + [0.0] * 10
    r = paired_comparison(*runs(base, candidate))
    assert r.test == MCNEMAR_EXACT
    assert r.p_value == 0.09228515625  # scipy.stats.binomtest(3, 13, 0.5).pvalue
    assert (r.improved, r.regressed, r.unchanged, r.n) == (10, 3, 20, 33)
    assert r.improved_tasks == tuple(range(10)) and r.regressed_tasks == (10, 11, 12)
    assert r.delta == pytest.approx(7 / 33)


def test_sign_test_on_averaged_repeats() -> None:
    # 20 tasks up by a quarter, 5 down by a half, 5 unchanged at 0.5: scores are not all 0/1.
    base = [0.25] * 20 + [0.75] * 5 + [0.5] * 5
    candidate = [0.5] * 20 + [0.25] * 5 + [0.5] * 5
    r = paired_comparison(*runs(base, candidate))
    assert r.test == SIGN_TEST
    assert r.p_value == pytest.approx(0.004077315330505371, rel=1e-12)  # scipy.stats.binomtest(5, 25, 0.5).pvalue
    assert (r.improved, r.regressed, r.unchanged) == (20, 5, 5)


def test_one_non_binary_score_anywhere_switches_to_the_sign_test() -> None:
    r = paired_comparison({0: 0.0, 1: 1.0, 2: 0.5}, {0: 1.0, 1: 1.0, 2: 0.5})
    assert r.test == SIGN_TEST


# --- the bootstrap CI --------------------------------------------------------------------------


def test_bootstrap_ci_agrees_with_scipy_percentile_bootstrap() -> None:
    deltas = [1.0] * 60 + [-1.0] * 30 + [0.0] * 110
    # scipy.stats.bootstrap((deltas,), np.mean, confidence_level=0.95, n_resamples=10000,
    #                       method="percentile", random_state=0) -> (0.06, 0.24)
    lo, hi = bootstrap_mean_ci(deltas, confidence=0.95, resamples=10_000, seed=0)
    assert lo == pytest.approx(0.06, abs=0.01) and hi == pytest.approx(0.24, abs=0.01)

    deltas = [((i * 37) % 101) / 100 - 0.45 for i in range(400)]
    # same call with confidence_level=0.9 -> (0.025175, 0.073075); other random draws, so ~1e-3 apart
    lo, hi = bootstrap_mean_ci(deltas, confidence=0.9, resamples=10_000, seed=0)
    assert lo == pytest.approx(0.025175, abs=0.003) and hi == pytest.approx(0.073075, abs=0.003)


def test_bootstrap_ci_is_close_to_the_normal_approximation_with_many_tasks() -> None:
    deltas = [1.0] * 700 + [-1.0] * 500 + [0.0] * 3800  # 5 000 tasks
    mean = sum(deltas) / len(deltas)
    half_width = 1.959964 * math.sqrt((sum(d * d for d in deltas) / len(deltas) - mean**2) / len(deltas))
    lo, hi = bootstrap_mean_ci(deltas)
    assert lo == pytest.approx(mean - half_width, abs=0.002)
    assert hi == pytest.approx(mean + half_width, abs=0.002)


def test_bootstrap_is_deterministic_given_the_seed() -> None:
    deltas = [((i * 7) % 11) / 10 - 0.4 for i in range(300)]
    assert bootstrap_mean_ci(deltas, seed=3) == bootstrap_mean_ci(deltas, seed=3)
    assert bootstrap_mean_ci(deltas, seed=3) != bootstrap_mean_ci(deltas, seed=4)


def test_chunking_the_draws_does_not_change_the_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    deltas = [((i * 7) % 11) / 10 - 0.4 for i in range(300)]
    whole = bootstrap_mean_ci(deltas, resamples=2_000)
    monkeypatch.setattr(stats, "_CHUNK_ELEMENTS", 1_000)  # 3 resamples per chunk
    assert bootstrap_mean_ci(deltas, resamples=2_000) == whole


@pytest.mark.parametrize("resamples", [1, 2, 3, 39, 40])
def test_bounds_are_ordered_even_with_very_few_resamples(resamples: int) -> None:
    lo, hi = bootstrap_mean_ci([0.0, 1.0, -2.0, 0.5], resamples=resamples, confidence=0.5)
    assert lo <= hi


@pytest.mark.parametrize(
    "kwargs", [{"confidence": 0}, {"confidence": 1}, {"resamples": 0}, {"resamples": 2.5}, {"resamples": True}]
)
def test_bootstrap_refuses_nonsense_parameters(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        bootstrap_mean_ci([0.0, 1.0], **kwargs)
    with pytest.raises(ValueError):
        bootstrap_mean_ci([])


# --- verdicts: both the exact test and the CI must agree -------------------------------------


def test_a_clear_improvement_over_many_binary_tasks() -> None:
    base = [1.0] * 300 + [0.0] * 300 + [1.0] * 20 + [0.0] * 80
    candidate = [1.0] * 300 + [0.0] * 300 + [0.0] * 20 + [1.0] * 80
    r = paired_comparison(*runs(base, candidate))
    assert r.verdict == IMPROVED
    assert r.p_value < 0.05 and r.ci[0] > 0
    assert r.base_mean == pytest.approx(320 / 700) and r.candidate_mean == pytest.approx(380 / 700)


def test_a_clear_regression_is_the_mirror_image() -> None:
    base = [1.0] * 300 + [0.0] * 300 + [1.0] * 20 + [0.0] * 80
    candidate = [1.0] * 300 + [0.0] * 300 + [0.0] * 20 + [1.0] * 80
    r = paired_comparison(*runs(candidate, base))
    assert r.verdict == REGRESSED and r.ci[1] < 0


def test_a_small_p_is_not_enough_when_the_ci_contains_zero() -> None:
    # 12 tasks up by 0.05, 2 down by 0.25: mostly up (p = 0.0129), but the mean barely moves.
    base = [0.5] * 14
    candidate = [0.55] * 12 + [0.25] * 2
    r = paired_comparison(*runs(base, candidate))
    assert r.p_value == pytest.approx(0.012939453125)  # scipy.stats.binomtest(2, 14, 0.5).pvalue
    assert r.ci[0] < 0 < r.ci[1]
    assert r.verdict == NO_SIGNIFICANT_CHANGE


def test_a_ci_excluding_zero_is_not_enough_with_too_few_tasks() -> None:
    """Three of three tasks improved: every bootstrap resample says +1, the exact test says p = 0.25."""
    r = paired_comparison(*runs([0.0] * 3, [1.0] * 3))
    assert r.ci == (1.0, 1.0)
    assert r.p_value == 0.25  # scipy.stats.binomtest(3, 3, 0.5).pvalue
    assert r.verdict == NO_SIGNIFICANT_CHANGE


def test_conflicting_directions_claim_nothing() -> None:
    """40 tasks gain 0.01, 5 lose 1.0: most tasks improved (p ~ 8e-8), but the mean fell."""
    base = [0.5] * 40 + [1.0] * 5
    candidate = [0.51] * 40 + [0.0] * 5
    r = paired_comparison(*runs(base, candidate))
    assert r.p_value == pytest.approx(7.878384167270269e-08, rel=1e-12)  # scipy.stats.binomtest(5, 45, 0.5).pvalue
    assert r.improved > r.regressed and r.delta < 0 and r.ci[1] < 0
    assert r.verdict == NO_SIGNIFICANT_CHANGE


# --- edge cases --------------------------------------------------------------------------------


def test_no_common_tasks() -> None:
    r = paired_comparison({0: 1.0, 1: 0.0}, {2: 1.0})
    assert r.verdict == NO_COMMON_TASKS
    assert r.n == 0
    assert (r.ci, r.p_value, r.test, r.delta, r.base_mean, r.candidate_mean) == (None,) * 6
    assert (r.only_in_base, r.only_in_candidate) == (2, 1)
    assert paired_comparison({}, {}).verdict == NO_COMMON_TASKS


def test_identical_runs() -> None:
    base = {t: (t % 3) / 2 for t in range(50)}
    r = paired_comparison(base, dict(base))
    assert (r.p_value, r.ci, r.delta, r.unchanged, r.verdict) == (1.0, (0.0, 0.0), 0.0, 50, NO_SIGNIFICANT_CHANGE)
    assert r.improved_tasks == r.regressed_tasks == ()


def test_one_task() -> None:
    r = paired_comparison({7: 0.0}, {7: 1.0})
    assert (r.n, r.delta, r.ci, r.p_value, r.improved_tasks) == (1, 1.0, (1.0, 1.0), 1.0, (7,))
    assert r.verdict == NO_SIGNIFICANT_CHANGE


def test_only_common_tasks_are_compared_and_the_rest_are_counted() -> None:
    r = paired_comparison({0: 0.0, 1: 1.0, 5: 1.0}, {1: 0.0, 0: 1.0, 9: 0.0, 10: 0.0})
    assert r.n == 2 and (r.only_in_base, r.only_in_candidate) == (1, 2)
    assert r.improved_tasks == (0,) and r.regressed_tasks == (1,)


def test_task_lists_are_sorted_whatever_the_input_order() -> None:
    base = {9: 0.0, 2: 0.0, 5: 1.0, 1: 1.0}
    candidate = {1: 0.0, 5: 0.0, 2: 1.0, 9: 1.0}
    r = paired_comparison(base, candidate)
    assert r.improved_tasks == (2, 9) and r.regressed_tasks == (1, 5)


def test_the_comparison_records_how_it_was_made() -> None:
    r = paired_comparison({0: 0.0}, {0: 1.0}, confidence=0.9, resamples=500, seed=11, alpha=0.01)
    assert (r.confidence, r.resamples, r.seed, r.alpha) == (0.9, 500, 11, 0.01)


@pytest.mark.parametrize("kwargs", [{"alpha": 0}, {"alpha": 1.5}, {"confidence": 0.0}, {"resamples": -1}])
def test_nonsense_parameters_are_refused_even_without_common_tasks(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        paired_comparison({}, {}, **kwargs)


def test_a_nan_score_is_refused_rather_than_counted_unchanged() -> None:
    with pytest.raises(ValueError, match="candidate score of task 1"):
        paired_comparison({0: 0.0, 1: 1.0}, {0: 1.0, 1: float("nan")})


def test_five_thousand_tasks_are_quick_enough() -> None:
    import time

    base = {t: float(t % 5 == 0) for t in range(5_000)}
    candidate = {t: float(t % 4 == 0) for t in range(5_000)}
    start = time.perf_counter()
    paired_comparison(base, candidate)
    assert time.perf_counter() - start < 5  # ~0.2 s on a laptop core; generous for loaded CI


# --- properties --------------------------------------------------------------------------------

binary = st.sampled_from([0.0, 1.0])
graded = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])
continuous = st.floats(min_value=0, max_value=1, allow_nan=False)
scores = st.one_of(binary, graded, continuous)
run = st.dictionaries(st.integers(0, 40), scores, max_size=40)
paired_runs = st.one_of(
    st.tuples(run, run),
    # mostly the same tasks, which is the real case
    st.lists(st.tuples(binary, binary), max_size=60).map(lambda pairs: runs(*zip(*pairs)) if pairs else ({}, {})),
)
FAST = {"resamples": 200}  # properties hold for any number of resamples


@settings(deadline=None)
@given(paired_runs, st.integers(0, 2**32 - 1))
def test_p_is_a_probability_and_the_ci_is_ordered(pair: tuple[dict, dict], seed: int) -> None:
    r = paired_comparison(*pair, seed=seed, **FAST)
    if r.n:
        assert 0.0 <= r.p_value <= 1.0
        assert r.ci[0] <= r.ci[1]
        assert r.improved + r.regressed + r.unchanged == r.n
    assert r.verdict in (IMPROVED, REGRESSED, NO_SIGNIFICANT_CHANGE, NO_COMMON_TASKS)


MIRROR = {
    IMPROVED: REGRESSED,
    REGRESSED: IMPROVED,
    NO_SIGNIFICANT_CHANGE: NO_SIGNIFICANT_CHANGE,
    NO_COMMON_TASKS: NO_COMMON_TASKS,
}


@settings(deadline=None)
@given(paired_runs, st.integers(0, 2**32 - 1), st.sampled_from([199, 200, 1000]), st.sampled_from([0.67, 0.9, 0.95]))
def test_swapping_base_and_candidate_mirrors_everything_exactly(
    pair: tuple[dict, dict], seed: int, resamples: int, confidence: float
) -> None:
    """Exactly, not approximately: a bound that is 0.0 one way and -1e-17 the other would flip a verdict.
    (Interpolated percentiles, np.quantile's default, break this in most cases; order statistics don't.)"""
    forward = paired_comparison(*pair, seed=seed, resamples=resamples, confidence=confidence)
    backward = paired_comparison(*reversed(pair), seed=seed, resamples=resamples, confidence=confidence)
    assert backward.verdict == MIRROR[forward.verdict]
    assert backward.p_value == forward.p_value and backward.test == forward.test
    assert (backward.improved_tasks, backward.regressed_tasks) == (forward.regressed_tasks, forward.improved_tasks)
    if forward.n:
        assert backward.delta == -forward.delta
        assert backward.ci == (-forward.ci[1], -forward.ci[0])


@settings(deadline=None)
@given(paired_runs, st.lists(scores, min_size=1, max_size=30))
def test_adding_identical_tasks_to_both_never_makes_p_smaller(pair: tuple[dict, dict], shared: list[float]) -> None:
    base, candidate = pair
    before = paired_comparison(base, candidate, **FAST)
    first_new = max([*base, *candidate], default=-1) + 1
    extra = {first_new + i: s for i, s in enumerate(shared)}
    after = paired_comparison({**base, **extra}, {**candidate, **extra}, **FAST)
    if before.n:
        assert after.p_value >= before.p_value
    assert after.unchanged == before.unchanged + len(shared)


@settings(deadline=None)
@given(paired_runs, st.integers(0, 2**32 - 1))
def test_deterministic_given_the_seed(pair: tuple[dict, dict], seed: int) -> None:
    assert paired_comparison(*pair, seed=seed, **FAST) == paired_comparison(*pair, seed=seed, **FAST)
