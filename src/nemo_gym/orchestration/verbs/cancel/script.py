"""The script that cancels runs' jobs on their submit host, and what its answer says was refused."""

from __future__ import annotations

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.backends.base import Backend
from nemo_gym.orchestration.observe import JobStatus
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord
from nemo_gym.orchestration.render import backend_context
from nemo_gym.orchestration.templating import render_template


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
