"""Cancelling the jobs still queued or running of every run named."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.connection import Connect, Connection, connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library.hosts import over_their_hosts
from nemo_gym.orchestration.library.selecting import select_jobs
from nemo_gym.orchestration.observe import JobStatus, probe_runs
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord
from nemo_gym.orchestration.submission import marked_sections
from nemo_gym.orchestration.verbs.cancel.script import cancel_script, cancellable, refused_cancels, runs_cancel_script


@dataclass(frozen=True)
class CancelReport:
    cancelled: list[JobStatus] = field(default_factory=list)  # as they were just before the cancel
    already_ended: list[JobStatus] = field(default_factory=list)
    refused: list[JobStatus] = field(default_factory=list)  # the scheduler refused to cancel them
    # Their shared job serves other runs (or benchmarks) too: it goes on, and skips these.
    job_left_running: bool = False

    @property
    def ok(self) -> bool:
        return not self.refused


def cancel(
    records: list[SubmissionRecord], benchmarks: list[str] | None = None, *, connect: Connect = connect
) -> list[CancelReport]:
    """Cancel each run's jobs still queued or running (all, or the benchmarks named, in every run),
    over one connection per host: one probe for every run, then one cancel script for every run
    with something to cancel. Every name is checked in every run before anything is cancelled.

    A shared job (job.deployment: shared, reload) is cancelled only with every benchmark of every
    run it serves; cancelling some of them marks those alone, and the job skips them."""
    jobs = [select_jobs(record, benchmarks or []) for record in records]
    keep = [_keeps_its_shared_job(record, records, benchmarks) for record in records]
    return over_their_hosts(records, connect, lambda conn, indices: _cancel_over(conn, records, jobs, keep, indices))


def _keeps_its_shared_job(
    record: SubmissionRecord, records: list[SubmissionRecord], benchmarks: list[str] | None
) -> bool:
    """Whether the run's benchmarks run on a shared job that serves others not cancelled now (other
    runs of its sweep, or its own benchmarks not named): that job is left running. A job of an
    older version cannot skip one run: its runs are cancelled together, whole, or not at all."""
    one_job = len({unit.job_id for unit in record.units}) == 1 and len(record.units) > 1
    if record.deployment_host is None and not one_job:
        return False  # a job per benchmark
    named = {other.gym_job_id for other in records}
    others_left = any(run not in named for run in record.deployment_shared_with)
    own_left = bool(benchmarks) and not {b.benchmark for b in record.benchmarks} <= set(benchmarks or [])
    if not (others_left or own_left):
        return False
    if not record.deployment_skips_cancelled:
        sweep = f"gym eval cancel {record.sweep_id}" if record.sweep_id else f"gym eval cancel {record.gym_job_id}"
        raise UserError(
            f"run {record.gym_job_id}'s benchmarks share one job with other benchmarks"
            f"{f' of {len(record.deployment_shared_with)} other run(s)' if record.deployment_shared_with else ''}, "
            f"and that job (an older version's) cannot skip some of them; cancel them together, whole: {sweep}"
        )
    return True


def cancel_command(record: SubmissionRecord) -> str:
    """The run's backend's word for what cancels one of its jobs, for messages."""
    return backend_named(record.executor).cancel_command


def _cancel_over(
    conn: Connection,
    records: list[SubmissionRecord],
    jobs: list[list[BenchmarkJob]],
    keep: list[bool],
    indices: list[int],
) -> list[CancelReport]:
    runs = [records[i] for i in indices]
    statuses = probe_runs(runs, conn)
    found = [
        cancellable(run_statuses, jobs[i], backend_named(records[i].executor))
        for i, run_statuses in zip(indices, statuses)
    ]
    # Every run's script is made before any is sent.
    scripts = {
        i: cancel_script(run, live, keep[indices[i]]) for i, (run, (live, _)) in enumerate(zip(runs, found)) if live
    }
    refused: dict[int, set[str]] = {}
    if scripts:
        backends = [backend_named(runs[i].executor) for i in scripts]
        out = conn.run_script(runs_cancel_script(list(scripts.values()), backends)).stdout
        parts = marked_sections(out, contract.RUN_MARKER)
        # A run whose part never began (the script stopped before it) cancelled nothing.
        refused = {
            i: refused_cancels(parts[str(n)]) if str(n) in parts else {j.benchmark for j in found[i][0]}
            for n, i in enumerate(scripts)
        }
    reports = [
        _report(run, run_statuses, live, done, refused.get(i, set()))
        for i, (run, run_statuses, (live, done)) in enumerate(zip(runs, statuses, found))
    ]
    return [replace(report, job_left_running=keep[i] and bool(report.cancelled)) for i, report in zip(indices, reports)]


def _report(
    record: SubmissionRecord,
    statuses: list[JobStatus],
    live: list[BenchmarkJob],
    done: list[JobStatus],
    refused: set[str],
) -> CancelReport:
    if not live:
        return CancelReport(already_ended=done)
    by_name = {s.benchmark: s for s in statuses}
    # The jobs were a benchmark's, or a sharded benchmark's shards (B@k): each benchmark once, refused
    # when any of its jobs was.
    names = list(dict.fromkeys(contract.split_unit(j.benchmark)[0] for j in live))
    refused_benchmarks = {contract.split_unit(name)[0] for name in refused}
    return CancelReport(
        cancelled=[by_name[n] for n in names if n not in refused_benchmarks],
        already_ended=done,
        refused=[by_name[n] for n in names if n in refused_benchmarks],
    )
