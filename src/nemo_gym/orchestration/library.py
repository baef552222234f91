"""The use cases, as library functions that return data: submit, status, results, logs, cancel.

The command line only parses arguments, calls these and formats what they return. Each function
that talks to the cluster takes an open connection, or a ``connect`` function that opens one
(``connection.connect`` by default; tests pass a fake).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.api import BaseServiceConfig, DriverConfig, SubmitConfig
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.connection import Connect, Connection, connect
from nemo_gym.orchestration.errors import ConnectionLost, UserError
from nemo_gym.orchestration.export_runs import export_environment_problems, host_credential_problems
from nemo_gym.orchestration.exporters.record import credential_problem
from nemo_gym.orchestration.exporters.spec import destinations
from nemo_gym.orchestration.observe import FINAL, JobStatus, SampleCheck, probe_run, probe_runs, run_usage
from nemo_gym.orchestration.plan import RunPlan, build_plan
from nemo_gym.orchestration.preflight import check_gym_keys, staging_warnings
from nemo_gym.orchestration.record import (
    BenchmarkJob,
    SubmissionRecord,
    SweepRecord,
    SweepRun,
    all_records,
    all_sweeps,
    current_user,
    indexed_run,
    now_utc,
    submission_origin,
    write_local_index,
    write_observation,
    write_sweep_index,
)
from nemo_gym.orchestration.render import StagedRun, render_run
from nemo_gym.orchestration.results import DEFAULT_METRIC, RunResults, collect_results
from nemo_gym.orchestration.runid import new_run_id
from nemo_gym.orchestration.submission import (
    QueuedJob,
    RunToSubmit,
    recover_results,
    recover_runs,
    stage_and_submit,
    stage_and_submit_runs,
    write_remote_file,
    write_remote_files,
)
from nemo_gym.orchestration.usage import Usage

if TYPE_CHECKING:
    from nemo_gym.orchestration.comparison import RunComparison
    from nemo_gym.orchestration.sweep import SweepPoint

__all__ = [
    "CancelReport",
    "LogRequest",
    "PreparedSweep",
    "RunLog",
    "RunResults",
    "RunStatus",
    "Submission",
    "SweepMember",
    "SweepSubmission",
    "cancel",
    "cancel_runs",
    "compare",
    "list_runs",
    "list_sweeps",
    "logs",
    "logs_of_runs",
    "prepare",
    "prepare_sweep",
    "report",
    "results",
    "results_of_runs",
    "submission_secrets",
    "status",
    "status_of_runs",
    "submit",
    "submit_sweep",
]


# -- submit ----------------------------------------------------------------------------------------


def prepare(config: SubmitConfig, run_id: str | None = None, sweep_id: str | None = None) -> StagedRun:
    """Everything a submission stages, decided and rendered, once gym's run/prepare keys are checked,
    with the submit path's warnings (``StagedRun.warnings``); nothing is connected to. ``--dry-run`` stops here; ``submit`` goes
    on from here."""
    check_gym_keys(config)
    staged = render_run(build_plan(config, run_id or new_run_id(), sweep_id))
    return replace(staged, warnings=tuple(staging_warnings(config)))


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
    problems = host_credential_problems(owners, plan.secrets, values)
    if plan.otel_token_env:
        token = os.environ.get(plan.otel_token_env, "")
        if not token:
            raise UserError(
                f"otel: the collector's token is read from ${plan.otel_token_env} when you submit, but it is "
                f"not set in this shell; export it, or set otel.enabled: false"
            )
        problems += [f"otel.token_env: {p}" for p in [credential_problem(plan.otel_token_env, token)] if p]
        values[plan.otel_token_env] = token
    # The exporters' credentials, when this shell has them: they reach the jobs the same way.
    carried = {name: os.environ[name] for name in plan.carried_env if os.environ.get(name)}
    problems += export_environment_problems(config, plan.carried_env, carried)
    if problems:
        raise UserError(problems)
    values.update(carried)
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


def _record(
    plan: RunPlan, queued: list[QueuedJob], interrupted: bool = False, sweep_values: dict[str, str] | None = None
) -> SubmissionRecord:
    gpus = backend_named(plan.backend).allocated_gpus(plan)
    export_to = {job.benchmark: destinations(job.export.spec["exporters"]) for job in plan.jobs if job.export}
    return SubmissionRecord(
        gym_job_id=plan.run_id,
        submitted_at=now_utc(),
        run_dir=plan.run_dir,
        cluster=plan.compute,
        executor=plan.backend,
        submitted_by=current_user(),
        submitted_from=submission_origin(),
        model=plan.model,
        hostname=plan.hostname,
        benchmarks=[
            BenchmarkJob(benchmark=q.benchmark, job_dir=contract.job_dir(plan.run_dir, q.benchmark), job_id=q.job_id,
                         error=q.error, gpus=gpus.get(q.benchmark), export_to=export_to.get(q.benchmark, {}))
            for q in queued
        ],  # fmt: skip
        executor_metadata={"submission": "interrupted"} if interrupted else {},
        sweep_id=plan.sweep_id,
        sweep_values=sweep_values or {},
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


# -- sweeps ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepMember:
    """One combination of a sweep, composed, validated and rendered."""

    point: SweepPoint
    config: SubmitConfig
    staged: StagedRun
    warnings: list[str]

    @property
    def plan(self) -> RunPlan:
        return self.staged.plan

    @property
    def values(self) -> dict[str, str]:
        return dict(self.point.values)


@dataclass(frozen=True)
class PreparedSweep:
    sweep_id: str
    config_path: str
    members: list[SweepMember]

    @property
    def swept(self) -> list[str]:
        return [key for key, _ in self.members[0].point.values] if self.members else []

    @property
    def warnings(self) -> list[str]:
        """Each combination's warnings, once each."""
        return list(dict.fromkeys(w for member in self.members for w in member.warnings))


def prepare_sweep(config_path: str | Path, overrides: list[str], sweep_id: str | None = None) -> PreparedSweep:
    """Every combination of ``overrides`` (Hydra's multirun grammar) composed, validated and
    rendered before anything is submitted: a bad value in any combination is reported, naming the
    combination, and nothing is submitted."""
    from nemo_gym.orchestration.compose import compose_config
    from nemo_gym.orchestration.sweep import expand, new_sweep_id
    from nemo_gym.orchestration.validate import validate_config

    sweep_id = sweep_id or new_sweep_id()
    points = expand(config_path, overrides)
    members, problems = [], {}
    for point in points:
        try:
            config, warnings = validate_config(compose_config(config_path, list(point.overrides)))
            staged = prepare(config, sweep_id=sweep_id)
            members.append(SweepMember(point, config, staged, [*warnings, *staged.warnings]))
        except UserError as exc:
            problems[point.label()] = exc.problems
    if problems:
        raise UserError(_sweep_problems(problems, len(points)))
    hosts = sorted({m.plan.hostname or "this machine" for m in members})
    if len(hosts) > 1:
        raise UserError(
            f"-m: the combinations are submitted from different hosts ({', '.join(hosts)}); a sweep is submitted "
            f"over one connection: sweep one host at a time"
        )
    backends = sorted({m.plan.backend for m in members})
    if len(backends) > 1:
        raise UserError(
            f"-m: the combinations run on different kinds of compute ({', '.join(backends)}); a sweep's jobs are "
            f"queued by one backend: sweep one compute type at a time"
        )
    return PreparedSweep(sweep_id, str(Path(config_path).expanduser().resolve()), members)


def _sweep_problems(problems: dict[str, list[str]], combinations: int) -> list[str]:
    """Each problem naming its combination; one every combination has, once and plainly."""
    everywhere = set.intersection(*(set(p) for p in problems.values())) if len(problems) == combinations else set()
    lines = [p for p in next(iter(problems.values())) if p in everywhere]
    for label, found in problems.items():
        lines += [f"combination {label or 'without swept values'}: {p}" for p in found if p not in everywhere]
    return lines


@dataclass(frozen=True)
class SweepSubmission:
    sweep: SweepRecord
    runs: list[Submission]
    # Set when the connection broke during the submission (see Submission.interrupted).
    interrupted: str | None = None

    @property
    def failed(self) -> list[tuple[SubmissionRecord, BenchmarkJob]]:
        return [(run.record, job) for run in self.runs for job in run.failed]


def submit_sweep(sweep: PreparedSweep, *, connect: Connect = connect) -> SweepSubmission:
    """Stage every run of the sweep and queue all their jobs over one connection, in one script;
    then record each run (with its sweep id and values) and the sweep, in the local index first and
    then in every run directory, in one more script. A connection lost mid-way is reopened once and
    the records rebuilt from the cluster's own log of what was queued."""
    runs = [RunToSubmit(m.staged, submission_secrets(m.config, m.plan)) for m in sweep.members]
    host = sweep.members[0].plan.hostname
    try:
        with connect(host) as conn:
            records = [
                _record(m.plan, queued, sweep_values=m.values)
                for m, queued in zip(sweep.members, stage_and_submit_runs(conn, runs))
            ]
            record = _sweep_record(sweep, records)
            _write_sweep_records(conn, records, record)
    except ConnectionLost as lost:
        return _recover_sweep(sweep, lost, connect)
    return SweepSubmission(record, [Submission(r) for r in records])


def _sweep_record(sweep: PreparedSweep, records: list[SubmissionRecord]) -> SweepRecord:
    first = sweep.members[0].plan
    return SweepRecord(
        sweep_id=sweep.sweep_id,
        submitted_at=now_utc(),
        submitted_by=current_user(),
        submitted_from=submission_origin(),
        config=sweep.config_path,
        swept=sweep.swept,
        executor=first.backend,
        hostname=first.hostname,
        runs=[SweepRun(run_id=r.gym_job_id, run_dir=r.run_dir, values=r.sweep_values) for r in records],
    )


def _write_sweep_records(conn: Connection, records: list[SubmissionRecord], sweep: SweepRecord) -> None:
    """The local index first (it cannot fail the submit, and it survives a lost connection), then
    every run directory: its run's record and the sweep's."""
    for record in records:
        write_local_index(record)
    write_sweep_index(sweep)
    files = {}
    for record in records:
        files[f"{record.run_dir}/{contract.RECORD_FILE}"] = record.dumps()
        files[f"{record.run_dir}/{contract.SWEEP_RECORD_FILE}"] = sweep.dumps()
    try:
        write_remote_files(conn, files)
    except ConnectionLost:
        raise  # recovered by the caller, like a loss while queueing
    except (OSError, UserError) as exc:
        queued = sum(1 for r in records for b in r.benchmarks if b.job_id)
        raise UserError(
            f"{queued} job(s) of sweep {sweep.sweep_id} were queued but the records could not be written into "
            f"the run directories ({exc}); the local index has them (gym eval status {sweep.sweep_id})"
        ) from None


def _recover_sweep(sweep: PreparedSweep, lost: ConnectionLost, connect: Connect) -> SweepSubmission:
    """The connection broke mid-submission: reconnect once and record what really was queued, run by run."""
    host = sweep.members[0].plan.hostname
    try:
        with connect(host) as conn:
            queued = recover_runs(conn, [m.staged for m in sweep.members])
            records = [_record(m.plan, q, interrupted=True, sweep_values=m.values) for m, q in zip(sweep.members, queued)]
            record = _sweep_record(sweep, records)
            _write_sweep_records(conn, records, record)
    except UserError:
        logs = ", ".join(f"{m.plan.run_dir}/{contract.SUBMITTED_LOG}" for m in sweep.members)
        raise UserError(
            f"the connection to {host} was lost during submission and could not be re-opened, so it is unknown "
            f"which jobs of sweep {sweep.sweep_id} were queued; when it is back, {logs} on {host} list them "
            f"({lost.problems[0]})"
        ) from None
    jobs = [b for r in records for b in r.benchmarks]
    done = [b for b in jobs if b.job_id]
    return SweepSubmission(
        record,
        [Submission(r) for r in records],
        interrupted=(
            f"the connection to {host} was lost during submission; {len(done)} of {len(jobs)} job(s) of the sweep's "
            f"{len(records)} runs had been queued and are recorded in sweep {sweep.sweep_id}; submit the others "
            f"again, or cancel the sweep with gym eval cancel {sweep.sweep_id}"
        ),
    )


# -- status and results ----------------------------------------------------------------------------


def list_runs() -> list[SubmissionRecord]:
    """Every run in the local index, oldest first."""
    return all_records()


def list_sweeps() -> list[SweepRecord]:
    """Every sweep in the local index, oldest first."""
    return all_sweeps()


T = TypeVar("T")


def _each_over_its_host(
    records: list[SubmissionRecord], connect: Connect, work: Callable[[Connection, int], T], conn: Connection | None = None
) -> list[T]:
    """``work(conn, i)`` for every record, in order, over one connection per host."""
    return _batches_over_their_hosts(records, connect, lambda opened, indices: [work(opened, i) for i in indices], conn)


def _batches_over_their_hosts(
    records: list[SubmissionRecord],
    connect: Connect,
    work: Callable[[Connection, list[int]], list[T]],
    conn: Connection | None = None,
) -> list[T]:
    """``work(conn, indices)`` once per host with the indices of its records, whose answers are in
    that order; all of them over ``conn`` when given (a sweep's runs share one host)."""
    if conn is not None:
        return work(conn, list(range(len(records))))
    by_host: dict[str | None, list[int]] = {}
    for i, record in enumerate(records):
        by_host.setdefault(record.hostname, []).append(i)
    out: dict[int, T] = {}
    for host, indices in by_host.items():
        with connect(host) as opened:
            out.update(zip(indices, work(opened, indices)))
    return [out[i] for i in range(len(records))]


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
    return _observed(RunStatus(record, probe_run(record, conn, connect, _known_checks(previous))))


def _observed(run: RunStatus) -> RunStatus:
    """``run``, remembered in the index as last observed (``gym eval list`` shows it)."""
    counts = Counter(job.state for job in run.jobs)
    summary = ", ".join(f"{n} {state}" for state, n in counts.most_common()) if len(counts) > 1 else next(iter(counts), "")
    write_observation(run.record.gym_job_id, summary)
    return run


def _known_checks(previous: RunStatus | None) -> dict[str, SampleCheck]:
    if previous is None:
        return {}
    return {j.benchmark: j.check for j in previous.jobs if j.check is not None and j.state in FINAL}


def status_of_runs(
    records: list[SubmissionRecord],
    conn: Connection | None = None,
    *,
    connect: Connect = connect,
    previous: list[RunStatus] | None = None,
) -> list[RunStatus]:
    """Several runs' statuses (a sweep's), in order, over ``conn`` or one connection per host: one
    round trip per host, however many runs."""

    def batch(opened: Connection, indices: list[int]) -> list[RunStatus]:
        known = [_known_checks(previous[i] if previous else None) for i in indices]
        statuses = probe_runs([records[i] for i in indices], opened, known)
        return [_observed(RunStatus(records[i], s)) for i, s in zip(indices, statuses)]

    return _batches_over_their_hosts(records, connect, batch, conn)


def results(record: SubmissionRecord, metric: str = DEFAULT_METRIC, *, connect: Connect = connect) -> RunResults:
    """A run's results: each benchmark's metrics, samples against the expected ones, its ``metric``
    per task, and what its jobs cost."""
    return results_of_runs([record], metric, connect=connect)[0]


def results_of_runs(
    records: list[SubmissionRecord], metric: str = DEFAULT_METRIC, *, connect: Connect = connect
) -> list[RunResults]:
    """Several runs' results, in order, over one connection per host (a sweep's runs share one):
    every run's states in one round trip, then each run's files."""

    def batch(conn: Connection, indices: list[int]) -> list[RunResults]:
        runs = [records[i] for i in indices]
        statuses = probe_runs(runs, conn, [{} for _ in runs])
        return [RunResults(r, s, collect_results(r, s, conn, metric)) for r, s in zip(runs, statuses)]

    return _batches_over_their_hosts(records, connect, batch)


def compare(
    base: SubmissionRecord, candidate: SubmissionRecord, metric: str = DEFAULT_METRIC, *, connect: Connect = connect
) -> RunComparison:
    """BASE against CANDIDATE, per benchmark, on the tasks both runs have."""
    from nemo_gym.orchestration.comparison import compare_runs
    from nemo_gym.orchestration.results import require_metric

    runs = results_of_runs([base, candidate], metric, connect=connect)
    require_metric(runs, metric)
    return compare_runs(runs[0], runs[1], metric)


def report(records: list[SubmissionRecord], metric: str = DEFAULT_METRIC, *, connect: Connect = connect) -> str:
    """The HTML report of several runs (a sweep's): the results ``results`` shows and, of exactly
    two runs, the comparison ``compare`` shows, as one self-contained page."""
    from nemo_gym.orchestration.comparison import compare_runs
    from nemo_gym.orchestration.report import report_html, require_matplotlib
    from nemo_gym.orchestration.results import require_metric

    require_matplotlib()  # before any connection: say what to install first
    runs = results_of_runs(records, metric, connect=connect)
    require_metric(runs, metric)
    comparison = compare_runs(runs[0], runs[1], metric) if len(runs) == 2 else None
    return report_html(runs, metric, comparison)


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


@dataclass(frozen=True)
class RunLog:
    """One run's wanted log, or why there is none yet."""

    record: SubmissionRecord
    text: str | None
    problem: str | None = None


def logs_of_runs(records: list[SubmissionRecord], request: LogRequest, *, connect: Connect = connect) -> list[RunLog]:
    """The wanted log of each run (a sweep's), over one connection per host; a run without it says why."""

    from nemo_gym.orchestration.manage import one_job

    for record in records:
        one_job(record, request.benchmark)  # a wrong or missing benchmark name is wrong in every run

    def one(conn: Connection, i: int) -> RunLog:
        record = records[i]
        try:
            job, script = _logs_script(record, request, follow=False)
        except UserError as exc:  # this run's job was never queued
            return RunLog(record, None, exc.problems[0])
        result = conn.run_script(script)
        if contract.NO_LOGS_MARKER in result.stdout:
            return RunLog(record, None, _no_logs(job, request).problems[0])
        return RunLog(record, result.stdout)

    return _each_over_its_host(records, connect, one)


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
    from nemo_gym.orchestration.manage import select_jobs

    jobs = select_jobs(record, benchmarks or [])
    with connect(record.hostname) as conn:
        return _cancel_over(conn, record, jobs)


def cancel_runs(
    records: list[SubmissionRecord], benchmarks: list[str] | None = None, *, connect: Connect = connect
) -> list[CancelReport]:
    """Cancel the jobs still queued or running of several runs (a sweep's): all, or the benchmarks
    named in each run. Every name is checked in every run before anything is cancelled."""
    from nemo_gym.orchestration.manage import select_jobs

    jobs = [select_jobs(record, benchmarks or []) for record in records]
    return _each_over_its_host(records, connect, lambda conn, i: _cancel_over(conn, records[i], jobs[i]))


def _cancel_over(conn: Connection, record: SubmissionRecord, jobs: list[BenchmarkJob]) -> CancelReport:
    from nemo_gym.orchestration.manage import cancel_script, cancellable, refused_cancels

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


# -- export ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportResult:
    """What ``gym eval export`` did for one benchmark: the exporters' own lines, and whether any failed."""

    benchmark: str
    lines: list[str]
    failed: bool


def export(
    record: SubmissionRecord, to: list[str] | None = None, force: bool = False, *, trusted: list[str] | None = None,
    connect: Connect = connect,
) -> list[ExportResult]:
    """Run (or rerun) a run's exports from here, on its submit host, with this package's exporters
    (shipped in the script: never the copy staged in the run directory) against each job
    directory's data; credentials from this shell's environment travel in the script, never in a file,
    and go only to the destinations the local index recorded for the run, or ``trusted`` names."""
    from nemo_gym.orchestration.export_runs import export_script, read_export_output

    own = indexed_run(record.gym_job_id)
    chosen = {job.benchmark: job.export_to for job in own.benchmarks} if own else {}
    script = export_script(record, to or [], force, os.environ, chosen, trusted or [])
    with connect(record.hostname) as conn:
        out = conn.run_script(script).stdout
    return [ExportResult(bench, lines, failed) for bench, lines, failed in read_export_output(out, record, os.environ)]
