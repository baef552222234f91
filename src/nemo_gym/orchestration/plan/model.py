"""The plan's data: frozen dataclasses that say every decision about a run's jobs, and nothing
that makes them (``building.build_plan`` does).

Nodes are indices into the allocation's node list (``GYM_NODES``), so node pools are
contiguous slices of it, in declaration order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from nemo_gym.orchestration import contract, ports
from nemo_gym.orchestration.rules import COLLECTOR_PORTS

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
    kind: Literal["lit", "runtime", "host", "node-address", "ported"]
    # literal value | variable to read on the node | carrier variable name | "" | a literal around
    # one ``{port}``, where ``port``'s claimed port goes (an endpoint on a port claimed at the start)
    value: str
    port: PortRef | None = None


@dataclass(frozen=True)
class PortRef:
    """A server's port, claimed on the job's node when the job starts (``ports.py``): ``preferred``
    when it is free there, else another. Templates print it as the shell variable that holds it."""

    name: str
    preferred: int
    count: int = 1  # consecutive ports from the one claimed (a server that listens on one a rank)

    @property
    def variable(self) -> str:
        return ports.variable(self.name)

    @property
    def word(self) -> str:
        """How ``ports.py claim`` is asked for it: ``NAME=PREFERRED[+COUNT]``."""
        return f"{self.name}={self.preferred}" + (f"+{self.count}" if self.count > 1 else "")


Port = int | PortRef  # a configured port, or one claimed at the job's start


@dataclass(frozen=True)
class HealthCheck:
    kind: Literal["http", "ready-marker"]
    timeout_seconds: int
    port: Port | None = None
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

    @property
    def log_pattern(self) -> str:
        """Its log as a scheduler's output pattern (%j the job id, %N the node's name)."""
        return contract.step_log_pattern(self.step, per_node=self.nodes.count > 1, log_dir=self.log_dir)

    @property
    def container_mounts(self) -> tuple[str, ...]:
        """What a container of the step mounts: the job directory at its own path, then the rest."""
        own = f"{self.job_dir}:{self.job_dir}"
        return (own, *(m for m in self.mounts if m != own))


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
    metrics_port: Port | None = None  # where its Prometheus /metrics is served, for the collector
    # Its serving port, claimed when the job starts: ``argv`` lacks ``--port``, which the step puts
    # back where it was (after ``vllm serve MODEL``) with the claimed port.
    claimed_port: PortRef | None = None
    # Its other ports claimed when the job starts (a tier's NIXL side channel, a router's metrics).
    side_ports: tuple[PortRef, ...] = ()

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
    """Several vLLM replicas on a Ray cluster: one Ray Serve application run by our gateway (``gateway/ray_serve_gateway.py``)."""

    kind: ClassVar[str] = "vllm-gateway"
    ray_port: int
    ray_metrics_port: int  # each node's Ray metrics (Serve's among them), which the collector scrapes
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
    prefill: tuple[tuple[int, Port], ...]  # (node, port) of each prefill server
    decode: tuple[tuple[int, Port], ...]
    port: Port  # where it serves (``argv`` lacks ``--port``): configured, or claimed at the job's start
    prometheus_port: Port  # where it serves its metrics (``argv`` lacks ``--prometheus-port``)

    def what(self) -> str:
        return f"vllm-router in front of {len(self.prefill)} prefill and {len(self.decode)} decode server(s)"


@dataclass(frozen=True, kw_only=True)
class RayHeadStep(StepBase):
    kind: ClassVar[str] = "ray-head"
    ray_port: Port  # its GCS port (``argv`` lacks ``--port`` when it is claimed)
    ray_nodes: int  # nodes of the whole Ray cluster (the head and every worker)
    # Its other fixed-by-default ports, claimed at the job's start, as options after ``argv``.
    ported_args: tuple[PortedArg, ...] = ()

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
    port: Port
    variable: str


@dataclass(frozen=True)
class ServiceUrl:
    """Where a model service answers (its OpenAI base URL), exported to the job as ``variable``:
    the driver, a command and the other services reach it there, whichever component it is on."""

    service: str
    node: int
    port: Port
    variable: str


@dataclass(frozen=True)
class PortedArg:
    """A word of the driver's command that holds a claimed port: ``before``, the port, ``after``."""

    before: str
    port: PortRef
    after: str = ""


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
    # Words added to run_argv that hold claimed ports (policy_base_url, gym's head_server.port).
    ported_argv: tuple[PortedArg, ...] = ()

    @property
    def continues_from_disk(self) -> bool:
        """Whether a job of it can be told to keep what is on disk and generate only the rest."""
        return self.command is None


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
    port: Port
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
    # Where it listens (OTLP gRPC, OTLP HTTP, health): its configured ports, or claimed at the start.
    otlp_grpc_port: Port = COLLECTOR_PORTS[0]
    otlp_http_port: Port = COLLECTOR_PORTS[1]
    health_port: Port = COLLECTOR_PORTS[2]

    @property
    def ports(self) -> tuple[Port, ...]:
        return (self.otlp_grpc_port, self.otlp_http_port, self.health_port)


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
    # The ports the job claims on its node when it starts (ports.py), and released at its end.
    ports: tuple[PortRef, ...] = ()
    # A shared deployment's: the ports each driver claims as it starts (gym's head server), given
    # back when it ends; its drivers start and end at their own times.
    driver_ports: tuple[PortRef, ...] = ()
    # Whether it takes its nodes whole or shares them, and why (the dry run says it).
    node_sharing: str = ""

    @property
    def unit(self) -> str:
        """What the job is known by among the run's jobs: its benchmark, or ``B@k`` for shard k."""
        return self.benchmark if self.shard is None else contract.shard_unit(self.benchmark, self.shard.index)

    def services(self) -> dict[str, list[str]]:
        """Service -> its steps' names, in order: what the job watches."""
        return services_of(self.steps)


def services_of(steps: tuple[Step, ...]) -> dict[str, list[str]]:
    """Service -> the names of its steps among ``steps``, in order."""
    out: dict[str, list[str]] = {}
    for step in steps:
        out.setdefault(step.service, []).append(step.name)
    return out


@dataclass(frozen=True)
class WeightsTurn:
    """One run of a lane: the checkpoint whose weights answer its benchmarks."""

    run_id: str
    weights: str
    # A restart lane's turn after the first: the deployment it starts in the lane's job, its run's
    # own steps named for the turn (``contract.turn_step``); the first turn's are the job's.
    steps: tuple[Step, ...] = ()


@dataclass(frozen=True)
class InPlace:
    """How a warm lane's one vLLM server is reached to switch its weights in place."""

    node: int  # where it runs, in the job's allocation
    port: Port  # its serving port: the configured one, or claimed as the job starts


@dataclass(frozen=True)
class ReloadPlan:
    """A lane of checkpoints (``job.deployment: reload``): its host's shared job serves each run in
    turn, after the last request of the run before and before the first of the next. A warm lane
    (``in_place``) starts the policy's vLLM server once, on the first run's weights, and reloads
    them in place for each next run (``weights``); a restart lane (``in_place`` None: a policy
    whose weights cannot be switched in place) stops the deployment and starts each next turn's."""

    service: str  # the policy service
    turns: tuple[WeightsTurn, ...]  # in the order they are served: the host's own run first
    in_place: InPlace | None = None


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
    reload: ReloadPlan | None = None  # a warm lane's host: how its server's weights switch between runs

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
