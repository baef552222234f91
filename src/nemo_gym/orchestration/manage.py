"""Logs and cancellation of a run's jobs: the scripts sent over the run's connection, and their answers."""

from __future__ import annotations

import shlex

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.observe import JobStatus
from nemo_gym.orchestration.plan import DRIVER_STEP
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord


def select_jobs(record: SubmissionRecord, names: list[str]) -> list[BenchmarkJob]:
    if not names:
        return list(record.benchmarks)
    known = {b.benchmark: b for b in record.benchmarks}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UserError(
            f"run {record.gym_job_id} has no benchmark {', '.join(map(repr, unknown))}; it has: {', '.join(known)}"
        )
    return [known[n] for n in names]


def one_job(record: SubmissionRecord, name: str | None) -> BenchmarkJob:
    if name is None:
        if len(record.benchmarks) == 1:
            return record.benchmarks[0]
        raise UserError(
            f"run {record.gym_job_id} has {len(record.benchmarks)} benchmarks; name one: "
            f"{', '.join(b.benchmark for b in record.benchmarks)}"
        )
    return select_jobs(record, [name])[0]


# -- logs ------------------------------------------------------------------------------------------


def log_patterns(job: BenchmarkJob, service: str | None, driver: bool, run_dir: str) -> str:
    """Shell words for the wanted log files (quoted parts, glob characters left active), of the
    job in ``$jid`` (see ``current_job_shell``).

    With a shared deployment the services and the job's own log live in the shared job's
    directory; each benchmark's driver log stays in its own.
    """
    if job.job_id is None:
        raise UserError(f"{job.benchmark} was never queued ({job.error}); there are no logs")
    jid = '"$jid"'
    own = shlex.quote(job.job_dir)
    if driver:
        return f"{own}/{contract.step_log(DRIVER_STEP, jid)}"
    dirs = [own, shlex.quote(contract.job_dir(run_dir, contract.SHARED_DEPLOYMENT_DIR))]
    if service:
        # A service's steps: <service>, <service>_<pool>_workers; per node for multi-node steps.
        s = shlex.quote(service)
        return " ".join(
            f"{d}/{contract.step_log(s, jid)} {d}/{contract.step_log(s, jid, '*')} "
            f"{d}/{contract.LOGS_DIR}/{s}_*_workers-{jid}*.log"
            for d in dirs
        )
    return " ".join(f"{d}/{contract.job_log(jid)}" for d in dirs)


def current_job_shell(job: BenchmarkJob) -> str:
    """Sets ``jid``: the benchmark's job that ran last — of a resumable chain, its latest job."""
    chain = shlex.quote(f"{job.job_dir}/{contract.CHAIN_FILE}")
    latest = contract.latest_started_awk()
    return f"jid=$({latest} {chain} 2>/dev/null); [ -n \"$jid\" ] || jid={shlex.quote(job.job_id or '')}; "


def logs_script(job: BenchmarkJob, patterns: str, lines: int | None, follow: bool) -> str:
    n = "+1" if lines is None else str(lines)
    return (
        current_job_shell(job)
        # The patterns into an array first: a loop over them as words is a loop over one word
        # when there is one pattern (shellcheck SC2043); nullglob drops the globs matching nothing.
        + f"shopt -s nullglob; wanted=({patterns}); files=(); "
        'for f in "${wanted[@]}"; do [ -e "$f" ] && files+=("$f"); done; '
        f'if [ ${{#files[@]}} -eq 0 ]; then echo "{contract.NO_LOGS_MARKER}"; exit 3; fi; '
        + (f'exec tail -n {n} -F "${{files[@]}}"' if follow else f'tail -n {n} "${{files[@]}}"')
    )


# -- cancel ----------------------------------------------------------------------------------------


def cancel_script(record: SubmissionRecord, jobs: list[BenchmarkJob]) -> str:
    shared = {b.job_id for b in record.benchmarks}
    if len(shared) == 1 and len(record.benchmarks) > 1 and len(jobs) < len(record.benchmarks):
        raise UserError(
            f"the benchmarks of run {record.gym_job_id} share one deployment (one job); cancel them together "
            f"with gym eval cancel {record.gym_job_id}"
        )
    backend = backend_named(record.executor)
    lines = []
    for job in jobs:
        # The job's own marker first: whatever the scheduler does next, the job and status know why.
        marker = shlex.quote(f"{job.job_dir}/{contract.state_dir(job.job_id or '')}")
        lines.append(f"mkdir -p {marker} && date -u +%Y-%m-%dT%H:%M:%SZ >{marker}/{contract.CANCELLED_FILE}")
        lines += backend.cancel_lines(record, job)
    return "\n".join(lines) + "\n"


def refused_cancels(stdout: str) -> set[str]:
    """The benchmarks whose cancel the scheduler refused."""
    marker = contract.CANCEL_FAILED_MARKER
    return {line[len(marker) :] for line in stdout.splitlines() if line.startswith(marker)}


def cancellable(statuses: list[JobStatus], jobs: list[BenchmarkJob]) -> tuple[list[BenchmarkJob], list[JobStatus]]:
    by_name = {s.benchmark: s for s in statuses}
    live = [j for j in jobs if j.job_id and not by_name[j.benchmark].state.final]
    done = [by_name[j.benchmark] for j in jobs if j not in live]
    return live, done
