"""Cancelling the jobs still queued or running of every run named."""

from __future__ import annotations

from dataclasses import dataclass, field

from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.connection import Connect, Connection, connect
from nemo_gym.orchestration.library.hosts import each_over_its_host
from nemo_gym.orchestration.manage import cancel_script, cancellable, refused_cancels, select_jobs
from nemo_gym.orchestration.observe import JobStatus, probe_runs
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord


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
    over one connection per host. Every name is checked in every run before anything is cancelled."""
    jobs = [select_jobs(record, benchmarks or []) for record in records]
    return each_over_its_host(records, connect, lambda conn, i: _cancel_over(conn, records[i], jobs[i]))


def cancel_command(record: SubmissionRecord) -> str:
    """The run's backend's word for what cancels one of its jobs, for messages."""
    return backend_named(record.executor).cancel_command


def _cancel_over(conn: Connection, record: SubmissionRecord, jobs: list[BenchmarkJob]) -> CancelReport:
    [statuses] = probe_runs([record], conn)
    live, done = cancellable(statuses, jobs)
    if not live:
        return CancelReport(already_ended=done)
    refused = refused_cancels(conn.run_script(cancel_script(record, live)).stdout)
    by_name = {s.benchmark: s for s in statuses}
    return CancelReport(
        cancelled=[by_name[j.benchmark] for j in live if j.benchmark not in refused],
        already_ended=done,
        refused=[by_name[j.benchmark] for j in live if j.benchmark in refused],
    )
