"""``plan``: how many tasks and repeats each benchmark needs to detect a drop, from an earlier run
(or a pair of runs), and what that costs (``sample_size``'s rules)."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from nemo_gym.orchestration.connection import Connect, connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library.observing import results
from nemo_gym.orchestration.record import SubmissionRecord
from nemo_gym.orchestration.results import BenchmarkResult
from nemo_gym.orchestration.verbs.plan.sample_size import DetectionTarget, Pilot, SamplePlan, plan


def plan_samples(
    records: list[SubmissionRecord], target: DetectionTarget, metric: str | None = None, *, connect: Connect = connect
) -> list[SamplePlan]:
    """A plan per benchmark of the first run; with two runs (a base and a candidate), from their
    per-task differences. ``target.family`` 0 means: as many as the run has benchmarks."""
    runs = results(records, metric, connect=connect)
    base = runs[0]
    others = {r.benchmark: r for r in runs[1].benchmarks} if len(runs) > 1 else None
    pilots = [pilot_of(b, None if others is None else others.get(b.benchmark)) for b in base.benchmarks]
    usable = [p for p in pilots if p is not None]
    if not usable:
        raise UserError(
            f"{base.record.gym_job_id}: no benchmark has two or more scored tasks to plan from; "
            "run it first (gym eval status)"
        )
    if target.family == 0:
        target = replace(target, family=len(usable))
    return [plan(p, target) for p in usable]


def pilot_of(result: BenchmarkResult, other: BenchmarkResult | None) -> Pilot | None:
    """What one benchmark's run (and, with ``other``, a second run's) says of its variance."""
    if result.spread is None or len(result.task_means) < 2:
        return None
    usage = result.usage
    if other is None or other.spread is None:
        values = list(result.task_means.values())
        return Pilot(
            benchmark=result.benchmark,
            tasks=len(values),
            repeats=result.spread.repeats,
            task_mean_variance=statistics.variance(values),
            within_task_variance=result.spread.within_task_variance,
            paired=False,
            gpu_hours=usage.gpu_hours,
            wall_seconds=usage.wall_seconds,
            value_range=spread_of(values),
            binary=all(v in (0.0, 1.0) for v in values),
        )
    common = sorted(result.task_means.keys() & other.task_means.keys())
    if len(common) < 2:
        return None
    differences = [other.task_means[t] - result.task_means[t] for t in common]
    spreads = [s for s in (result.spread.within_task_variance, other.spread.within_task_variance) if s is not None]
    within = math.fsum(spreads) / 2 if len(spreads) == 2 else None
    repeats = min(result.spread.repeats, other.spread.repeats)
    return Pilot(
        benchmark=result.benchmark,
        tasks=len(common),
        repeats=repeats,
        task_mean_variance=statistics.variance(differences),
        within_task_variance=within,
        paired=True,
        gpu_hours=usage.gpu_hours,
        wall_seconds=usage.wall_seconds,
        value_range=spread_of([*result.task_means.values(), *other.task_means.values()]),
        binary=all(v in (0.0, 1.0) for v in [*result.task_means.values(), *other.task_means.values()]),
    )


def spread_of(values: list[float]) -> float:
    """The scores' range; 1 when they are all equal (a pass/fail metric that never passed)."""
    return (max(values) - min(values)) or 1.0
