"""Logs and cancellation of a run's jobs, over the run's own connection (local or ssh)."""

from __future__ import annotations

import shlex

from nemo_gym.orchestration.api import SHARED_DEPLOYMENT_DIR
from nemo_gym.orchestration.chain import CHAIN_IDS_AWK, LATEST_STARTED_AWK
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.observe import ENDED_SLURM_STATES, FINAL, JobStatus
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
        return f"{own}/logs/driver-{jid}.log"
    dirs = [own, shlex.quote(f"{run_dir}/{SHARED_DEPLOYMENT_DIR}")]
    if service:
        # A service's steps: <service>, <service>_<pool>_workers; per node for multi-node steps.
        s = shlex.quote(service)
        return " ".join(
            f"{d}/logs/{s}-{jid}.log {d}/logs/{s}-{jid}-*.log {d}/logs/{s}_*_workers-{jid}*.log" for d in dirs
        )
    return " ".join(f"{d}/slurm-{jid}.out" for d in dirs)


def current_job_shell(job: BenchmarkJob) -> str:
    """Sets ``jid``: the benchmark's job that ran last — of a resumable chain, its latest job."""
    chain = shlex.quote(f"{job.job_dir}/.gym/chain")
    return f"jid=$({LATEST_STARTED_AWK} {chain} 2>/dev/null); [ -n \"$jid\" ] || jid={shlex.quote(job.job_id or '')}; "


def logs_script(job: BenchmarkJob, patterns: str, lines: int | None, follow: bool) -> str:
    n = "+1" if lines is None else str(lines)
    return (
        current_job_shell(job)
        + f"shopt -s nullglob; files=(); for f in {patterns}; do [ -e \"$f\" ] && files+=(\"$f\"); done; "
        'if [ ${#files[@]} -eq 0 ]; then echo "__GYM_NO_LOGS__"; exit 3; fi; '
        + (f'exec tail -n {n} -F "${{files[@]}}"' if follow else f'tail -n {n} "${{files[@]}}"')
    )


def cancel_script(record: SubmissionRecord, jobs: list[BenchmarkJob]) -> str:
    shared = {b.job_id for b in record.benchmarks}
    if len(shared) == 1 and len(record.benchmarks) > 1 and len(jobs) < len(record.benchmarks):
        raise UserError(
            f"the benchmarks of run {record.gym_job_id} share one deployment (one job); cancel them together "
            f"with gym eval cancel {record.gym_job_id}"
        )
    lines = []
    for job in jobs:
        marker = shlex.quote(f"{job.job_dir}/.gym/{job.job_id}")
        lines.append(f"mkdir -p {marker} && date -u +%Y-%m-%dT%H:%M:%SZ >{marker}/cancelled")
        if record.executor == "slurm":
            # A resumable benchmark is a chain: the job running now and the one queued to resume it
            # both go, and the chain-wide marker stops any job of it that starts regardless.
            chain = shlex.quote(f"{job.job_dir}/.gym/chain")
            lines += [
                f"date -u +%Y-%m-%dT%H:%M:%SZ >{shlex.quote(job.job_dir)}/.gym/cancelled",
                f"for id in $({{ echo {shlex.quote(job.job_id or '')}; {CHAIN_IDS_AWK} {chain} 2>/dev/null; }} | awk '!seen[$0]++'); do",
                "  case $(scontrol show job -o \"$id\" 2>/dev/null | grep -o 'JobState=[A-Z_]*') in",
                "    " + " | ".join(f"JobState={state}" for state in ENDED_SLURM_STATES) + ") ;;",
                # Anything else, Slurm's silence included, gets a scancel; only a job Slurm
                # does not know (ended long ago) may refuse it without it being a failure.
                "    *) out=$(scancel \"$id\" 2>&1) || case $out in *'Invalid job id'*) ;; "
                f"*) echo __GYM_CANCEL_FAILED:{job.benchmark} ;; esac ;;",
                "  esac",
                "done",
            ]
        else:
            # A running local job stops on TERM (its trap stops its steps); a queued one is skipped.
            lines.append(f"[ -f {marker}/pid ] && kill -TERM \"$(cat {marker}/pid)\" 2>/dev/null; true")
    return "\n".join(lines) + "\n"


def cancellable(statuses: list[JobStatus], jobs: list[BenchmarkJob]) -> tuple[list[BenchmarkJob], list[JobStatus]]:
    by_name = {s.benchmark: s for s in statuses}
    live = [j for j in jobs if j.job_id and by_name[j.benchmark].state not in FINAL]
    done = [by_name[j.benchmark] for j in jobs if j not in live]
    return live, done
