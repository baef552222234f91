"""The submit config: pydantic models, ``resolve_env_dict`` and ``effective_ray_serve``.

This module is the only place where rules about the config live. Everything downstream (plan,
render, launch) trusts a validated ``SubmitConfig``.

Error messages start with the YAML path of the offending value and end with what to do, because
the CLI prints them as they are, one line per problem.
"""

from __future__ import annotations

import copy
import os
import re
import warnings
from typing import Annotated, Any, Literal, NamedTuple, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    PrivateAttr,
    Tag,
    field_validator,
    model_validator,
)

from nemo_gym.orchestration import contract, rules
from nemo_gym.orchestration.backends import backend_named, kubernetes_rules, slurm_rules
from nemo_gym.orchestration.errors import error_at
from nemo_gym.orchestration.exporters.spec import SECRETS as CREDENTIAL_SECRETS

__all__ = [
    "RUNTIME_ENV_PREFIX",
    "BaseComputeConfig",
    "BaseModelServiceConfig",
    "BaseServiceConfig",
    "BenchmarkRunConfig",
    "ResumeConfig",
    "AnyComputeConfig",
    "ComputeConfig",
    "DriverConfig",
    "GymInstallConfig",
    "HealthCheckConfig",
    "JobConfig",
    "KubernetesComputeConfig",
    "LocalComputeConfig",
    "NodePool",
    "OtelConfig",
    "RayServiceConfig",
    "ServiceConfig",
    "SlurmComputeConfig",
    "SubmitConfig",
    "VllmPDServiceConfig",
    "VllmPDTierConfig",
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
POLICY_HOST = "localhost"  # the default of driver.policy_host
POLICY_API_KEY = "dummy"
# vLLM's default data-parallel rpc port; a vllm_pd decode tier defaults to the prefill tier's + 1.
DATA_PARALLEL_RPC_PORT = 13345


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
        raise ValueError(f"env['{key}']: {var!r} is not a valid environment variable name for {prefix}{var}")


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


def is_carried_secret(key: str, source: EnvSource) -> bool:
    """Whether an env value travels as a secret (in the submission's environment, never in a file):
    every ``host:`` value, and a credential written as a literal."""
    return source.kind == "host" or (source.kind == "lit" and key in CREDENTIAL_SECRETS)


def env_sources_of(model: BaseServiceConfig | DriverConfig) -> dict[str, EnvSource]:
    """The source of every env value of a validated service or driver.

    Values set in code after validation have no recorded source; they count as literals.
    """
    recorded = getattr(model, "_env_sources", {}) or {}
    return {k: recorded.get(k, EnvSource(kind="lit", ref=v)) for k, v in model.env.items()}


def _resolve_env_field(cls: type, v: Any) -> Any:
    if isinstance(v, dict) and all(isinstance(x, str) for x in v.values()):
        rules.env_keys(cls, v)
        for key in rules.literal_credentials(v, CREDENTIAL_SECRETS):
            warnings.warn(rules.literal_credential_warning(key), UserWarning, stacklevel=2)
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
    _check_not_options = field_validator("model", "served_model_name")(rules.not_an_option)


class VllmServiceConfig(BaseModelServiceConfig):
    type: Literal["vllm"]
    extra_args: str = ""
    number_of_instances: int = 1
    pipeline_parallel_size: int = 1
    tensor_parallel_size: int = 1
    trust_remote_code: bool = False
    use_ray_serve: bool = False
    # NeMo Gym 0.7.0's field: ``--data-parallel-rpc-port`` of multi-node data parallelism.
    data_parallel_rpc_port: int = DATA_PARALLEL_RPC_PORT

    @field_validator("number_of_instances")
    @classmethod
    def _validate_number_of_instances(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"number_of_instances must be >= 1, got {v}")
        return v

    _check_sizes = field_validator("pipeline_parallel_size", "tensor_parallel_size")(rules.positive)
    _check_extra_args = field_validator("extra_args")(rules.shell_words)
    _check_rpc_port = field_validator("data_parallel_rpc_port")(rules.port)

    @model_validator(mode="after")
    def _default_health_check(self) -> VllmServiceConfig:
        _probe_own_port(self)
        return self


def _probe_own_port(service: BaseModelServiceConfig) -> None:
    """A model service is healthy when its own port answers, unless the config says otherwise."""
    if service.health_check is None:
        service.health_check = HealthCheckConfig(port=service.port)
    elif service.health_check.port is None:
        service.health_check = service.health_check.model_copy(update={"port": service.port})


class VllmPDTierConfig(VllmServiceConfig):
    """The prefill or decode tier of a ``vllm_pd`` service, as deployed (see ``VllmPDServiceConfig``).

    Built by the service from its ``prefill``/``decode`` entry; never written by users.
    """

    nixl_side_channel_port: int
    server_per_node: bool
    kv_transfer_config: dict[str, str]


class PDTier(NamedTuple):
    """One tier of a vllm_pd service: where it is written and how it differs from the other."""

    field: str  # its key under the service, and its suffix when deployed (<service>-<field>)
    kv_role: str
    port_offset: int  # beyond the service's port + 1, and beyond nixl_side_channel_port


PD_TIERS = (PDTier("prefill", "kv_producer", 0), PDTier("decode", "kv_consumer", 1))
# What a tier takes from its vllm_pd service unless it sets its own: the model it serves.
PD_TIER_IDENTITY = ("container", "model", "served_model_name")
# Settings that belong to the pair, not to one tier.
PD_SERVICE_ONLY = ("server_per_node", "nixl_side_channel_port")


class VllmPDServiceConfig(BaseModelServiceConfig):
    """Prefill/decode disaggregation: a prefill tier and a decode tier of vLLM, each on its own node
    pool, joined by NIXL KV transfer, behind a vllm-router that is this service's own endpoint.

    Deployed as three services: ``<name>-prefill``, ``<name>-decode``, then ``<name>`` (the router,
    on the driver's node); ``driver.policy_model`` names the router (``<name>``).

    Each tier is a vLLM service that takes ``type``, ``container``, ``model`` and
    ``served_model_name`` from this service unless it sets its own; its port defaults to this
    port + 1 (prefill) / + 2 (decode). Unlike NeMo Gym 0.7.0, where this service's ``env``,
    ``mounts`` and ``pre_command`` reach only the router, the tiers inherit them too (the
    processes that load the model need the token and the model mount): ``env`` merged key by key,
    the tier's value winning; ``mounts`` this service's then the tier's, each once;
    ``pre_command`` the tier's own if set, else this service's.
    """

    type: Literal["vllm_pd"]
    prefill: VllmServiceConfig
    decode: VllmServiceConfig
    server_per_node: bool = False
    nixl_side_channel_port: int = 5600
    prefill_policy: str = "cache_aware"
    decode_policy: str = "cache_aware"
    intra_node_data_parallel_size: int = 1
    request_timeout_secs: int = 86400
    log_level: str = "error"
    kv_connector: str = "NixlConnector"
    kv_load_failure_policy: str = "fail"

    # The tiers as deployed, keyed "prefill"/"decode"; private so model_dump (and the resolved
    # config) keeps only what the user wrote, which validates again to the same tiers.
    _tiers: dict[str, VllmPDTierConfig] = PrivateAttr(default_factory=dict)

    _check_side_channel = field_validator("nixl_side_channel_port")(rules.side_channel_port)
    _check_counts = field_validator("intra_node_data_parallel_size", "request_timeout_secs")(rules.positive)
    _check_words = field_validator(
        "prefill_policy", "decode_policy", "log_level", "kv_connector", "kv_load_failure_policy"
    )(rules.word)

    @model_validator(mode="before")
    @classmethod
    def _fill_tier_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data  # pydantic reports the wrong type
        data = dict(data)  # never change the caller's mapping
        prefill_rpc_port = DATA_PARALLEL_RPC_PORT
        for field, _, offset in PD_TIERS:
            tier = data.get(field)
            if not isinstance(tier, dict):
                continue  # missing or not a mapping: pydantic reports it at the tier's path
            _refuse_pair_settings(field, tier)
            tier = {**{k: data[k] for k in PD_TIER_IDENTITY if k in data}, "type": "vllm", **tier}
            service_port = data.get("port", 8000)
            if rules.is_integer(service_port):
                tier.setdefault("port", service_port + 1 + offset)
            if field == "prefill":
                prefill_rpc_port = tier.get("data_parallel_rpc_port", DATA_PARALLEL_RPC_PORT)
            elif rules.is_integer(prefill_rpc_port):
                tier.setdefault("data_parallel_rpc_port", prefill_rpc_port + 1)
            data[field] = tier
        return data

    @model_validator(mode="after")
    def _build_tiers(self) -> VllmPDServiceConfig:
        _probe_own_port(self)  # the router's port
        if self.prefill.data_parallel_rpc_port == self.decode.data_parallel_rpc_port:
            raise error_at(
                "decode.data_parallel_rpc_port",
                f"the prefill and decode tiers both use data_parallel_rpc_port "
                f"{self.decode.data_parallel_rpc_port}; give decode another port (by default it is "
                f"prefill's + 1), or remove it",
            )
        for field, role, offset in PD_TIERS:
            tier = getattr(self, field)
            self._inherit_deployment_settings(tier)
            self._tiers[field] = self._deployed_tier(tier, role, self.nixl_side_channel_port + offset)
        return self

    def _inherit_deployment_settings(self, tier: VllmServiceConfig) -> None:
        """env, mounts and pre_command reach the tiers too (NeMo Gym 0.7.0 gives them to the router
        only). Merging again what a previous merge wrote gives the same tier, so a resolved config
        validates to the same object."""
        merged_sources = {**env_sources_of(self), **env_sources_of(tier)}
        tier.env = {**self.env, **tier.env}
        tier._env_sources = merged_sources  # a host: value stays a reference wherever it is shown
        tier.mounts = list(dict.fromkeys([*self.mounts, *tier.mounts]))
        tier.pre_command = tier.pre_command or self.pre_command

    def _deployed_tier(self, tier: VllmServiceConfig, role: str, side_channel_port: int) -> VllmPDTierConfig:
        # Built, not validated: the env values are resolved already (host: read once, at the tier).
        fields = copy.deepcopy({name: getattr(tier, name) for name in VllmServiceConfig.model_fields})
        deployed = VllmPDTierConfig.model_construct(
            **fields,
            nixl_side_channel_port=side_channel_port,
            server_per_node=self.server_per_node,
            kv_transfer_config={
                "kv_connector": self.kv_connector,
                "kv_role": role,
                "kv_load_failure_policy": self.kv_load_failure_policy,
            },
        )
        deployed._env_sources = dict(tier._env_sources)
        return deployed

    def tiers(self, name: str) -> dict[str, VllmPDTierConfig]:
        """The deployed tiers of the service called ``name``: ``<name>-prefill``, ``<name>-decode``."""
        return {f"{name}-{tier.field}": self._tiers[tier.field] for tier in PD_TIERS}


def _refuse_pair_settings(tier_name: str, tier: dict[str, Any]) -> None:
    for key in PD_SERVICE_ONLY:
        if key in tier:
            raise error_at(
                f"{tier_name}.{key}",
                f"is set on the {tier_name} tier, but it applies to both tiers together; "
                f"set {key} on the vllm_pd service itself",
            )


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
                    raise ValueError(f"resources['{pool}']['{name}'] is {amount}; a resource amount must be >= 0")
        return v

    @model_validator(mode="after")
    def _validate_shape(self) -> RayServiceConfig:
        if self.node_pool is not None:
            raise ValueError(
                f"A ray service spans `node_pools`, not a single `node_pool`; use node_pools: [{self.node_pool}]."
            )
        duplicates = sorted({p for p in self.node_pools if self.node_pools.count(p) > 1})
        if duplicates:
            raise ValueError(f"A ray service's node_pools lists a pool more than once: {duplicates}; list each once.")
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


def effective_ray_serve(service: VllmServiceConfig, total_nodes: int, gpus_per_node_values: list[int]) -> bool:
    """Whether the Ray Serve gateway manages this service's instances/routing instead of vLLM's own DP."""
    if service.use_ray_serve:
        return True
    if not gpus_per_node_values:
        return False
    footprint = service.tensor_parallel_size * service.pipeline_parallel_size
    return total_nodes > 1 and service.number_of_instances > 1 and footprint > max(gpus_per_node_values)


ServiceConfig = Annotated[
    Annotated[VllmServiceConfig, Tag("vllm")]
    | Annotated[RayServiceConfig, Tag("ray")]
    | Annotated[VllmPDServiceConfig, Tag("vllm_pd")],
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
    _check_partition = field_validator("partition")(slurm_rules.slurm_word)
    _check_extra_args = field_validator("extra_args")(slurm_rules.slurm_options)


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
    # Extension beyond the spec: each job asks for its nodes whole (Slurm's ``--exclusive``). Its
    # servers bind fixed ports (vLLM, gym's own, the collector's), so two jobs packed onto one node
    # would collide or, worse, answer each other. ``false`` lets Slurm pack jobs; a port another
    # job holds then fails the step at once, named, instead of serving the wrong model.
    exclusive_nodes: bool = True

    _check_account = field_validator("account")(slurm_rules.slurm_word)
    _check_extra_args = field_validator("extra_args")(slurm_rules.slurm_options)
    _check_walltime = field_validator("walltime")(slurm_rules.optional_walltime)
    _check_hostname = field_validator("hostname")(rules.optional_hostname)
    _check_pool_names = field_validator("node_pools")(rules.named_entries("node pool"))

    @model_validator(mode="after")
    def _pools_share_one_allocation(self) -> SlurmComputeConfig:
        """Pools that differ make a heterogeneous job: one component per pool. What Slurm cannot
        do with one is refused here."""
        if not rules.pools_differ(self.node_pools):
            return self
        for where, args in [("extra_args", self.extra_args)] + [
            (f"node_pools.{name}.extra_args", pool.extra_args) for name, pool in self.node_pools.items()
        ]:
            for option in slurm_rules.NOT_FOR_HETEROGENEOUS_JOBS:
                if option in args:
                    raise error_at(
                        f"{where}.{option}",
                        f"the node pools differ on {rules.disagreement(self.node_pools)}, so the job is a "
                        f"heterogeneous Slurm job, and Slurm has no job arrays of those; drop {option} or "
                        f"make the pools agree",
                    )
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


class KubernetesComputeConfig(BaseComputeConfig):
    """Extension beyond the spec: one Job per benchmark on a Kubernetes cluster, the
    shape of upstream's ``KubernetesComputeConfig`` (main branch, v1): field names, types and
    defaults are its own.

    One pod per job (single node): the model services run as native sidecars, the driver as the
    pod's one container, every container mounting ``pvc_name`` at ``job.output_path``.
    """

    type: Literal["kubernetes"]
    context: str | None = None  # the kubeconfig context; None: its current one
    namespace: str = "default"
    gpus_per_node: int | None = None  # the most GPUs one pod may ask for; None: not checked
    node_selector: dict[str, str] = {}
    service_account: str | None = None
    pvc_name: str  # mounted at job.output_path in every container; the submit host sees it there too
    memory_per_gpu: str = "32Gi"  # requested per GPU, so that a GPU pod is not BestEffort
    extra_args: dict[str, dict[str, str]] = {}  # labels and annotations for the Job and its pod
    ttl_seconds_after_finished: int | None = 86400
    active_deadline_seconds: int | None = None

    _check_context = field_validator("context")(kubernetes_rules.optional_context)
    _check_names = field_validator("namespace", "pvc_name")(kubernetes_rules.dns_label)
    _check_account = field_validator("service_account")(kubernetes_rules.optional_dns_label)
    _check_gpus = field_validator("gpus_per_node")(rules.optional_gpus)
    _check_selector = field_validator("node_selector")(kubernetes_rules.node_selector)
    _check_memory = field_validator("memory_per_gpu")(kubernetes_rules.quantity)
    _check_extra_args = field_validator("extra_args")(kubernetes_rules.extra_args)
    _check_ttl = field_validator("ttl_seconds_after_finished")(kubernetes_rules.optional_int32_seconds)
    _check_deadline = field_validator("active_deadline_seconds")(kubernetes_rules.optional_int64_seconds)

    @property
    def node_pools(self) -> dict[str, NodePool]:
        return {}  # one implicit pool: the pod's node

    @property
    def hostname(self) -> None:
        return None  # its client runs where gym does, with the user's kubeconfig

    @property
    def container_runtime(self) -> Literal["none"]:
        return "none"  # each step already runs in its own container of the pod


ComputeConfig = Annotated[
    Annotated[SlurmComputeConfig, Tag("slurm")]
    | Annotated[LocalComputeConfig, Tag("local")]
    | Annotated[KubernetesComputeConfig, Tag("kubernetes")],
    Discriminator("type"),
]
# What a validated ``ComputeConfig`` is: the type where the config meets its backend.
AnyComputeConfig: TypeAlias = SlurmComputeConfig | LocalComputeConfig | KubernetesComputeConfig


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
    _check_walltime = field_validator("max_walltime")(slurm_rules.optional_time_cap)


# Where a benchmark's unchecked_keys may point: its run and prepare mappings.
UNCHECKED_SECTIONS = ("run.", "prepare.")


def _resume_shape(v: Any) -> str:
    return "caps" if isinstance(v, (dict, ResumeConfig)) else "flag"


# ``true``/``false``, or the caps as a mapping; tagged so an error names one shape, not both.
Resumable = Annotated[Annotated[bool, Tag("flag")] | Annotated[ResumeConfig, Tag("caps")], Discriminator(_resume_shape)]


class BenchmarkRunConfig(_StrictModel):
    prepare: dict[str, Any] = {}
    run: dict[str, Any] = {}
    # Extension beyond the spec (NeMo Gym 0.7.0's field): requeue this benchmark's job when it
    # times out, is preempted or loses a node, and continue from the rollouts already written.
    resumable: Resumable = False
    # Extension beyond the spec: this benchmark's exports, over ``job.export`` (see JobConfig).
    export: dict[str, dict[str, Any] | None] | None = None
    # NeMo Gym 0.7.0's field: a shell script the driver runs instead of ``gym eval run`` (prepare
    # still runs first). Whether ``run`` is empty beside it is checked with the policy wiring,
    # which ``SubmitConfig`` adds to ``run`` (see ``SubmitConfig._check_command_runs_alone``).
    command: str | None = None
    # Extension beyond the spec: run/prepare keys (``run.num_repeat``) passed to gym as written, not
    # checked against what gym reads when a run is staged (see preflight.py).
    unchecked_keys: list[str] = []
    # Extension beyond the spec: split the benchmark's tasks into this many slices, each a job with
    # its own deployment, merged into one benchmark by gym eval aggregate (None: job.shards).
    shards: int | None = None

    _check_shards = field_validator("shards")(rules.optional_shards)
    _no_bool_shards = field_validator("shards", mode="before")(rules.not_a_bool)

    @property
    def resume_config(self) -> ResumeConfig | None:
        if self.resumable is False:
            return None
        return ResumeConfig() if self.resumable is True else self.resumable

    @model_validator(mode="after")
    def _check_command(self) -> BenchmarkRunConfig:
        if self.command is None:
            return self
        if not self.command.strip():
            raise error_at("command", "is empty; give the shell script to run, or remove command")
        if self.resume_config is not None:
            raise error_at(
                "command",
                "is set together with resumable, but a resumed job can only tell `gym eval run` to "
                "continue from its cache, so a command would start over from zero; drop resumable, "
                "or drop command and configure run",
            )
        return self

    @field_validator("unchecked_keys")
    @classmethod
    def _check_unchecked_keys(cls, v: list[str]) -> list[str]:
        for key in v:
            if not key.startswith(UNCHECKED_SECTIONS) or key in UNCHECKED_SECTIONS:
                raise ValueError(
                    f"{key!r} names no run or prepare key; write it as run.<key> or prepare.<key>, "
                    f"e.g. run.{key.split('.')[-1] or 'num_repeats'}"
                )
        return v

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
    # NeMo Gym 0.7.0's field: the host in the injected policy_base_url. Composition has already
    # resolved any ${oc.env:...} in it (on the submitting machine), so it is checked as a host.
    policy_host: str = POLICY_HOST

    _env_sources: dict[str, EnvSource] = PrivateAttr(default_factory=dict)
    _check_policy_host = field_validator("policy_host")(rules.host)

    @field_validator("env", mode="before")
    @classmethod
    def _resolve_env_prefixes(cls, v: dict[str, str]) -> dict[str, str]:
        return _resolve_env_field(cls, v)

    _keep_env_sources = model_validator(mode="wrap")(_remember_env_sources)

    _check_mounts = field_validator("mounts")(rules.mount_list)
    _check_benchmark_names = field_validator("benchmarks")(rules.benchmark_names)


class JobConfig(_StrictModel):
    output_path: str
    # Extension beyond the spec: ``per_benchmark`` (one job, one deployment of the services per
    # benchmark, as upstream) or ``shared`` (one job whose services are started once and serve
    # every benchmark in turn, ``benchmarks_at_once`` drivers at a time: the model's start-up is
    # paid once; each benchmark keeps its own artifacts, logs and status).
    deployment: Literal["per_benchmark", "shared"] = "per_benchmark"
    benchmarks_at_once: int = 1
    # Extension beyond the spec: where every benchmark's results go after its driver, by exporter
    # (mlflow, wandb, table) with its settings; a benchmark's own ``export`` overrides them setting
    # by setting, ``null`` dropping an exporter. See ``exporters``.
    export: dict[str, dict[str, Any] | None] = {}
    # Extension beyond the spec: how many shards each benchmark runs in unless it says (see
    # BenchmarkRunConfig.shards).
    shards: int = 1
    # Extension beyond the spec: at most this many of a submission's jobs of one shape run at once
    # (a Slurm job array's throttle, ``--array=0-N%K``); None: as many as the scheduler starts.
    max_concurrent: int | None = None
    # Extension beyond the spec: the training step of the checkpoint this run evaluates (gym eval
    # watch sets it from the checkpoint's name); exports log the metrics at this step.
    training_step: int | None = None
    # Extension beyond the spec: refuse a submission whose estimated GPU-hours (earlier runs of the
    # same benchmarks on the same footprint, from the local index) exceed this; None: no limit.
    max_gpu_hours: float | None = None

    _check_output_path = field_validator("output_path")(rules.absolute_path)
    _check_max_concurrent = field_validator("max_concurrent")(rules.optional_positive)
    _check_max_gpu_hours = field_validator("max_gpu_hours")(rules.optional_positive_number)
    _check_training_step = field_validator("training_step")(rules.optional_step)
    _check_at_once = field_validator("benchmarks_at_once")(rules.positive)
    _check_shards = field_validator("shards")(rules.optional_shards)
    _no_bool_shards = field_validator("shards", mode="before")(rules.not_a_bool)


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
    # NeMo Gym 0.7.0's fields: gym's own telemetry from the driver, the span groups it emits, and
    # its logs over OTLP. Only driver.gym_install installs gym's telemetry extra; without it the
    # submit path warns (preflight.py), as the schema accepts what 0.7.0's accepts.
    gym_telemetry: bool = True
    gym_span_groups: str = "default,verify"
    gym_logs: bool = True

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
    _check_span_groups = field_validator("gym_span_groups")(rules.single_line)


# --------------------------------------------------------------------------------------------
# the whole submission


class SubmitConfig(_StrictModel):
    compute: dict[str, ComputeConfig]
    driver: DriverConfig
    job: JobConfig
    otel: OtelConfig = OtelConfig()
    services: dict[str, ServiceConfig]

    _check_service_names = field_validator("services")(rules.named_entries("service"))

    @property
    def deployed_services(self) -> dict[str, BaseServiceConfig]:
        """Every service the job starts, by deployed name, in declaration order; a vllm_pd
        service's prefill and decode tiers come right before it (its router)."""
        return {name: service for name, _, service in self._deployment()}

    def _deployment(self) -> list[tuple[str, str, BaseServiceConfig]]:
        """(deployed name, YAML path, service) of every service the job starts."""
        deployment: list[tuple[str, str, BaseServiceConfig]] = []
        for name, service in self.services.items():
            if isinstance(service, VllmPDServiceConfig):
                for (tier_name, deployed), tier in zip(service.tiers(name).items(), PD_TIERS):
                    deployment.append((tier_name, f"services.{name}.{tier.field}", deployed))
            deployment.append((name, f"services.{name}", service))
        return deployment

    def _service_label(self, name: str) -> str:
        """How messages name a deployed service; a tier also by where it is written."""
        if name in self.services:
            return f"Service '{name}'"
        path = next(path for deployed, path, _ in self._deployment() if deployed == name)
        return f"Service '{name}' ({path})"

    @model_validator(mode="after")
    def _resolve_and_validate_placements(self) -> SubmitConfig:
        compute_name, compute = self._sole_compute()
        # What its backend cannot run at all is said first, before rules about what it could.
        problem = backend_named(compute.type).config_problem(self, compute_name)
        if problem is not None:
            raise error_at(*problem)
        node_pools = compute.node_pools
        total_nodes = sum(pool.nodes for pool in node_pools.values())
        self._check_tier_names_are_free()
        deployment = self._deployment()
        for name, path, service in deployment:
            self._resolve_placement(name, service, compute_name, path)
            self._check_pools_exist(name, service, compute_name, node_pools, path)
            if isinstance(service, VllmPDTierConfig):
                self._check_tier_has_a_pool(path, service, compute_name, compute)
            if isinstance(service, VllmServiceConfig):
                self._check_vllm_shape(name, service, node_pools, total_nodes, path)
        self._check_routers_beside_driver(list(node_pools))
        if rules.pools_differ(node_pools):
            self._check_each_service_fits_one_component(deployment, node_pools)
        rules.check_port_clashes(
            self.deployed_services,
            list(node_pools),
            self.driver.policy_model,
            self.otel.enabled,
            paths={name: path for name, path, _ in deployment},
        )
        if self.job.deployment == "shared" and contract.SHARED_DEPLOYMENT_DIR in self.driver.benchmarks:
            raise ValueError(
                f"driver.benchmarks: with job.deployment: shared the name '{contract.SHARED_DEPLOYMENT_DIR}' is the "
                f"shared job's own directory; rename that benchmark"
            )
        self._check_resumable(compute_name, compute)
        self._check_shards()
        self._wire_policy_model()
        self._check_exports()
        return self

    def shards_of(self, benchmark: str) -> int:
        """How many shards a benchmark runs in: its own ``shards``, else ``job.shards``."""
        own = self.driver.benchmarks[benchmark].shards
        return self.job.shards if own is None else own

    def _check_shards(self) -> None:
        for name, bench in self.driver.benchmarks.items():
            shards = self.shards_of(name)
            if shards == 1:
                continue
            where = f"driver.benchmarks.{name}.shards" if bench.shards is not None else "job.shards"
            said = f"is {shards}"
            if self.job.deployment == "shared":
                raise error_at(
                    where,
                    f"{said}, but job.deployment: shared runs every benchmark in one job, and each shard is a "
                    f"job with its own deployment; use job.deployment: per_benchmark or drop shards",
                )
            if bench.command is not None:
                raise error_at(
                    where,
                    f"{said}, but driver.benchmarks.{name} runs its own command, whose inputs gym does not "
                    f"prepare; drop shards for it (shards: 1) or drop command",
                )
            if bench.resume_config is not None:
                raise error_at(
                    where,
                    f"{said}, but driver.benchmarks.{name} is resumable, and a sharded benchmark is not "
                    f"resumed yet; drop resumable (gym eval resubmit still reruns a failed shard) or shards",
                )
            limit = bench.run.get("limit")
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
                raise error_at(
                    f"driver.benchmarks.{name}.run.limit",
                    f"is {limit!r}, but a sharded benchmark's shards take their slices of the first `limit` "
                    f"tasks, which needs a whole number (0: all of them)",
                )
            if any(ch in self.job.output_path for ch in ",*?["):
                raise error_at(
                    "job.output_path",
                    f"holds one of , * ? [, but the shards of {name} are merged by a glob of their "
                    f"directories under it; choose an output path without them",
                )

    def exports_of(self, benchmark: str) -> dict[str, dict[str, Any]]:
        """The exporters a benchmark's job runs, ``job.export`` merged with its own ``export``."""
        from nemo_gym.orchestration.exporters.spec import merge_exporters

        return merge_exporters(self.job.export, self.driver.benchmarks[benchmark].export)

    def _check_exports(self) -> None:
        from nemo_gym.orchestration.exporters.spec import settings_problems

        for problem in settings_problems({k: v for k, v in self.job.export.items() if v is not None}):
            raise error_at(f"job.{problem.split(': ', 1)[0]}", problem.split(": ", 1)[1])
        for name, bench in self.driver.benchmarks.items():
            if bench.export is None:
                continue
            for problem in settings_problems(self.exports_of(name)):
                raise error_at(f"driver.benchmarks.{name}.{problem.split(': ', 1)[0]}", problem.split(": ", 1)[1])

    def _check_each_service_fits_one_component(
        self, deployment: list[tuple[str, str, BaseServiceConfig]], node_pools: dict[str, NodePool]
    ) -> None:
        """In a heterogeneous job each pool is a component of its own, and one step (srun) runs in
        one component: a vLLM service must say which pool it runs on."""
        for _, path, service in deployment:
            if isinstance(service, VllmServiceConfig) and service.node_pool is None:
                raise error_at(
                    f"{path}.node_pool",
                    f"is not set, but the node pools differ on {rules.disagreement(node_pools)}, so each "
                    f"pool is a component of a heterogeneous job and a service runs within one; set "
                    f"{path}.node_pool to one of {', '.join(node_pools)}",
                )

    def _check_resumable(self, compute_name: str, compute: AnyComputeConfig) -> None:
        resumable = [name for name, bench in self.driver.benchmarks.items() if bench.resume_config is not None]
        if not resumable:
            return
        names = ", ".join(f"driver.benchmarks.{name}.resumable" for name in resumable)
        if not backend_named(compute.type).supports_resume:
            raise ValueError(
                f"{names}: compute '{compute_name}' is {compute.type}, whose jobs are not resumed (only Slurm's "
                f"queue their successors as they near their walltime); drop resumable or submit to a Slurm compute"
            )
        if self.job.deployment == "shared":
            raise ValueError(
                f"{names}: job.deployment: shared runs every benchmark in one job, and a job is resumed as "
                f"a whole; use job.deployment: per_benchmark or drop resumable"
            )

    # -- placement ---------------------------------------------------------------------------

    def _sole_compute(self) -> tuple[str, AnyComputeConfig]:
        if not self.compute:
            raise ValueError(
                "compute: no compute resource is declared; add one, e.g. compute: {cluster: {type: slurm, account: ...}}"
            )
        if len(self.compute) > 1:
            raise ValueError(
                f"Multiple compute resources are not supported yet ({', '.join(self.compute)}); keep one under compute."
            )
        return next(iter(self.compute.items()))

    @staticmethod
    def _resolve_placement(name: str, service: BaseServiceConfig, compute_name: str, path: str) -> None:
        if service.placement is None:
            service.placement = compute_name
        elif service.placement != compute_name:
            raise ValueError(
                f"Service '{name}' placement '{service.placement}' does not match any compute "
                f"resource ({compute_name}); set {path}.placement to '{compute_name}' or remove it."
            )

    @staticmethod
    def _check_pools_exist(
        name: str, service: BaseServiceConfig, compute_name: str, node_pools: dict[str, NodePool], path: str
    ) -> None:
        declared = ", ".join(node_pools) or "none declared"
        if isinstance(service, RayServiceConfig):
            unknown = [p for p in service.node_pools if p not in node_pools]
            if unknown:
                raise ValueError(
                    f"Service '{name}' node_pools {unknown} do not match any node pool of compute "
                    f"'{compute_name}' ({declared}); fix {path}.node_pools."
                )
        if service.node_pool is not None and service.node_pool not in node_pools:
            raise ValueError(
                f"Service '{name}' node_pool '{service.node_pool}' does not match any node pool of "
                f"compute '{compute_name}' ({declared}); fix {path}.node_pool."
            )

    # -- prefill/decode ----------------------------------------------------------------------

    def _check_tier_names_are_free(self) -> None:
        for name, service in self.services.items():
            if not isinstance(service, VllmPDServiceConfig):
                continue
            tier_names = list(service.tiers(name))
            taken = [tier for tier in tier_names if tier in self.services]
            if taken:
                raise error_at(
                    f"services.{name}",
                    f"a vllm_pd service deploys its tiers as {' and '.join(tier_names)}, but "
                    f"services.{taken[0]} already exists; rename one of the two services",
                )

    @staticmethod
    def _check_tier_has_a_pool(path: str, tier: VllmPDTierConfig, compute_name: str, compute: AnyComputeConfig) -> None:
        if tier.node_pool is not None:
            return
        if isinstance(compute, LocalComputeConfig):  # a question of the config's shape: it declares no pools
            fix = f"compute '{compute_name}' is local, which has no node pools; submit to a Slurm compute"
        elif compute.node_pools:
            pools = ", ".join(compute.node_pools)
            fix = f"pin it to one of compute '{compute_name}''s node pools ({pools})"
        else:
            fix = f"declare node_pools under compute.{compute_name} and pin each tier to one"
        raise error_at(f"{path}.node_pool", f"a prefill/decode tier needs nodes of its own, but none is set; {fix}")

    def _check_routers_beside_driver(self, pool_names: list[str]) -> None:
        """The router is started on the driver's node; pinned anywhere else, it would not run there."""
        driver_pool = rules.driver_pool_name(self.services, self.driver.policy_model, pool_names)
        for name, service in self.services.items():
            if isinstance(service, VllmPDServiceConfig) and service.node_pool not in (None, driver_pool):
                raise error_at(
                    f"services.{name}.node_pool",
                    f"is '{service.node_pool}', but a vllm_pd service's router runs on the driver's node, "
                    f"which is on node pool '{driver_pool}'; pin it to '{driver_pool}' or remove node_pool",
                )

    # -- vLLM shapes -------------------------------------------------------------------------

    def _check_vllm_shape(
        self,
        name: str,
        service: VllmServiceConfig,
        node_pools: dict[str, NodePool],
        total_nodes: int,
        path: str,
    ) -> None:
        pools = {service.node_pool: node_pools[service.node_pool]} if service.node_pool else node_pools
        service_nodes = sum(p.nodes for p in pools.values()) or total_nodes
        gpus = [p.gpus_per_node for p in pools.values() if p.gpus_per_node is not None]
        n = service.number_of_instances
        if isinstance(service, VllmPDTierConfig) and service.server_per_node:
            if n != 1:
                raise error_at(
                    f"{path}.number_of_instances",
                    f"is {n}, but with server_per_node each node of the tier's pool runs one server, "
                    f"which is one instance; set it to 1 (or remove it), or turn server_per_node off",
                )
            service_nodes = 1  # each node is checked as a deployment of its own
        is_ray_serve = effective_ray_serve(service, service_nodes, gpus)
        if service_nodes > 1 and n > 1 and n % service_nodes != 0 and not is_ray_serve:
            raise ValueError(
                f"{self._service_label(name)} has number_of_instances={n}, which must be evenly divisible by the "
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
                f"{self._service_label(service_name)} requires {needed} GPUs ({footprint}), which exceeds {scope} "
                f"on compute '{compute_name}'. Reduce number_of_instances/tensor_parallel_size/"
                f"pipeline_parallel_size, or add more nodes/GPUs."
            )
        if needed < available:
            warnings.warn(
                f"{self._service_label(service_name)} uses {needed} of {available} GPUs ({footprint}), leaving "
                f"{available - needed} GPU(s) idle on compute '{compute_name}'; raise "
                f"tensor_parallel_size or number_of_instances to use them.",
                UserWarning,
                stacklevel=2,
            )

    # -- policy model ------------------------------------------------------------------------

    def _wire_policy_model(self) -> None:
        wiring = self._policy_wiring()
        for bench_name, bench in self.driver.benchmarks.items():
            self._check_command_runs_alone(bench_name, bench, wiring)
            if not wiring:
                continue
            # Identical values are what an earlier validation injected (--resolve-only output fed
            # back in), so only a different value is a conflict.
            clashing = [k for k in POLICY_RUN_KEYS if k in bench.run and bench.run[k] != wiring[k]]
            if clashing:
                raise ValueError(
                    f"Benchmark '{bench_name}' run config already sets {clashing} but "
                    f"driver.policy_model is also set. Remove one."
                )
            bench.run.update(wiring)

    def _policy_wiring(self) -> dict[str, str]:
        """The run keys ``driver.policy_model`` gives every benchmark; none without a model endpoint.

        A ``command`` benchmark gets them too: they are how its script learns the endpoint.
        """
        name = self.driver.policy_model
        if name is None:
            return {}
        if name not in self.services:
            raise ValueError(self._unknown_policy_model(name))
        service = self.services[name]
        if not isinstance(service, BaseModelServiceConfig):
            return {}  # a ray cluster serves no model endpoint of its own
        return {
            "policy_base_url": f"http://{self.driver.policy_host}:{service.port}/v1",
            "policy_model_name": service.served_model_name or service.model,
            "policy_api_key": POLICY_API_KEY,
        }

    def _unknown_policy_model(self, name: str) -> str:
        for pd_name, service in self.services.items():
            if isinstance(service, VllmPDServiceConfig) and name in service.tiers(pd_name):
                return (
                    f"driver.policy_model: '{name}' is a tier of vllm_pd service '{pd_name}', whose router "
                    f"is the endpoint for both tiers; set driver.policy_model to '{pd_name}'"
                )
        return (
            f"driver.policy_model '{name}' does not match any service "
            f"({', '.join(self.services) or 'none declared'}); name one of the services."
        )

    @staticmethod
    def _check_command_runs_alone(bench_name: str, bench: BenchmarkRunConfig, wiring: dict[str, str]) -> None:
        """``run`` only configures ``gym eval run``, which ``command`` replaces.

        The policy wiring in ``run`` is not the user's setting (it is injected, or written back by
        an earlier validation, and the command reads it as NEMO_GYM_POLICY_* env), so only keys
        that differ from it count.
        """
        if bench.command is None:
            return
        settings = [k for k, v in bench.run.items() if not (k in wiring and v == wiring[k])]
        if settings:
            raise error_at(
                f"driver.benchmarks.{bench_name}.command",
                f"replaces `gym eval run`, but run sets {settings}, which only `gym eval run` reads; "
                f"fold those settings into the command, or drop command",
            )
