"""A release gate over a suite of benchmarks, from a policy file. Pure rules, no I/O.

A policy names the benchmarks that matter and how much: each has a tier (critical, supporting,
advisory), the drop it tolerates (absolute ``max_drop``, relative ``max_relative_drop``, or none:
any significant drop), the direction that is better, and the paired tasks it needs before it can
say anything. Each benchmark of the policy gets one finding from the paired comparison
``comparison.compare_benchmark`` already makes (tasks paired by index, a CI from the per-task
differences, McNemar's exact test or a paired t-test). The critical and supporting benchmarks are
one family: their p-values are adjusted together (Holm's by default), so an unchanged model is
called NO-GO by chance at most 5 % of the time however many benchmarks the policy names; advisory
ones are reported with their raw p and never counted.

- ``missing``: not in both sides, or not comparable (not complete, not started, no common task).
  A benchmark nobody measured is not certified.
- ``insufficient evidence``: fewer paired tasks than the policy asks; or a drop beyond the
  tolerance that the evidence does not establish; or a limit smaller than the smallest drop this
  pair can detect (80 % power at the family's level): a pass there would certify nothing (more
  tasks or repeats would tell; ``gym eval plan`` says how many).
- ``breach``: a drop the evidence puts beyond the tolerance: the paired test calls it significant
  (adjusted p) and the whole 95 % CI of the delta lies past the tolerated drop.
- ``pass``: the drop is within a tolerance the pair can resolve; without any limit, no
  significant drop.

The verdict, strongest finding first: NO-GO when a critical benchmark breaches, or more supporting
ones than ``supporting_breaches_allowed``; else MISSING when a critical or supporting one is
missing; else INCONCLUSIVE when one of them lacks evidence; else GO. Advisory benchmarks are
reported and never move the verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nemo_gym.orchestration.errors import UserError, describe_validation_error
from nemo_gym.orchestration.results import DEFAULT_METRIC

if TYPE_CHECKING:
    from nemo_gym.orchestration.comparison import BenchmarkComparison
    from nemo_gym.orchestration.stats import Correction


class Tier(str, Enum):
    CRITICAL = "critical"
    SUPPORTING = "supporting"
    ADVISORY = "advisory"


class Direction(str, Enum):
    """Which way the metric is better."""

    HIGHER = "higher"
    LOWER = "lower"


class Finding(str, Enum):
    PASS = "pass"
    BREACH = "breach"
    INSUFFICIENT = "insufficient evidence"
    MISSING = "missing"


class Verdict(str, Enum):
    GO = "GO"
    NO_GO = "NO-GO"
    INCONCLUSIVE = "INCONCLUSIVE"
    MISSING = "MISSING"


# The command's exit code per verdict (2 is the CLI's own: the gate could not run).
EXIT_CODES = {Verdict.GO: 0, Verdict.NO_GO: 1, Verdict.INCONCLUSIVE: 3, Verdict.MISSING: 4}

# Paired tasks a benchmark needs by default before it can pass or breach (nel's minimum too).
DEFAULT_MIN_PAIRED = 10


class BenchmarkPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tier: Tier = Tier.CRITICAL
    metric: str | None = Field(default=None, min_length=1, description="default: the policy's metric")
    direction: Direction = Direction.HIGHER
    max_drop: float | None = Field(default=None, ge=0, description="the largest tolerated drop, in the metric's units")
    max_relative_drop: float | None = Field(
        default=None, ge=0, le=1, description="the largest tolerated drop, as a fraction of the base value"
    )
    min_paired: int | None = Field(default=None, ge=1, description="default: the policy's min_paired")


class GatePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metric: str = Field(default=DEFAULT_METRIC, min_length=1)
    min_paired: int = Field(default=DEFAULT_MIN_PAIRED, ge=1)
    supporting_breaches_allowed: int = Field(default=0, ge=0)
    benchmarks: dict[str, BenchmarkPolicy]

    @field_validator("benchmarks", mode="before")
    @classmethod
    def _bare_names_take_the_defaults(cls, value: Any) -> Any:
        """``math:`` with nothing after it is a benchmark with every default."""
        if isinstance(value, dict):
            return {name: ({} if rule is None else rule) for name, rule in value.items()}
        return value

    @model_validator(mode="after")
    def _names_benchmarks(self) -> GatePolicy:
        if not self.benchmarks:
            raise ValueError("benchmarks: the policy names no benchmark; add at least one (name: {tier: critical})")
        return self

    def metric_of(self, name: str) -> str:
        return self.benchmarks[name].metric or self.metric

    def min_paired_of(self, name: str) -> int:
        return self.benchmarks[name].min_paired or self.min_paired


def load_policy(data: Any, source: str) -> GatePolicy:
    """The policy a file holds (parsed YAML), or a ``UserError`` naming the file and the field."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: a gate policy is a mapping with a 'benchmarks' key; see gym eval gate --help")
    try:
        return GatePolicy.model_validate(data)
    except ValidationError as exc:
        raise UserError([f"{source}: {line}" for line in describe_validation_error(exc, GatePolicy)]) from None


@dataclass(frozen=True)
class BenchmarkGate:
    benchmark: str
    tier: Tier
    metric: str
    finding: Finding
    why: str  # one line
    tolerated_drop: float | None  # None when missing (no base value to scale a relative drop)
    comparison: BenchmarkComparison | None

    def as_dict(self) -> dict[str, Any]:
        paired = self.comparison.paired if self.comparison else None
        return {
            "benchmark": self.benchmark,
            "tier": self.tier.value,
            "metric": self.metric,
            "finding": self.finding.value,
            "why": self.why,
            "tolerated_drop": self.tolerated_drop,
            "paired_tasks": paired.n if paired else 0,
            "base": paired.base_mean if paired else None,
            "candidate": paired.candidate_mean if paired else None,
            "delta": paired.delta if paired else None,
            "ci95": list(paired.ci) if paired and paired.ci else None,
            "p_value": paired.p_value if paired else None,
            "p_adjusted": self.comparison.p_for_verdict if self.comparison else None,
            "correction": self.comparison.correction.value if self.comparison else None,
            "detectable_drop": self.comparison.detectable_drop() if self.comparison else None,
        }


@dataclass(frozen=True)
class GateOutcome:
    verdict: Verdict
    why: str  # one line: what decided the verdict
    benchmarks: tuple[BenchmarkGate, ...]
    not_in_policy: tuple[str, ...]  # measured, not gated

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "exit_code": self.exit_code,
            "why": self.why,
            "benchmarks": [b.as_dict() for b in self.benchmarks],
            "not_in_policy": list(self.not_in_policy),
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)


def has_limit(rule: BenchmarkPolicy) -> bool:
    return rule.max_drop is not None or rule.max_relative_drop is not None


def tolerated_drop(rule: BenchmarkPolicy, base_mean: float) -> float:
    """The drop the rule tolerates at this base value: the tighter of its limits, 0 without one."""
    limits = []
    if rule.max_drop is not None:
        limits.append(rule.max_drop)
    if rule.max_relative_drop is not None:
        limits.append(rule.max_relative_drop * abs(base_mean))
    return min(limits) if limits else 0.0


def judge_benchmark(
    name: str, policy: GatePolicy, comparison: BenchmarkComparison | None, missing: str | None
) -> BenchmarkGate:
    """One benchmark's finding. ``missing`` says why there is no comparison, or why it cannot
    decide (not complete, not started); ``comparison`` is None when a side lacks the benchmark."""
    rule = policy.benchmarks[name]
    metric = policy.metric_of(name)

    def found(finding: Finding, why: str, tolerance: float | None = None) -> BenchmarkGate:
        return BenchmarkGate(name, rule.tier, metric, finding, why, tolerance, comparison)

    if comparison is None or missing:
        return found(Finding.MISSING, missing or "not measured in both runs")
    paired = comparison.paired
    needed = policy.min_paired_of(name)
    if paired.n < needed or paired.delta is None or paired.base_mean is None:
        return found(Finding.INSUFFICIENT, f"{paired.n} paired task(s); the policy asks at least {needed}")
    tolerance = tolerated_drop(rule, paired.base_mean)
    finding, why = judge_drop(rule, metric, comparison, tolerance)
    return found(finding, why, tolerance)


def judge_drop(
    rule: BenchmarkPolicy, metric: str, comparison: BenchmarkComparison, tolerance: float
) -> tuple[Finding, str]:
    """A comparable benchmark's finding against its tolerated drop, and why, in one line."""
    from nemo_gym.orchestration.stats import IMPROVED, REGRESSED  # numpy: only when a gate runs

    paired = comparison.paired
    assert paired.delta is not None and paired.base_mean is not None and paired.candidate_mean is not None
    higher = rule.direction is Direction.HIGHER
    drop = -paired.delta if higher else paired.delta
    significant = comparison.verdict == (REGRESSED if higher else IMPROVED)
    # The smallest drop the 95 % CI allows: beyond the tolerance, so is all of it.
    least_drop = None if paired.ci is None else (-paired.ci[1] if higher else paired.ci[0])
    detectable = comparison.detectable_drop()
    shown = f"{metric} {paired.base_mean:.4f} -> {paired.candidate_mean:.4f} ({paired.delta:+.4f})"
    p_value = p_words(comparison)
    if drop > tolerance and significant and least_drop is not None and least_drop > tolerance:
        return Finding.BREACH, (
            f"{shown}, beyond the tolerated {tolerance:.4f}: significant ({p_value}), and the 95 % CI "
            f"puts the drop at {least_drop:.4f} or more"
        )
    if has_limit(rule) and detectable is not None and tolerance < detectable:
        return Finding.INSUFFICIENT, (
            f"{shown}: the tolerated drop {tolerance:.4f} is below the smallest drop this pair can detect "
            f"({detectable:.4f}); more tasks or repeats would tell (gym eval plan)"
        )
    if drop <= tolerance:
        return Finding.PASS, f"{shown}, within the tolerated drop of {tolerance:.4f}"
    if not has_limit(rule) and not significant:
        can = "" if detectable is None else f"; this pair can detect drops of {detectable:.4f} or more"
        return Finding.PASS, f"{shown}, no significant drop ({p_value}){can}"
    allowed = 0.0 if least_drop is None else max(least_drop, 0.0)
    return Finding.INSUFFICIENT, (
        f"{shown}, beyond the tolerated {tolerance:.4f}, but the evidence does not establish it ({p_value}; "
        f"the 95 % CI allows a drop of only {allowed:.4f}): more tasks or repeats would tell"
    )


def p_words(comparison: BenchmarkComparison) -> str:
    """``p=0.012, adjusted 0.2 (holm over 12)``, or the raw p alone for a family of one."""
    raw = comparison.paired.p_value
    if raw is None:
        return "p=-"
    if comparison.family <= 1 or comparison.adjusted_p is None:
        return f"p={raw:.3g}"
    return f"p={raw:.3g}, adjusted {comparison.adjusted_p:.3g} ({comparison.correction.value} over {comparison.family})"


GATING_TIERS = (Tier.CRITICAL, Tier.SUPPORTING)


def family_of(policy: GatePolicy, comparisons: dict[str, BenchmarkComparison]) -> list[str]:
    """The benchmarks whose p-values are adjusted together: the critical and supporting ones."""
    return [name for name in comparisons if policy.benchmarks[name].tier in GATING_TIERS]


def judge_suite(
    policy: GatePolicy, compared: dict[str, BenchmarkComparison], missing: dict[str, str], correction: Correction
) -> list[BenchmarkGate]:
    """Every benchmark of the policy judged, in the policy's order: the critical and supporting
    ones' p-values adjusted together first. ``missing`` says why a benchmark has no comparison."""
    from nemo_gym.orchestration.comparison import judged_together

    family = family_of(policy, compared)
    compared = {**compared, **dict(zip(family, judged_together([compared[n] for n in family], correction)))}
    judged = []
    for name in policy.benchmarks:
        comparison = compared.get(name)
        if comparison is None:
            judged.append(judge_benchmark(name, policy, None, missing.get(name) or "not measured in both runs"))
            continue
        blocked = "; ".join(u.detail for u in comparison.uncomparable) or None
        judged.append(judge_benchmark(name, policy, comparison, blocked))
    return judged


def decide(policy: GatePolicy, judged: list[BenchmarkGate], not_in_policy: list[str]) -> GateOutcome:
    """The verdict over the judged benchmarks, by the rule in this module's docstring."""

    def named(tiers: tuple[Tier, ...], finding: Finding) -> list[str]:
        return [b.benchmark for b in judged if b.tier in tiers and b.finding is finding]

    gating = GATING_TIERS
    critical_breaches = named((Tier.CRITICAL,), Finding.BREACH)
    supporting_breaches = named((Tier.SUPPORTING,), Finding.BREACH)
    if critical_breaches:
        verdict, why = Verdict.NO_GO, f"critical benchmark(s) breached: {', '.join(critical_breaches)}"
    elif len(supporting_breaches) > policy.supporting_breaches_allowed:
        verdict, why = (
            Verdict.NO_GO,
            f"{len(supporting_breaches)} supporting benchmark(s) breached ({', '.join(supporting_breaches)}); "
            f"the policy allows {policy.supporting_breaches_allowed}",
        )
    elif missing := named(gating, Finding.MISSING):
        verdict, why = Verdict.MISSING, f"not certified: no comparable result for {', '.join(missing)}"
    elif unsure := named(gating, Finding.INSUFFICIENT):
        verdict, why = Verdict.INCONCLUSIVE, f"not enough evidence for {', '.join(unsure)}"
    else:
        verdict, why = Verdict.GO, "every critical and supporting benchmark within its tolerance"
    return GateOutcome(verdict, why, tuple(judged), tuple(not_in_policy))
