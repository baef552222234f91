"""The submit half of ``gym eval submit``: secrets, connection, staging, sbatch, the record."""

from __future__ import annotations

import argparse
import os
import sys

from nemo_gym.orchestration.api import SubmitConfig, env_sources_of
from nemo_gym.orchestration.connection import connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.launch import stage_and_submit, write_remote_file
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


def submit_staged(config: SubmitConfig, staged: StagedRun, args: argparse.Namespace) -> int:
    plan = staged.plan
    with connect(plan.hostname) as conn:
        results = stage_and_submit(conn, config, staged, secret_values(config, staged))
        record = SubmissionRecord(
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
        )
        # The local index first: it cannot fail the submit, and it survives a lost connection.
        write_local_index(record)
        try:
            write_remote_file(conn, f"{plan.run_dir}/{RECORD_NAME}", record.dumps(), 0o644)
        except (OSError, UserError) as exc:
            queued = ", ".join(f"{b.benchmark}={b.job_id}" for b in record.benchmarks if b.job_id)
            raise UserError(
                f"jobs were queued but the record could not be written under {plan.run_dir} ({exc}); "
                f"already queued: {queued or 'none'}; the local index has the record"
            ) from None
    return _report(record, args.json)


def _report(record: SubmissionRecord, as_json: bool) -> int:
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
    if record.failed:
        names = ", ".join(b.benchmark for b in record.failed)
        print(f"error: {len(record.failed)} benchmark(s) failed to submit: {names}", file=sys.stderr)
        return 1
    return 0


