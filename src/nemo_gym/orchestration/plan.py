"""Validated ``SubmitConfig`` -> ``RunPlan``: every decision about the jobs, as plain data.

Which node is a service's head, which nodes a step runs on, which argv each node's process gets,
how each service is health-checked, where the driver runs: all decided here, once, in Python. The
templates only print these decisions.

Nodes are indices into the allocation's node list (``scontrol show hostnames``), so node pools are
contiguous slices of it, in declaration order.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Literal

from nemo_gym.orchestration.api import (
    SHARED_DEPLOYMENT_DIR,
    BaseServiceConfig,
    BenchmarkRunConfig,
    DriverConfig,
    RayServiceConfig,
    SlurmComputeConfig,
    SubmitConfig,
    VllmServiceConfig,
    effective_ray_serve,
    env_sources_of,
)
from nemo_gym.orchestration.overrides import flatten_overrides
from nemo_gym.orchestration.rules import walltime_seconds

# The rpc port vLLM's data-parallel ranks use to find the head.
VLLM_DP_RPC_PORT = 13345
# A Ray cluster that only carries one vLLM instance across nodes; kept off 6379 so it never meets
# a ray service's own head on the same node.
VLLM_RAY_PORT = 6390
# Ray services and ray-backed vLLM heads have no HTTP probe: their step writes a ready marker.
DEFAULT_READY_TIMEOUT = 600

Runtime = Literal["pyxis", "apptainer", "none"]
StepMode = Literal["plain", "vllm-dp", "vllm-ray", "vllm-gateway", "ray-head", "ray-worker"]


@dataclass(frozen=True)
class NodeSlice:
    """``count`` consecutive nodes of the allocation starting at index ``start``."""

    start: int
    count: int

    @property
    def indices(self) -> range:
        return range(self.start, self.start + self.count)


@dataclass(frozen=True)
class EnvVar:
    """One env entry of a step: a literal, a variable read where the step runs, or a secret
    carried from the submitting machine through the submission's environment."""

    key: str
    kind: Literal["lit", "runtime", "host"]
    value: str  # literal value | variable to read on the node | carrier variable name


@dataclass(frozen=True)
class HealthCheck:
    kind: Literal["http", "ready-marker"]
    timeout_seconds: int
    port: int | None = None
    path: str = "/health"
    node: int = 0  # the node whose address is probed


@dataclass(frozen=True)
class Step:
    name: str  # unique in the job; names its script, log and markers
    service: str
    mode: StepMode
    nodes: NodeSlice
    container: str | None
    mounts: tuple[str, ...]
    env: tuple[EnvVar, ...]
    pre_command: str
    argv: tuple[str, ...]  # what the step's first node runs (every node, for plain steps)
    worker_argv: tuple[str, ...] = ()  # what the other nodes run (vllm-dp, vllm-ray, ray workers)
    dp_local_size: int = 0  # vllm-dp: data-parallel ranks on each node
    ray_port: int = 0
    ray_head_node: int = 0  # ray-worker: the node whose ray head the workers join
    health: HealthCheck | None = None
    instances: int = 1  # vllm-gateway: replicas behind the gateway
    gpus_per_instance: int = 0  # vllm-gateway: GPUs each replica reserves (0: unknown)
    port: int = 0  # vllm-gateway: where the gateway serves
    ray_nodes: int = 1  # ray-head: nodes of the whole Ray cluster (the head and every worker)


@dataclass(frozen=True)
class DriverPlan:
    node: int
    container: str
    mounts: tuple[str, ...]
    env: tuple[EnvVar, ...]
    prepare_argv: tuple[str, ...] | None
    run_argv: tuple[str, ...]
    gym_repo: str | None
    gym_ref: str | None
    rollouts_path: str


# No resumable chain grows past this many jobs, whatever its caps say: the last guard against a loop.
RESUME_CHAIN_LIMIT = 100


@dataclass(frozen=True)
class ResumePlan:
    """A resumable benchmark's caps (see ``ResumeConfig``), in the units the job script uses."""

    max_retries: int
    max_walltime: str | None
    max_walltime_seconds: int | None


@dataclass(frozen=True)
class JobPlan:
    benchmark: str
    local_job_id: str  # the job's id under the local launcher (Slurm assigns its own)
    job_dir: str
    directives: tuple[tuple[str, str | None], ...]  # (option, value); None for a bare flag
    node_count: int  # nodes in the allocation
    steps: tuple[Step, ...]
    driver: DriverPlan
    ray_addresses: tuple[tuple[str, int, int], ...] = ()  # (service, head node, port)
    resume: ResumePlan | None = None  # resumable: the job queues its own successor (Slurm only)


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    run_dir: str
    compute: str
    hostname: str | None
    runtime: Runtime
    launcher: Literal["slurm", "local"]
    jobs: tuple[JobPlan, ...]
    # Carrier variable -> (owner label, env key): secrets the submission must export.
    secrets: dict[str, tuple[str, str]] = field(default_factory=dict)
    # job.deployment: shared — the one job that starts the services and runs every benchmark's
    # driver (from ``jobs``) against them, ``benchmarks_at_once`` at a time.
    shared: JobPlan | None = None
    benchmarks_at_once: int = 1

    @property
    def submitted_jobs(self) -> tuple[JobPlan, ...]:
        """What is handed to the scheduler: one job per benchmark, or the one shared job."""
        return (self.shared,) if self.shared is not None else self.jobs


def shell_var(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def secret_carrier(owner: str, key: str) -> str:
    return f"GYM_HOST_{shell_var(owner)}__{key}"


# --------------------------------------------------------------------------------------------


def build_plan(config: SubmitConfig, run_id: str) -> RunPlan:
    compute_name, compute = next(iter(config.compute.items()))
    run_dir = f"{config.job.output_path.rstrip('/')}/{run_id}"
    layout = _Layout.of(config)
    secrets: dict[str, tuple[str, str]] = {}
    jobs = tuple(
        _job_plan(config, layout, name, f"{run_dir}/{name}", secrets, f"local-{run_id[-6:]}-{i}")
        for i, name in enumerate(config.driver.benchmarks, start=1)
    )
    shared = None
    if config.job.deployment == "shared":
        first = next(iter(config.driver.benchmarks))
        shared_dir = f"{run_dir}/{SHARED_DEPLOYMENT_DIR}"
        base = _job_plan(config, layout, first, shared_dir, secrets, f"local-{run_id[-6:]}-1")
        shared = replace(
            base,
            benchmark=SHARED_DEPLOYMENT_DIR,
            directives=_directives(config, SHARED_DEPLOYMENT_DIR, shared_dir),
        )
        # Every benchmark shares the one job (and its id) under the local launcher too.
        jobs = tuple(replace(job, local_job_id=shared.local_job_id) for job in jobs)
    return RunPlan(
        run_id=run_id,
        run_dir=run_dir,
        compute=compute_name,
        hostname=compute.hostname,
        runtime=compute.container_runtime,
        launcher="slurm" if isinstance(compute, SlurmComputeConfig) else "local",
        jobs=jobs,
        secrets=secrets,
        shared=shared,
        benchmarks_at_once=config.job.benchmarks_at_once,
    )


@dataclass(frozen=True)
class _Layout:
    node_count: int
    pools: dict[str, NodeSlice]
    driver_node: int

    @classmethod
    def of(cls, config: SubmitConfig) -> _Layout:
        compute = next(iter(config.compute.values()))
        pools: dict[str, NodeSlice] = {}
        start = 0
        for name, pool in compute.node_pools.items():
            pools[name] = NodeSlice(start, pool.nodes)
            start += pool.nodes
        node_count = max(start, 1)
        policy = config.services.get(config.driver.policy_model or "")
        pinned = getattr(policy, "node_pool", None)
        driver_node = pools[pinned].start if pinned else 0
        return cls(node_count=node_count, pools=pools, driver_node=driver_node)

    def service_nodes(self, service: BaseServiceConfig) -> NodeSlice:
        if service.node_pool is not None:
            return self.pools[service.node_pool]
        return NodeSlice(0, self.node_count)


def _directives(config: SubmitConfig, benchmark: str, job_dir: str) -> tuple[tuple[str, str | None], ...]:
    compute = next(iter(config.compute.values()))
    if not isinstance(compute, SlurmComputeConfig):
        return ()
    out: list[tuple[str, str | None]] = [
        ("job-name", f"gym-{benchmark}"),
        ("account", compute.account),
    ]
    if compute.walltime:
        out.append(("time", compute.walltime))
    out += [("chdir", job_dir), ("output", f"{job_dir}/slurm-%j.out")]
    pools = list(compute.node_pools.values())
    if pools:
        first = pools[0]
        out += [
            ("partition", first.partition),
            ("nodes", str(sum(p.nodes for p in pools))),
            ("ntasks-per-node", str(first.ntasks_per_node)),
        ]
        if first.gpus_per_node is not None:
            out.append(("gpus-per-node", str(first.gpus_per_node)))
    extra: dict[str, str] = {}
    for pool in pools:
        extra.update(pool.extra_args)
    extra.update(compute.extra_args)
    out += [(k, v if v != "" else None) for k, v in extra.items()]
    return tuple(out)


def _env(owner_label: str, owner: BaseServiceConfig | DriverConfig, secrets: dict) -> tuple[EnvVar, ...]:
    entries = []
    for key, source in env_sources_of(owner).items():
        if source.kind == "host":
            carrier = secret_carrier(owner_label, key)
            secrets[carrier] = (owner_label, key)
            entries.append(EnvVar(key, "host", carrier))
        elif source.kind == "runtime":
            entries.append(EnvVar(key, "runtime", source.ref))
        else:
            entries.append(EnvVar(key, "lit", owner.env[key]))
    return tuple(entries)


def _job_plan(
    config: SubmitConfig, layout: _Layout, benchmark: str, job_dir: str, secrets: dict, local_job_id: str
) -> JobPlan:
    steps: list[Step] = []
    ray_addresses: list[tuple[str, int, int]] = []
    for name, service in config.services.items():
        env = _env(name, service, secrets)
        if isinstance(service, VllmServiceConfig):
            steps.append(_vllm_step(config, layout, name, service, env))
        else:
            assert isinstance(service, RayServiceConfig)
            steps += _ray_steps(layout, name, service, env)
            ray_addresses.append((name, layout.driver_node, service.port))
    return JobPlan(
        benchmark=benchmark,
        local_job_id=local_job_id,
        job_dir=job_dir,
        directives=_directives(config, benchmark, job_dir),
        node_count=layout.node_count,
        steps=tuple(steps),
        driver=_driver_plan(config, layout, benchmark, job_dir, secrets),
        ray_addresses=tuple(ray_addresses),
        resume=_resume_plan(config.driver.benchmarks[benchmark]),
    )


def _resume_plan(bench: BenchmarkRunConfig) -> ResumePlan | None:
    caps = bench.resume_config
    if caps is None:
        return None
    cap = caps.max_walltime
    return ResumePlan(caps.max_retries, cap, walltime_seconds(cap) if cap else None)


# -- vLLM ---------------------------------------------------------------------------------------


def _vllm_argv(service: VllmServiceConfig) -> list[str]:
    argv = [
        "vllm", "serve", service.model,
        "--port", str(service.port),
        "--tensor-parallel-size", str(service.tensor_parallel_size),
    ]  # fmt: skip
    if service.pipeline_parallel_size > 1:
        argv += ["--pipeline-parallel-size", str(service.pipeline_parallel_size)]
    if service.served_model_name:
        argv += ["--served-model-name", service.served_model_name]
    if service.trust_remote_code:
        argv.append("--trust-remote-code")
    return argv + shlex.split(service.extra_args)


def _drop_flags(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """``argv`` without the given options, written ``--flag value`` or ``--flag=value``."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        flag, has_value, _ = arg.partition("=")
        if flag in flags:
            skip = not has_value
            continue
        out.append(arg)
    return out


# Headless vLLM ranks refuse --api-server-count: only the head serves the API.
_HEAD_ONLY_VLLM_FLAGS = ("--api-server-count",)


def _vllm_step(
    config: SubmitConfig, layout: _Layout, name: str, service: VllmServiceConfig, env: tuple[EnvVar, ...]
) -> Step:
    nodes = layout.service_nodes(service)
    compute = next(iter(config.compute.values()))
    pools = [compute.node_pools[service.node_pool]] if service.node_pool else list(compute.node_pools.values())
    gpus = [p.gpus_per_node for p in pools if p.gpus_per_node is not None]
    assert service.health_check is not None and service.health_check.port is not None
    health = HealthCheck(
        "http", service.health_check.timeout_seconds, service.health_check.port, service.health_check.path,
        nodes.start,
    )  # fmt: skip
    base = _vllm_argv(service)
    n = service.number_of_instances
    common = dict(
        name=name, service=name, nodes=nodes, container=service.container, mounts=tuple(service.mounts),
        env=env, pre_command=service.pre_command, health=health,
    )  # fmt: skip
    if effective_ray_serve(service, nodes.count, gpus):
        # Our gateway on a Ray cluster across the service's nodes: N replicas, one endpoint; each
        # replica gets its own port from the gateway.
        return Step(
            mode="vllm-gateway", argv=tuple(_drop_flags(base, ("--port",))), ray_port=VLLM_RAY_PORT,
            instances=n, port=service.port,
            gpus_per_instance=service.tensor_parallel_size * service.pipeline_parallel_size if gpus else 0,
            **common,  # type: ignore[arg-type]
        )  # fmt: skip
    if nodes.count == 1:
        argv = base + (["--data-parallel-size", str(n)] if n > 1 else [])
        return Step(mode="plain", argv=tuple(argv), **common)  # type: ignore[arg-type]
    if n > 1:
        local = n // nodes.count
        dp = ["--data-parallel-size", str(n), "--data-parallel-size-local", str(local),
              "--data-parallel-rpc-port", str(VLLM_DP_RPC_PORT)]  # fmt: skip
        return Step(
            mode="vllm-dp",
            argv=tuple(base + dp),
            worker_argv=tuple(_drop_flags(base, _HEAD_ONLY_VLLM_FLAGS) + dp + ["--headless"]),
            dp_local_size=local,
            **common,  # type: ignore[arg-type]
        )
    argv = base + ["--distributed-executor-backend", "ray"]
    return Step(mode="vllm-ray", argv=tuple(argv), ray_port=VLLM_RAY_PORT, **common)  # type: ignore[arg-type]


# -- Ray ----------------------------------------------------------------------------------------


def _ray_resource_flags(service: RayServiceConfig, pool: str | None) -> list[str]:
    flags = []
    if service.num_cpus is not None:
        flags.append(f"--num-cpus={service.num_cpus}")
    if service.num_gpus is not None:
        flags.append(f"--num-gpus={service.num_gpus}")
    if pool is not None and service.resources.get(pool):
        import json

        amounts = {k: (int(v) if float(v).is_integer() else v) for k, v in sorted(service.resources[pool].items())}
        flags.append("--resources=" + json.dumps(amounts, separators=(",", ":")))
    return flags


_HEAD_ONLY_RAY_FLAGS = ("--port", "--redis-shard-ports", "--include-dashboard", "--dashboard-host", "--dashboard-port")


def _ray_steps(layout: _Layout, name: str, service: RayServiceConfig, env: tuple[EnvVar, ...]) -> list[Step]:
    head = layout.driver_node
    head_pool = next((p for p, s in layout.pools.items() if head in s.indices), None)
    extra = shlex.split(service.extra_args)
    common = dict(
        service=name, container=service.container, mounts=tuple(service.mounts), env=env,
        pre_command=service.pre_command, ray_port=service.port, ray_head_node=head,
    )  # fmt: skip
    head_flags = _ray_resource_flags(service, head_pool if head_pool in service.node_pools else None)
    if service.health_check is not None:
        health = HealthCheck(
            "http", service.health_check.timeout_seconds, service.health_check.port, service.health_check.path, head
        )
    else:
        health = HealthCheck("ready-marker", DEFAULT_READY_TIMEOUT, node=head)
    worker_count = sum(len([i for i in layout.pools[p].indices if i != head]) for p in service.node_pools)
    steps = [
        Step(
            name=name, mode="ray-head", nodes=NodeSlice(head, 1), ray_nodes=1 + worker_count,
            argv=tuple(["ray", "start", "--head", f"--port={service.port}", *head_flags, *extra]),
            health=health, **common,  # type: ignore[arg-type]
        )
    ]  # fmt: skip
    for pool in service.node_pools:
        slice_ = layout.pools[pool]
        workers = [i for i in slice_.indices if i != head]
        if not workers:
            continue
        # Workers of a pool are contiguous except where the head sits at the pool's start.
        nodes = NodeSlice(workers[0], len(workers))
        flags = _ray_resource_flags(service, pool)
        steps.append(
            Step(
                name=f"{name}_{pool}_workers", mode="ray-worker", nodes=nodes,
                argv=tuple(["ray", "start", *flags, *_drop_flags(extra, _HEAD_ONLY_RAY_FLAGS)]),
                **common,  # type: ignore[arg-type]
            )
        )  # fmt: skip
    return steps


# -- driver -------------------------------------------------------------------------------------


def _driver_plan(
    config: SubmitConfig, layout: _Layout, benchmark: str, job_dir: str, secrets: dict
) -> DriverPlan:
    driver = config.driver
    bench = driver.benchmarks[benchmark]
    rollouts = f"{job_dir}/artifacts/rollouts.jsonl"
    prepare = None
    if bench.prepare:
        prepare = ("gym", "eval", "prepare", *flatten_overrides(bench.prepare, "prepare."))
    run_argv = ["gym", "eval", "run", f"+output_jsonl_fpath={rollouts}"]
    if driver.policy_model and driver.policy_model_type:
        run_argv += ["--model-type", driver.policy_model_type]
    run = bench.run
    if bench.resume_config is not None and "resume_from_cache" not in run:
        # Every job of a resumable chain continues from the rollouts on disk; on the first job
        # there are none yet, which gym treats as a fresh start.
        run = {**run, "resume_from_cache": True}
    run_argv += flatten_overrides(run, "run.")
    mounts = tuple(driver.mounts) + (f"{job_dir}:{job_dir}",)
    return DriverPlan(
        node=layout.driver_node,
        container=driver.container,
        mounts=mounts,
        env=_env("driver", driver, secrets),
        prepare_argv=prepare,
        run_argv=tuple(run_argv),
        gym_repo=driver.gym_install.repo if driver.gym_install else None,
        gym_ref=driver.gym_install.ref if driver.gym_install else None,
        rollouts_path=rollouts,
    )
