"""What a run will cost, before it is queued, from what earlier runs of the same benchmarks cost.
Pure rules, no I/O: the history is read from the local index by ``record.spent_history``.

A benchmark's estimate is the median GPU-hours and wall time of its earlier successful jobs on the
same GPU footprint (the GPUs its allocation holds, as ``Backend.allocated_gpus`` says at submit):
another footprint is another cost, and is never scaled to this one. The median, because a few
runs are all there is at first and one slow node should not move the figure much. A run's
estimate is the sum over its benchmarks, known only when every benchmark has one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from nemo_gym.orchestration.display import some_of


@dataclass(frozen=True)
class Spent:
    """What one successful job of an earlier run cost (its record in the index's observation)."""

    benchmark: str
    gpus: int
    gpu_hours: float
    wall_seconds: float | None


@dataclass(frozen=True)
class BenchmarkEstimate:
    benchmark: str
    gpus: int
    runs: int  # earlier jobs it is based on; 0: no estimate
    gpu_hours: float | None
    wall_seconds: float | None


@dataclass(frozen=True)
class RunEstimate:
    benchmarks: tuple[BenchmarkEstimate, ...]

    @property
    def gpu_hours(self) -> float | None:
        """The run's GPU-hours, when every benchmark has an estimate."""
        if not self.benchmarks or any(b.gpu_hours is None for b in self.benchmarks):
            return None
        return sum(b.gpu_hours or 0.0 for b in self.benchmarks)

    @property
    def unknown(self) -> list[str]:
        return [b.benchmark for b in self.benchmarks if b.gpu_hours is None]

    @property
    def known_gpu_hours(self) -> float:
        """The GPU-hours of the benchmarks that have an estimate: the run's at least."""
        return sum(b.gpu_hours for b in self.benchmarks if b.gpu_hours is not None)


def estimate_benchmark(benchmark: str, gpus: int, history: list[Spent]) -> BenchmarkEstimate:
    same = [s for s in history if s.benchmark == benchmark and s.gpus == gpus]
    if not same:
        return BenchmarkEstimate(benchmark, gpus, 0, None, None)
    import statistics  # only with an earlier run to go by (a first submission has none)

    walls = [s.wall_seconds for s in same if s.wall_seconds is not None]
    return BenchmarkEstimate(
        benchmark,
        gpus,
        len(same),
        statistics.median(s.gpu_hours for s in same),
        statistics.median(walls) if walls else None,
    )


def estimate_run(footprints: dict[str, int], history: list[Spent]) -> RunEstimate:
    """Each benchmark's estimate (benchmark -> the GPUs its job will hold), in the run's order."""
    return RunEstimate(tuple(estimate_benchmark(b, gpus, history) for b, gpus in footprints.items()))


def over_budget(estimate: RunEstimate, max_gpu_hours: float | None) -> str | None:
    """Why the run is refused under ``job.max_gpu_hours`` (one line), or None: refused when what
    is known of it is over, whatever the benchmarks without an estimate add."""
    known = estimate.known_gpu_hours
    if max_gpu_hours is None or known <= max_gpu_hours:
        return None
    parts = ", ".join(
        f"{b.benchmark} {b.gpu_hours:.2f} ({runs_text(b)})" for b in estimate.benchmarks if b.gpu_hours is not None
    )
    at = f"{known:.2f}" if not estimate.unknown else f"at least {known:.2f}"
    return (
        f"job.max_gpu_hours: this run is estimated at {at} GPU-hours ({parts}), over the "
        f"{max_gpu_hours:g} allowed; raise job.max_gpu_hours, or evaluate fewer benchmarks or repeats"
    )


def runs_text(b: BenchmarkEstimate) -> str:
    return f"median of {b.runs} earlier run{'s' if b.runs != 1 else ''} on {b.gpus} GPU{'s' if b.gpus != 1 else ''}"


def estimate_lines(estimate: RunEstimate, wall_text: Callable[[float], str]) -> list[str]:
    """One line per benchmark with an estimate, and what it is based on; one line for the
    benchmarks of each footprint that have none (200 new benchmarks are one line, not 200)."""
    lines, unknown = [], defaultdict(list)
    for b in estimate.benchmarks:
        if b.gpu_hours is None:
            unknown[b.gpus].append(b.benchmark)
            continue
        wall = wall_text(b.wall_seconds) if b.wall_seconds is not None else "?"
        lines.append(f"{b.benchmark}: ~{b.gpu_hours:.2f} GPU-hours, ~{wall} wall ({runs_text(b)})")
    for gpus, names in unknown.items():
        lines.append(f"{some_of(names)}: no earlier run on {gpus} GPU(s) in the local index to estimate from")
    return lines
