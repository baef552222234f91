"""The submit config: pydantic models, ``resolve_env_dict`` and ``effective_ray_serve``.

This module is the only place where rules about the config live. Everything downstream (plan,
render, launch) trusts a validated ``SubmitConfig``.

Error messages start with the YAML path of the offending value and end with what to do, because
the CLI prints them as they are, one line per problem.
"""

from __future__ import annotations

import os
import re
import warnings
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    PrivateAttr,
    Tag,
    field_validator,
    model_validator,
)

from nemo_gym.orchestration import rules

__all__ = [
    "RUNTIME_ENV_PREFIX",
    "BaseComputeConfig",
    "BaseModelServiceConfig",
    "BaseServiceConfig",
    "BenchmarkRunConfig",
    "ResumeConfig",
    "ComputeConfig",
    "DriverConfig",
    "GymInstallConfig",
    "HealthCheckConfig",
    "JobConfig",
    "LocalComputeConfig",
    "NodePool",
    "OtelConfig",
    "RayServiceConfig",
    "ServiceConfig",
    "SlurmComputeConfig",
    "SubmitConfig",
    "VllmServiceConfig",
    "effective_ray_serve",
    "resolve_env_dict",
]

RUNTIME_ENV_PREFIX = "runtime:"
LITERAL_ENV_PREFIX = "lit:"
HOST_ENV_PREFIX = "host:"
_ENV_VAR_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Keys the driver's run config receives from ``driver.policy_model``.
POLICY_RUN_KEYS = ("policy_base_url", "policy_model_name", "policy_api_key")
POLICY_HOST = "localhost"
POLICY_API_KEY = "dummy"


class _StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------------------------
# env values


def _split_env_value(key: str, raw: str) -> tuple[str, str]:
    """Return (prefix, rest) for one env value, or raise naming the key and the fix."""
    for prefix in (LITERAL_ENV_PREFIX, HOST_ENV_PREFIX, RUNTIME_ENV_PREFIX):
        if raw.startswith(prefix):
            return prefix, raw[len(prefix) :]
    raise ValueError(
        f"env['{key}']: {raw!r} must start with one of the prefixes 'lit:', 'host:', or 'runtime:' "
        f"(write 'lit:{raw}' for a literal value)"
    )


def _check_var_name(key: str, prefix: str, var: str) -> None:
    if not _ENV_VAR_NAME_RE.match(var):
        raise ValueError(
            f"env['{key}']: {var!r} is not a valid environment variable name for {prefix}{var}"
        )


def resolve_env_dict(env: dict[str, str]) -> dict[str, str]:
    """Resolve ``lit:``/``host:``/``runtime:`` prefixes on ``env`` values.

    Every value must use one of the prefixes; a missing or misspelled prefix raises rather than
    being guessed at. ``lit:VALUE`` gives VALUE; ``host:VAR`` reads VAR from the submitting
    machine's environment now; ``runtime:VAR`` stays ``runtime:VAR`` for the job to read where
    it runs.
    """
    resolved: dict[str, str] = {}
    for key, raw in env.items():
        prefix, rest = _split_env_value(key, raw)
        if prefix == LITERAL_ENV_PREFIX:
            resolved[key] = rest
            continue
        _check_var_name(key, prefix, rest)
        if prefix == HOST_ENV_PREFIX:
            if rest not in os.environ:
                raise ValueError(
                    f"env['{key}'] references host:{rest}, but {rest!r} is not set in the "
                    f"submitting shell's environment; export it before submitting"
                )
            resolved[key] = os.environ[rest]
        else:
            resolved[key] = RUNTIME_ENV_PREFIX + rest
    return resolved


class EnvSource(BaseModel):
    """Where one resolved env value came from, so output can show the reference, not a secret."""

    kind: Literal["lit", "host", "runtime"]
    ref: str  # the literal value, or the variable name


def env_sources(env: dict[str, str]) -> dict[str, EnvSource]:
    sources: dict[str, EnvSource] = {}
    for key, raw in env.items():
        prefix, rest = _split_env_value(key, raw)
        sources[key] = EnvSource(kind=prefix[:-1], ref=rest)  # type: ignore[arg-type]
    return sources


def _remember_env_sources(cls: type, data: Any, handler: Any) -> Any:
    """Keep each env value's source beside the resolved value (see ``env_sources_of``)."""
    raw_env = data.get("env") if isinstance(data, dict) else None
    model = handler(data)
    if isinstance(raw_env, dict) and all(isinstance(v, str) for v in raw_env.values()):
        model._env_sources = env_sources(raw_env)
    elif isinstance(data, BaseModel) and hasattr(data, "_env_sources"):
        model._env_sources = dict(data._env_sources)
    return model


def env_sources_of(model: BaseServiceConfig | DriverConfig) -> dict[str, EnvSource]:
    """The source of every env value of a validated service or driver.

    Values set in code after validation have no recorded source; they count as literals.
    """
    recorded = getattr(model, "_env_sources", {}) or {}
    return {k: recorded.get(k, EnvSource(kind="lit", ref=v)) for k, v in model.env.items()}


def _resolve_env_field(cls: type, v: Any) -> Any:
    if isinstance(v, dict) and all(isinstance(x, str) for x in v.values()):
        rules.env_keys(cls, v)
        return resolve_env_dict(v)
    return v  # wrong types are reported by pydantic with their path


# --------------------------------------------------------------------------------------------
# services


class HealthCheckConfig(_StrictModel):
    path: str = "/health"
    port: int | None = None
    timeout_seconds: int = 60

    _check_port = field_validator("port")(rules.optional_port)
    _check_timeout = field_validator("timeout_seconds")(rules.positive)

    @field_validator("path")
    @classmethod
    def _check_path(cls, v: str) -> str:
        if not v.startswith("/") or any(c.isspace() for c in v):
            raise ValueError(f"{v!r} is not a URL path; write it like '/health'")
        return v


class BaseServiceConfig(_StrictModel):
    container: str
    env: dict[str, str] = {}
    health_check: HealthCheckConfig | None = None
    mounts: list[str] = []
    node_pool: str | None = None
    placement: str | None = None
    pre_command: str = ""

    _env_sources: dict[str, EnvSource] = PrivateAttr(default_factory=dict)

    @field_validator("env", mode="before")
    @classmethod
    def _resolve_env_prefixes(cls, v: dict[str, str]) -> dict[str, str]:
        return _resolve_env_field(cls, v)

    _keep_env_sources = model_validator(mode="wrap")(_remember_env_sources)

    _check_mounts = field_validator("mounts")(rules.mount_list)
    _check_container = field_validator("container")(rules.single_line_nonempty)


class BaseModelServiceConfig(BaseServiceConfig):
    """Base for services that serve a model and can be wired as the policy model."""

    model: str
    port: int = 8000
    served_model_name: str | None = None

    _check_port = field_validator("port")(rules.port)
    _check_model = field_validator("model")(rules.single_line_nonempty)


class VllmServiceConfig(BaseModelServiceConfig):
    type: Literal["vllm"]
    extra_args: str = ""
    number_of_instances: int = 1
    pipeline_parallel_size: int = 1
    tensor_parallel_size: int = 1
    trust_remote_code: bool = False
    use_ray_serve: bool = False

    @field_validator("number_of_instances")
    @classmethod
    def _validate_number_of_instances(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"number_of_instances must be >= 1, got {v}")
        return v

    _check_sizes = field_validator("pipeline_parallel_size", "tensor_parallel_size")(rules.positive)
    _check_extra_args = field_validator("extra_args")(rules.shell_words)

    @model_validator(mode="after")
    def _default_health_check(self) -> VllmServiceConfig:
        if self.health_check is None:
            self.health_check = HealthCheckConfig(port=self.port)
        elif self.health_check.port is None:
            self.health_check = self.health_check.model_copy(update={"port": self.port})
        return self


class RayServiceConfig(BaseServiceConfig):
    type: Literal["ray"]
    extra_args: str = ""
    node_pools: list[str] = []
    num_cpus: int | None = None
    num_gpus: int | None = None
    port: int = 6379
    resources: dict[str, dict[str, float]] = {}

    _check_port = field_validator("port")(rules.port)
    _check_counts = field_validator("num_cpus", "num_gpus")(rules.optional_non_negative)
    _check_extra_args = field_validator("extra_args")(rules.shell_words)

    @field_validator("resources")
    @classmethod
    def _check_resource_amounts(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for pool, amounts in v.items():
            for name, amount in amounts.items():
                if amount < 0:
                    raise ValueError(
                        f"resources['{pool}']['{name}'] is {amount}; a resource amount must be >= 0"
                    )
        return v

    @model_validator(mode="after")
    def _validate_shape(self) -> RayServiceConfig:
        if self.node_pool is not None:
            raise ValueError(
                f"A ray service spans `node_pools`, not a single `node_pool`; "
                f"use node_pools: [{self.node_pool}]."
            )
        duplicates = sorted({p for p in self.node_pools if self.node_pools.count(p) > 1})
        if duplicates:
            raise ValueError(
                f"A ray service's node_pools lists a pool more than once: {duplicates}; list each once."
            )
        if self.health_check is not None and self.health_check.port is None:
            raise ValueError(
                "A ray service has no HTTP endpoint of its own to probe; set health_check.port to the "
                "port of what it serves (e.g. 8265 for the Ray dashboard) or drop health_check."
            )
        unspanned = [p for p in self.resources if p not in self.node_pools]
        if unspanned:
            raise ValueError(
                f"A ray service sets resources for {', '.join(unspanned)}, which it does not span "
                f"(node_pools: {self.node_pools}). Add the pool to node_pools or drop its resources."
            )
        return self


def effective_ray_serve(
    service: VllmServiceConfig, total_nodes: int, gpus_per_node_values: list[int]
) -> bool:
    """Whether the Ray Serve gateway manages this service's instances/routing instead of vLLM's own DP."""
    if service.use_ray_serve:
        return True
    if not gpus_per_node_values:
        return False
    footprint = service.tensor_parallel_size * service.pipeline_parallel_size
    return total_nodes > 1 and service.number_of_instances > 1 and footprint > max(gpus_per_node_values)


ServiceConfig = Annotated[
    Union[
        Annotated[VllmServiceConfig, Tag("vllm")],
        Annotated[RayServiceConfig, Tag("ray")],
    ],
    Discriminator("type"),
]


# --------------------------------------------------------------------------------------------
# compute


class BaseComputeConfig(_StrictModel):
    pass


class NodePool(_StrictModel):
    extra_args: dict[str, str] = {}
    gpus_per_node: int | None = None
    nodes: int = 1
    ntasks_per_node: int = 1
    partition: str

    _check_counts = field_validator("nodes", "ntasks_per_node")(rules.positive)
    _check_gpus = field_validator("gpus_per_node")(rules.optional_gpus)
    _check_partition = field_validator("partition")(rules.slurm_word)
    _check_extra_args = field_validator("extra_args")(rules.sbatch_options)


class SlurmComputeConfig(BaseComputeConfig):
    type: Literal["slurm"]
    account: str
    extra_args: dict[str, str] = {}
    hostname: str | None = None
    node_pools: dict[str, NodePool] = {}
    walltime: str | None = None
    # Extension beyond the spec: how steps get their container. Pyxis (``srun --container-image``)
    # is the default; most academic clusters have Apptainer instead; ``none`` runs on the host.
    container_runtime: Literal["pyxis", "apptainer", "none"] = "pyxis"

    _check_account = field_validator("account")(rules.slurm_word)
    _check_extra_args = field_validator("extra_args")(rules.sbatch_options)
    _check_walltime = field_validator("walltime")(rules.optional_walltime)
    _check_hostname = field_validator("hostname")(rules.optional_hostname)
    _check_pool_names = field_validator("node_pools")(rules.named_entries("node pool"))

    @model_validator(mode="after")
    def _pools_share_one_allocation(self) -> SlurmComputeConfig:
        rules.check_pools_agree(self.node_pools)
        return self


class LocalComputeConfig(BaseComputeConfig):
    """Extension beyond the spec: the same job on this machine, each step a local process.

    No scheduler, no containers, one node: for laptops, workstations and CI. Benchmarks of a run
    go one after another, since they would share the machine's ports and GPUs.
    """

    type: Literal["local"]

    @property
    def node_pools(self) -> dict[str, NodePool]:
        return {}

    @property
    def hostname(self) -> None:
        return None

    @property
    def container_runtime(self) -> Literal["none"]:
        return "none"


ComputeConfig = Annotated[
    Union[Annotated[SlurmComputeConfig, Tag("slurm")], Annotated[LocalComputeConfig, Tag("local")]],
    Discriminator("type"),
]


# --------------------------------------------------------------------------------------------
# driver, job, telemetry


class ResumeConfig(_StrictModel):
    """Extension beyond the spec, as in NeMo Gym 0.7.0: how far a resumable benchmark's chain of
    jobs may go. A job that times out or is preempted after writing new rollouts resumes for free
    (within ``max_walltime``, summed over the chain); any other resume spends one of ``max_retries``
    (a node failure, a service dying mid-run, a job that made no progress)."""

    max_retries: int = 3
    max_walltime: str | None = None

    _check_retries = field_validator("max_retries")(rules.non_negative)
    _check_walltime = field_validator("max_walltime")(rules.optional_time_cap)


def _resume_shape(v: Any) -> str:
    return "caps" if isinstance(v, (dict, ResumeConfig)) else "flag"


# ``true``/``false``, or the caps as a mapping; tagged so an error names one shape, not both.
Resumable = Annotated[
    Union[Annotated[bool, Tag("flag")], Annotated[ResumeConfig, Tag("caps")]], Discriminator(_resume_shape)
]


class BenchmarkRunConfig(_StrictModel):
    prepare: dict[str, Any] = {}
    run: dict[str, Any] = {}
    # Extension beyond the spec (NeMo Gym 0.7.0's field): requeue this benchmark's job when it
    # times out, is preempted or loses a node, and continue from the rollouts already written.
    resumable: Resumable = False

    @property
    def resume_config(self) -> ResumeConfig | None:
        if self.resumable is False:
            return None
        return ResumeConfig() if self.resumable is True else self.resumable

    @model_validator(mode="after")
    def _check_resume_from_cache(self) -> BenchmarkRunConfig:
        if self.resume_config is not None and self.run.get("resume_from_cache") in (False, "false", "False"):
            raise ValueError(
                "resumable needs gym to resume from its cache, but run.resume_from_cache is false; "
                "drop run.resume_from_cache or drop resumable"
            )
        return self


class GymInstallConfig(_StrictModel):
    ref: str
    repo: str = "https://github.com/NVIDIA-NeMo/gym"

    _check_ref = field_validator("ref", "repo")(rules.single_line_nonempty)


class DriverConfig(_StrictModel):
    benchmarks: dict[str, BenchmarkRunConfig]
    container: str = "python:3.12"
    env: dict[str, str] = {}
    gym_install: GymInstallConfig | None = None
    mounts: list[str] = []
    policy_model: str | None = None
    policy_model_type: str = "openai_model"

    _env_sources: dict[str, EnvSource] = PrivateAttr(default_factory=dict)

    @field_validator("env", mode="before")
    @classmethod
    def _resolve_env_prefixes(cls, v: dict[str, str]) -> dict[str, str]:
        return _resolve_env_field(cls, v)

    _keep_env_sources = model_validator(mode="wrap")(_remember_env_sources)

    _check_mounts = field_validator("mounts")(rules.mount_list)
    _check_benchmark_names = field_validator("benchmarks")(rules.benchmark_names)


SHARED_DEPLOYMENT_DIR = "shared-deployment"


class JobConfig(_StrictModel):
    output_path: str
    # Extension beyond the spec: ``per_benchmark`` (one job, one deployment of the services per
    # benchmark, as upstream) or ``shared`` (one job whose services are started once and serve
    # every benchmark in turn, ``benchmarks_at_once`` drivers at a time: the model's start-up is
    # paid once; each benchmark keeps its own artifacts, logs and status).
    deployment: Literal["per_benchmark", "shared"] = "per_benchmark"
    benchmarks_at_once: int = 1

    _check_output_path = field_validator("output_path")(rules.absolute_path)
    _check_at_once = field_validator("benchmarks_at_once")(rules.positive)


class OtelConfig(_StrictModel):
    """An OpenTelemetry collector beside every benchmark job.

    It scrapes each model service's Prometheus /metrics, receives OTLP from the job's own
    processes on :4317/:4318, and ships both to an OTLP/HTTP backend while keeping a copy under
    <job dir>/otel/. On by default, so a run is observable unless it opts out; endpoint and
    service_name come from the deployment's own config (a cluster fragment, typically) and are
    required while enabled.
    """

    binary: str = "otelcol-contrib"
    component: str = "gym-vllm"
    container: str | None = None
    enabled: bool = True
    endpoint: str | None = None
    gpu_metrics_port: int | None = 9400
    health_check_timeout_seconds: int = 300
    node_metrics_port: int | None = 9100
    scrape_interval_seconds: int = 15
    service_name: str | None = None
    token_env: str = "OTEL_TOKEN"

    @field_validator("scrape_interval_seconds", "health_check_timeout_seconds")
    @classmethod
    def _validate_positive(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be >= 1, got {v}")
        return v

    @field_validator("token_env")
    @classmethod
    def _validate_token_env(cls, v: str) -> str:
        if not _ENV_VAR_NAME_RE.match(v):
            raise ValueError(
                f"otel.token_env: {v!r} is not a valid environment variable name; name the "
                f"variable that holds the token, e.g. OTEL_TOKEN"
            )
        return v

    _check_ports = field_validator("gpu_metrics_port", "node_metrics_port")(rules.optional_port)


# --------------------------------------------------------------------------------------------
# the whole submission


class SubmitConfig(_StrictModel):
    compute: dict[str, ComputeConfig]
    driver: DriverConfig
    job: JobConfig
    otel: OtelConfig = OtelConfig()
    services: dict[str, ServiceConfig]

    _check_service_names = field_validator("services")(rules.named_entries("service"))

    @model_validator(mode="after")
    def _resolve_and_validate_placements(self) -> SubmitConfig:
        compute_name, compute = self._sole_compute()
        node_pools = compute.node_pools
        total_nodes = sum(pool.nodes for pool in node_pools.values())
        for name, service in self.services.items():
            self._resolve_placement(name, service, compute_name)
            self._check_pools_exist(name, service, compute_name, node_pools)
            if isinstance(service, VllmServiceConfig):
                self._check_vllm_shape(name, service, node_pools, total_nodes)
        rules.check_port_clashes(
            self.services, list(node_pools), self.driver.policy_model, self.otel.enabled
        )
        if self.job.deployment == "shared" and SHARED_DEPLOYMENT_DIR in self.driver.benchmarks:
            raise ValueError(
                f"driver.benchmarks: with job.deployment: shared the name '{SHARED_DEPLOYMENT_DIR}' is the "
                f"shared job's own directory; rename that benchmark"
            )
        self._check_resumable(compute_name, compute)
        self._wire_policy_model()
        return self

    def _check_resumable(self, compute_name: str, compute: SlurmComputeConfig | LocalComputeConfig) -> None:
        resumable = [name for name, bench in self.driver.benchmarks.items() if bench.resume_config is not None]
        if not resumable:
            return
        names = ", ".join(f"driver.benchmarks.{name}.resumable" for name in resumable)
        if isinstance(compute, LocalComputeConfig):
            raise ValueError(
                f"{names}: compute '{compute_name}' is local, which has no walltime, preemption or node "
                f"failure to resume from; drop resumable or submit to a Slurm compute"
            )
        if self.job.deployment == "shared":
            raise ValueError(
                f"{names}: job.deployment: shared runs every benchmark in one job, and a job is resumed as "
                f"a whole; use job.deployment: per_benchmark or drop resumable"
            )

    # -- placement ---------------------------------------------------------------------------

    def _sole_compute(self) -> tuple[str, SlurmComputeConfig | LocalComputeConfig]:
        if not self.compute:
            raise ValueError(
                "compute: no compute resource is declared; add one, e.g. compute: {cluster: {type: slurm, account: ...}}"
            )
        if len(self.compute) > 1:
            raise ValueError(
                f"Multiple compute resources are not supported yet ({', '.join(self.compute)}); "
                f"keep one under compute."
            )
        return next(iter(self.compute.items()))

    @staticmethod
    def _resolve_placement(name: str, service: BaseServiceConfig, compute_name: str) -> None:
        if service.placement is None:
            service.placement = compute_name
        elif service.placement != compute_name:
            raise ValueError(
                f"Service '{name}' placement '{service.placement}' does not match any compute "
                f"resource ({compute_name}); set services.{name}.placement to '{compute_name}' or remove it."
            )

    @staticmethod
    def _check_pools_exist(
        name: str, service: BaseServiceConfig, compute_name: str, node_pools: dict[str, NodePool]
    ) -> None:
        declared = ", ".join(node_pools) or "none declared"
        if isinstance(service, RayServiceConfig):
            unknown = [p for p in service.node_pools if p not in node_pools]
            if unknown:
                raise ValueError(
                    f"Service '{name}' node_pools {unknown} do not match any node pool of compute "
                    f"'{compute_name}' ({declared}); fix services.{name}.node_pools."
                )
        if service.node_pool is not None and service.node_pool not in node_pools:
            raise ValueError(
                f"Service '{name}' node_pool '{service.node_pool}' does not match any node pool of "
                f"compute '{compute_name}' ({declared}); fix services.{name}.node_pool."
            )

    def _check_vllm_shape(
        self,
        name: str,
        service: VllmServiceConfig,
        node_pools: dict[str, NodePool],
        total_nodes: int,
    ) -> None:
        pools = {service.node_pool: node_pools[service.node_pool]} if service.node_pool else node_pools
        service_nodes = sum(p.nodes for p in pools.values()) or total_nodes
        gpus = [p.gpus_per_node for p in pools.values() if p.gpus_per_node is not None]
        is_ray_serve = effective_ray_serve(service, service_nodes, gpus)
        n = service.number_of_instances
        if service_nodes > 1 and n > 1 and n % service_nodes != 0 and not is_ray_serve:
            raise ValueError(
                f"Service '{name}' has number_of_instances={n}, which must be evenly divisible by the "
                f"number of nodes ({service_nodes}) for multi-node data-parallel deployment - each node "
                f"hosts an equal share of the data-parallel replicas."
            )
        self._validate_vllm_gpu_footprint(name, service, service_nodes, pools, gpus, is_ray_serve)

    def _validate_vllm_gpu_footprint(
        self,
        service_name: str,
        service: VllmServiceConfig,
        total_nodes: int,
        node_pools: dict[str, NodePool],
        gpus_per_node_values: list[int],
        is_ray_serve: bool,
    ) -> None:
        if not gpus_per_node_values:
            return  # no pool says how many GPUs it has: nothing to check against
        compute_name = service.placement
        tp_pp = service.tensor_parallel_size * service.pipeline_parallel_size
        n = service.number_of_instances
        shape = f"tensor_parallel_size={service.tensor_parallel_size} x pipeline_parallel_size={service.pipeline_parallel_size}"
        all_gpus = sum(p.nodes * (p.gpus_per_node or 0) for p in node_pools.values())
        one_node = max(gpus_per_node_values)
        if total_nodes > 1 and is_ray_serve:
            needed, available = tp_pp * n, all_gpus
            footprint = f"{shape} x number_of_instances={n} (ray_serve gateway)"
            scope = f"the total GPUs across all nodes ({available})"
        elif total_nodes > 1 and n > 1:
            per_node = n // total_nodes
            needed, available = tp_pp * per_node, one_node
            footprint = f"{shape} x {per_node} instance(s) per node"
            scope = f"a single node's gpus_per_node ({available})"
        elif total_nodes > 1:
            needed, available = tp_pp, all_gpus
            footprint = shape
            scope = f"the total GPUs across all nodes ({available})"
        else:
            needed, available = tp_pp * n, one_node
            footprint = f"{shape} x number_of_instances={n}"
            scope = f"the node pool's gpus_per_node ({available})"
        if needed > available:
            raise ValueError(
                f"Service '{service_name}' requires {needed} GPUs ({footprint}), which exceeds {scope} "
                f"on compute '{compute_name}'. Reduce number_of_instances/tensor_parallel_size/"
                f"pipeline_parallel_size, or add more nodes/GPUs."
            )
        if needed < available:
            warnings.warn(
                f"Service '{service_name}' uses {needed} of {available} GPUs ({footprint}), leaving "
                f"{available - needed} GPU(s) idle on compute '{compute_name}'; raise "
                f"tensor_parallel_size or number_of_instances to use them.",
                UserWarning,
                stacklevel=2,
            )

    # -- policy model ------------------------------------------------------------------------

    def _wire_policy_model(self) -> None:
        name = self.driver.policy_model
        if name is None:
            return
        if name not in self.services:
            raise ValueError(
                f"driver.policy_model '{name}' does not match any service "
                f"({', '.join(self.services) or 'none declared'}); name one of the services."
            )
        service = self.services[name]
        if not isinstance(service, BaseModelServiceConfig):
            return  # a ray cluster serves no model endpoint of its own
        wiring = {
            "policy_base_url": f"http://{POLICY_HOST}:{service.port}/v1",
            "policy_model_name": service.served_model_name or service.model,
            "policy_api_key": POLICY_API_KEY,
        }
        for bench_name, bench in self.driver.benchmarks.items():
            # Identical values are what an earlier validation injected (--resolve-only output fed
            # back in), so only a different value is a conflict.
            clashing = [k for k in POLICY_RUN_KEYS if k in bench.run and bench.run[k] != wiring[k]]
            if clashing:
                raise ValueError(
                    f"Benchmark '{bench_name}' run config already sets {clashing} but "
                    f"driver.policy_model is also set. Remove one."
                )
            bench.run.update(wiring)

