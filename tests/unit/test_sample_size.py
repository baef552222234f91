"""gym eval plan's rules: the variance model, every task before repeats, the floor of a pilot
without variance, and, by simulation, that the planned tasks x repeats really detect the drop
with about the power asked."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.comparison import compare_benchmark
from nemo_gym.orchestration.stats import REGRESSED
from nemo_gym.orchestration.verbs.plan.sample_size import DetectionTarget, Pilot, plan

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import suite_statistics as simulation  # noqa: E402


def pilot(**overrides) -> Pilot:
    fields = {
        "benchmark": "b",
        "tasks": 200,
        "repeats": 4,
        "task_mean_variance": 0.02,
        "within_task_variance": 0.2,
        "paired": True,
        "gpu_hours": 2.0,
        "wall_seconds": 3600.0,
    }
    return Pilot(**{**fields, **overrides})


def test_a_reachable_target_takes_every_task_then_the_fewest_repeats() -> None:
    p = plan(pilot(), DetectionTarget(drop=0.03))
    # tau^2 = 0.02 - 0.4/4 < 0 -> 0: all the variance is the repeats': (2.80^2 x 0.4/K) / 200 <= 0.03^2
    assert p.tasks == 200 and p.repeats == math.ceil(2.8016**2 * 0.4 / (200 * 0.03**2))
    assert (
        p.detectable_then <= 0.03 < plan(pilot(), DetectionTarget(drop=0.03, max_repeats=p.repeats - 1)).detectable_now
    )
    assert p.gpu_hours == pytest.approx(2.0 * p.repeats / 4) and p.wall_seconds == pytest.approx(3600 * p.repeats / 4)


def test_one_repeat_enough_plans_fewer_tasks() -> None:
    p = plan(pilot(task_mean_variance=0.1, within_task_variance=0.0, repeats=1), DetectionTarget(drop=0.2))
    assert p.repeats == 1 and p.tasks < 200
    assert p.detectable_then <= 0.2
    assert (
        plan(pilot(task_mean_variance=0.1, within_task_variance=0.0, repeats=1), DetectionTarget(drop=0.01)).tasks
        is None
    )


def test_what_repeats_cannot_shrink_puts_the_target_out_of_reach() -> None:
    p = plan(pilot(task_mean_variance=0.5), DetectionTarget(drop=0.03))  # tau^2 = 0.4 whatever the repeats
    assert p.tasks is None and p.repeats is None
    assert "out of reach with 200 tasks" in p.note and "it would take about" in p.note


def test_a_family_asks_more_than_one_benchmark() -> None:
    alone = plan(pilot(), DetectionTarget(drop=0.03))
    thirty = plan(pilot(), DetectionTarget(drop=0.03, family=30))
    assert thirty.repeats > alone.repeats


def test_one_run_needs_an_assumed_correlation() -> None:
    one_run = pilot(paired=False, task_mean_variance=0.1)
    alike = plan(one_run, DetectionTarget(drop=0.03, correlation=0.95))
    unlike = plan(one_run, DetectionTarget(drop=0.03, correlation=0.0))
    assert alike.detectable_now < unlike.detectable_now


def test_a_pilot_whose_scores_never_moved_still_has_a_floor() -> None:
    p = plan(pilot(task_mean_variance=0.0, within_task_variance=0.0, tasks=12, binary=True), DetectionTarget(drop=0.1))
    assert p.detectable_now == pytest.approx(6 / 12) and p.tasks is None  # 6 tasks one way: McNemar's least


@pytest.mark.parametrize("repeats", [4])
def test_the_planned_size_detects_the_drop_with_about_the_power_asked(repeats: int) -> None:
    rng = np.random.default_rng(9)
    base, candidate = simulation.benchmark_pair(rng, repeats, 0.0)  # a pilot pair of the same model
    differences = [candidate[t] - base[t] for t in base]
    # A task's repeats are Bernoulli(p): their sample variance is p(1-p) on average over the tasks.
    rates = rng.beta(simulation.BETA, simulation.BETA, 20_000)
    within = float(np.mean(rates * (1 - rates)))
    target = DetectionTarget(drop=0.05, power=0.8)
    planned = plan(pilot(task_mean_variance=float(np.var(differences, ddof=1)), within_task_variance=within), target)
    assert planned.repeats is not None and planned.tasks == 200
    detected = 0
    for _ in range(150):
        b, c = simulation.benchmark_pair(rng, planned.repeats, 0.05, tasks=planned.tasks)
        compared = compare_benchmark(simulation.result("b", b), simulation.result("b", c), "reward")
        detected += compared.verdict == REGRESSED
    assert 0.65 <= detected / 150 <= 0.95, (planned, detected)


def test_the_command_plans_from_a_run_directory(tmp_path, capsys) -> None:
    from test_compare import generated_run

    rng = np.random.default_rng(1)
    rates = rng.beta(0.8, 0.8, 100)
    run = generated_run(
        tmp_path, "pilot", {"math": {t: list(map(float, rng.random(4) < p)) for t, p in enumerate(rates)}}
    )
    assert main(["eval", "plan", str(run), "--detect", "0.15", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    only = out["benchmarks"][0]
    assert only["benchmark"] == "math" and only["tasks"] == 100 and only["repeats"] >= 1
    assert out["target"]["family"] == 1
    assert main(["eval", "plan", str(run), "--detect", "0.15"]) == 0
    text = capsys.readouterr().out
    assert "TASKS x REPEATS" in text and f"100 x {only['repeats']}" in text


@pytest.mark.parametrize("flag", [["--detect", "nan"], ["--detect", "0"], ["--power", "1"], ["--max-repeats", "0"]])
def test_nonsense_targets_are_one_line_usage_errors(tmp_path, capsys, flag: list[str]) -> None:
    args = ["eval", "plan", str(tmp_path), *(["--detect", "0.1"] if flag[0] != "--detect" else []), *flag]
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    assert "error: argument" in capsys.readouterr().err
