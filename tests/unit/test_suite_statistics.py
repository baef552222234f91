"""The suite-level claims of compare and the gate, by seeded simulation through the real code
(benchmarks/suite_statistics.py with fewer trials): an unchanged model rarely fails a 30-benchmark
suite, the CI holds the true delta about 95 % of the time, and a true drop is found as often as
a paired t-test finds it. Each bound is loose enough for its trial count and far from the old
behaviour (45 % / 33 % false alarms), which the uncorrected family still shows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import suite_statistics as simulation  # noqa: E402

from nemo_gym.orchestration.stats import Correction  # noqa: E402


@pytest.mark.parametrize("repeats", [1, 16])
def test_an_unchanged_model_rarely_fails_a_suite_of_thirty(repeats: int) -> None:
    compare, gate = simulation.false_alarms(120, repeats, seed=11, correction=Correction.HOLM)
    # Holm keeps any false alarm at <= 5 % (a regression, one side of it, about half); 120 trials.
    assert compare.value <= 0.06 and gate.value <= 0.06, (compare.text(), gate.text())


def test_without_a_correction_the_same_suite_fails_often() -> None:
    compare, gate = simulation.false_alarms(40, 16, seed=11, correction=Correction.NONE)
    assert compare.value >= 0.3 and gate.value >= 0.3  # the simulation can tell the two apart


@pytest.mark.parametrize("repeats", [1, 16])
def test_the_interval_holds_the_true_delta_about_95_percent_of_the_time(repeats: int) -> None:
    covered, _, _ = simulation.coverage_and_power(300, repeats, seed=3)
    assert 0.91 <= covered.value <= 0.99, covered.text()


def test_a_true_drop_is_found_as_often_as_by_a_paired_t_test() -> None:
    pytest.importorskip("scipy.stats")
    _, ours, reference = simulation.coverage_and_power(200, 16, seed=4)
    assert ours.value >= reference.value - 0.02, (ours.text(), reference.text())
    assert ours.value >= 0.7  # 200 tasks x 16 repeats resolve a drop of 0.03 (the detectable drop)
