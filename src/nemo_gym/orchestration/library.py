"""The use cases, as library functions that return data: submit, status, results, logs, cancel.

The command line only parses arguments, calls these and formats what they return. Each function
that talks to the cluster takes an open connection, or a ``connect`` function that opens one
(``connection.connect`` by default; tests pass a fake).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.api import BaseServiceConfig, DriverConfig, SubmitConfig
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.connection import Connect, Connection, connect
from nemo_gym.orchestration.errors import ConnectionLost, UserError
from nemo_gym.orchestration.observe import FINAL, JobStatus, probe_run, run_usage
from nemo_gym.orchestration.plan import RunPlan, build_plan
from nemo_gym.orchestration.record import (
    BenchmarkJob,
    SubmissionRecord,
    all_records,
    current_user,
    now_utc,
    write_local_index,
)
from nemo_gym.orchestration.render import StagedRun, render_run
from nemo_gym.orchestration.results import DEFAULT_METRIC, RunResults, collect_results
from nemo_gym.orchestration.runid import new_run_id
from nemo_gym.orchestration.submission import QueuedJob, recover_results, stage_and_submit, write_remote_file
from nemo_gym.orchestration.usage import Usage

if TYPE_CHECKING:
    from nemo_gym.orchestration.comparison import RunComparison

__all__ = [
    "CancelReport",
    "LogRequest",
    "RunResults",
    "RunStatus",
    "Submission",
    "cancel",
    "compare",
    "list_runs",
    "logs",
    "prepare",
    "results",
    "results_of_runs",
    "submission_secrets",
    "status",
    "submit",
]


# -- submit ----------------------------------------------------------------------------------------


def prepare(config: SubmitConfig, run_id: str | None = None) -> StagedRun:
    """Everything a submission stages, decided and rendered; nothing is connected to. ``--dry-run``
    stops here; ``submit`` goes on from here."""
    return render_run(build_plan(config, run_id or new_run_id()))


@dataclass(frozen=True)
class Submission:
    record: SubmissionRecord
    # Set when the connection broke during the submission: the record was recovered from the
    # cluster's own log of what was queued, and this says what happened.
    interrupted: str | None = None

    @property
    def failed(self) -> list[BenchmarkJob]:
        return self.record.failed


def submission_secrets(config: SubmitConfig, plan: RunPlan) -> dict[str, str]:
    """Carrier variable -> value, for every ``host:`` env value and the collector's token."""
    owners: dict[str, DriverConfig | BaseServiceConfig] = {"driver": config.driver, **config.deployed_services}
    values = {carrier: owners[owner].env[key] for carrier, (owner, key) in plan.secrets.items()}
    if plan.otel_token_env:
        token = os.environ.get(plan.otel_token_env, "")
        if not token:
            raise UserError(
                f"otel: the collector's token is read from ${plan.otel_token_env} when you submit, but it is "
                f"not set in this shell; export it, or set otel.enabled: false"
            )
        values[plan.otel_token_env] = token
    return values


def submit(config: SubmitConfig, staged: StagedRun | None = None, *, connect: Connect = connect) -> Submission:
    """Stage the run on its submit host and queue its jobs; record what was queued.

    The record goes to the local index first (it cannot fail the submit, and it survives a lost
    connection), then into the run directory. A connection lost mid-way is reopened once and the
    record rebuilt from the cluster's own log of what was queued."""
    staged = staged or prepare(config)
    plan = staged.plan
    secrets = submission_secrets(config, plan)
    try:
        with connect(plan.hostname) as conn:
            record = _record(plan, stage_and_submit(conn, staged, secrets))
            write_local_index(record)
            _write_run_record(conn, record)
    except ConnectionLost as lost:
        return _recover(staged, lost, connect)
    return Submission(record)


def _record(plan: RunPlan, queued: list[QueuedJob], interrupted: bool = False) -> SubmissionRecord:
    gpus = backend_named(plan.backend).allocated_gpus(plan)
    return SubmissionRecord(
        gym_job_id=plan.run_id,
        submitted_at=now_utc(),
        run_dir=plan.run_dir,
        cluster=plan.compute,
        executor=plan.backend,
        submitted_by=current_user(),
        hostname=plan.hostname,
        benchmarks=[
            BenchmarkJob(benchmark=q.benchmark, job_dir=contract.job_dir(plan.run_dir, q.benchmark), job_id=q.job_id,
                         error=q.error, gpus=gpus.get(q.benchmark))
            for q in queued
        ],  # fmt: skip
        executor_metadata={"submission": "interrupted"} if interrupted else {},
    )


def _write_run_record(conn: Connection, record: SubmissionRecord) -> None:
    try:
        write_remote_file(conn, f"{record.run_dir}/{contract.RECORD_FILE}", record.dumps(), 0o644)
    except (OSError, UserError) as exc:
        queued = ", ".join(f"{b.benchmark}={b.job_id}" for b in record.benchmarks if b.job_id)
        raise UserError(
            f"jobs were queued but the record could not be written under {record.run_dir} ({exc}); "
            f"already queued: {queued or 'none'}; the local index has the record"
        ) from None


def _recover(staged: StagedRun, lost: ConnectionLost, connect: Connect) -> Submission:
    """The connection broke mid-submission: reconnect once and record what really was queued."""
    plan = staged.plan
    try:
        with connect(plan.hostname) as conn:
            record = _record(plan, recover_results(conn, staged), interrupted=True)
            write_local_index(record)
            _write_run_record(conn, record)
    except UserError:
        raise UserError(
            f"the connection to {plan.hostname} was lost during submission and could not be re-opened, so "
            f"it is unknown which jobs were queued; when it is back, {plan.run_dir}/{contract.SUBMITTED_LOG} on "
            f"{plan.hostname} lists them ({lost.problems[0]})"
        ) from None
    queued = [b for b in record.benchmarks if b.job_id]
    return Submission(
        record,
        interrupted=(
            f"the connection to {plan.hostname} was lost during submission; {len(queued)} of "
            f"{len(record.benchmarks)} benchmark(s) had been queued and are recorded in run {plan.run_id}; "
            f"submit the others again, or cancel the run with gym eval cancel {plan.run_id}"
        ),
    )


# -- status and results ----------------------------------------------------------------------------


def list_runs() -> list[SubmissionRecord]:
    """Every run in the local index, oldest first."""
    return all_records()


@dataclass(frozen=True)
class RunStatus:
    record: SubmissionRecord
    jobs: list[JobStatus]

    @property
    def final(self) -> bool:
        return all(job.state in FINAL for job in self.jobs)

    @property
    def succeeded(self) -> bool:
        return all(job.state == "succeeded" for job in self.jobs)

    @property
    def usage(self) -> Usage:
        """The run's total: every job once."""
        return run_usage(self.jobs)


def status(
    record: SubmissionRecord,
    conn: Connection | None = None,
    *,
    connect: Connect = connect,
    previous: RunStatus | None = None,
) -> RunStatus:
    """Every job's state, over ``conn`` (kept open by the caller, e.g. for --watch) or a new
    connection. ``previous``: the status a moment ago, whose final sample counts are kept, not made
    again (they cannot change once a job has ended)."""
    known = {}
    if previous is not None:
        known = {j.benchmark: j.check for j in previous.jobs if j.check is not None and j.state in FINAL}
    return RunStatus(record, probe_run(record, conn, connect, known))


def results(record: SubmissionRecord, metric: str = DEFAULT_METRIC, *, connect: Connect = connect) -> RunResults:
    """A run's results: each benchmark's metrics, samples against the expected ones, its ``metric``
    per task, and what its jobs cost."""
    return results_of_runs([record], metric, connect=connect)[0]


def results_of_runs(
    records: list[SubmissionRecord], metric: str = DEFAULT_METRIC, *, connect: Connect = connect
) -> list[RunResults]:
    """Several runs' results, in order, over one connection per host (a sweep's runs share one)."""
    by_host: dict[str | None, list[int]] = {}
    for i, record in enumerate(records):
        by_host.setdefault(record.hostname, []).append(i)
    out: dict[int, RunResults] = {}
    for host, indices in by_host.items():
        with connect(host) as conn:  # one connection for the states and the files
            for i in indices:
                statuses = probe_run(records[i], conn)
                out[i] = RunResults(records[i], statuses, collect_results(records[i], statuses, conn, metric))
    return [out[i] for i in range(len(records))]


def compare(
    base: SubmissionRecord, candidate: SubmissionRecord, metric: str = DEFAULT_METRIC, *, connect: Connect = connect
) -> RunComparison:
    """BASE against CANDIDATE, per benchmark, on the tasks both runs have."""
    from nemo_gym.orchestration.comparison import compare_runs
    from nemo_gym.orchestration.results import require_metric

    runs = results_of_runs([base, candidate], metric, connect=connect)
    require_metric(runs, metric)
    return compare_runs(runs[0], runs[1], metric)


# -- logs ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogRequest:
    """Which log of a run: the job's own (default), a service's (every node) or the driver's."""

    benchmark: str | None = None
    service: str | None = None
    driver: bool = False
    lines: int | None = None  # the last N lines; all when None

    def what(self) -> str:
        return f"service {self.service!r}" if self.service else "the driver" if self.driver else "the job"


def _logs_script(record: SubmissionRecord, request: LogRequest, follow: bool) -> tuple[BenchmarkJob, str]:
    from nemo_gym.orchestration.manage import log_patterns, logs_script, one_job

    job = one_job(record, request.benchmark)
    patterns = log_patterns(job, request.service, request.driver, record.run_dir)
    return job, logs_script(job, patterns, request.lines, follow)


def _no_logs(job: BenchmarkJob, request: LogRequest) -> UserError:
    return UserError(
        f"no log of {request.what()} for {job.benchmark} yet (the job may still be queued, or the name is wrong)"
    )


def logs(record: SubmissionRecord, request: LogRequest, *, connect: Connect = connect) -> str:
    """The wanted log's text (the last ``request.lines`` lines of each of its files)."""
    job, script = _logs_script(record, request, follow=False)
    with connect(record.hostname) as conn:
        result = conn.run_script(script)
    if contract.NO_LOGS_MARKER in result.stdout:
        raise _no_logs(job, request)
    return result.stdout


def follow_logs(
    record: SubmissionRecord, request: LogRequest, *, connect: Connect = connect, poll_seconds: float = 2.0
) -> Iterator[str]:
    """The wanted log's lines as they are written, until the job has ended (and its last lines arrived)."""
    import threading
    import time

    job, script = _logs_script(record, request, follow=True)
    with connect(record.hostname) as conn:
        proc = conn.stream_script(script)
        done = threading.Event()

        def stop_when_the_job_ends() -> None:
            while not done.is_set():
                [current] = [s for s in probe_run(record, conn) if s.benchmark == job.benchmark]
                if current.state in FINAL:
                    time.sleep(1.5)
                    proc.terminate()
                    return
                done.wait(poll_seconds)

        threading.Thread(target=stop_when_the_job_ends, daemon=True).start()
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if line.strip() == contract.NO_LOGS_MARKER:
                    raise _no_logs(job, request)
                yield line
        finally:
            done.set()
            proc.terminate()
            proc.wait()


# -- cancel ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CancelReport:
    cancelled: list[JobStatus] = field(default_factory=list)  # as they were just before the cancel
    already_ended: list[JobStatus] = field(default_factory=list)
    refused: list[JobStatus] = field(default_factory=list)  # the scheduler refused to cancel them

    @property
    def ok(self) -> bool:
        return not self.refused


def cancel(record: SubmissionRecord, benchmarks: list[str] | None = None, *, connect: Connect = connect) -> CancelReport:
    """Cancel the run's jobs still queued or running (all, or the benchmarks named)."""
    from nemo_gym.orchestration.manage import cancel_script, cancellable, refused_cancels, select_jobs

    jobs = select_jobs(record, benchmarks or [])
    with connect(record.hostname) as conn:
        statuses = probe_run(record, conn)
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


def staged_directory(staged: StagedRun, directory: str | Path) -> Path:
    """Write a staged run to a local directory, with the modes it is uploaded with (``--stage-dir``)."""
    from nemo_gym.orchestration.stage import write_staged

    return write_staged(staged, directory)


def backend_job_kind(record: SubmissionRecord) -> str:
    return backend_named(record.executor).job_kind
