"""Two runs compared benchmark by benchmark, over the tasks both have. No I/O here.

Per benchmark in both runs: each task's metric (its rollouts averaged) in each run, paired by task
index, and ``stats.paired_comparison`` over the pairs: the delta, its 95 % CI, a p-value (McNemar's
exact test for 0/1 scores, a paired t-test on the per-task differences otherwise, a permutation
test for few tasks), the tasks that went up and down, and the smallest drop the pair can detect.
A benchmark that is partial in either run is still compared on the tasks both have, and flagged.
Benchmarks of one run only are listed, never dropped.

The benchmarks of a comparison are judged together: their p-values are adjusted as one family
(Holm's by default, so the chance of any false alarm over the suite stays at 5 %), and each
verdict is read off the adjusted p. Thirty benchmarks each tested at 5 % alone would cry
"regressed" for an unchanged model in every second comparison.

The regression gate fails closed: a benchmark that cannot be compared (missing from either run,
not started, not complete in either, no task scored in both, or inputs that differ unless that is
allowed) is ``uncomparable``, with why, and
``gym eval compare --fail-on-regression`` fails on it with an exit code of its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from nemo_gym.orchestration.contract import Status
from nemo_gym.orchestration.results import BenchmarkResult, RunResults
from nemo_gym.orchestration.stats import (
    DEFAULT_POWER,
    REGRESSED,
    Correction,
    PairedComparison,
    adjust,
    family_alpha,
    paired_comparison,
)

# Unscoreable rows named in a comparison's flag (results --json lists them).
UNSCOREABLE_FLAGGED = 5


class Blocker(str, Enum):
    """Why a benchmark cannot decide a regression gate."""

    MISSING = "missing"  # in one run only
    NOT_STARTED = "not started"  # queued or starting in either run
    NOT_COMPLETE = "not complete"  # either side failed, incomplete, of unknown completeness or unscored rows
    NO_COMMON_TASKS = "no common tasks"  # no task scored in both runs
    NOTHING = "nothing to compare"  # neither run has a benchmark
    INPUTS_DIFFER = "inputs differ"  # the two runs were not asked the same tasks


@dataclass(frozen=True)
class Uncomparable:
    benchmark: str
    blocker: Blocker
    detail: str  # one line: which run and why

    def text(self) -> str:
        return f"{self.benchmark}: {self.detail}"

    def as_dict(self) -> dict[str, str]:
        return {"benchmark": self.benchmark, "why": self.blocker.value, "detail": self.detail}


@dataclass(frozen=True)
class BenchmarkComparison:
    benchmark: str
    metric: str
    paired: PairedComparison
    flags: tuple[str, ...]  # why the comparison may be weaker than it looks (partial runs, ...)
    uncomparable: tuple[Uncomparable, ...] = ()  # why it cannot decide a gate; () when it can
    # Set by ``judged_together``: the p-value adjusted over the family, the correction and the
    # family's size. Alone, a benchmark is a family of one (adjusted p = raw p).
    adjusted_p: float | None = None
    correction: Correction = Correction.NONE
    family: int = 1

    @property
    def p_for_verdict(self) -> float | None:
        return self.paired.p_value if self.adjusted_p is None else self.adjusted_p

    @property
    def verdict(self) -> str:
        """Improved, regressed or no significant change, read off the adjusted p-value."""
        return self.paired.significant(self.p_for_verdict)

    @property
    def regressed(self) -> bool:
        return self.verdict == REGRESSED

    @property
    def level(self) -> float:
        """The per-benchmark level a drop must reach in the worst case (alpha / m under a correction)."""
        return family_alpha(self.paired.alpha, self.family, self.correction)

    def detectable_drop(self, power: float = DEFAULT_POWER) -> float | None:
        """The smallest change this pair detects with probability ``power`` at this family's level."""
        return self.paired.detectable_drop(self.level, power)

    def as_dict(self) -> dict[str, Any]:
        p = self.paired
        return {
            "benchmark": self.benchmark,
            "metric": self.metric,
            "base": p.base_mean,
            "candidate": p.candidate_mean,
            "delta": p.delta,
            "ci95": list(p.ci) if p.ci is not None else None,
            "p_value": p.p_value,
            "p_adjusted": self.p_for_verdict,
            "correction": self.correction.value,
            "family": self.family,
            "detectable_drop": self.detectable_drop(),
            "detectable_at": {"power": DEFAULT_POWER, "alpha": self.level},
            "standard_error": p.standard_error,
            "improved": list(p.improved_tasks),
            "regressed": list(p.regressed_tasks),
            "paired_tasks": p.n,
            "verdict": self.verdict,
            "test": p.test.value if p.test is not None else None,
            "unchanged": p.unchanged,
            "tasks_only_in_base": p.only_in_base,
            "tasks_only_in_candidate": p.only_in_candidate,
            "flags": list(self.flags),
            "comparable": not self.uncomparable,
        }


@dataclass(frozen=True)
class RunComparison:
    base: RunResults
    candidate: RunResults
    metric: str
    benchmarks: tuple[BenchmarkComparison, ...]
    only_in_base: tuple[str, ...]
    only_in_candidate: tuple[str, ...]
    correction: Correction = Correction.HOLM

    @property
    def regressed(self) -> tuple[str, ...]:
        return tuple(b.benchmark for b in self.benchmarks if b.regressed)

    @property
    def uncomparable(self) -> tuple[Uncomparable, ...]:
        """Every reason a benchmark of either run cannot decide the gate, benchmark by benchmark."""
        found = [u for b in self.benchmarks for u in b.uncomparable]
        found += [Uncomparable(n, Blocker.MISSING, "not in the candidate run") for n in self.only_in_base]
        found += [Uncomparable(n, Blocker.MISSING, "not in the base run") for n in self.only_in_candidate]
        if not (self.benchmarks or self.only_in_base or self.only_in_candidate):
            found.append(Uncomparable("-", Blocker.NOTHING, "neither run has a benchmark"))
        return tuple(found)

    def as_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.record.gym_job_id,
            "candidate": self.candidate.record.gym_job_id,
            "base_dir": self.base.record.run_dir,
            "candidate_dir": self.candidate.record.run_dir,
            "metric": self.metric,
            "correction": self.correction.value,
            "benchmarks": [b.as_dict() for b in self.benchmarks],
            "only_in_base": list(self.only_in_base),
            "only_in_candidate": list(self.only_in_candidate),
            "regressed": list(self.regressed),
            "uncomparable": [u.as_dict() for u in self.uncomparable],
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)


def compare_runs(
    base: RunResults,
    candidate: RunResults,
    metric: str,
    *,
    seed: int = 0,
    allow_different_inputs: bool = False,
    correction: Correction = Correction.HOLM,
) -> RunComparison:
    base_by_name = {r.benchmark: r for r in base.benchmarks}
    candidate_by_name = {r.benchmark: r for r in candidate.benchmarks}
    common = [name for name in base_by_name if name in candidate_by_name]
    compared = tuple(
        compare_benchmark(
            base_by_name[name],
            candidate_by_name[name],
            metric,
            seed=seed,
            allow_different_inputs=allow_different_inputs,
        )
        for name in common
    )
    return RunComparison(
        base=base,
        candidate=candidate,
        metric=metric,
        benchmarks=judged_together(compared, correction),
        correction=correction,
        only_in_base=tuple(n for n in base_by_name if n not in candidate_by_name),
        only_in_candidate=tuple(n for n in candidate_by_name if n not in base_by_name),
    )


def compare_benchmark(
    base: BenchmarkResult,
    candidate: BenchmarkResult,
    metric: str,
    *,
    seed: int = 0,
    allow_different_inputs: bool = False,
) -> BenchmarkComparison:
    # Related tasks (a group_key's groups) are one unit of evidence: the base run's groups decide.
    groups = {**candidate.task_groups, **base.task_groups} or None
    paired = paired_comparison(base.task_means, candidate.task_means, seed=seed, groups=groups)
    flags = [*partial_flags(base, "base"), *partial_flags(candidate, "candidate")]
    if paired.only_in_base or paired.only_in_candidate:
        flags.append(
            f"compared on the {paired.n} task(s) both have ({paired.only_in_base} only in base, "
            f"{paired.only_in_candidate} only in candidate)"
        )
    blockers = (*side_blockers(base, "base"), *side_blockers(candidate, "candidate"))
    differ = inputs_differ(base, candidate)
    if differ:
        flags.append(differ)
        if not allow_different_inputs:
            blockers += (Uncomparable(base.benchmark, Blocker.INPUTS_DIFFER, differ),)
    if paired.n == 0:
        blockers += (Uncomparable(base.benchmark, Blocker.NO_COMMON_TASKS, "no task is scored in both runs"),)
    return BenchmarkComparison(base.benchmark, metric, paired, tuple(flags), blockers)


def judged_together(
    comparisons: tuple[BenchmarkComparison, ...] | list[BenchmarkComparison], correction: Correction
) -> tuple[BenchmarkComparison, ...]:
    """The comparisons as one family: each p-value adjusted over every one that has a p-value."""
    tested = [c for c in comparisons if c.paired.p_value is not None]
    adjusted = dict(zip((id(c) for c in tested), adjust([c.paired.p_value or 0.0 for c in tested], correction)))
    return tuple(
        replace(c, adjusted_p=adjusted[id(c)], correction=correction, family=len(tested)) if id(c) in adjusted else c
        for c in comparisons
    )


def inputs_differ(base: BenchmarkResult, candidate: BenchmarkResult) -> str | None:
    """One line when both runs' materialized inputs are known and differ: apples and oranges."""
    if base.inputs_digest is None or candidate.inputs_digest is None or base.inputs_digest == candidate.inputs_digest:
        return None
    return (
        f"the runs were asked different tasks (inputs digest {base.inputs_digest[:12]} in base, "
        f"{candidate.inputs_digest[:12]} in candidate)"
    )


def side_blockers(result: BenchmarkResult, role: str) -> tuple[Uncomparable, ...]:
    """Why one run's side of a benchmark cannot decide a gate: not started, or not complete."""
    if result.state in (Status.QUEUED, Status.STARTING):
        return (
            Uncomparable(result.benchmark, Blocker.NOT_STARTED, f"the {role} run has not started ({result.state})"),
        )
    if result.complete is not True:
        why = result.completeness_reason or result.state
        return (Uncomparable(result.benchmark, Blocker.NOT_COMPLETE, f"the {role} run is not complete: {why}"),)
    return ()


def partial_flags(result: BenchmarkResult, role: str) -> list[str]:
    """What makes one side's numbers partial: ``base incomplete (9/12 samples)``."""
    flags = []
    if not result.complete:
        flags.append(f"{role} {result.state} ({result.samples_text()} samples)")
    if result.unscoreable:
        shown = ", ".join(u.text() for u in result.unscoreable[:UNSCOREABLE_FLAGGED])
        more = ", ..." if len(result.unscoreable) > UNSCOREABLE_FLAGGED else ""
        flags.append(
            f"{role} has {len(result.unscoreable)} row(s) without a {result.metric!r} score, left out: {shown}{more}"
        )
    if result.complete is None:
        flags.append(f"{role} completeness unknown: {result.completeness_reason}")
    if result.duplicates:
        flags.append(f"{role} has {result.duplicates} duplicate row(s), counted once")
    if not result.scored_tasks:
        flags.append(f"{role} has no {result.metric!r} scores")
    return flags
