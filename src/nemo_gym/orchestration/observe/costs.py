"""What a benchmark's jobs cost (GPU-hours, wall), from the scheduler's accounting and the jobs' own records."""

from __future__ import annotations

from nemo_gym.orchestration import usage
from nemo_gym.orchestration.observe.reading import ProbeAnswer
from nemo_gym.orchestration.observe.status import JobStatus
from nemo_gym.orchestration.usage import OwnRecord, Usage


def benchmark_usage(
    benchmark: str, gpus: int | None, ids: list[str], running: str | None, answer: ProbeAnswer
) -> Usage:
    """The benchmark's jobs' usage."""
    return usage.chain_usage(
        ids, answer.accounting, own_records_by_job(benchmark, ids, answer), gpus, answer.now, running
    )


def own_records_by_job(benchmark: str, ids: list[str], answer: ProbeAnswer) -> dict[str, list[OwnRecord]]:
    """The benchmark's jobs' own records by job id; a job with no record in the benchmark's
    directory is a shared deployment's, whose record is in the shared job's directory."""
    own = answer.own_records.get(benchmark, [])
    here = {r.job_id for r in own}
    shared = [r for r in answer.own_records.get("", []) if r.job_id in ids and r.job_id not in here]
    by_job: dict[str, list[OwnRecord]] = {}
    for record in [*own, *shared]:
        by_job.setdefault(record.job_id, []).append(record)
    return by_job


def run_usage(statuses: list[JobStatus]) -> Usage:
    """A run's total: every job once (benchmarks of a shared deployment share theirs)."""
    seen: dict[tuple[str, ...], Usage] = {}
    for s in statuses:
        seen.setdefault(tuple(s.chain), s.usage)
    return usage.total(seen.values())
