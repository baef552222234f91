"""Validated ``SubmitConfig`` -> ``RunPlan``: every job of the run, planned once, in Python."""

from __future__ import annotations

from dataclasses import replace

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.plan.exports import export_carried_env, policy_model_path
from nemo_gym.orchestration.plan.inputs import RunInputs
from nemo_gym.orchestration.plan.jobs import job_compute, job_plan, shard_job_plan
from nemo_gym.orchestration.plan.layout import Layout
from nemo_gym.orchestration.plan.model import JobPlan, RunPlan
from nemo_gym.orchestration.plan.ports import fixed_ports_reason


def build_plan(config: SubmitConfig, run_id: str, sweep_id: str | None = None) -> RunPlan:
    from nemo_gym.orchestration.backends import backend_for
    from nemo_gym.orchestration.resolved import resolved_config_dict

    compute_name, compute = next(iter(config.compute.items()))
    if config.otel.enabled:
        from nemo_gym.orchestration.otel_destination import validate_destination

        validate_destination(config)  # telemetry must have somewhere to go before it is planned
    backend = backend_for(compute)
    run_dir = f"{config.job.output_path.rstrip('/')}/{run_id}"
    run = RunInputs(config, run_id, compute_name, backend, Layout.of(config), {}, sweep_id)
    jobs = _benchmark_jobs(run, run_dir)
    shared = _shared_job(run, run_dir) if config.job.deployment in ("shared", "reload") else None
    if shared is not None:
        # Every benchmark shares the one job (and its id) under the local backend too.
        jobs = tuple(replace(job, local_job_id=shared.local_job_id) for job in jobs)
    return RunPlan(
        run_id=run_id,
        run_dir=run_dir,
        compute=compute_name,
        hostname=compute.hostname,
        runtime=compute.container_runtime,
        backend=backend.name,
        jobs=jobs,
        resolved_config=resolved_config_dict(config),
        secrets=run.secrets,
        shared=shared,
        benchmarks_at_once=config.job.benchmarks_at_once,
        otel_token_env=config.otel.token_env if config.otel.enabled else None,
        mount_sources=_mount_sources(config),
        carried_env=export_carried_env(config),
        sweep_id=sweep_id,
        model=policy_model_path(config),
    )


def _benchmark_jobs(run: RunInputs, run_dir: str) -> tuple[JobPlan, ...]:
    """A job per benchmark, or one per shard of a sharded benchmark, numbered in that order."""
    config = run.config
    shared_deployment = config.job.deployment in ("shared", "reload")
    units = [
        (name, shard, config.shards_of(name))
        for name in config.driver.benchmarks
        for shard in (range(1, config.shards_of(name) + 1) if config.shards_of(name) > 1 else [None])
    ]
    return tuple(
        job_plan(run, name, contract.job_dir(run_dir, name), _local_job_id(run.run_id, i), shared_deployment)
        if shard is None
        else shard_job_plan(run, name, contract.job_dir(run_dir, name), shard, count, _local_job_id(run.run_id, i))
        for i, (name, shard, count) in enumerate(units, start=1)
    )


def _shared_job(run: RunInputs, run_dir: str) -> JobPlan:
    """job.deployment: shared — the one job that starts the services and runs every benchmark's driver."""
    first = next(iter(run.config.driver.benchmarks))
    shared_dir = contract.job_dir(run_dir, contract.SHARED_DEPLOYMENT_DIR)
    compute, _ = job_compute(run, fixed_ports_reason(run))
    return replace(
        job_plan(run, first, shared_dir, _local_job_id(run.run_id, 1), shared_driver=False),
        benchmark=contract.SHARED_DEPLOYMENT_DIR,
        directives=run.backend.directives(compute, contract.SHARED_DEPLOYMENT_DIR, shared_dir),
        export=None,  # each benchmark exports its own results, from its own directory
    )


def _local_job_id(run_id: str, number: int) -> str:
    """The job's id under the local backend (Slurm assigns its own)."""
    return f"local-{run_id[-6:]}-{number}"


def _mount_sources(config: SubmitConfig) -> tuple[tuple[str, str], ...]:
    entries = [("driver", m) for m in config.driver.mounts]
    entries += [(f"services.{name}", m) for name, s in config.services.items() for m in s.mounts]
    return tuple((label, mount.split(":", 1)[0]) for label, mount in entries)
