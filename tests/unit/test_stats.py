"""paired_comparison: McNemar's exact test for 0/1 scores, a paired t-test on the per-task
differences otherwise (a permutation test for few tasks), a CI from the same differences, clustered
by group where there are groups, the smallest detectable drop, and p-values adjusted over a family.
Reference values come from scipy's own implementations (binomtest, ttest_rel,
false_discovery_control) or are hard-coded with the call that produced them."""

from __future__ import annotations

import itertools
import math

import numpy as np
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
    Correction,
    adjust,
    binomial_two_sided_p,
    bootstrap_mean_ci,
    clustered_standard_error,
    family_alpha,
    floor_drop,
    paired_comparison,
    sign_flip_p,
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


def test_a_paired_t_test_on_averaged_repeats_matches_scipy() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(5)
    base = rng.binomial(16, rng.beta(0.8, 0.8, 200)) / 16
    candidate = np.clip(base + rng.normal(-0.02, 0.1, 200), 0, 1)
    r = paired_comparison(*runs(list(base), list(candidate)))
    reference = scipy_stats.ttest_rel(candidate, base)
    assert r.test == stats.PAIRED_T and r.df == 199
    assert r.p_value == pytest.approx(reference.pvalue, rel=1e-9)
    interval = reference.confidence_interval(0.95)
    assert r.ci == (pytest.approx(interval.low, rel=1e-9), pytest.approx(interval.high, rel=1e-9))


def test_one_non_binary_score_anywhere_leaves_mcnemar() -> None:
    r = paired_comparison({0: 0.0, 1: 1.0, 2: 0.5}, {0: 1.0, 1: 1.0, 2: 0.5})
    assert r.test == stats.PERMUTATION  # 3 tasks: too few for the t-test


def test_few_tasks_get_the_exact_sign_flip_permutation_test() -> None:
    # 12 tasks: every one of the 4096 sign patterns is counted.
    deltas = [0.25, 0.5, 0.25, 0.75, 0.25, -0.25, 0.5, 0.25, 0.0, 0.25, 0.5, -0.5]
    observed = abs(sum(deltas))
    flips = [abs(sum(s * d for s, d in zip(signs, deltas))) for signs in itertools.product((1, -1), repeat=12)]
    exact = sum(f >= observed - 1e-12 for f in flips) / len(flips)
    r = paired_comparison(*runs([0.25] * 12, [0.25 + d for d in deltas]))
    assert r.test == stats.PERMUTATION and r.p_value == pytest.approx(exact, rel=1e-12)


def test_drawn_permutations_are_close_to_the_exact_p_and_seeded() -> None:
    deltas = [((i * 7) % 11) / 10 - 0.35 for i in range(25)]  # 2^25 patterns: drawn
    assert sign_flip_p(deltas, seed=1) == sign_flip_p(deltas, seed=1)
    scipy_stats = pytest.importorskip("scipy.stats")
    t_p = scipy_stats.ttest_1samp(deltas, 0).pvalue
    assert sign_flip_p(deltas, seed=1) == pytest.approx(t_p, abs=0.02)  # the two agree on 25 tame values


def test_the_clustered_standard_error_is_the_cluster_robust_one() -> None:
    deltas = [0.1, 0.3, -0.2, 0.4, 0.0, 0.5, -0.1, 0.2]
    groups = {0: "a", 1: "a", 2: "b", 3: "b", 4: "b", 5: "c", 6: "d", 7: "d"}
    r = paired_comparison(*runs([0.5] * 8, [0.5 + d for d in deltas]), groups=groups)
    # By the sandwich formula with numpy: residuals summed per cluster, G/(G-1) small-sample factor.
    e = np.array(deltas) - np.mean(deltas)
    sums = [e[[t for t in range(8) if groups[t] == g]].sum() for g in "abcd"]
    assert r.standard_error == pytest.approx(math.sqrt(4 / 3 * sum(x * x for x in sums)) / 8, rel=1e-9)
    assert (r.groups, r.df) == (4, 3)
    # One task per group is the ordinary paired standard error.
    alone = paired_comparison(*runs([0.5] * 8, [0.5 + d for d in deltas]))
    assert alone.standard_error == pytest.approx(np.std(deltas, ddof=1) / math.sqrt(8), rel=1e-9)


def test_correlated_tasks_in_groups_widen_the_interval() -> None:
    # 20 groups of 10 near-copies: 200 rows, but only 20 independent pieces of evidence.
    rng = np.random.default_rng(2)
    group_shift = np.repeat(rng.normal(0, 0.2, 20), 10)
    deltas = list(group_shift + rng.normal(0, 0.01, 200))
    pair = runs([0.5] * 200, [0.5 + d for d in deltas])
    grouped = paired_comparison(*pair, groups={t: str(t // 10) for t in range(200)})
    plain = paired_comparison(*pair)
    assert grouped.test == stats.PERMUTATION and grouped.groups == 20  # 20 units: permutation over groups
    assert grouped.standard_error > 2.5 * plain.standard_error
    assert grouped.ci[1] - grouped.ci[0] > 2.5 * (plain.ci[1] - plain.ci[0])


# --- one family of benchmarks ----------------------------------------------------------------


def test_holm_on_the_textbook_example() -> None:
    # Holm (1979)-style step-down: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, kept monotone.
    assert adjust([0.01, 0.04, 0.03, 0.005], Correction.HOLM) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_benjamini_hochberg_matches_scipy() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    p = [0.01, 0.04, 0.03, 0.005, 0.2, 0.9, 0.001, 0.049]
    assert adjust(p, Correction.BH) == pytest.approx(list(scipy_stats.false_discovery_control(p)), rel=1e-12)


@given(st.lists(st.floats(0, 1), max_size=40), st.sampled_from(list(Correction)))
def test_adjusted_p_values_are_probabilities_never_below_the_raw_ones(p: list[float], correction: Correction) -> None:
    adjusted = adjust(p, correction)
    assert all(a >= raw and 0 <= a <= 1 for a, raw in zip(adjusted, p))
    order = sorted(range(len(p)), key=lambda i: p[i])  # the ranking is kept
    assert all(adjusted[i] <= adjusted[j] for i, j in zip(order, order[1:]))


def test_the_family_level_is_alpha_over_its_size() -> None:
    assert family_alpha(0.05, 30, Correction.HOLM) == pytest.approx(0.05 / 30)
    assert family_alpha(0.05, 30, Correction.NONE) == 0.05
    assert family_alpha(0.05, 1, Correction.HOLM) == 0.05


# --- the smallest detectable drop --------------------------------------------------------------


def test_the_detectable_drop_is_the_power_formula() -> None:
    deltas = [((i * 37) % 101) / 100 - 0.5 for i in range(400)]
    r = paired_comparison(*runs([0.5] * 400, [0.5 + d for d in deltas]))
    se = np.std(deltas, ddof=1) / math.sqrt(400)
    # (t_{0.975, 399} + t_{0.8, 399}) x se: scipy.stats.t.ppf(0.975, 399) = 1.965927, .ppf(0.8, 399) = 0.842523
    assert r.detectable_drop() == pytest.approx((1.965927 + 0.842523) * se, rel=1e-5)
    assert r.detectable_drop(alpha=0.05 / 30) > r.detectable_drop()  # a family asks more


def test_a_pair_where_nothing_moved_still_cannot_see_everything() -> None:
    r = paired_comparison(*runs([1.0] * 10 + [0.0] * 10, [1.0] * 10 + [0.0] * 10))
    assert r.standard_error == 0.0
    # Six tasks flipping one way is the least McNemar calls significant at 5 % (2/64 < 0.05 < 2/32).
    assert r.detectable_drop() == pytest.approx(6 / 20) == floor_drop(20, 1.0, 0.05)
    # Five tasks: however they move, no test on them reaches 5 %; more than the whole range (0.5).
    few = paired_comparison(*runs([0.0] * 5, [0.5] * 5))
    assert few.detectable_drop() == pytest.approx(0.5 * 6 / 5)


def test_graded_scores_are_not_held_to_the_counting_floor() -> None:
    # 200 tasks each up by 0.01 or 0.02: a t-test sees it though no task moved the whole range.
    r = paired_comparison(*runs([0.5] * 200, [0.51 + 0.01 * (t % 2) for t in range(200)]))
    assert r.verdict == IMPROVED and r.detectable_drop() < 0.01


def test_clustered_standard_error_of_one_unit_is_zero() -> None:
    assert clustered_standard_error([stats.Unit(0.5, 3)], 3) == (0.0, 1)


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


# --- verdicts -----------------------------------------------------------------------------------


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


def test_many_small_gains_and_a_few_large_losses_read_as_the_mean_says() -> None:
    """40 tasks gain 0.01, 5 lose 1.0: most tasks improved, but the mean fell, and the t-test on the
    differences (not the directions) says so."""
    base = [0.5] * 40 + [1.0] * 5
    candidate = [0.51] * 40 + [0.0] * 5
    r = paired_comparison(*runs(base, candidate))
    assert r.improved > r.regressed and r.delta < 0
    assert r.verdict in (REGRESSED, NO_SIGNIFICANT_CHANGE) and r.verdict != IMPROVED


def test_three_of_three_tasks_improved_is_not_enough() -> None:
    r = paired_comparison(*runs([0.0] * 3, [1.0] * 3))
    assert r.p_value == 0.25  # scipy.stats.binomtest(3, 3, 0.5).pvalue
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
    assert (r.n, r.delta, r.p_value, r.improved_tasks) == (1, 1.0, 1.0, (7,))
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
    r = paired_comparison({0: 0.0}, {0: 1.0}, confidence=0.9, seed=11, alpha=0.01)
    assert (r.confidence, r.seed, r.alpha) == (0.9, 11, 0.01)


@pytest.mark.parametrize("kwargs", [{"alpha": 0}, {"alpha": 1.5}, {"confidence": 0.0}, {"confidence": 1.0}])
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


@settings(deadline=None)
@given(paired_runs, st.integers(0, 2**32 - 1))
def test_p_is_a_probability_and_the_ci_is_ordered(pair: tuple[dict, dict], seed: int) -> None:
    r = paired_comparison(*pair, seed=seed)
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
@given(paired_runs, st.integers(0, 2**32 - 1), st.sampled_from([0.67, 0.9, 0.95]))
def test_swapping_base_and_candidate_mirrors_everything_exactly(
    pair: tuple[dict, dict], seed: int, confidence: float
) -> None:
    """Exactly, not approximately: a bound that is 0.0 one way and -1e-17 the other would flip a verdict."""
    forward = paired_comparison(*pair, seed=seed, confidence=confidence)
    backward = paired_comparison(*reversed(pair), seed=seed, confidence=confidence)
    assert backward.verdict == MIRROR[forward.verdict]
    assert backward.p_value == forward.p_value and backward.test == forward.test
    assert (backward.improved_tasks, backward.regressed_tasks) == (forward.regressed_tasks, forward.improved_tasks)
    if forward.n:
        assert backward.delta == -forward.delta
        assert backward.ci == (-forward.ci[1], -forward.ci[0])


@settings(deadline=None)
@given(st.tuples(st.dictionaries(st.integers(0, 40), binary), st.dictionaries(st.integers(0, 40), binary)))
def test_adding_identical_tasks_to_both_never_makes_mcnemars_p_smaller(pair: tuple[dict, dict]) -> None:
    base, candidate = pair
    before = paired_comparison(base, candidate)
    first_new = max([*base, *candidate], default=-1) + 1
    shared = [1.0, 0.0, 1.0]
    extra = {first_new + i: s for i, s in enumerate(shared)}
    after = paired_comparison({**base, **extra}, {**candidate, **extra})
    if before.n:
        assert after.p_value >= before.p_value
    assert after.unchanged == before.unchanged + len(shared)


@settings(deadline=None)
@given(paired_runs, st.integers(0, 2**32 - 1))
def test_deterministic_given_the_seed(pair: tuple[dict, dict], seed: int) -> None:
    assert paired_comparison(*pair, seed=seed) == paired_comparison(*pair, seed=seed)
