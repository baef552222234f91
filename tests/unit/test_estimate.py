"""Before submitting: an estimate of GPU-hours and wall time per benchmark from earlier runs in the
local index (same benchmark, same GPU footprint), and job.max_gpu_hours refusing a run over it."""

from __future__ import annotations

import math

import pytest
from test_sweep_runs import config_file, prepared  # noqa: F401  (a fixture)

from nemo_gym.orchestration import library
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.estimate import Spent, estimate_benchmark, estimate_run, over_budget
from nemo_gym.orchestration.record import spent_history, write_observation

MODEL = "services.policy.model=/ckpt/a"
# The footprint the estimates key on: one node of 8 GPUs.
GPUS = "++compute.cluster.node_pools={gpu:{partition:batch,nodes:1,gpus_per_node:8}}"


def footprint(config_file) -> dict[str, int]:  # noqa: F811
    from nemo_gym.orchestration.backends import backend_named

    plan = prepared(config_file, MODEL, GPUS).runs[0].plan
    return backend_named(plan.backend).allocated_gpus(plan)


def earlier_run(run_id: str, **gpu_hours: float) -> None:
    """What status saw of an earlier run: its benchmarks succeeded, each costing this much."""
    write_observation(run_id, "succeeded", [Spent(b, 8, h, h * 3600 / 8) for b, h in gpu_hours.items()])


def test_the_estimate_is_the_median_of_earlier_runs_on_the_same_footprint() -> None:
    history = [Spent("math", 8, h, 60.0) for h in (1.0, 2.0, 10.0)] + [Spent("math", 4, 50.0, 60.0)]
    math_on_8 = estimate_benchmark("math", 8, history)
    assert (math_on_8.runs, math_on_8.gpu_hours, math_on_8.wall_seconds) == (3, 2.0, 60.0)
    assert estimate_benchmark("math", 16, history).gpu_hours is None  # another footprint: never scaled
    run = estimate_run({"math": 8, "code": 8}, history)
    assert run.gpu_hours is None and run.unknown == ["code"]  # a run's total needs every benchmark's


def test_over_budget_names_the_estimate_and_the_fix() -> None:
    run = estimate_run({"math": 8}, [Spent("math", 8, 3.0, 100.0)])
    assert over_budget(run, 5.0) is None and over_budget(run, None) is None
    said = over_budget(run, 2.5)
    assert said.startswith("job.max_gpu_hours: this run is estimated at 3.00 GPU-hours")
    assert "math 3.00 (median of 1 earlier run on 8 GPUs)" in said and "raise job.max_gpu_hours" in said


def test_a_dry_run_after_earlier_runs_prints_an_estimate_based_on_them(config_file, capsys) -> None:  # noqa: F811
    gpus = footprint(config_file)
    assert gpus == {"math": 8, "code": 8}, gpus  # the fixture's allocation (the estimate keys on it)
    earlier_run("gym-job-20260101T000000Z-000001", math=2.0, code=1.0)
    code = main(["eval", "submit", "-c", str(config_file), "--dry-run", MODEL, GPUS])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "estimate: math: ~2.00 GPU-hours, ~15m00s wall (median of 1 earlier run on 8 GPUs)" in err, err
    assert "estimate: code: ~1.00 GPU-hours" in err and "estimate: the run: ~3.00 GPU-hours" in err


def test_with_no_earlier_run_the_estimate_says_so(config_file, capsys) -> None:  # noqa: F811
    assert main(["eval", "submit", "-c", str(config_file), "--dry-run", MODEL, GPUS]) == 0
    err = capsys.readouterr().err
    assert "estimate: math, code: no earlier run on 8 GPU(s) in the local index to estimate from" in err, err


def test_max_gpu_hours_below_the_estimate_refuses_in_one_line_naming_it(config_file, capsys) -> None:  # noqa: F811
    earlier_run("gym-job-20260101T000000Z-000001", math=2.0, code=1.0)
    code = main(
        [
            "eval",
            "submit",
            "-c",
            str(config_file),
            "--dry-run",
            MODEL,
            GPUS,
            "++job.max_gpu_hours=2.5",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    [line] = [e for e in err.splitlines() if e.startswith("error:")]
    assert "job.max_gpu_hours: this run is estimated at 3.00 GPU-hours" in line and "2.5 allowed" in line
    allowed = ["eval", "submit", "-c", str(config_file), "--dry-run", MODEL, GPUS, "++job.max_gpu_hours=4"]
    assert main(allowed) == 0


def test_a_sweep_refuses_naming_the_run_over_budget(config_file) -> None:  # noqa: F811
    earlier_run("gym-job-20260101T000000Z-000001", math=2.0, code=1.0)
    with pytest.raises(UserError) as refused:
        prepared(config_file, "services.policy.model=/ckpt/a,/ckpt/b", GPUS, "++job.max_gpu_hours=1")
    assert len(refused.value.problems) == 2 and refused.value.problems[0].startswith(
        "services.policy.model=/ckpt/a: job.max_gpu_hours"
    )


@pytest.mark.parametrize("bad", [0, -1, "inf", "nan", "lots"])
def test_max_gpu_hours_must_be_a_positive_number(config_file, capsys, bad) -> None:  # noqa: F811
    code = main(["eval", "submit", "-c", str(config_file), "--dry-run", f"++job.max_gpu_hours={bad}"])
    assert code == 1 and "job.max_gpu_hours" in capsys.readouterr().err


def test_status_records_what_succeeded_jobs_cost_and_hostile_observations_are_skipped(tmp_path) -> None:
    from nemo_gym.orchestration.record import OBSERVED_DIR, index_dir

    earlier_run("gym-job-20260101T000000Z-000001", math=2.0)
    folder = index_dir() / OBSERVED_DIR
    (folder / "bad1.json").write_text('{"state": "x", "spent": [{"benchmark": "m", "gpus": true, "gpu_hours": 1}]}')
    (folder / "bad2.json").write_text('{"spent": [{"benchmark": "m", "gpus": 1, "gpu_hours": NaN}, "x", null]}')
    (folder / "bad3.json").write_text("[" * 100_000)
    (folder / "bad4.json").write_text('{"spent": [{"benchmark": "m", "gpus": 1, "gpu_hours": -1}]}')
    history = spent_history()
    assert [(s.benchmark, s.gpus, s.gpu_hours) for s in history] == [("math", 8, 2.0)]
    assert all(math.isfinite(s.gpu_hours) for s in history)
    assert library.estimate_text([estimate_run({"math": 8}, history)]) == [
        "math: ~2.00 GPU-hours, ~15m00s wall (median of 1 earlier run on 8 GPUs)"
    ]


def test_what_is_known_over_the_limit_refuses_whatever_the_rest_adds() -> None:
    run = estimate_run({"math": 8, "code": 8}, [Spent("math", 8, 3.0, 100.0)])
    said = over_budget(run, 2.0)
    assert said is not None and "estimated at at least 3.00 GPU-hours (math 3.00" in said
    assert over_budget(run, 4.0) is None  # code's cost is unknown: no refusal on a guess


def test_a_sharded_benchmark_is_estimated_as_one_on_its_shards_gpus(config_file) -> None:  # noqa: F811
    from nemo_gym.orchestration.verbs.submit.use_case import footprints

    plan = prepared(config_file, MODEL, GPUS, "++driver.benchmarks.math.shards=3").runs[0].plan
    assert footprints(plan) == {"math": 24, "code": 8}


def test_benchmarks_without_an_estimate_are_one_line_per_footprint_however_many() -> None:
    from nemo_gym.orchestration.estimate import BenchmarkEstimate, RunEstimate, estimate_lines

    unknown = tuple(BenchmarkEstimate(f"b{i}", 8, 0, None, None) for i in range(200))
    known = (BenchmarkEstimate("math", 8, 3, 1.5, 600.0),)
    lines = estimate_lines(RunEstimate(known + unknown), lambda s: f"{s:.0f}s")
    assert lines == [
        "math: ~1.50 GPU-hours, ~600s wall (median of 3 earlier runs on 8 GPUs)",
        "b0, b1, b2 and 197 more: no earlier run on 8 GPU(s) in the local index to estimate from",
    ]
