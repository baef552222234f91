"""One job's plan: its services' steps, its collector, its driver, what it exports and how it resumes."""

from __future__ import annotations

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.api import BenchmarkRunConfig, ComputeConfig
from nemo_gym.orchestration.backends.slurm_rules import walltime_seconds
from nemo_gym.orchestration.plan.driver import driver_plan, head_server_port
from nemo_gym.orchestration.plan.exports import export_plan
from nemo_gym.orchestration.plan.inputs import RunInputs
from nemo_gym.orchestration.plan.model import JobPlan, OtelPlan, PortRef, ResumePlan, ShardPlan, Step
from nemo_gym.orchestration.plan.ports import HEAD_SERVER, fixed_ports_reason, whole_nodes
from nemo_gym.orchestration.plan.services import runs_ray, service_steps, service_url
from nemo_gym.orchestration.plan.telemetry import otel_plan


def shard_job_plan(
    run: RunInputs, benchmark: str, bench_dir: str, index: int, count: int, local_job_id: str
) -> JobPlan:
    """Shard ``index`` of ``count`` of a benchmark: a job of its own in the benchmark's directory."""
    job_dir = contract.shard_dir(bench_dir, index)
    shard = ShardPlan(index, count, bench_dir, "", "", None, (), (), ())  # its commands: driver_plan
    return job_plan(run, benchmark, job_dir, local_job_id, False, shard)


def job_plan(
    run: RunInputs,
    benchmark: str,
    job_dir: str,
    local_job_id: str,
    shared_driver: bool,
    shard: ShardPlan | None = None,
) -> JobPlan:
    config = run.config
    layout = run.layout
    fixed = fixed_ports_reason(run)
    compute, node_sharing = job_compute(run, fixed)
    steps, ray_addresses = service_steps(run, job_dir, claimed=fixed is None)
    otel = otel_plan(run, benchmark, job_dir, steps, claimed=fixed is None) if config.otel.enabled else None
    ports = _claimed_ports(run, steps, otel) if fixed is None else ()
    head = (PortRef(HEAD_SERVER, head_server_port(config.driver.benchmarks[benchmark])),) if fixed is None else ()
    claimed = {ref.name: ref for ref in (*ports, *head)}
    # Several drivers in one job (a shared deployment, a warm lane) each claim their own as they start.
    per_driver = config.job.deployment in ("shared", "reload")
    driver, shard = driver_plan(run, benchmark, job_dir, otel, shared_driver, shard, claimed)
    unit = benchmark if shard is None else contract.shard_unit(benchmark, shard.index)
    return JobPlan(
        benchmark=benchmark,
        local_job_id=local_job_id,
        job_dir=job_dir,
        directives=run.backend.directives(compute, unit, job_dir),
        node_count=layout.node_count,
        steps=tuple(steps),
        driver=driver,
        gpus=layout.gpu_count,
        ray_addresses=tuple(ray_addresses),
        service_urls=tuple(service_url(step) for step in steps if step.metrics_port is not None and step.health),
        component_pools=tuple(layout.pools) if layout.heterogeneous else (),
        resume=_resume_plan(config.driver.benchmarks[benchmark]),
        otel=otel,
        ray_token_file=f"{job_dir}/{contract.RAY_TOKEN_FILE}" if any(runs_ray(s) for s in steps) else None,
        export=export_plan(run, benchmark, shared_driver),
        shard=shard,
        max_concurrent=config.job.max_concurrent,
        ports=ports if per_driver else (*ports, *head),
        driver_ports=head if per_driver else (),
        node_sharing=node_sharing,
    )


def _claimed_ports(run: RunInputs, steps: list[Step], otel: OtelPlan | None) -> tuple[PortRef, ...]:
    """The services' ports the job claims at its start: its servers' (each step's serving port, then
    its others: a tier's side channel, a router's metrics), then its collector's."""
    served = [step.claimed_port for step in steps if step.claimed_port is not None]
    collector = [port for port in otel.ports if isinstance(port, PortRef)] if otel is not None else []
    return (*served, *(ref for step in steps for ref in step.side_ports), *collector)


def job_compute(run: RunInputs, fixed_ports: str | None) -> tuple[ComputeConfig, str]:
    """The compute as the backend reads it for a job, ``exclusive_nodes`` decided (auto:
    ``plan.ports.whole_nodes``), and the words that say why."""
    compute = next(iter(run.config.compute.values()))
    whole, why = whole_nodes(run, fixed_ports)
    if "exclusive_nodes" not in type(compute).model_fields or getattr(compute, "exclusive_nodes", None) == whole:
        return compute, why
    return compute.model_copy(update={"exclusive_nodes": whole}), why


def _resume_plan(bench: BenchmarkRunConfig) -> ResumePlan | None:
    caps = bench.resume_config
    if caps is None:
        return None
    cap = caps.max_walltime
    return ResumePlan(caps.max_retries, cap, walltime_seconds(cap) if cap else None)
