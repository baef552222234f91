"""Validated ``SubmitConfig`` -> ``RunPlan``: every decision about the jobs, as plain data.

Which node is a service's head, which nodes a step runs on, which argv each node's process gets,
how each service is health-checked, where the driver and the collector run, what the collector
scrapes, what the driver's environment is: all decided here, once, in Python. Rendering prints
these decisions and decides nothing.

Nodes are indices into the allocation's node list (``GYM_NODES``), so node pools are
contiguous slices of it, in declaration order.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.api import (
    POLICY_RUN_KEYS,
    RUNTIME_ENV_PREFIX,
    BaseModelServiceConfig,
    BaseServiceConfig,
    BenchmarkRunConfig,
    DriverConfig,
    OtelConfig,
    RayServiceConfig,
    SubmitConfig,
    VllmPDServiceConfig,
    VllmPDTierConfig,
    VllmServiceConfig,
    effective_ray_serve,
    env_sources_of,
    is_carried_secret,
)
from nemo_gym.orchestration.backends.slurm_rules import walltime_seconds
from nemo_gym.orchestration.exporters.spec import CREDENTIALS, ENV_TRACKING_URI, MLFLOW
from nemo_gym.orchestration.overrides import flatten_overrides
from nemo_gym.orchestration.rules import ROUTER_METRICS_PORT, pools_differ

# A Ray cluster that only carries one vLLM instance across nodes; kept off 6379 so it never meets
# a ray service's own head on the same node.
VLLM_RAY_PORT = 6390
# Ray services and ray-backed vLLM heads have no HTTP probe: their step writes a ready marker.
DEFAULT_READY_TIMEOUT = 600
COLLECTOR_STEP = "otel_collector"
DRIVER_STEP = "driver"

Runtime = Literal["pyxis", "apptainer", "none"]


@dataclass(frozen=True)
class NodeSlice:
    """``count`` consecutive nodes of the allocation starting at index ``start``."""

    start: int
    count: int

    @property
    def indices(self) -> range:
        return range(self.start, self.start + self.count)

    @property
    def last(self) -> int:
        return self.start + self.count - 1


@dataclass(frozen=True)
class EnvVar:
    """One env entry of a step: a literal, a variable read where the step runs, a secret carried
    from the submitting machine through the submission's environment, or the address of the node
    the process runs on (known only there)."""

    key: str
    kind: Literal["lit", "runtime", "host", "node-address"]
    value: str  # literal value | variable to read on the node | carrier variable name | ""


@dataclass(frozen=True)
class HealthCheck:
    kind: Literal["http", "ready-marker"]
    timeout_seconds: int
    port: int | None = None
    path: str = "/health"
    nodes: tuple[int, ...] = (0,)  # the nodes whose addresses are probed, each until it answers
    # A name the server must list at /v1/models once it answers: an answer from another job's
    # server on the same port (a shared node, a stale server) is then told from this job's own.
    identity: str | None = None


@dataclass(frozen=True)
class Launch:
    """How one step's processes are placed and started; the backend prints it as a command line.

    The step's script is ``<job_dir>/steps/<step>.sh``; it runs once on each of ``nodes``.
    """

    step: str
    job_dir: str
    nodes: NodeSlice
    container: str | None
    mounts: tuple[str, ...]  # besides the job directory, which is always mounted at its own path
    gpus: bool  # the nodes have GPUs a container must be given
    log_dir: str = contract.LOGS_DIR  # relative to the job directory, or absolute
    # The component of a heterogeneous job the nodes belong to (srun --het-group); None otherwise.
    component: int | None = None

    @property
    def script(self) -> str:
        return f"{self.job_dir}/{contract.step_script(self.step)}"


@dataclass(frozen=True, kw_only=True)
class StepBase:
    """What every step has. A step is one service process (or Ray node) on each of its nodes."""

    kind: ClassVar[str]
    name: str  # unique in the job; names its script, log and markers
    service: str
    nodes: NodeSlice
    env: tuple[EnvVar, ...]
    pre_command: str
    argv: tuple[str, ...]  # what the step's first node runs (every node, for a plain step)
    launch: Launch
    health: HealthCheck | None = None
    metrics_port: int | None = None  # where its Prometheus /metrics is served, for the collector

    def describe(self) -> str:
        return f"service {self.service}, step {self.name}: {self.what()}, nodes {self.nodes.start}..{self.nodes.last}"

    def what(self) -> str:
        return "one process"


@dataclass(frozen=True, kw_only=True)
class PlainStep(StepBase):
    kind: ClassVar[str] = "plain"


@dataclass(frozen=True, kw_only=True)
class VllmDataParallelStep(StepBase):
    """Data parallel across nodes: the first node serves the API, the others run headless ranks."""

    kind: ClassVar[str] = "vllm-dp"
    worker_argv: tuple[str, ...]
    ranks_per_node: int

    def what(self) -> str:
        return f"vLLM data parallel, {self.ranks_per_node} rank(s) a node"


@dataclass(frozen=True, kw_only=True)
class VllmRayStep(StepBase):
    """One vLLM instance larger than a node, on a Ray cluster of its own."""

    kind: ClassVar[str] = "vllm-ray"
    ray_port: int

    def what(self) -> str:
        return "one vLLM instance across nodes on a Ray cluster"


@dataclass(frozen=True, kw_only=True)
class VllmGatewayStep(StepBase):
    """Several vLLM replicas on a Ray cluster behind our gateway (``steps/ray_serve_gateway.py``)."""

    kind: ClassVar[str] = "vllm-gateway"
    ray_port: int
    instances: int
    gpus_per_instance: int  # 0: unknown (the pools do not say how many GPUs they have)
    port: int  # where the gateway serves

    def what(self) -> str:
        return f"{self.instances} vLLM replicas behind the Ray gateway"


@dataclass(frozen=True, kw_only=True)
class VllmRouterStep(StepBase):
    """vllm-router in front of a prefill/decode pair: ``argv`` plus one ``--prefill``/``--decode``
    URL per serving node of each tier, whose addresses the job knows only when it runs."""

    kind: ClassVar[str] = "vllm-router"
    prefill: tuple[tuple[int, int], ...]  # (node, port) of each prefill server
    decode: tuple[tuple[int, int], ...]

    def what(self) -> str:
        return f"vllm-router in front of {len(self.prefill)} prefill and {len(self.decode)} decode server(s)"


@dataclass(frozen=True, kw_only=True)
class RayHeadStep(StepBase):
    kind: ClassVar[str] = "ray-head"
    ray_port: int
    ray_nodes: int  # nodes of the whole Ray cluster (the head and every worker)

    def what(self) -> str:
        return "Ray head"


@dataclass(frozen=True, kw_only=True)
class RayWorkerStep(StepBase):
    kind: ClassVar[str] = "ray-worker"
    head_address_variable: str  # the job exports the head's ip:port in it

    def what(self) -> str:
        return "Ray workers"


Step = PlainStep | VllmDataParallelStep | VllmRayStep | VllmGatewayStep | VllmRouterStep | RayHeadStep | RayWorkerStep


@dataclass(frozen=True)
class RayAddress:
    """A ray service's head, exported to the job as ``variable`` = ``<ip of node>:<port>``."""

    service: str
    node: int
    port: int
    variable: str


@dataclass(frozen=True)
class ServiceUrl:
    """Where a model service answers (its OpenAI base URL), exported to the job as ``variable``:
    the driver, a command and the other services reach it there, whichever component it is on."""

    service: str
    node: int
    port: int
    variable: str


@dataclass(frozen=True)
class DriverPlan:
    node: int
    launch: Launch
    # Telemetry settings first, then driver.env (which wins over them), then what a command
    # benchmark is told (which wins over both).
    env: tuple[EnvVar, ...]
    prepare_argv: tuple[str, ...] | None
    run_argv: tuple[str, ...]  # gym eval run; empty for a command benchmark
    gym_repo: str | None
    gym_ref: str | None
    rollouts_path: str
    command: str | None = None  # a benchmark's own shell script, run instead of gym eval run
    gym_extras: str = ""  # pip extras of gym_install, e.g. "telemetry"
    # driver.policy_host read on the driver's node (runtime:VAR): the variable, whose value replaces
    # "runtime:VAR" in the run arguments and the environment when the driver starts.
    policy_host_variable: str | None = None
    # Added to run_argv once gym eval resubmit has marked the benchmark (contract.CONTINUE_FILE):
    # gym then generates only the (task, rollout) pairs its rollouts lack. Empty when every job
    # continues anyway, and for a command benchmark (its command cannot be told to).
    continue_argv: tuple[str, ...] = ()

    @property
    def continues_from_disk(self) -> bool:
        """Whether a job of it can be told to keep what is on disk and generate only the rest."""
        return self.command is None


# What tells gym eval run to keep the rollouts on disk and generate only the pairs they lack: it
# dispatches the materialized inputs' pairs that rollouts.jsonl does not hold, appends their rows
# and aggregates over all of them. ``++`` sets it whether or not the run config did.
CONTINUE_FROM_DISK = "++resume_from_cache=true"


@dataclass(frozen=True)
class ResumePlan:
    """A resumable benchmark's caps (see ``ResumeConfig``), in the units the judge uses."""

    max_retries: int
    max_walltime: str | None
    max_walltime_seconds: int | None
    chain_limit: int = contract.CHAIN_LIMIT


@dataclass(frozen=True)
class ScrapeJob:
    """One prometheus scrape job: ``targets`` are (node index, ``host:port``) pairs."""

    name: str
    port: int
    targets: tuple[tuple[int, str], ...]
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Attribute:
    """A resource attribute: a literal value, or the value of a variable in the collector's env."""

    key: str
    value: str
    from_env: bool = False


@dataclass(frozen=True)
class OtelPlan:
    """The OpenTelemetry collector of one job: where it runs, what it scrapes, where it sends."""

    launch: Launch
    argv: tuple[str, ...]
    config_path: str
    node_count: int  # it scrapes every node of the allocation; the job exports their addresses
    endpoint: str
    token_env: str
    health_timeout_seconds: int
    scrape_interval_seconds: int
    scrape_jobs: tuple[ScrapeJob, ...]
    attributes: tuple[Attribute, ...]  # set on everything the collector exports
    out_dir: str


@dataclass(frozen=True)
class ExportPlan:
    """Where a benchmark's results go once its driver has ended: the exporters, and the spec (JSON)
    the job's stdlib exporters read (see ``exporters.spec``)."""

    exporters: tuple[str, ...]
    spec: dict[str, Any]


@dataclass(frozen=True)
class ShardPlan:
    """Shard ``index`` (1..``count``) of a sharded benchmark: a job of its own whose driver has gym
    prepare the benchmark's inputs (``collate_argv``, into ``prepared_dir``), keeps its slice of
    them (``shards.py slice``: the first ``limit`` rows when set, the tasks whose index is
    ``index - 1`` modulo ``count``) and runs gym eval run on that slice alone. The last shard to
    finish merges every shard's rollouts into the benchmark's own directory: ``env_start_argv``
    starts gym's servers for ``aggregate_argv`` (gym eval aggregate) to score the union."""

    index: int
    count: int
    bench_dir: str  # the benchmark's directory: the merged artifacts and the shards' markers
    prepared_dir: str
    split: str  # the prepared file's name (run.split); "" when gym's config files set it
    limit: int | None
    collate_argv: tuple[str, ...]
    env_start_argv: tuple[str, ...]
    aggregate_argv: tuple[str, ...]


# The run keys a shard's driver sets itself: its slice is its input, unaggregated.
SHARD_RUN_KEYS = ("limit", "reuse_existing_data_preparation", "disable_aggregation")
# How long the merging shard waits for gym's servers to start before it gives up on the merge.
MERGE_START_TIMEOUT = 600


@dataclass(frozen=True)
class JobPlan:
    benchmark: str
    local_job_id: str  # the job's id under the local backend (Slurm assigns its own)
    job_dir: str
    # The scheduler's options, one tuple per component (a heterogeneous job has several): (option,
    # value) pairs, value None for a bare flag.
    directives: tuple[tuple[tuple[str, str | None], ...], ...]
    node_count: int  # nodes in the allocation
    steps: tuple[Step, ...]
    driver: DriverPlan
    gpus: int = 0  # GPUs the allocation holds (all its nodes'); 0 when the config does not say
    ray_addresses: tuple[RayAddress, ...] = ()
    service_urls: tuple[ServiceUrl, ...] = ()
    # The pools whose components make a heterogeneous job, in order; empty for a plain job.
    component_pools: tuple[str, ...] = ()
    resume: ResumePlan | None = None  # resumable: the job queues its own successor (Slurm only)
    otel: OtelPlan | None = None
    # Every Ray cluster of the job (and every client of one) authenticates with this token, made
    # by the job before its steps start: Ray turns token auth on for its heads, and a client
    # without the token is refused. None when the job runs no Ray.
    ray_token_file: str | None = None
    export: ExportPlan | None = None  # for a shared deployment, each benchmark's job holds its own
    shard: ShardPlan | None = None  # one shard of a sharded benchmark
    # At most this many of the submission's jobs of its shape at once (job.max_concurrent).
    max_concurrent: int | None = None

    @property
    def unit(self) -> str:
        """What the job is known by among the run's jobs: its benchmark, or ``B@k`` for shard k."""
        return self.benchmark if self.shard is None else contract.shard_unit(self.benchmark, self.shard.index)

    def services(self) -> dict[str, list[str]]:
        """Service -> its steps' names, in order: what the job watches."""
        out: dict[str, list[str]] = {}
        for step in self.steps:
            out.setdefault(step.service, []).append(step.name)
        return out


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    run_dir: str
    compute: str
    hostname: str | None
    runtime: Runtime
    backend: str  # the name of the backend that runs it (backends.backend_named)
    jobs: tuple[JobPlan, ...]
    resolved_config: dict[str, Any]  # the validated config, secrets as references
    # Carrier variable -> (owner label, env key): secrets the submission must export.
    secrets: dict[str, tuple[str, str]] = field(default_factory=dict)
    # job.deployment: shared — the one job that starts the services and runs every benchmark's
    # driver (from ``jobs``) against them, ``benchmarks_at_once`` at a time.
    shared: JobPlan | None = None
    benchmarks_at_once: int = 1
    # The variable, read on the submitting machine, that carries the collector's token.
    otel_token_env: str | None = None
    # (label, source) of every mount: checked on the submit host before anything is staged.
    mount_sources: tuple[tuple[str, str], ...] = ()
    # Variables carried from the submitting shell to the jobs when set there: the exporters'
    # credentials (they travel like host: secrets: in the submission's environment, never a file).
    carried_env: tuple[str, ...] = ()
    sweep_id: str | None = None  # the sweep this run is one combination of
    model: str | None = None  # the model the policy serves (``policy_model``), for people to tell runs apart
    # A sweep's runs whose shared deployments are the same share one (``share_deployments``): its
    # host runs the shared job, which also runs its guests' benchmarks (``guests``, their jobs); a
    # guest queues nothing, its benchmarks answered by the host's job (``host``: run id, job dir).
    guests: tuple[JobPlan, ...] = ()
    host: tuple[str, str] | None = None

    @property
    def submitted_jobs(self) -> tuple[JobPlan, ...]:
        """What is handed to the scheduler: one job per benchmark, or the one shared job (none for a
        run whose benchmarks another run's shared job runs)."""
        if self.host is not None:
            return ()
        return (self.shared,) if self.shared is not None else self.jobs

    @property
    def deployment_dir(self) -> str | None:
        """The shared job's directory that runs this run's benchmarks (its own, or its host's)."""
        if self.host is not None:
            return self.host[1]
        return self.shared.job_dir if self.shared is not None else None


def deployment_key(plan: RunPlan) -> str:
    """What a run's deployment is made of, paths aside: the services, the compute, the telemetry,
    where it is submitted and what it is given. Runs with the same key could share one."""
    config = plan.resolved_config
    made_of = {
        "services": config.get("services"),
        "compute": config.get("compute"),
        "otel": config.get("otel"),
        "at_once": plan.benchmarks_at_once,
        "given": [sorted(plan.secrets), sorted(plan.carried_env), plan.otel_token_env, plan.hostname, plan.runtime],
        # Its runs' directories side by side: each finds the shared job's beside its own.
        "where": posixpath.dirname(plan.run_dir),
    }
    return json.dumps(made_of, sort_keys=True, default=str)


def share_deployments(plans: list[RunPlan]) -> list[RunPlan]:
    """A sweep's runs whose shared deployments are the same (``deployment_key``: only driver or
    benchmark settings differ, a temperature, a prompt) as one: the first runs the shared job and
    its job runs every one of their benchmarks, each still in its own run's directory; the others
    queue nothing. The host's run counts the shared job's GPU-hours, the guests' none."""
    groups: dict[str, list[int]] = {}
    for i, plan in enumerate(plans):
        if plan.shared is not None:
            groups.setdefault(deployment_key(plan), []).append(i)
    shared = list(plans)
    for members in groups.values():
        if len(members) < 2:
            continue
        host = plans[members[0]]
        assert host.shared is not None
        where = (host.run_id, host.shared.job_dir)
        guests: list[JobPlan] = []
        for i in members[1:]:
            jobs = tuple(_counted_by_host(job) for job in plans[i].jobs)
            shared[i] = replace(plans[i], jobs=jobs, host=where)
            guests += jobs
        shared[members[0]] = replace(host, guests=tuple(guests))
    return shared


def _counted_by_host(job: JobPlan) -> JobPlan:
    """A guest's benchmark: its exports count no GPU-hours (the host's run counts the shared job's)."""
    if job.export is None:
        return job
    return replace(job, export=replace(job.export, spec={**job.export.spec, "usage_dir": None}))


def shell_var(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def secret_carrier(owner: str, key: str) -> str:
    return f"{contract.SECRET_CARRIER_PREFIX}{shell_var(owner)}__{key}"


# --------------------------------------------------------------------------------------------


def build_plan(config: SubmitConfig, run_id: str, sweep_id: str | None = None) -> RunPlan:
    from nemo_gym.orchestration.backends import backend_for
    from nemo_gym.orchestration.resolved import resolved_config_dict

    compute_name, compute = next(iter(config.compute.items()))
    if config.otel.enabled:
        from nemo_gym.orchestration.otel_destination import validate_destination

        validate_destination(config)  # telemetry must have somewhere to go before it is planned
    backend = backend_for(compute)
    run_dir = f"{config.job.output_path.rstrip('/')}/{run_id}"
    ctx = _Context(config, run_id, compute_name, backend, _Layout.of(config), {}, sweep_id)
    shared_deployment = config.job.deployment == "shared"
    units = [
        (name, shard, config.shards_of(name))
        for name in config.driver.benchmarks
        for shard in (range(1, config.shards_of(name) + 1) if config.shards_of(name) > 1 else [None])
    ]
    jobs = tuple(
        ctx.job(name, contract.job_dir(run_dir, name), f"local-{run_id[-6:]}-{i}", shared_deployment)
        if shard is None
        else ctx.shard_job(name, contract.job_dir(run_dir, name), shard, count, f"local-{run_id[-6:]}-{i}")
        for i, (name, shard, count) in enumerate(units, start=1)
    )
    shared = None
    if shared_deployment:
        first = next(iter(config.driver.benchmarks))
        shared_dir = contract.job_dir(run_dir, contract.SHARED_DEPLOYMENT_DIR)
        shared = replace(
            ctx.job(first, shared_dir, f"local-{run_id[-6:]}-1", shared_driver=False),
            benchmark=contract.SHARED_DEPLOYMENT_DIR,
            directives=backend.directives(compute, contract.SHARED_DEPLOYMENT_DIR, shared_dir),
            export=None,  # each benchmark exports its own results, from its own directory
        )
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
        secrets=ctx.secrets,
        shared=shared,
        benchmarks_at_once=config.job.benchmarks_at_once,
        otel_token_env=config.otel.token_env if config.otel.enabled else None,
        mount_sources=_mount_sources(config),
        carried_env=export_carried_env(config),
        sweep_id=sweep_id,
        model=policy_model_path(config),
    )


def _shard_plan(shard: ShardPlan, job_dir: str, run: dict[str, Any], model_type: list[str]) -> ShardPlan:
    """The commands of a shard's driver, from its benchmark's run keys (those a shard sets itself
    left out; policy wiring included, as every gym command of the benchmark reads it)."""
    common = flatten_overrides({k: v for k, v in run.items() if k not in SHARD_RUN_KEYS}, "run.")
    prepared_dir = f"{job_dir}/{contract.PREPARED_DATA_DIR}"
    shard_rollouts = f"{contract.shard_dir(shard.bench_dir, '*')}/{contract.ROLLOUTS_FILE}"
    limit = run.get("limit")
    return replace(
        shard,
        prepared_dir=prepared_dir,
        split=str(run.get("split") or ""),
        limit=int(limit) if limit not in (None, "", 0) else None,
        collate_argv=(
            "gym",
            "dataset",
            "collate",
            *model_type,
            *common,
            "+mode=train_preparation",
            "+should_download=true",
            f"+output_dirpath={prepared_dir}",
        ),
        env_start_argv=("gym", "env", "start", *model_type, *common),
        # gym eval aggregate takes no --model-type: the config it names is given as a path.
        aggregate_argv=(
            "gym",
            "eval",
            "aggregate",
            *_model_type_config(model_type),
            *common,
            f"+input_glob={shard_rollouts}",
            f"+output_jsonl_fpath={shard.bench_dir}/{contract.ROLLOUTS_FILE}",
        ),
    )


def _model_type_config(model_type: list[str]) -> list[str]:
    """``--model-type NAME[/FLAVOR]`` as the config path gym 0.7.0 makes of it, for gym commands
    that take only configs: ``responses_api_models/NAME/configs/FLAVOR.yaml`` (FLAVOR: NAME)."""
    if not model_type:
        return []
    name, _, flavor = model_type[1].partition("/")
    return [f"+config_paths=[responses_api_models/{name}/configs/{flavor or name}.yaml]"]


def policy_model_path(config: SubmitConfig) -> str | None:
    """The model (checkpoint) the driver's policy service serves, if it is a model service."""
    policy = config.services.get(config.driver.policy_model or "")
    return policy.model if isinstance(policy, BaseModelServiceConfig) else None


# What each exporter reads from its environment to authenticate (see exporters.run_exports).
EXPORT_CREDENTIALS = CREDENTIALS


def export_carried_env(config: SubmitConfig) -> tuple[str, ...]:
    """The exporters' credentials, and MLFLOW_TRACKING_URI where an mlflow exporter has no
    tracking_uri of its own (the job's then comes from the submitting shell, like a credential)."""
    exports = [config.exports_of(bench) for bench in config.driver.benchmarks]
    used = {name for exporters in exports for name in exporters}
    carried = [var for name in sorted(used) for var in EXPORT_CREDENTIALS.get(name, ())]
    if any(MLFLOW in e and not e[MLFLOW].get("tracking_uri") for e in exports):
        carried.append(ENV_TRACKING_URI)
    return tuple(carried)


def _mount_sources(config: SubmitConfig) -> tuple[tuple[str, str], ...]:
    entries = [("driver", m) for m in config.driver.mounts]
    entries += [(f"services.{name}", m) for name, s in config.services.items() for m in s.mounts]
    return tuple((label, mount.split(":", 1)[0]) for label, mount in entries)


@dataclass(frozen=True)
class _Layout:
    node_count: int
    pools: dict[str, NodeSlice]
    driver_node: int
    gpu_count: int  # GPUs of the whole allocation
    pool_gpus: dict[str, int]  # GPUs per node, by pool
    # Pools that differ make a heterogeneous job whose components are the pools, in order.
    heterogeneous: bool

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
        pool_gpus = {name: pool.gpus_per_node or 0 for name, pool in compute.node_pools.items()}
        gpu_count = sum(p.nodes * pool_gpus[name] for name, p in compute.node_pools.items())
        return cls(
            node_count=node_count,
            pools=pools,
            driver_node=driver_node,
            gpu_count=gpu_count,
            pool_gpus=pool_gpus,
            heterogeneous=pools_differ(compute.node_pools),
        )

    def pool_of(self, node: int) -> str | None:
        return next((name for name, nodes in self.pools.items() if node in nodes.indices), None)

    def component_of(self, nodes: NodeSlice) -> int | None:
        """The heterogeneous job's component that holds these nodes (validation keeps a step in one)."""
        if not self.heterogeneous:
            return None
        names = list(self.pools)
        first, last = self.pool_of(nodes.start), self.pool_of(nodes.last)
        assert first is not None and first == last, f"nodes {nodes} span components"
        return names.index(first)

    def has_gpus(self, nodes: NodeSlice) -> bool:
        pools = {pool for pool in (self.pool_of(i) for i in nodes.indices) if pool is not None}
        return any(self.pool_gpus[p] for p in pools)

    def service_nodes(self, service: BaseServiceConfig) -> NodeSlice:
        if service.node_pool is not None:
            return self.pools[service.node_pool]
        return NodeSlice(0, self.node_count)


@dataclass
class _Context:
    """What every job's plan is made from."""

    config: SubmitConfig
    run_id: str
    compute_name: str
    backend: Any  # backends.Backend; Any keeps this module free of the backends' imports
    layout: _Layout
    secrets: dict[str, tuple[str, str]]
    sweep_id: str | None = None

    def shard_job(self, benchmark: str, bench_dir: str, index: int, count: int, local_job_id: str) -> JobPlan:
        """Shard ``index`` of ``count`` of a benchmark: a job of its own in the benchmark's directory."""
        job_dir = contract.shard_dir(bench_dir, index)
        shard = ShardPlan(index, count, bench_dir, "", "", None, (), (), ())  # its commands: self.driver
        return self.job(benchmark, job_dir, local_job_id, False, shard)

    def job(
        self, benchmark: str, job_dir: str, local_job_id: str, shared_driver: bool, shard: ShardPlan | None = None
    ) -> JobPlan:
        config = self.config
        compute = next(iter(config.compute.values()))
        steps: list[Step] = []
        ray_addresses: list[RayAddress] = []
        for name, service in config.deployed_services.items():
            env = self.env(name, service)
            if isinstance(service, VllmServiceConfig):
                steps.append(self.vllm_step(job_dir, name, service, env))
            elif isinstance(service, VllmPDServiceConfig):
                steps.append(self.router_step(job_dir, name, service, env, steps))
            else:
                assert isinstance(service, RayServiceConfig)
                steps += self.ray_steps(job_dir, name, service, env)
                variable = contract.RAY_ADDRESS_ENV_PREFIX + shell_var(name)
                ray_addresses.append(RayAddress(name, self.layout.driver_node, service.port, variable))
        otel = self.otel(benchmark, job_dir, steps) if config.otel.enabled else None
        driver, shard = self.driver(benchmark, job_dir, otel, shared_driver, shard)
        unit = benchmark if shard is None else contract.shard_unit(benchmark, shard.index)
        return JobPlan(
            benchmark=benchmark,
            local_job_id=local_job_id,
            job_dir=job_dir,
            directives=self.backend.directives(compute, unit, job_dir),
            node_count=self.layout.node_count,
            steps=tuple(steps),
            driver=driver,
            gpus=self.layout.gpu_count,
            ray_addresses=tuple(ray_addresses),
            service_urls=tuple(_service_url(step) for step in steps if step.metrics_port is not None and step.health),
            component_pools=tuple(self.layout.pools) if self.layout.heterogeneous else (),
            resume=_resume_plan(config.driver.benchmarks[benchmark]),
            otel=otel,
            ray_token_file=f"{job_dir}/{contract.RAY_TOKEN_FILE}" if any(_runs_ray(s) for s in steps) else None,
            export=self.export(benchmark, shared_driver),
            shard=shard,
            max_concurrent=config.job.max_concurrent,
        )

    def env(self, owner_label: str, owner: BaseServiceConfig | DriverConfig) -> tuple[EnvVar, ...]:
        entries = []
        for key, source in env_sources_of(owner).items():
            if is_carried_secret(key, source):
                carrier = secret_carrier(owner_label, key)
                self.secrets[carrier] = (owner_label, key)
                entries.append(EnvVar(key, "host", carrier))
            elif source.kind == "runtime":
                entries.append(EnvVar(key, "runtime", source.ref))
            else:
                entries.append(EnvVar(key, "lit", owner.env[key]))
        return tuple(entries)

    def launch(self, job_dir: str, step: str, nodes: NodeSlice, service: BaseServiceConfig) -> Launch:
        layout = self.layout
        return Launch(
            step,
            job_dir,
            nodes,
            service.container,
            tuple(service.mounts),
            layout.has_gpus(nodes),
            component=layout.component_of(nodes),
        )

    # -- vLLM -----------------------------------------------------------------------------------

    def vllm_step(self, job_dir: str, name: str, service: VllmServiceConfig, env: tuple[EnvVar, ...]) -> Step:
        layout = self.layout
        nodes = layout.service_nodes(service)
        compute = next(iter(self.config.compute.values()))
        pools = [compute.node_pools[service.node_pool]] if service.node_pool else list(compute.node_pools.values())
        gpus = [p.gpus_per_node for p in pools if p.gpus_per_node is not None]
        assert service.health_check is not None and service.health_check.port is not None
        check = service.health_check
        one_server_per_node = isinstance(service, VllmPDTierConfig) and service.server_per_node
        probed = tuple(nodes.indices) if one_server_per_node else (nodes.start,)
        identity = serving_identity(self.run_id, job_dir, name) if _identity_checkable(service) else None
        health = HealthCheck("http", check.timeout_seconds, check.port, check.path, probed, identity)
        base = _vllm_argv(service, identity)
        n = service.number_of_instances
        if isinstance(service, VllmPDTierConfig):
            env = _nixl_env(service) + env  # the tier's own env still wins
        common: dict[str, Any] = dict(
            name=name,
            service=name,
            nodes=nodes,
            env=env,
            pre_command=service.pre_command,
            health=health,
            launch=self.launch(job_dir, name, nodes, service),
            metrics_port=service.port,
        )
        if one_server_per_node:
            # Independent servers, one a node; the router lists each (validation holds n to 1).
            return PlainStep(argv=tuple(base), **common)
        if effective_ray_serve(service, nodes.count, gpus):
            # Our gateway on a Ray cluster across the service's nodes: N replicas, one endpoint; each
            # replica gets its own port from the gateway.
            footprint = service.tensor_parallel_size * service.pipeline_parallel_size
            return VllmGatewayStep(
                argv=tuple(_drop_flags(base, ("--port",))),
                ray_port=VLLM_RAY_PORT,
                instances=n,
                port=service.port,
                gpus_per_instance=footprint if gpus else 0,
                **common,
            )
        if nodes.count == 1:
            argv = base + (["--data-parallel-size", str(n)] if n > 1 else [])
            return PlainStep(argv=tuple(argv), **common)
        if n > 1:
            local = n // nodes.count
            dp = [
                "--data-parallel-size",
                str(n),
                "--data-parallel-size-local",
                str(local),
                "--data-parallel-rpc-port",
                str(service.data_parallel_rpc_port),
            ]
            return VllmDataParallelStep(
                argv=tuple(base + dp),
                worker_argv=tuple(_drop_flags(base, _HEAD_ONLY_VLLM_FLAGS) + dp + ["--headless"]),
                ranks_per_node=local,
                **common,
            )
        argv = base + ["--distributed-executor-backend", "ray"]
        return VllmRayStep(argv=tuple(argv), ray_port=VLLM_RAY_PORT, **common)

    def router_step(
        self, job_dir: str, name: str, service: VllmPDServiceConfig, env: tuple[EnvVar, ...], steps: list[Step]
    ) -> Step:
        """vllm-router on the driver's node, in front of the tiers planned just before it."""
        tiers = {step.name: step for step in steps}
        prefill, decode = (tiers[tier] for tier in service.tiers(name))
        node = self.layout.driver_node
        nodes = NodeSlice(node, 1)
        assert service.health_check is not None and service.health_check.port is not None
        check = service.health_check
        metrics_port = router_metrics_port(self.config, name)
        argv = [
            "vllm-router",
            "--vllm-pd-disaggregation",
            "--prefill-policy",
            service.prefill_policy,
            "--decode-policy",
            service.decode_policy,
            "--host",
            "0.0.0.0",
            "--port",
            str(service.port),
            "--intra-node-data-parallel-size",
            str(service.intra_node_data_parallel_size),
            "--request-timeout-secs",
            str(service.request_timeout_secs),
            "--log-level",
            service.log_level,
            # Its metrics on every interface, so the collector beside the driver can scrape them.
            "--prometheus-host",
            "0.0.0.0",
            "--prometheus-port",
            str(metrics_port),
        ]
        return VllmRouterStep(
            name=name,
            service=name,
            nodes=nodes,
            env=env,
            pre_command=service.pre_command,
            argv=tuple(argv),
            launch=self.launch(job_dir, name, nodes, service),
            metrics_port=metrics_port,
            health=HealthCheck("http", check.timeout_seconds, check.port, check.path, (node,)),
            prefill=_serving_endpoints(prefill),
            decode=_serving_endpoints(decode),
        )

    # -- Ray ------------------------------------------------------------------------------------

    def ray_steps(self, job_dir: str, name: str, service: RayServiceConfig, env: tuple[EnvVar, ...]) -> list[Step]:
        layout = self.layout
        head = layout.driver_node
        head_pool = next((p for p, s in layout.pools.items() if head in s.indices), None)
        extra = shlex.split(service.extra_args)
        common: dict[str, Any] = dict(service=name, env=env, pre_command=service.pre_command)
        head_flags = _ray_resource_flags(service, head_pool if head_pool in service.node_pools else None)
        if service.health_check is not None:
            check = service.health_check
            health = HealthCheck("http", check.timeout_seconds, check.port, check.path, (head,))
        else:
            health = HealthCheck("ready-marker", DEFAULT_READY_TIMEOUT, nodes=(head,))
        worker_count = sum(len([i for i in layout.pools[p].indices if i != head]) for p in service.node_pools)
        head_nodes = NodeSlice(head, 1)
        steps: list[Step] = [
            RayHeadStep(
                name=name,
                nodes=head_nodes,
                ray_port=service.port,
                ray_nodes=1 + worker_count,
                argv=tuple(["ray", "start", "--head", f"--port={service.port}", *head_flags, *extra]),
                health=health,
                launch=self.launch(job_dir, name, head_nodes, service),
                **common,
            )
        ]
        for pool in service.node_pools:
            workers = [i for i in layout.pools[pool].indices if i != head]
            if not workers:
                continue
            # Workers of a pool are contiguous except where the head sits at the pool's start.
            nodes = NodeSlice(workers[0], len(workers))
            step = f"{name}_{pool}_workers"
            steps.append(
                RayWorkerStep(
                    name=step,
                    nodes=nodes,
                    head_address_variable=contract.RAY_ADDRESS_ENV_PREFIX + shell_var(name),
                    argv=tuple(
                        ["ray", "start", *_ray_resource_flags(service, pool), *_drop_flags(extra, _HEAD_ONLY_RAY_FLAGS)]
                    ),
                    launch=self.launch(job_dir, step, nodes, service),
                    **common,
                )
            )
        return steps

    # -- driver ---------------------------------------------------------------------------------

    def driver(
        self, benchmark: str, job_dir: str, otel: OtelPlan | None, shared_driver: bool, shard: ShardPlan | None
    ) -> tuple[DriverPlan, ShardPlan | None]:
        driver = self.config.driver
        bench = driver.benchmarks[benchmark]
        rollouts = f"{job_dir}/{contract.ROLLOUTS_FILE}"
        prepare = None
        if bench.prepare:
            prepare = ("gym", "eval", "prepare", *flatten_overrides(bench.prepare, "prepare."))
        run_argv: list[str] = []
        continue_argv: tuple[str, ...] = ()
        if bench.command is None:
            model_type = (
                ["--model-type", driver.policy_model_type] if driver.policy_model and driver.policy_model_type else []
            )
            run = bench.run
            if bench.resume_config is not None and "resume_from_cache" not in run:
                # Every job of a resumable chain continues from the rollouts on disk; on the first job
                # there are none yet, which gym treats as a fresh start.
                run = {**run, "resume_from_cache": True}
            if shard is not None:
                shard = _shard_plan(shard, job_dir, run, model_type)
                run = {key: value for key, value in run.items() if key not in SHARD_RUN_KEYS}
                run = {**run, "reuse_existing_data_preparation": True, "disable_aggregation": True}
            run_argv = ["gym", "eval", "run", f"+output_jsonl_fpath={rollouts}", *model_type]
            run_argv += flatten_overrides(run, "run.")
            continue_argv = () if run.get("resume_from_cache") is True else (CONTINUE_FROM_DISK,)
        node = self.layout.driver_node
        mounts = tuple(driver.mounts) + (f"{job_dir}:{job_dir}",)
        if shard is not None:
            # The shard's driver reads its siblings' rollouts and writes the merged ones beside them.
            mounts += (f"{shard.bench_dir}:{shard.bench_dir}",)
        # A shared deployment's job runs every benchmark's driver from its own directory: the
        # drivers' logs go to their benchmarks' directories.
        log_dir = f"{job_dir}/{contract.LOGS_DIR}" if shared_driver else contract.LOGS_DIR
        nodes = NodeSlice(node, 1)
        launch = Launch(
            DRIVER_STEP,
            job_dir,
            nodes,
            driver.container,
            mounts,
            False,
            log_dir,
            component=self.layout.component_of(nodes),
        )
        env = self.env("driver", driver)
        gym_telemetry = otel is not None and self.config.otel.gym_telemetry
        if otel is not None:
            own = {var.key for var in env}
            telemetry = driver_otel_env(self.run_id, benchmark, self.compute_name)
            if gym_telemetry:
                telemetry.update(gym_telemetry_env(self.config.otel, self.run_id))
            env = tuple(EnvVar(k, "lit", v) for k, v in telemetry.items() if k not in own) + env
        if bench.command is not None:
            told = command_env(job_dir, bench.run)
            env = tuple(var for var in env if var.key not in told) + tuple(EnvVar(k, "lit", v) for k, v in told.items())
        plan = DriverPlan(
            node=node,
            launch=launch,
            env=env,
            prepare_argv=prepare,
            run_argv=tuple(run_argv),
            gym_repo=driver.gym_install.repo if driver.gym_install else None,
            gym_ref=driver.gym_install.ref if driver.gym_install else None,
            rollouts_path=rollouts,
            command=bench.command,
            continue_argv=continue_argv,
            gym_extras="telemetry" if gym_telemetry else "",
            policy_host_variable=runtime_variable(driver.policy_host),
        )
        return plan, shard

    # -- exports --------------------------------------------------------------------------------

    def export(self, benchmark: str, shared_driver: bool) -> ExportPlan | None:
        from nemo_gym.orchestration.exporters.spec import make_spec
        from nemo_gym.orchestration.resolved import resolved_config_dict

        exporters = self.config.exports_of(benchmark)
        if not exporters:
            return None
        policy = self.config.services.get(self.config.driver.policy_model or "")
        model = policy_model_path(self.config) or ""
        served = getattr(policy, "served_model_name", None) or model
        spec = make_spec(
            self.run_id,
            benchmark,
            model,
            served,
            resolved_config_dict(self.config),
            exporters,
            sweep_id=self.sweep_id,
            gpus=self.layout.gpu_count if self.layout.pool_gpus else None,
            # A shared deployment's benchmarks are timed by the one job that ran them all.
            usage_dir=f"../{contract.SHARED_DEPLOYMENT_DIR}" if shared_driver else None,
            step=self.config.job.training_step,
        )
        return ExportPlan(tuple(exporters), spec)

    # -- telemetry ------------------------------------------------------------------------------

    def otel(self, benchmark: str, job_dir: str, steps: list[Step]) -> OtelPlan:
        otel = self.config.otel
        assert otel.endpoint is not None and otel.service_name is not None  # validate_destination ran
        node = self.layout.driver_node
        config_path = f"{job_dir}/{contract.COLLECTOR_CONFIG_FILE}"
        nodes = NodeSlice(node, 1)
        launch = Launch(
            COLLECTOR_STEP, job_dir, nodes, otel.container, (), False, component=self.layout.component_of(nodes)
        )
        return OtelPlan(
            launch=launch,
            argv=(otel.binary, "--config", config_path),
            config_path=config_path,
            node_count=self.layout.node_count,
            endpoint=otel.endpoint,
            token_env=otel.token_env,
            health_timeout_seconds=otel.health_check_timeout_seconds,
            scrape_interval_seconds=otel.scrape_interval_seconds,
            scrape_jobs=tuple(self.scrape_jobs(steps)),
            attributes=self.otel_attributes(benchmark),
            out_dir=f"{job_dir}/{contract.OTEL_DIR}",
        )

    def scrape_jobs(self, steps: list[Step]) -> list[ScrapeJob]:
        """Each model service's /metrics where it serves, then the GPU and node exporters of every node."""
        otel = self.config.otel
        jobs: list[ScrapeJob] = []
        for step in steps:
            port = step.metrics_port
            if port is None:
                continue
            jobs.append(
                ScrapeJob(
                    name=f"{otel.component}/{step.service}",
                    port=port,
                    targets=tuple((i, f"{node_ref(i)}:{port}") for i in metrics_nodes(step)),
                    labels=(("gym_component", otel.component), ("gym_service", step.service)),
                )
            )
        every_node = range(self.layout.node_count)
        for name, port in (("dcgm", otel.gpu_metrics_port), ("node", otel.node_metrics_port)):
            if port is not None:
                jobs.append(ScrapeJob(name, port, tuple((i, f"{node_ref(i)}:{port}") for i in every_node)))
        return jobs

    def otel_attributes(self, benchmark: str) -> tuple[Attribute, ...]:
        config = self.config
        assert config.otel.service_name is not None
        values = [
            Attribute("service.name", config.otel.service_name),
            Attribute("run_id", self.run_id),
            Attribute("benchmark", benchmark),
            Attribute("cluster", self.compute_name),
            Attribute("user", "USER", from_env=True),
            Attribute("job_id", contract.ENV_JOB_ID, from_env=True),
        ]
        values += [Attribute(key, var, from_env=True) for key, var in self.backend.job_id_attributes()]
        policy = config.services.get(config.driver.policy_model or "")
        if isinstance(policy, BaseModelServiceConfig):
            values.append(Attribute("model", policy.served_model_name or policy.model))
        return tuple(values)


def _service_url(step: Step) -> ServiceUrl:
    assert step.health is not None and step.health.port is not None
    variable = contract.SERVICE_URL_ENV_PREFIX + shell_var(step.service)
    return ServiceUrl(step.service, step.health.nodes[0], step.health.port, variable)


def _runs_ray(step: Step) -> bool:
    return isinstance(step, (RayHeadStep, RayWorkerStep, VllmRayStep, VllmGatewayStep))


def node_ref(index: int) -> str:
    """How the collector's config names allocation node ``index``: an env reference the job sets."""
    return "${env:" + contract.NODE_ADDRESS_ENV_PREFIX + str(index) + "}"


def metrics_nodes(step: Step) -> tuple[int, ...]:
    """The nodes where a model step's HTTP server (and so its /metrics) listens.

    A plain step runs the same server on each of its nodes. A multi-node data-parallel step
    serves the API from its first node only (the other nodes run ``--headless`` ranks, with no
    HTTP server; the API server's /metrics reports every rank, labelled by engine), and a
    Ray-backed step runs ``vllm serve`` on its first node only.
    """
    if isinstance(step, PlainStep):
        return tuple(step.nodes.indices)
    return (step.nodes.start,)


# OTLP ports of the collector beside the driver (see rules.COLLECTOR_PORTS).
OTLP_HTTP_PORT = 4318
DRIVER_SERVICE_NAME = "gym-driver"


def driver_otel_env(run_id: str, benchmark: str, compute_name: str) -> dict[str, str]:
    """OTLP env for the driver: send to the collector beside it (same node) over HTTP."""
    from urllib.parse import quote

    attributes = {"run_id": run_id, "benchmark": benchmark, "cluster": compute_name}
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://localhost:{OTLP_HTTP_PORT}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": DRIVER_SERVICE_NAME,
        # W3C-baggage style: values percent-encoded so ',' and '=' cannot break the list.
        "OTEL_RESOURCE_ATTRIBUTES": ",".join(f"{k}={quote(v, safe='')}" for k, v in attributes.items()),
    }


def router_metrics_port(config: SubmitConfig, name: str) -> int:
    """Where vllm_pd service ``name``'s router serves its Prometheus metrics: vllm-router's own
    default port for the first, the next ports for the others (they all run on the driver's node)."""
    routers = [n for n, s in config.services.items() if isinstance(s, VllmPDServiceConfig)]
    return ROUTER_METRICS_PORT + routers.index(name)


def _serving_endpoints(step: Step) -> tuple[tuple[int, int], ...]:
    """(node, port) of each server a tier's step runs: every node of one server a node, else its head."""
    assert step.health is not None and step.health.port is not None
    return tuple((node, step.health.port) for node in step.health.nodes)


def _nixl_env(tier: VllmPDTierConfig) -> tuple[EnvVar, ...]:
    """NIXL's side channel listens on the node's own address, known only there."""
    return (
        EnvVar("VLLM_NIXL_SIDE_CHANNEL_HOST", "node-address", ""),
        EnvVar("VLLM_NIXL_SIDE_CHANNEL_PORT", "lit", str(tier.nixl_side_channel_port)),
    )


def gym_telemetry_env(otel: OtelConfig, run_id: str) -> dict[str, str]:
    """What NeMo Gym's own telemetry reads (otel.gym_telemetry). Unlike NeMo Gym 0.7.0, which
    points the logs at the collector's gRPC port while the protocol is HTTP, the logs go where
    the other signals go: OTLP/HTTP on the collector beside the driver."""
    return {
        "NEMO_GYM_OTEL_ENABLED": "1",
        "NEMO_GYM_OTEL_RUN_ID": run_id,
        "NEMO_GYM_OTEL_SPAN_GROUPS": otel.gym_span_groups,
        "NEMO_GYM_OTEL_LOGS_ENABLED": "1" if otel.gym_logs else "0",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"http://localhost:{OTLP_HTTP_PORT}/v1/logs",
    }


def command_env(job_dir: str, run: dict[str, Any]) -> dict[str, str]:
    """What a command benchmark's script is told: its directory and the policy's endpoint."""
    env = {"NEMO_GYM_BENCH_DIR": job_dir}
    for key in POLICY_RUN_KEYS:
        if key in run:
            env[f"NEMO_GYM_{key.upper()}"] = str(run[key])
    return env


def runtime_variable(host: str) -> str | None:
    """``runtime:VAR`` -> VAR: a host known only on the node, read there."""
    return host[len(RUNTIME_ENV_PREFIX) :] if host.startswith(RUNTIME_ENV_PREFIX) else None


def _resume_plan(bench: BenchmarkRunConfig) -> ResumePlan | None:
    caps = bench.resume_config
    if caps is None:
        return None
    cap = caps.max_walltime
    return ResumePlan(caps.max_retries, cap, walltime_seconds(cap) if cap else None)


def _vllm_argv(service: VllmServiceConfig, identity: str | None = None) -> list[str]:
    """``vllm serve`` with the service's options, serving ``identity`` too when given; the
    config's extra_args last, as written."""
    argv = [
        "vllm",
        "serve",
        service.model,
        "--port",
        str(service.port),
        "--tensor-parallel-size",
        str(service.tensor_parallel_size),
    ]
    if service.pipeline_parallel_size > 1:
        argv += ["--pipeline-parallel-size", str(service.pipeline_parallel_size)]
    extra = shlex.split(service.extra_args)
    names_in_extra = any(arg == _SERVED_NAME_FLAG or arg.startswith(_SERVED_NAME_FLAG + "=") for arg in extra)
    names = [service.served_model_name] if service.served_model_name else []
    if identity is not None and not names_in_extra:
        names = (names or [service.model]) + [identity]  # the first name stays what clients see
    if names:
        argv += [_SERVED_NAME_FLAG, *names]
    if service.trust_remote_code:
        argv.append("--trust-remote-code")
    if isinstance(service, VllmPDTierConfig):
        argv += ["--kv-transfer-config", json.dumps(service.kv_transfer_config, separators=(",", ":"))]
    argv += extra
    if identity is not None and names_in_extra:
        argv = _with_identity(argv, identity)
    return argv


def serving_identity(run_id: str, job_dir: str, service: str) -> str:
    """The served-model alias that makes a vLLM server this job's own: unique to the run, its job
    (one per benchmark, or the shared deployment) and the service, so no two jobs that can run at
    the same time share it (a resumable chain's jobs run one after another)."""
    job = job_dir.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{run_id}-{job}-{service}")


_SERVED_NAME_FLAG = "--served-model-name"


def _identity_checkable(service: VllmServiceConfig) -> bool:
    """Whether the health check can ask the server its names: it probes the serving port itself,
    and /v1/models needs no key (a server with --api-key or VLLM_API_KEY answers it 401)."""
    assert service.health_check is not None
    keyed = any(arg == "--api-key" or arg.startswith("--api-key=") for arg in shlex.split(service.extra_args))
    return service.health_check.port == service.port and not keyed and "VLLM_API_KEY" not in service.env


def _with_identity(argv: list[str], identity: str) -> list[str]:
    """``argv``, whose extra_args name the served models, serving ``identity`` too after those
    names: vLLM answers with the first name, so what clients see does not change."""
    at = [i for i, arg in enumerate(argv) if arg == _SERVED_NAME_FLAG or arg.startswith(_SERVED_NAME_FLAG + "=")]
    last = at[-1]  # argparse keeps the last occurrence
    if argv[last] == _SERVED_NAME_FLAG:
        return argv[: last + 2] + [identity] + argv[last + 2 :]
    first = argv[last].partition("=")[2]
    return argv[:last] + [_SERVED_NAME_FLAG, first, identity] + argv[last + 1 :]


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
_HEAD_ONLY_RAY_FLAGS = ("--port", "--redis-shard-ports", "--include-dashboard", "--dashboard-host", "--dashboard-port")


def _ray_resource_flags(service: RayServiceConfig, pool: str | None) -> list[str]:
    flags = []
    if service.num_cpus is not None:
        flags.append(f"--num-cpus={service.num_cpus}")
    if service.num_gpus is not None:
        flags.append(f"--num-gpus={service.num_gpus}")
    if pool is not None and service.resources.get(pool):
        amounts = {k: (int(v) if float(v).is_integer() else v) for k, v in sorted(service.resources[pool].items())}
        flags.append("--resources=" + json.dumps(amounts, separators=(",", ":")))
    return flags
