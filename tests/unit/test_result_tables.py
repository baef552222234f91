"""The tables the report and the view show, worded once (result_tables.py): each input as the
exact words both pages show for it. The pages' own tests (test_report.py, test_view.py, tests/view
in Chromium) check they lay these words out, escaped."""

from __future__ import annotations

import pytest

from nemo_gym.orchestration.comparison import BenchmarkComparison, compare_benchmark, compare_runs
from nemo_gym.orchestration.contract import Status
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord
from nemo_gym.orchestration.result_tables import (
    COMPARISON_COLUMNS,
    Cell,
    cell,
    comparison_row,
    comparison_table,
    interval,
    number,
    p_text,
    sweep_table,
    task_list,
    x_axis,
)
from nemo_gym.orchestration.results import BenchmarkResult, RunResults, Unscoreable
from nemo_gym.orchestration.rollouts import NoScore
from nemo_gym.orchestration.stats import Correction


def result(benchmark: str = "math", **fields) -> BenchmarkResult:
    base = {
        "state": Status.SUCCEEDED,
        "samples": 12,
        "expected_samples": 12,
        "value": 0.5,
        "complete": True,
        "scored_tasks": 12,
    }
    return BenchmarkResult(benchmark=benchmark, **{**base, **fields})


def run(run_id: str, *results: BenchmarkResult, swept: str | None = None) -> RunResults:
    """A run ``gym-job-20261201T000000Z-<run_id>`` of ``results``."""
    record = SubmissionRecord(
        gym_job_id=f"gym-job-20261201T000000Z-{run_id}",
        submitted_at="2026-12-01T00:00:00Z",
        run_dir=f"/runs/{run_id}",
        cluster="c",
        executor="local",
        submitted_by="me",
        benchmarks=[
            BenchmarkJob(benchmark=r.benchmark, job_dir=f"/runs/{run_id}/{r.benchmark}", job_id="1") for r in results
        ],
        sweep_id="gym-sweep-x" if swept else None,
        sweep_values={"services.policy.model": swept} if swept else {},
    )
    return RunResults(record, [], list(results))


@pytest.mark.parametrize(
    ("value", "signed", "words"),
    [
        (0.5, False, "0.5000"),
        (None, False, "–"),
        (0.25, True, "+0.2500"),
        (-0.125, True, "-0.1250"),
        (0.0, True, "+0.0000"),
    ],
)
def test_a_number_is_four_decimals_signed_when_a_delta(value, signed, words) -> None:
    assert number(value, signed) == words


def test_an_interval_is_two_signed_numbers() -> None:
    assert interval((-0.125, 0.25)) == "[-0.1250, +0.2500]" and interval(None) == "–"


@pytest.mark.parametrize(
    ("tasks", "named", "words"),
    [
        ((), 30, "none"),
        ((0, 1, 2), 30, "0, 1, 2"),
        ((0, 1, 2, 3, 4), 2, "0, 1 and 3 more (gym eval compare --json lists them all)"),
    ],
)
def test_flipped_tasks_are_named_up_to_a_bound(tasks, named, words) -> None:
    assert task_list(tasks, named) == words


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        (None, Cell("–", "not in this run", "absent")),
        (result(), Cell("0.5000", "12/12 samples", "complete")),
        (
            result(state=Status.INCOMPLETE, samples=9, value=1.0, complete=False, note="3 samples missing"),
            Cell("1.0000", "9/12 samples, incomplete", "partial", "3 samples missing"),
        ),
        (result(expected_samples=None, complete=None), Cell("0.5000", "12/? samples, completeness unknown", "partial")),
        (
            result(complete=False, unscoreable=[Unscoreable(1, 0, NoScore.ABSENT), Unscoreable(2, 0, NoScore.ABSENT)]),
            Cell("0.5000", "12/12 samples, 2 unscored", "partial"),
        ),
        (
            result(state=Status.FAILED, samples=0, value=None, complete=False),
            Cell("–", "0/12 samples, failed", "partial"),
        ),
        (result(complete=False), Cell("0.5000", "12/12 samples, partial", "partial")),
    ],
)
def test_a_cell_says_its_value_its_samples_and_why_it_is_partial(found, expected) -> None:
    assert cell(found) == expected


def test_the_sweep_table_has_every_benchmark_in_first_seen_order_and_the_runs_by_their_swept_value() -> None:
    table = sweep_table(
        [
            run("aaaaa1", result("math", value=0.25), swept="/ckpt/step-1000"),
            run("aaaaa2", result("code"), result("math"), swept="/ckpt/step-2000"),
        ]
    )
    assert (table.header, table.benchmarks, table.labels) == (
        "model",
        ["math", "code"],
        ["/ckpt/step-1000", "/ckpt/step-2000"],
    )
    assert [[(c.value, c.samples) for c in row.cells] for row in table.rows] == [
        [("0.2500", "12/12 samples"), ("–", "not in this run")],
        [("0.5000", "12/12 samples"), ("0.5000", "12/12 samples")],
    ]
    assert [(row.run_id, row.directory, row.hours, row.wall) for row in table.rows] == [
        ("gym-job-20261201T000000Z-aaaaa1", "/runs/aaaaa1", "-", "-"),
        ("gym-job-20261201T000000Z-aaaaa2", "/runs/aaaaa2", "-", "-"),
    ]
    assert [r.value if r else None for r in table.across("code")] == [None, 0.5]
    assert (table.total_hours, table.total_wall) == ("-", "-")


def test_labels_that_differ_in_one_number_are_a_numeric_axis() -> None:
    axis = x_axis("services.policy.model", ["/ckpt/step-1000/hf", "/ckpt/step-3000/hf", "/ckpt/step-2000/hf"])
    assert axis.numeric and axis.positions == [1000.0, 3000.0, 2000.0]
    assert axis.title == "services.policy.model: /ckpt/step-N/hf" and axis.ticks == ["1000", "3000", "2000"]
    assert x_axis(
        "m", ["/a/very/long/checkpoint/directory/step-1", "/a/very/long/checkpoint/directory/step-2"]
    ).title == ("m: …checkpoint/directory/step-N")
    assert x_axis("lr", ["1e-5", "3e-5"]).positions == [1e-5, 3e-5]
    assert x_axis("RUN", ["step-10", "step-20"]).title == "step-N"


def test_labels_without_one_varying_number_stay_in_order() -> None:
    for labels in (["/m/a", "/m/b"], ["v1-step-100", "v2-step-200"], ["only-1"]):
        axis = x_axis("services.policy.model", labels)
        assert not axis.numeric and axis.positions == [float(i) for i in range(len(labels))]


def compared(base: dict[int, float], candidate: dict[int, float], **fields) -> BenchmarkComparison:
    return compare_benchmark(result(task_means=base), result(task_means=candidate, **fields), "reward")


def test_a_comparison_row_words_the_numbers_in_the_columns_order() -> None:
    row = comparison_row(compared({t: 0.0 for t in range(12)}, {t: 1.0 if t < 8 else 0.0 for t in range(12)}))
    assert COMPARISON_COLUMNS == ("tasks", "base", "candidate", "delta", "95% CI", "p")
    n, base, candidate, delta, ci, p = row.numbers
    assert (n, base, candidate, delta) == ("12", "0.0000", "0.6667", "+0.6667")
    assert ci.startswith("[+") and p == "0.00781"  # McNemar's exact test: 8 flipped up, none down
    assert (row.verdict, row.css) == ("improved", "improved")
    assert (row.improved_text, row.regressed_text) == ("0, 1, 2, 3, 4, 5, 6, 7", "none")


def test_an_unchanged_benchmark_and_one_without_common_tasks() -> None:
    same = comparison_row(compared({0: 1.0, 1: 0.0}, {0: 1.0, 1: 0.0}))
    assert (same.verdict, same.css, same.numbers[3]) == ("no significant change", "no-significant-change", "+0.0000")
    apart = comparison_row(compared({0: 1.0}, {1: 1.0}))
    assert apart.numbers == ("0", "–", "–", "–", "–", "–") and apart.css == "no-common-tasks"
    assert apart.flags == ("compared on the 0 task(s) both have (1 only in base, 1 only in candidate)",)


def test_over_several_benchmarks_the_p_says_it_was_adjusted_and_the_method_how() -> None:
    up = {t: 1.0 if t < 8 else 0.0 for t in range(12)}
    zero = {t: 0.0 for t in range(12)}
    base = run("bbbbbb", result("math", task_means=zero), result("code", task_means=zero), result("old"))
    candidate = run("cccccc", result("math", task_means=up), result("code", task_means=zero), result("new"))
    table = comparison_table(compare_runs(base, candidate, "reward"), "step-1000", "step-2000")
    assert table.title == "step-2000 against step-1000"
    assert [row.numbers[-1] for row in table.rows] == ["0.00781 (adjusted 0.0156)", "1 (adjusted 1)"]
    assert table.not_compared == [
        "only in the base run, not compared: old",
        "only in the candidate run, not compared: new",
    ]
    assert table.method.endswith(
        "the benchmarks' p-values adjusted together (Holm's correction); improved or regressed when the "
        "adjusted p is below 0.05."
    )
    alone = compare_runs(base, candidate, "reward", correction=Correction.NONE)
    assert p_text(alone.benchmarks[0]) == "0.00781"
    assert comparison_table(alone, "a", "b").method.endswith("; improved or regressed when p is below 0.05.")
