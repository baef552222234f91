"""Cancelling the jobs still queued or running of every run named."""

from __future__ import annotations

from dataclasses import dataclass, field

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.connection import Connect, Connection, connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library.hosts import over_their_hosts
from nemo_gym.orchestration.manage import cancel_script, cancellable, refused_cancels, runs_cancel_script, select_jobs
from nemo_gym.orchestration.observe import JobStatus, probe_runs
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord
from nemo_gym.orchestration.submission import marked_sections


@dataclass(frozen=True)
class CancelReport:
    cancelled: list[JobStatus] = field(default_factory=list)  # as they were just before the cancel
    already_ended: list[JobStatus] = field(default_factory=list)
    refused: list[JobStatus] = field(default_factory=list)  # the scheduler refused to cancel them

    @property
    def ok(self) -> bool:
        return not self.refused


def cancel(
    records: list[SubmissionRecord], benchmarks: list[str] | None = None, *, connect: Connect = connect
) -> list[CancelReport]:
    """Cancel each run's jobs still queued or running (all, or the benchmarks named, in every run),
    over one connection per host: one probe for every run, then one cancel script for every run
    with something to cancel. Every name is checked in every run before anything is cancelled."""
    jobs = [select_jobs(record, benchmarks or []) for record in records]
    _refuse_half_a_shared_deployment(records, benchmarks)
    return over_their_hosts(records, connect, lambda conn, indices: _cancel_over(conn, records, jobs, indices))


def _refuse_half_a_shared_deployment(records: list[SubmissionRecord], benchmarks: list[str] | None) -> None:
    """Runs whose benchmarks one shared job runs are cancelled together or not at all: cancelling
    the job would end the others' benchmarks too."""
    named = {record.gym_job_id for record in records}
    for record in records:
        left_out = [other for other in record.deployment_shared_with if other not in named]
        if left_out or (record.deployment_shared_with and benchmarks):
            sweep = f"gym eval cancel {record.sweep_id}" if record.sweep_id else "gym eval cancel with all of them"
            raise UserError(
                f"run {record.gym_job_id} shares one deployment (one job) with {len(record.deployment_shared_with)} "
                f"other run(s) of its sweep ({', '.join(record.deployment_shared_with[:3])}"
                f"{', ...' if len(record.deployment_shared_with) > 3 else ''}); cancel them together, whole: {sweep}"
            )


def cancel_command(record: SubmissionRecord) -> str:
    """The run's backend's word for what cancels one of its jobs, for messages."""
    return backend_named(record.executor).cancel_command


def _cancel_over(
    conn: Connection, records: list[SubmissionRecord], jobs: list[list[BenchmarkJob]], indices: list[int]
) -> list[CancelReport]:
    runs = [records[i] for i in indices]
    statuses = probe_runs(runs, conn)
    found = [
        cancellable(run_statuses, jobs[i], backend_named(records[i].executor))
        for i, run_statuses in zip(indices, statuses)
    ]
    # Every run's script before any is sent: a refusal (a shared deployment's one benchmark) cancels nothing.
    scripts = {i: cancel_script(run, live) for i, (run, (live, _)) in enumerate(zip(runs, found)) if live}
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
    return [
        _report(run, run_statuses, live, done, refused.get(i, set()))
        for i, (run, run_statuses, (live, done)) in enumerate(zip(runs, statuses, found))
    ]


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
