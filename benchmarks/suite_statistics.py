"""Do compare's and the gate's verdicts hold over a whole suite? Seeded simulations.

Generates pairs of runs in memory (each task a true pass rate drawn from Beta(0.8, 0.8); each run
draws its repeats from it), then judges them with the real code: ``comparison.compare_runs`` and
``gym eval compare --fail-on-regression``'s exit code, and the gate's rules over a policy naming
every benchmark supporting with no limit. Prints:

- false alarms: the same model on both sides, 30 benchmarks x 200 tasks, 1 and 16 repeats: how
  often --fail-on-regression and the gate fail (Holm's correction, and none for contrast);
- coverage: how often the 95 % CI of the mean delta holds the true delta (-0.03);
- power: how often a true drop of 0.03 on 200 tasks x 16 repeats is called a regression, against a
  paired t-test (scipy's) on the same per-task means.

    .venv/bin/python benchmarks/suite_statistics.py [--trials 1000] [--seed 0]

tests/unit/test_suite_statistics.py runs the same, fewer trials, as tests.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from nemo_gym.orchestration.comparison import compare_benchmark, compare_runs  # noqa: E402
from nemo_gym.orchestration.contract import Status  # noqa: E402
from nemo_gym.orchestration.results import BenchmarkResult, RunResults  # noqa: E402
from nemo_gym.orchestration.stats import REGRESSED, Correction  # noqa: E402
from nemo_gym.orchestration.verbs.compare.command import gate as regression_gate  # noqa: E402
from nemo_gym.orchestration.verbs.gate.rules import GatePolicy, Verdict, decide, judge_suite  # noqa: E402

BENCHMARKS = 30
TASKS = 200
TRUE_DROP = 0.03
BETA = 0.8  # task pass rates ~ Beta(0.8, 0.8): many near 0 or 1, as real benchmarks have; mean 0.5


@dataclass(frozen=True)
class Rate:
    hits: int
    trials: int

    @property
    def value(self) -> float:
        return self.hits / self.trials

    def interval(self) -> tuple[float, float]:
        """Wilson's 95 % interval of the rate."""
        z, n, p = 1.959964, self.trials, self.value
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return centre - half, centre + half

    def text(self) -> str:
        low, high = self.interval()
        return f"{self.value:6.1%}  ({self.hits}/{self.trials}; 95% CI {low:.1%}-{high:.1%})"


def task_means(rng: np.random.Generator, rates: np.ndarray, repeats: int) -> dict[int, float]:
    return dict(enumerate((rng.binomial(repeats, rates) / repeats).tolist()))


def benchmark_pair(rng: np.random.Generator, repeats: int, drop: float, tasks: int = TASKS) -> tuple[dict, dict]:
    """Per-task means of base and candidate; the candidate's rates scaled so the mean falls by ``drop``."""
    rates = rng.beta(BETA, BETA, tasks)
    return task_means(rng, rates, repeats), task_means(rng, rates * (1 - drop / 0.5), repeats)


def result(name: str, means: dict[int, float]) -> BenchmarkResult:
    return BenchmarkResult(
        benchmark=name,
        state=Status.SUCCEEDED,
        samples=len(means),
        expected_samples=len(means),
        complete=True,
        task_means=means,
        scored_tasks=len(means),
    )


def suite_pair(rng: np.random.Generator, repeats: int, drop: float = 0.0) -> tuple[RunResults, RunResults]:
    pairs = [benchmark_pair(rng, repeats, drop) for _ in range(BENCHMARKS)]
    names = [f"b{i:02d}" for i in range(BENCHMARKS)]
    base = RunResults(None, [], [result(n, b) for n, (b, _) in zip(names, pairs)])  # type: ignore[arg-type]
    candidate = RunResults(None, [], [result(n, c) for n, (_, c) in zip(names, pairs)])  # type: ignore[arg-type]
    return base, candidate


def gate_verdict(base: RunResults, candidate: RunResults, correction: Correction) -> Verdict:
    """The gate over a policy naming every benchmark supporting, without limits."""
    policy = GatePolicy.model_validate({"benchmarks": {r.benchmark: {"tier": "supporting"} for r in base.benchmarks}})
    compared = {b.benchmark: compare_benchmark(b, c, "reward") for b, c in zip(base.benchmarks, candidate.benchmarks)}
    return decide(policy, judge_suite(policy, compared, {}, correction), []).verdict


def false_alarms(trials: int, repeats: int, seed: int, correction: Correction) -> tuple[Rate, Rate]:
    """--fail-on-regression's and the gate's failures when both sides are the same model."""
    rng = np.random.default_rng(seed)
    compare_fails = gate_fails = 0
    for _ in range(trials):
        base, candidate = suite_pair(rng, repeats)
        outcome = compare_runs(base, candidate, "reward", correction=correction)
        compare_fails += regression_gate(outcome)[0] != 0
        gate_fails += gate_verdict(base, candidate, correction) is Verdict.NO_GO
    return Rate(compare_fails, trials), Rate(gate_fails, trials)


def coverage_and_power(trials: int, repeats: int, seed: int) -> tuple[Rate, Rate, Rate]:
    """One benchmark with a true drop: the CI holds it; ours and scipy's paired t-test detect it."""
    from scipy.stats import ttest_rel

    rng = np.random.default_rng(seed)
    covered = ours = reference = 0
    for _ in range(trials):
        base, candidate = benchmark_pair(rng, repeats, TRUE_DROP)
        compared = compare_benchmark(result("b", base), result("b", candidate), "reward")
        low, high = compared.paired.ci or (math.nan, math.nan)
        covered += low <= -TRUE_DROP <= high
        ours += compared.verdict == REGRESSED
        t = ttest_rel(list(candidate.values()), list(base.values()))
        reference += bool(t.pvalue < 0.05 and t.statistic < 0)
    return Rate(covered, trials), Rate(ours, trials), Rate(reference, trials)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"same model on both sides: {BENCHMARKS} benchmarks x {TASKS} tasks, {args.trials} trials")
    for repeats in (1, 16):
        for correction in (Correction.HOLM, Correction.NONE):
            compare, gate = false_alarms(args.trials, repeats, args.seed, correction)
            print(
                f"  {repeats:2d} repeat(s), correction {correction.value:4s}  compare --fail-on-regression fails "
                f"{compare.text()}   gate NO-GO {gate.text()}"
            )
    print(f"a true drop of {TRUE_DROP} on {TASKS} tasks, {args.trials} trials")
    for repeats in (1, 16):
        covered, ours, reference = coverage_and_power(args.trials, repeats, args.seed + 1)
        print(f"  {repeats:2d} repeat(s)  CI covers the true delta {covered.text()}")
        print(f"               detected: ours {ours.text()}   paired t-test {reference.text()}")


if __name__ == "__main__":
    main()
