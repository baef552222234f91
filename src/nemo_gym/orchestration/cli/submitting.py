"""The submit half of ``gym eval submit``: secrets, connection, staging, sbatch, the record."""

from __future__ import annotations

import argparse
import os
import sys

from nemo_gym.orchestration.api import SubmitConfig, env_sources_of
from nemo_gym.orchestration.connection import connect
from nemo_gym.orchestration.errors import ConnectionLost, UserError
from nemo_gym.orchestration.launch import recover_results, stage_and_submit, write_remote_file
from nemo_gym.orchestration.record import (
    RECORD_NAME,
    BenchmarkJob,
    SubmissionRecord,
    current_user,
    now_utc,
    write_local_index,
)
from nemo_gym.orchestration.render import StagedRun


def secret_values(config: SubmitConfig, staged: StagedRun) -> dict[str, str]:
    """Carrier variable -> value, for every ``host:`` env value the plan needs."""
    owners = {"driver": config.driver, **config.services}
    values = {}
    for carrier, (owner, key) in staged.plan.secrets.items():
        values[carrier] = owners[owner].env[key]
        assert env_sources_of(owners[owner])[key].kind == "host"
    if staged.otel_token_env:
        token = os.environ.get(staged.otel_token_env, "")
        if not token:
            raise UserError(
                f"otel: the collector's token is read from ${staged.otel_token_env} when you submit, but it is "
                f"not set in this shell; export it, or set otel.enabled: false"
            )
        values[staged.otel_token_env] = token
    return values


def _record(plan, results, interrupted: bool = False) -> SubmissionRecord:
    return SubmissionRecord(
        gym_job_id=plan.run_id,
        submitted_at=now_utc(),
        run_dir=plan.run_dir,
        cluster=plan.compute,
        executor=plan.launcher,
        submitted_by=current_user(),
        hostname=plan.hostname,
        benchmarks=[
            BenchmarkJob(benchmark=r.benchmark, job_dir=f"{plan.run_dir}/{r.benchmark}", job_id=r.job_id, error=r.error)
            for r in results
        ],
        executor_metadata={"submission": "interrupted"} if interrupted else {},
    )


def submit_staged(config: SubmitConfig, staged: StagedRun, args: argparse.Namespace) -> int:
    plan = staged.plan
    secrets = secret_values(config, staged)
    try:
        with connect(plan.hostname) as conn:
            results = stage_and_submit(conn, config, staged, secrets)
            record = _record(plan, results)
            # The local index first: it cannot fail the submit, and it survives a lost connection.
            write_local_index(record)
            _write_run_record(conn, record)
    except ConnectionLost as lost:
        return _recover(staged, lost)
    return _report(record, args.json)


def _write_run_record(conn, record: SubmissionRecord) -> None:
    try:
        write_remote_file(conn, f"{record.run_dir}/{RECORD_NAME}", record.dumps(), 0o644)
    except (OSError, UserError) as exc:
        queued = ", ".join(f"{b.benchmark}={b.job_id}" for b in record.benchmarks if b.job_id)
        raise UserError(
            f"jobs were queued but the record could not be written under {record.run_dir} ({exc}); "
            f"already queued: {queued or 'none'}; the local index has the record"
        ) from None


def _recover(staged: StagedRun, lost: ConnectionLost) -> int:
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
            f"it is unknown which jobs were queued; when it is back, {plan.run_dir}/.gym-submitted on "
            f"{plan.hostname} lists them ({lost.problems[0]})"
        ) from None
    queued = [b for b in record.benchmarks if b.job_id]
    _report(record, False, summary=False)
    raise UserError(
        f"the connection to {plan.hostname} was lost during submission; {len(queued)} of {len(record.benchmarks)} "
        f"benchmark(s) had been queued and are recorded in run {plan.run_id}; submit the others again, or "
        f"cancel the run with gym eval cancel {plan.run_id}"
    )


def _report(record: SubmissionRecord, as_json: bool, summary: bool = True) -> int:
    if as_json:
        sys.stdout.write(record.dumps())
    else:
        print(f"Run {record.gym_job_id}: {record.run_dir}")
        for job in record.benchmarks:
            if job.job_id:
                kind = "local job" if record.executor == "local" else "Slurm job"
                print(f"  submitted {job.benchmark} -> {kind} {job.job_id}")
            else:
                print(f"  failed {job.benchmark}: {job.error}")
    if record.failed and summary:
        names = ", ".join(b.benchmark for b in record.failed)
        print(f"error: {len(record.failed)} benchmark(s) failed to submit: {names}", file=sys.stderr)
        return 1
    return 0


