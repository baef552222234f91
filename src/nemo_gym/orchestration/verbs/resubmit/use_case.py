"""Finishing what is unfinished (``gym eval resubmit``): per benchmark, the recovery plan over the
run's own evidence (``recovery.plan``, as ``gym eval info`` shows it), then, in place, a new job
for each benchmark the plan queues again: same run, same directory, the earlier attempts' files
kept aside, the new job recorded in the benchmark's chain (so status, logs, cancel, GPU-hours and
exports see one benchmark with several attempts), and its driver told to keep every row on disk
and generate only the (task, rollout) pairs they lack.

Over one connection per host: one status probe for every run, then one resubmit script for every
run that has something to queue (two round trips for a sweep, however many runs)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.backends.base import QueueDemand, RequeuedJob
from nemo_gym.orchestration.connection import Connect, Connection, connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.exporters.record import credential_problem
from nemo_gym.orchestration.library.hosts import over_their_hosts
from nemo_gym.orchestration.library.observing import status
from nemo_gym.orchestration.library.selecting import select_jobs
from nemo_gym.orchestration.record import SubmissionRecord, indexed_run
from nemo_gym.orchestration.submission import QueuedJob, refuse_beyond_site_limits
from nemo_gym.orchestration.verbs.info.use_case import BenchmarkInfo, benchmark_info, job_units
from nemo_gym.orchestration.verbs.resubmit import recovery
from nemo_gym.orchestration.verbs.resubmit.recovery import PAIRS_NAMED, Remedy
from nemo_gym.orchestration.verbs.resubmit.script import Requeued, RequeuedRun, parse_resubmit_output, resubmit_script


@dataclass(frozen=True)
class BenchmarkResubmit:
    """One benchmark: its plan (from what the probe found), and what was queued for it."""

    info: BenchmarkInfo
    requeued: RequeuedJob | None = None  # what it was to be queued as (None: nothing)
    answer: Requeued | None = None  # what the resubmit script said (None: dry run, or nothing to queue)

    @property
    def benchmark(self) -> str:
        return self.info.status.benchmark

    @property
    def plan(self) -> recovery.Plan:
        return self.info.plan

    @property
    def job_id(self) -> str | None:
        return self.answer.queued.job_id if self.answer else None

    @property
    def refused(self) -> str | None:
        """Why its job was not queued, when one was to be."""
        if self.answer is None or self.answer.queued.job_id:
            return None
        return self.answer.queued.error or "not queued"

    @property
    def ok(self) -> bool:
        """Nothing here needs a person: done, queued, or simply still going."""
        if self.refused or (self.answer is not None and self.answer.held):
            return False
        return self.plan.remedy in (Remedy.NOTHING, Remedy.WAIT) or self.plan.remedy.acts


@dataclass(frozen=True)
class RunResubmit:
    record: SubmissionRecord
    benchmarks: list[BenchmarkResubmit]
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return all(b.ok for b in self.benchmarks)

    @property
    def queued(self) -> list[BenchmarkResubmit]:
        return [b for b in self.benchmarks if b.job_id]


def resubmit(
    records: list[SubmissionRecord],
    benchmarks: list[str] | None = None,
    *,
    max_attempts: int = recovery.DEFAULT_MAX_ATTEMPTS,
    dry_run: bool = False,
    connect: Connect = connect,
) -> list[RunResubmit]:
    """Each run's ``benchmarks`` (all when none are named), planned from one status probe per host
    and, unless ``dry_run``, queued again where the plan says so, in one script per host. A
    benchmark a run does not have is refused before anything is connected to; a run's secrets
    that this shell cannot give again are refused before anything is queued."""
    wanted = [[job.benchmark for job in select_jobs(record, list(benchmarks or []))] for record in records]

    def over(conn: Connection, indices: list[int]) -> list[RunResubmit]:
        runs = status([records[i] for i in indices], conn, missing_named=PAIRS_NAMED)
        planned = [
            [
                benchmark_info(run.record, unit, max_attempts)
                for unit in job_units(run.jobs)
                if unit.benchmark in wanted[i] or contract.split_unit(unit.benchmark)[0] in wanted[i]
            ]
            for i, run in zip(indices, runs)
        ]
        requeues = [_requeued_jobs(records[i], infos) for i, infos in zip(indices, planned)]
        acting = [(i, jobs) for i, jobs in zip(indices, requeues) if jobs]
        if dry_run or not acting:
            return [
                _answered(records[i], infos, jobs, None, dry_run) for i, infos, jobs in zip(indices, planned, requeues)
            ]
        queued = _queue(conn, [(records[i], jobs) for i, jobs in acting])
        answers = dict(zip([i for i, _ in acting], queued))
        return [
            _answered(records[i], infos, jobs, answers.get(i), dry_run)
            for i, infos, jobs in zip(indices, planned, requeues)
        ]

    return over_their_hosts(records, connect, over)


def _requeued_jobs(record: SubmissionRecord, infos: list[BenchmarkInfo]) -> list[RequeuedJob]:
    backend = backend_named(record.executor)
    jobs = []
    for info in infos:
        job = info.status
        if not info.plan.remedy.acts or not job.job_id and info.plan.remedy != Remedy.FEED:
            continue
        own = next(b for b in record.units if b.benchmark == job.benchmark)
        attempt = 1 if info.plan.remedy == Remedy.FEED else job.resubmits + 2
        jobs.append(
            RequeuedJob(
                benchmark=job.benchmark,
                job_dir=job.job_dir,
                script=f"{job.job_dir}/{contract.JOB_SCRIPT}",
                attempt=attempt,
                remedy=info.plan.remedy,
                after=job.job_id or "",
                local_id=backend.requeued_id(own.job_id or "", attempt),
                queued_as=dict(own.queued_as),
            )
        )
    return jobs


def _queue(conn: Connection, runs: list[tuple[SubmissionRecord, list[RequeuedJob]]]) -> list[list[Requeued]]:
    secrets = [_secrets_again(record) for record, _ in runs]
    problems = [p for _, found in secrets for p in found]
    if problems:
        raise UserError(problems)
    requeued = [
        RequeuedRun(record.gym_job_id, record.run_dir, record.executor, jobs, values)
        for (record, jobs), (values, _) in zip(runs, secrets)
    ]
    # Weighed against the site's limits as their submission was: this host's all refused, naming
    # the limit (as a refused job is told), or all queued; another host's go on as they may.
    try:
        refuse_beyond_site_limits(conn, backend_named(runs[0][0].executor), _demands(runs))
    except UserError as beyond:  # a connection lost while asking is one too: nothing was queued here
        why = "; ".join(beyond.problems)
        return [[Requeued(QueuedJob(job.benchmark, None, why), None) for job in jobs] for _, jobs in runs]
    result = conn.run_script(resubmit_script(requeued))
    return parse_resubmit_output(result.stdout, requeued)


def _demands(runs: list[tuple[SubmissionRecord, list[RequeuedJob]]]) -> list[QueueDemand]:
    """The jobs queued again, as their records say they were queued (older records say nothing)."""
    demands = []
    for record, jobs in runs:
        facts = {b.benchmark: b.queued_as for b in record.units}
        demands += [QueueDemand(record.gym_job_id, facts[j.benchmark]) for j in jobs if facts.get(j.benchmark)]
    return demands


def _secrets_again(record: SubmissionRecord) -> tuple[dict[str, str], list[str]]:
    """What the run's jobs were given at submit, read again from this shell by the names the
    user's own record of the run keeps (never a run directory's: it could name any variable)."""
    own = indexed_run(record.gym_job_id)
    if own is None:
        return {}, [
            f"run {record.gym_job_id} is not in your local index (gym eval list): resubmit queues jobs as you, "
            "so only for runs you submitted from this machine"
        ]
    if own.run_dir != record.run_dir or [b.job_dir for b in own.benchmarks] != [b.job_dir for b in record.benchmarks]:
        return {}, [
            f"{record.run_dir} is not where your record of run {record.gym_job_id} says it is ({own.run_dir}): "
            "resubmit gives a run's jobs your secrets, so only at the run's own place; name the run by its id"
        ]
    values: dict[str, str] = {}
    problems: list[str] = []
    for carrier, source in own.carried_from.items():
        value = os.environ.get(source, "")
        if not value:
            problems.append(
                f"{source} is not set in this shell: run {record.gym_job_id}'s jobs were given it at submit "
                f"(as ${carrier}); export it and resubmit"
            )
            continue
        problem = credential_problem(source, value)
        if problem:
            problems.append(problem)
        values[carrier] = value
    return values, problems


def _answered(
    record: SubmissionRecord,
    infos: list[BenchmarkInfo],
    jobs: list[RequeuedJob],
    answers: list[Requeued] | None,
    dry_run: bool,
) -> RunResubmit:
    by_name = {job.benchmark: job for job in jobs}
    said = {job.benchmark: answer for job, answer in zip(jobs, answers or [])}
    return RunResubmit(
        record,
        [
            BenchmarkResubmit(info, by_name.get(info.status.benchmark), said.get(info.status.benchmark))
            for info in infos
        ],
        dry_run,
    )
