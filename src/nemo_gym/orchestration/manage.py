"""Logs and cancellation of a run's jobs: the scripts sent over the run's connection, and their answers."""

from __future__ import annotations

import shlex

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.backends.base import Backend
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.observe import JobStatus
from nemo_gym.orchestration.plan.model import DRIVER_STEP
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord
from nemo_gym.orchestration.render import backend_context, render_template


def select_jobs(record: SubmissionRecord, names: list[str]) -> list[BenchmarkJob]:
    """The benchmarks ``names`` names (all without names); a sharded benchmark's shard by its own
    name (``B@k``) too."""
    if not names:
        return list(record.benchmarks)
    known = {b.benchmark: b for b in record.benchmarks}
    known.update({u.benchmark: u for b in record.benchmarks for u in b.shards})
    unknown = [n for n in names if n not in known]
    if unknown:
        listed = ", ".join(b.benchmark for b in record.benchmarks)
        raise UserError(f"run {record.gym_job_id} has no benchmark {', '.join(map(repr, unknown))}; it has: {listed}")
    return [known[n] for n in names]


def one_job(record: SubmissionRecord, name: str | None) -> BenchmarkJob:
    """The one job ``name`` names: a benchmark's, or a shard's (``B@k``); without a name, the
    run's only job."""
    if name is None:
        if len(record.units) == 1:
            return record.units[0]
        kind = "benchmarks" if len(record.units) == len(record.benchmarks) else "jobs (its benchmarks and their shards)"
        raise UserError(
            f"run {record.gym_job_id} has {len(record.units)} {kind}; name one: "
            f"{', '.join(u.benchmark for u in record.units)}"
        )
    shard = next((u for u in record.units if u.benchmark == name and u not in record.benchmarks), None)
    if shard is not None:
        return shard
    [job] = select_jobs(record, [name])
    if job.shards:
        raise UserError(
            f"{name} of run {record.gym_job_id} runs in {len(job.shards)} shards, each a job of its own; name one: "
            f"{', '.join(u.benchmark for u in job.shards)}"
        )
    return job


# -- logs ------------------------------------------------------------------------------------------


def log_patterns(job: BenchmarkJob, service: str | None, driver: bool, shared_dir: str) -> str:
    """Shell words for the wanted log files (quoted parts, glob characters left active), of the
    job in ``$jid`` (set by ``templates/logs.sh.j2``).

    With a shared deployment the services and the job's own log live in the shared job's
    directory (``shared_dir``: the record's ``shared_deployment_dir``); each benchmark's driver log
    stays in its own.
    """
    if job.job_id is None:
        raise UserError(f"{job.benchmark} was never queued ({job.error}); there are no logs")
    jid = '"$jid"'
    own = shlex.quote(job.job_dir)
    if driver:
        return f"{own}/{contract.step_log(DRIVER_STEP, jid)}"
    dirs = [own, shlex.quote(shared_dir)]
    if service:
        # A service's steps: <service>, <service>_<pool>_workers; per node for multi-node steps.
        s = shlex.quote(service)
        return " ".join(
            f"{d}/{contract.step_log(s, jid)} {d}/{contract.step_log(s, jid, '*')} "
            f"{d}/{contract.LOGS_DIR}/{s}_*_workers-{jid}*.log"
            for d in dirs
        )
    return " ".join(f"{d}/{contract.job_log(jid)}" for d in dirs)


def logs_script(job: BenchmarkJob, patterns: str, lines: int | None, follow: bool) -> str:
    """Prints (or follows) the files ``patterns`` names, of the benchmark's latest job in ``$jid``."""
    return render_template(
        "logs.sh.j2",
        chain=f"{job.job_dir}/{contract.CHAIN_FILE}",
        job_id=job.job_id or "",
        patterns=patterns,
        lines="+1" if lines is None else str(lines),
        follow=follow,
    )


# -- cancel ----------------------------------------------------------------------------------------


def cancel_script(record: SubmissionRecord, jobs: list[BenchmarkJob], keep_job: bool = False) -> str:
    """Cancels ``jobs``; with ``keep_job`` (a shared job that serves other benchmarks too) only
    marks them cancelled, for that job to skip."""
    backend = backend_named(record.executor)
    return render_template(
        "cancel.sh.j2",
        **backend_context(backend),
        chain_marked=backend.cancel_marks_chain,
        keep_job=keep_job,
        jobs=[_cancelled_job(job) for job in jobs],
    )


def runs_cancel_script(scripts: list[str], backends: list[Backend]) -> str:
    """Several runs' cancel scripts as one: each run's part after its run marker, by its place in
    ``scripts`` (copies of a run share its id), then what each of their ``backends`` noted to
    cancel at once."""
    # Each backend's fragments once, with the variables they are rendered with (backend_context).
    distinct = {backend.template(): backend for backend in backends}
    return render_template(
        "cancel-runs.sh.j2",
        runs=[(str(i), script) for i, script in enumerate(scripts)],
        backends=[backend_context(backend) for backend in distinct.values()],
    )


def _cancelled_job(job: BenchmarkJob) -> dict[str, object]:
    """What a backend's ``cancel_job`` macro is given of one benchmark's job."""
    # A lane's job not queued yet has no state directory: the chain's marker stops its lane's feed.
    state_dir = f"{job.job_dir}/{contract.state_dir(job.job_id)}" if job.job_id else ""
    return {
        "benchmark": job.benchmark,
        "job_id": job.job_id or "",
        "job_dir": job.job_dir,
        "state_dir": state_dir,
        "chain": f"{job.job_dir}/{contract.CHAIN_FILE}",
        "pid_file": f"{state_dir}/{contract.PID_FILE}" if state_dir else "",
        "queued_as": dict(job.queued_as),  # where its scheduler keeps it (a Kubernetes namespace)
    }


def refused_cancels(stdout: str) -> set[str]:
    """The benchmarks whose cancel the scheduler refused."""
    marker = contract.CANCEL_FAILED_MARKER
    return {line[len(marker) :] for line in stdout.splitlines() if line.startswith(marker)}


def cancellable(
    statuses: list[JobStatus], jobs: list[BenchmarkJob], backend: Backend
) -> tuple[list[BenchmarkJob], list[JobStatus]]:
    """The jobs still queued or running, each as its current job (a resumed or resubmitted
    benchmark's latest: its cancel marker and process are that job's), and the benchmarks ended."""
    # A shard named on its own (B@k) is looked up among its benchmark's shards.
    by_name = {s.benchmark: s for status in statuses for s in (status, *status.shards)}
    live = [j for j in jobs if j.queued and not by_name[j.benchmark].state.final]
    done = [by_name[j.benchmark] for j in jobs if j not in live]
    current = []
    for job in live:
        # A sharded benchmark's shards still queued or running, each as its own job.
        status = by_name[job.benchmark]
        units = {s.benchmark: s for s in status.shards} if job.shards else {job.benchmark: status}
        current += [
            unit.model_copy(update={"job_id": _current_id(unit, units[unit.benchmark], backend)})
            for unit in job.units
            if unit.queued and not units[unit.benchmark].state.final
        ]
    return current, done


def _current_id(job: BenchmarkJob, status: JobStatus, backend: Backend) -> str | None:
    """The benchmark's current job as its chain names it, when that is an id of its scheduler's
    (a chain file is read back: it names paths for the cancel marker and the pid)."""
    return status.job_id if status.job_id and backend.is_job_id(status.job_id) else job.job_id
