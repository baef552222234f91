"""The services a job starts: vLLM, a vLLM prefill/decode pair behind its router, a Ray cluster;
their health checks, and whether the Ray Serve gateway fronts a vLLM service."""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import Discriminator, PrivateAttr, Tag, field_validator, model_validator

from nemo_gym.orchestration import rules
from nemo_gym.orchestration.api.env import EnvSource, _remember_env_sources, _resolve_env_field, env_sources_of
from nemo_gym.orchestration.api.strict import _StrictModel
from nemo_gym.orchestration.errors import error_at

# vLLM's default data-parallel rpc port; a vllm_pd decode tier defaults to the prefill tier's + 1.
DATA_PARALLEL_RPC_PORT = 13345


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
