"""Everything about a run's benchmarks in one place (``gym eval info``): per benchmark its
attempts (jobs, states, causes, times, GPU-hours), where its directory and logs are, its samples,
its exports, what it was made from (the gym and vLLM its job ran, its inputs digest, its results
fingerprint), and what ``gym eval resubmit`` would do (``recovery.plan``).

It comes from one status probe (``status``: one connection per host, one script) and one read of
the results' files over the probe's states (``results.collect_results``); the paths are the
contract's; the plan is the pure planner's over what the probe found.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.connection import Connect, connect
from nemo_gym.orchestration.library.hosts import over_their_hosts
from nemo_gym.orchestration.library.observing import RunStatus, status
from nemo_gym.orchestration.library.selecting import select_jobs
from nemo_gym.orchestration.observe import Attempt, JobStatus, SampleCheck
from nemo_gym.orchestration.plan.model import DRIVER_STEP
from nemo_gym.orchestration.record import SubmissionRecord
from nemo_gym.orchestration.results import BenchmarkResult, collect_results
from nemo_gym.orchestration.verbs.resubmit import recovery
from nemo_gym.orchestration.verbs.resubmit.recovery import PAIRS_NAMED, Plan

# The version of ``info_json``'s document: fields are only ever added.
INFO_SCHEMA = 1


@dataclass(frozen=True)
class AttemptLogs:
    """Where one job's logs are (files on the submit host)."""

    job_log: str  # the job's own log
    driver_log: str
    step_logs: tuple[str, ...]  # glob patterns: every step's log, and per node for multi-node steps


@dataclass(frozen=True)
class AttemptInfo:
    attempt: Attempt
    logs: AttemptLogs


@dataclass(frozen=True)
class MadeFrom:
    """What a benchmark's numbers were made from, and a fingerprint of them (issue: provenance)."""

    versions: dict[str, str]  # as the job's nodes saw them: gym_version, vllm_version.<service>
    inputs_digest: str | None
    results_fingerprint: str | None

    @classmethod
    def of(cls, result: BenchmarkResult | None) -> MadeFrom:
        if result is None:
            return cls({}, None, None)
        return cls(dict(result.provenance), result.inputs_digest, result.results_fingerprint)

    def as_dict(self) -> dict:
        return {
            "versions": self.versions,
            "inputs_digest": self.inputs_digest,
            "results_fingerprint": self.results_fingerprint,
        }


@dataclass(frozen=True)
class BenchmarkInfo:
    status: JobStatus
    attempts: list[AttemptInfo]
    plan: Plan
    made_from: MadeFrom = MadeFrom({}, None, None)

    @property
    def samples(self) -> SampleCheck | None:
        return self.status.check


@dataclass(frozen=True)
class RunInfo:
    record: SubmissionRecord
    benchmarks: list[BenchmarkInfo]


def info(
    records: list[SubmissionRecord],
    benchmarks: list[str] | None = None,
    *,
    max_attempts: int = recovery.DEFAULT_MAX_ATTEMPTS,
    connect: Connect = connect,
) -> list[RunInfo]:
    """Each run's ``benchmarks`` (all when none are named), in order, from one status probe per
    host. A benchmark a run does not have is refused before anything is connected to."""
    wanted = [[job.benchmark for job in select_jobs(record, list(benchmarks or []))] for record in records]
    runs = status(records, connect=connect, missing_named=PAIRS_NAMED)
    found = files_read(runs, connect)
    return [
        RunInfo(
            run.record,
            [
                benchmark_info(run.record, unit, max_attempts, by_name.get(contract.split_unit(unit.benchmark)[0]))
                for unit in job_units(run.jobs)
                if unit.benchmark in names or contract.split_unit(unit.benchmark)[0] in names
            ],
        )
        for run, names, by_name in zip(runs, wanted, found)
    ]


def files_read(runs: list[RunStatus], connect: Connect) -> list[dict[str, BenchmarkResult]]:
    """Each run's benchmarks as their files say, by name, over the states the probe found."""

    def batch(conn, indices: list[int]) -> list[dict[str, BenchmarkResult]]:
        chosen = [runs[i] for i in indices]
        read = collect_results([r.record for r in chosen], [r.jobs for r in chosen], conn)
        return [{b.benchmark: b for b in benchmarks} for benchmarks in read]

    return over_their_hosts([r.record for r in runs], connect, batch)


def job_units(statuses: list[JobStatus]) -> list[JobStatus]:
    """Each benchmark's status, a sharded benchmark's as its shards' (each a job to follow, named
    ``B@k``, wanted with its benchmark): what info tells and resubmit plans, one job at a time."""
    return [unit for job in statuses for unit in (job.shards or [job])]


def benchmark_info(
    record: SubmissionRecord, job: JobStatus, max_attempts: int, result: BenchmarkResult | None = None
) -> BenchmarkInfo:
    logs_dir = _logs_dir(record, job)
    attempts = [AttemptInfo(a, _logs_of(job.job_dir, logs_dir, a.job_id)) for a in job.history]
    return BenchmarkInfo(job, attempts, recovery.plan(evidence(record, job, max_attempts)), MadeFrom.of(result))


def evidence(
    record: SubmissionRecord, job: JobStatus, max_attempts: int = recovery.DEFAULT_MAX_ATTEMPTS
) -> recovery.Evidence:
    """What the planner is given of a benchmark: its state, its latest job's cause, its samples,
    how many jobs it has had (a resumable chain's resumes included), and whether a job of it can be
    told to keep what is on disk (its record says)."""
    latest = job.history[-1] if job.history else None
    before = job.history[-2] if len(job.history) > 1 else None
    check = job.check
    samples = (
        None if check is None else recovery.Samples(check.expected, check.done, check.missing, check.first_missing)
    )
    return recovery.Evidence(
        job.state,
        latest.cause if latest else None,
        samples,
        len(job.history),
        max_attempts,
        _blocked(record, job),
        before.cause if before else None,
        job.turn,
        job.stalled_at,
    )


def _blocked(record: SubmissionRecord, job: JobStatus) -> str:
    own = next((b for b in record.units if b.benchmark == job.benchmark), None)
    if own is not None and not own.job_id and own.fed_by and job.turn is not None:
        return ""  # a lane's job: its first job is queued as its lane would have (nothing on disk yet)
    if own is not None and not own.job_id:
        return "it was never queued (its submission was refused), so there is no job to follow; submit it again"
    if own is not None and not backend_named(record.executor).is_job_id(own.job_id or ""):
        return "its record names no job id this scheduler gives; submit it again"
    if own is not None and own.continues_from_disk:
        return ""
    if record.deployment_host is not None or sum(1 for b in record.units if own and b.job_id == own.job_id) > 1:
        # job.deployment shared or reload: one job served several benchmarks (of several runs, in a lane).
        return "its benchmarks share one deployment (one job), which resubmit does not queue again yet; submit it again"
    return (
        "its job cannot be told to keep the samples on disk (a benchmark's own command, or a run submitted "
        "before gym eval resubmit existed), so a new one would generate scored samples again; submit it again"
    )


def _logs_dir(record: SubmissionRecord, job: JobStatus) -> str:
    """Where the job's own and its services' logs are: a shared deployment's one job (its id is
    every benchmark's) keeps them in its own directory."""
    first = job.chain[0] if job.chain else job.job_id
    shared = record.deployment_host is not None or (
        first is not None and sum(1 for b in record.units if b.job_id == first) > 1
    )
    return record.shared_deployment_dir if shared else job.job_dir


def _logs_of(job_dir: str, logs_dir: str, job_id: str) -> AttemptLogs:
    return AttemptLogs(
        job_log=f"{logs_dir}/{contract.job_log(job_id)}",
        driver_log=f"{job_dir}/{contract.step_log(DRIVER_STEP, job_id)}",  # always the benchmark's own
        step_logs=(f"{logs_dir}/{contract.step_log('*', job_id)}", f"{logs_dir}/{contract.step_log('*', job_id, '*')}"),
    )


# -- the JSON document -------------------------------------------------------------------------------


def info_json(runs: list[RunInfo]) -> str:
    """``{"schema": 1, "runs": [{"run", "run_dir", "benchmarks": [...]}]}``, whether one run or a
    sweep's were asked for."""
    return json.dumps(
        {"schema": INFO_SCHEMA, "runs": [_run_document(run) for run in runs]},
        indent=2,
    )


def _run_document(run: RunInfo) -> dict:
    return {
        "run": run.record.gym_job_id,
        "run_dir": run.record.run_dir,
        "sweep_values": run.record.sweep_values,
        "benchmarks": [_benchmark_document(b) for b in run.benchmarks],
    }


def _benchmark_document(bench: BenchmarkInfo) -> dict:
    job = bench.status
    return {
        "benchmark": job.benchmark,
        "state": job.state,
        "detail": job.detail,
        "job_id": job.job_id,
        "job_dir": job.job_dir,
        "attempts": len(bench.attempts),
        "attempt_history": [_attempt_document(a) for a in bench.attempts],
        "samples": _samples_document(bench.samples),
        "exports": job.exports,
        "gpu_hours": None if job.usage.gpu_hours is None else round(job.usage.gpu_hours, 4),
        "made_from": bench.made_from.as_dict(),
        "resubmit": {
            "remedy": bench.plan.remedy,
            "plan": bench.plan.text,
            "missing": [list(p) for p in bench.plan.missing],
        },
    }


def _attempt_document(info: AttemptInfo) -> dict:
    a = info.attempt
    return {
        **a.as_dict(),
        "detail": a.detail,
        "started": a.started,
        "ended": a.ended,
        "gpu_hours": a.gpu_hours,
        "verdict": a.verdict or None,
        "job_log": info.logs.job_log,
        "driver_log": info.logs.driver_log,
        "step_logs": list(info.logs.step_logs),
    }


def _samples_document(check: SampleCheck | None) -> dict | None:
    if check is None:
        return None
    named = check.first_missing[:PAIRS_NAMED]
    return {
        "complete": check.missing == 0,
        "expected": check.expected,
        "written": check.done,
        "missing": check.missing,
        "missing_named": [list(p) for p in named],
        "missing_not_named": max(check.missing - len(named), 0),
        "duplicates": check.duplicates,
    }
