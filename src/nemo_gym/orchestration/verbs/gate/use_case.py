"""``gate``: a release decision over a suite of benchmarks, from a policy (``verbs/gate/rules.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from nemo_gym.orchestration.connection import Connect, connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library.observing import results
from nemo_gym.orchestration.record import SubmissionRecord
from nemo_gym.orchestration.results import BenchmarkResult, RunResults
from nemo_gym.orchestration.verbs.gate.rules import GateOutcome, GatePolicy, decide, judge_suite, load_policy

if TYPE_CHECKING:
    from nemo_gym.orchestration.stats import Correction


def gate(
    base: list[SubmissionRecord],
    candidate: list[SubmissionRecord],
    policy: GatePolicy,
    *,
    correction: Correction | None = None,
    group_key: str | None = None,
    connect: Connect = connect,
) -> GateOutcome:
    """BASE against CANDIDATE on the policy's benchmarks. Each side is one run or several (a
    suite split over runs, a sweep's runs) that hold each benchmark at most once. The critical and
    supporting benchmarks are judged as one family (``correction``, Holm's by default)."""
    from nemo_gym.orchestration.comparison import BenchmarkComparison, compare_benchmark
    from nemo_gym.orchestration.stats import Correction

    compared: dict[str, BenchmarkComparison] = {}
    missing: dict[str, str] = {}
    measured: set[str] = set()
    for metric in sorted({policy.metric_of(name) for name in policy.benchmarks}):
        runs = results([*base, *candidate], metric, group_key=group_key, connect=connect)
        base_side = by_benchmark(runs[: len(base)], "BASE", policy.benchmarks.keys())
        candidate_side = by_benchmark(runs[len(base) :], "CANDIDATE", policy.benchmarks.keys())
        measured |= base_side.keys() | candidate_side.keys()
        for name in (n for n in policy.benchmarks if policy.metric_of(n) == metric):
            absent = [side for side, found in (("BASE", base_side), ("CANDIDATE", candidate_side)) if name not in found]
            if absent:
                missing[name] = f"not in {absent[0]}" if len(absent) == 1 else "in neither BASE nor CANDIDATE"
                continue
            compared[name] = compare_benchmark(base_side[name], candidate_side[name], metric)
    judged = judge_suite(policy, compared, missing, correction or Correction.HOLM)
    return decide(policy, judged, sorted(measured - policy.benchmarks.keys()))


def read_policy(path: str, max_bytes: int) -> GatePolicy:
    """The policy in the YAML file at ``path``, or one line naming the file and what is wrong."""
    from pathlib import Path

    import yaml

    from nemo_gym.orchestration.untrusted import Unreadable, read_bounded
    from nemo_gym.orchestration.yamlio import DuplicateKey, load_yaml_unique

    try:
        data = read_bounded(str(Path(path).expanduser()), f"--policy {path}", max_bytes)
    except Unreadable as exc:
        short = "; a policy is a short YAML file" if "larger than" in str(exc) else ""
        raise UserError(f"{exc}{short}") from None
    try:
        parsed = load_yaml_unique(data.decode("utf-8"))
    except DuplicateKey as exc:
        raise UserError(f"--policy {path}:{exc.line}: {exc}") from None
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise UserError(f"--policy {path}: not YAML ({' '.join(str(exc).split())[:200]})") from None
    return load_policy(parsed, path)


def by_benchmark(runs: list[RunResults], side: str, gated: Iterable[str]) -> dict[str, BenchmarkResult]:
    """One side's benchmarks by name; a gated benchmark in two of its runs is ambiguous (one the
    policy does not name is only listed, whichever run holds it)."""
    found: dict[str, BenchmarkResult] = {}
    holder: dict[str, str] = {}
    names = set(gated)
    for run in runs:
        for result in run.benchmarks:
            if result.benchmark in found and result.benchmark in names:
                raise UserError(
                    f"{side} has {result.benchmark} in two runs ({holder[result.benchmark]}, "
                    f"{run.record.gym_job_id}); name runs that hold each benchmark once"
                )
            found[result.benchmark] = result
            holder[result.benchmark] = run.record.gym_job_id
    return found
