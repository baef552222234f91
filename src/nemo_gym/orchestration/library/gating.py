"""``gate``: a release decision over a suite of benchmarks, from a policy (``gate.py``'s rules)."""

from __future__ import annotations

from collections.abc import Iterable

from nemo_gym.orchestration.connection import Connect, connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.gate import BenchmarkGate, GateOutcome, GatePolicy, decide, judge_benchmark, load_policy
from nemo_gym.orchestration.library.observing import results
from nemo_gym.orchestration.record import SubmissionRecord
from nemo_gym.orchestration.results import BenchmarkResult, RunResults


def gate(
    base: list[SubmissionRecord],
    candidate: list[SubmissionRecord],
    policy: GatePolicy,
    *,
    connect: Connect = connect,
) -> GateOutcome:
    """BASE against CANDIDATE on the policy's benchmarks. Each side is one run or several (a
    suite split over runs, a sweep's runs) that hold each benchmark at most once."""
    from nemo_gym.orchestration.comparison import compare_benchmark

    judged: dict[str, BenchmarkGate] = {}
    measured: set[str] = set()
    for metric in sorted({policy.metric_of(name) for name in policy.benchmarks}):
        runs = results([*base, *candidate], metric, connect=connect)
        base_side = by_benchmark(runs[: len(base)], "BASE", policy.benchmarks.keys())
        candidate_side = by_benchmark(runs[len(base) :], "CANDIDATE", policy.benchmarks.keys())
        measured |= base_side.keys() | candidate_side.keys()
        for name in (n for n in policy.benchmarks if policy.metric_of(n) == metric):
            if name not in base_side or name not in candidate_side:
                sides = [
                    side for side, found in (("BASE", base_side), ("CANDIDATE", candidate_side)) if name not in found
                ]
                missing = f"not in {sides[0]}" if len(sides) == 1 else "in neither BASE nor CANDIDATE"
                judged[name] = judge_benchmark(name, policy, None, missing)
                continue
            compared = compare_benchmark(base_side[name], candidate_side[name], metric)
            blocked = "; ".join(u.detail for u in compared.uncomparable) or None
            judged[name] = judge_benchmark(name, policy, compared, blocked)
    ordered = [judged[name] for name in policy.benchmarks]
    return decide(policy, ordered, sorted(measured - policy.benchmarks.keys()))


def read_policy(path: str, max_bytes: int) -> GatePolicy:
    """The policy in the YAML file at ``path``, or one line naming the file and what is wrong."""
    from pathlib import Path

    import yaml

    from nemo_gym.orchestration.yamlio import load_yaml

    try:
        with Path(path).expanduser().open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise UserError(f"--policy {path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise UserError(f"--policy {path}: over {max_bytes} bytes; a policy is a short YAML file")
    try:
        parsed = load_yaml(data.decode("utf-8"))
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
