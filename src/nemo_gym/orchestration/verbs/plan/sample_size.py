"""How many tasks and repeats a comparison needs to see a drop of a given size: ``gym eval plan``.
Pure rules, no I/O.

A paired comparison's mean difference over n tasks, each averaged over K repeats, has variance
V(K) / n with V(K) = tau^2 + s^2 / K per task (Miller, "Adding Error Bars to Evals", 2024):

- s^2: the spread between repeats of one task, both runs' (the mean within-task variance, read
  from a pilot run with at least two repeats); repeats shrink it.
- tau^2: how much the two models' per-task pass rates differ beyond that noise; repeats never
  shrink it, only more tasks do. Two runs (a base and a candidate) measure it: var(d) - s^2 / K.
  One run cannot; it is taken as 2 sigma^2 (1 - rho), sigma^2 the spread of its tasks' true means
  and rho (``--correlation``) how alike two checkpoints' task difficulties are.

A drop D is detected with probability ``power`` at a two-sided level alpha' (alpha over the
family judged at once, Holm's first step) when D >= (z_{1-alpha'/2} + z_power) sqrt(V(K) / n),
and, where counts decide (pass/fail at one repeat, or a pilot without variance), never below
what the fewest tasks that could reach alpha' show (``stats.floor_drop``): a pilot whose every
score was 0 has no variance, yet 12 tasks cannot show a drop of 0.1.
Per rollout spent, another task buys at least as much as another repeat (it shrinks tau^2 as
well), so the plan takes every task first and adds repeats only then; with one repeat enough, it
says how few tasks would do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nemo_gym.orchestration.stats import fewest_units, floor_drop

DEFAULT_CORRELATION = 0.5  # between two checkpoints' per-task pass rates, when only one run is known
DEFAULT_MAX_REPEATS = 64


@dataclass(frozen=True)
class Pilot:
    """What one benchmark's earlier run(s) tell of its variance."""

    benchmark: str
    tasks: int  # tasks scored (and the benchmark's size)
    repeats: int  # rollouts per task in the pilot
    task_mean_variance: float  # the sample variance of the per-task means (one run's), or of the differences (two)
    within_task_variance: float | None  # s^2 of one run: None when the pilot has one repeat
    paired: bool  # True: task_mean_variance is of the per-task differences of two runs
    gpu_hours: float | None  # what the pilot's job cost
    wall_seconds: float | None
    value_range: float = 1.0  # the spread of the scores seen (1 when they are all equal)
    binary: bool = False  # every score 0 or 1: at one repeat, McNemar's counts decide


@dataclass(frozen=True)
class DetectionTarget:
    drop: float
    power: float = 0.8
    alpha: float = 0.05
    family: int = 1  # benchmarks judged at once: the level is alpha / family
    correlation: float = DEFAULT_CORRELATION
    max_repeats: int = DEFAULT_MAX_REPEATS

    @property
    def level(self) -> float:
        return self.alpha / max(self.family, 1)

    def multiplier(self) -> float:
        """z_{1-level/2} + z_power: the drop in standard errors a test finds with that power."""
        from scipy.special import ndtri

        return float(ndtri(1 - self.level / 2) + ndtri(self.power))


@dataclass(frozen=True)
class SamplePlan:
    benchmark: str
    tasks: int | None  # None: no number of repeats reaches the target with the tasks there are
    repeats: int | None
    detectable_now: float
    detectable_then: float | None
    gpu_hours: float | None  # at most: the pilot's cost scaled by rollouts (start-up does not grow)
    wall_seconds: float | None
    note: str  # one line: what was assumed, or why the target is out of reach

    @property
    def rollouts(self) -> int | None:
        return None if self.tasks is None or self.repeats is None else self.tasks * self.repeats


def plan(pilot: Pilot, target: DetectionTarget) -> SamplePlan:
    """The fewest rollouts (every task first, then repeats) that detect ``target.drop``."""
    within, note = _within(pilot)
    between = _between(pilot, within, target.correlation)
    factor = target.multiplier()

    def detectable(tasks: int, repeats: int) -> float:
        variance = max(between + within / repeats, 0.0)
        floor = floor_drop(tasks, pilot.value_range, target.level)
        if tasks < fewest_units(target.level):
            return floor
        formula = factor * math.sqrt(variance / tasks)
        return max(formula, floor) if variance == 0 or (pilot.binary and repeats == 1) else formula

    now = detectable(pilot.tasks, pilot.repeats)
    repeats = next((k for k in _repeat_choices(pilot, target) if detectable(pilot.tasks, k) <= target.drop), None)
    if repeats is None:
        most = _repeat_choices(pilot, target)[-1]
        wanted = max(
            math.ceil(factor**2 * (between + within / most) / target.drop**2),
            math.ceil(floor_drop(1, pilot.value_range, target.level) / target.drop),
        )
        why = (
            f"out of reach with {pilot.tasks} tasks: {most} repeat(s) detect {detectable(pilot.tasks, most):.3g}; "
            f"it would take about {wanted} tasks"
        )
        return SamplePlan(pilot.benchmark, None, None, now, None, None, None, _joined(why, note))
    tasks = pilot.tasks
    if repeats == 1:  # one repeat is enough: maybe fewer tasks are too
        tasks = next(n for n in _task_counts(pilot.tasks) if detectable(n, 1) <= target.drop)
    scale = tasks * repeats / (pilot.tasks * pilot.repeats)
    return SamplePlan(
        pilot.benchmark,
        tasks,
        repeats,
        now,
        detectable(tasks, repeats),
        None if pilot.gpu_hours is None else pilot.gpu_hours * scale,
        None if pilot.wall_seconds is None else pilot.wall_seconds * scale,
        note,
    )


def _within(pilot: Pilot) -> tuple[float, str]:
    """s^2 for the pair (both runs' repeats), and a note when it had to be assumed."""
    if pilot.within_task_variance is None:
        return 0.0, "1 repeat in the pilot: only tasks are planned (a pilot with num_repeats >= 2 plans repeats)"
    return 2 * pilot.within_task_variance, ""


def _between(pilot: Pilot, within: float, correlation: float) -> float:
    """tau^2: what stays however many repeats."""
    if pilot.paired:
        return max(pilot.task_mean_variance - within / pilot.repeats, 0.0)
    true_spread = max(pilot.task_mean_variance - within / 2 / pilot.repeats, 0.0)
    return 2 * true_spread * (1 - correlation)


def _repeat_choices(pilot: Pilot, target: DetectionTarget) -> range:
    if pilot.within_task_variance is None:
        return range(pilot.repeats, pilot.repeats + 1)  # repeats cannot be planned: only the pilot's
    return range(1, target.max_repeats + 1)


def _task_counts(most: int) -> range:
    return range(2, most + 1)


def _joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
