"""The spec's surface: classes, bases, fields, types and defaults of nemo_gym.orchestration.api."""

from __future__ import annotations

import re
import typing

import pytest
from pydantic import BaseModel

from nemo_gym.orchestration import api

# (class, base, {field: (annotation, default)}); REQUIRED marks a field without default.
REQUIRED = object()
SPEC = {
    "_StrictModel": ("BaseModel", {}),
    "HealthCheckConfig": (
        "_StrictModel",
        {"path": (str, "/health"), "port": (int | None, None), "timeout_seconds": (int, 60)},
    ),
    "BaseServiceConfig": (
        "_StrictModel",
        {
            "container": (str, REQUIRED),
            "env": (dict[str, str], {}),
            "health_check": (api.HealthCheckConfig | None, None),
            "mounts": (list[str], []),
            "node_pool": (str | None, None),
            "placement": (str | None, None),
            "pre_command": (str, ""),
        },
    ),
    "BaseModelServiceConfig": (
        "BaseServiceConfig",
        {"model": (str, REQUIRED), "port": (int, 8000), "served_model_name": (str | None, None)},
    ),
    "VllmServiceConfig": (
        "BaseModelServiceConfig",
        {
            "extra_args": (str, ""),
            "number_of_instances": (int, 1),
            "pipeline_parallel_size": (int, 1),
            "tensor_parallel_size": (int, 1),
            "trust_remote_code": (bool, False),
            "type": (typing.Literal["vllm"], REQUIRED),
            "use_ray_serve": (bool, False),
        },
    ),
    "RayServiceConfig": (
        "BaseServiceConfig",
        {
            "extra_args": (str, ""),
            "node_pools": (list[str], []),
            "num_cpus": (int | None, None),
            "num_gpus": (int | None, None),
            "port": (int, 6379),
            "resources": (dict[str, dict[str, float]], {}),
            "type": (typing.Literal["ray"], REQUIRED),
        },
    ),
    "BaseComputeConfig": ("_StrictModel", {}),
    "NodePool": (
        "_StrictModel",
        {
            "extra_args": (dict[str, str], {}),
            "gpus_per_node": (int | None, None),
            "nodes": (int, 1),
            "ntasks_per_node": (int, 1),
            "partition": (str, REQUIRED),
        },
    ),
    "SlurmComputeConfig": (
        "BaseComputeConfig",
        {
            "account": (str, REQUIRED),
            "extra_args": (dict[str, str], {}),
            "hostname": (str | None, None),
            "node_pools": (dict[str, api.NodePool], {}),
            "type": (typing.Literal["slurm"], REQUIRED),
            "walltime": (str | None, None),
        },
    ),
    "BenchmarkRunConfig": (
        "_StrictModel",
        {"prepare": (dict[str, typing.Any], {}), "run": (dict[str, typing.Any], {})},
    ),
    "GymInstallConfig": ("_StrictModel", {"ref": (str, REQUIRED), "repo": (str, "https://github.com/NVIDIA-NeMo/gym")}),
    "DriverConfig": (
        "_StrictModel",
        {
            "benchmarks": (dict[str, api.BenchmarkRunConfig], REQUIRED),
            "container": (str, "python:3.12"),
            "env": (dict[str, str], {}),
            "gym_install": (api.GymInstallConfig | None, None),
            "mounts": (list[str], []),
            "policy_model": (str | None, None),
            "policy_model_type": (str, "openai_model"),
        },
    ),
    "JobConfig": ("_StrictModel", {"output_path": (str, REQUIRED)}),
    "OtelConfig": (
        "_StrictModel",
        {
            "binary": (str, "otelcol-contrib"),
            "component": (str, "gym-vllm"),
            "container": (str | None, None),
            "enabled": (bool, True),
            "endpoint": (str | None, None),
            "gpu_metrics_port": (int | None, 9400),
            "health_check_timeout_seconds": (int, 300),
            "node_metrics_port": (int | None, 9100),
            "scrape_interval_seconds": (int, 15),
            "service_name": (str | None, None),
            "token_env": (str, "OTEL_TOKEN"),
        },
    ),
}


@pytest.mark.parametrize("name", sorted(SPEC))
def test_class_base_and_fields_match_the_spec(name: str) -> None:
    cls = getattr(api, name)
    base_name, fields = SPEC[name]
    assert cls.__bases__[0].__name__ == base_name
    own = {k: f for k, f in cls.model_fields.items()}
    for field, (annotation, default) in fields.items():
        info = own[field]
        assert info.annotation == annotation, field
        if default is REQUIRED:
            assert info.is_required(), field
        else:
            assert not info.is_required(), field
            assert info.get_default(call_default_factory=True) == default, field


# Fields added beyond the spec, each for an issue's requirement (documented in the README).
EXTENSIONS = {
    "SlurmComputeConfig": {"container_runtime", "exclusive_nodes"},
    "JobConfig": {
        "deployment",
        "benchmarks_at_once",
        "export",
        "shards",
        "max_concurrent",
        "training_step",
        "max_gpu_hours",
        "tags",
    },
    # NeMo Gym 0.7.0's fields (ResumeConfig too; the vllm_pd classes are checked below), and our export.
    "BenchmarkRunConfig": {"resumable", "command", "export", "unchecked_keys", "shards"},
    "VllmServiceConfig": {"data_parallel_rpc_port"},
    "DriverConfig": {"policy_host"},
    "OtelConfig": {"gym_telemetry", "gym_span_groups", "gym_logs"},
}

# NeMo Gym 0.7.0's fields beyond the spec, with 0.7.0's types and defaults, so its configs validate unchanged.
UPSTREAM_070 = {
    "VllmServiceConfig": {"data_parallel_rpc_port": (int, 13345)},
    "BenchmarkRunConfig": {"command": (str | None, None)},
    "DriverConfig": {"policy_host": (str, "localhost")},
    "OtelConfig": {"gym_telemetry": (bool, True), "gym_span_groups": (str, "default,verify"), "gym_logs": (bool, True)},
    "VllmPDServiceConfig": {
        "type": (typing.Literal["vllm_pd"], REQUIRED),
        "prefill": (api.VllmServiceConfig, REQUIRED),
        "decode": (api.VllmServiceConfig, REQUIRED),
        "server_per_node": (bool, False),
        "nixl_side_channel_port": (int, 5600),
        "prefill_policy": (str, "cache_aware"),
        "decode_policy": (str, "cache_aware"),
        "intra_node_data_parallel_size": (int, 1),
        "request_timeout_secs": (int, 86400),
        "log_level": (str, "error"),
        "kv_connector": (str, "NixlConnector"),
        "kv_load_failure_policy": (str, "fail"),
    },
    "VllmPDTierConfig": {
        "nixl_side_channel_port": (int, REQUIRED),
        "server_per_node": (bool, REQUIRED),
        "kv_transfer_config": (dict[str, str], REQUIRED),
    },
}


@pytest.mark.parametrize("name", sorted(UPSTREAM_070))
def test_upstream_070_fields(name: str) -> None:
    cls = getattr(api, name)
    for field, (annotation, default) in UPSTREAM_070[name].items():
        info = cls.model_fields[field]
        assert info.annotation == annotation, field
        if default is REQUIRED:
            assert info.is_required(), field
        else:
            assert info.get_default(call_default_factory=True) == default, field


def test_vllm_pd_classes_extend_only_with_upstream_fields() -> None:
    assert api.VllmPDServiceConfig.__bases__[0] is api.BaseModelServiceConfig
    assert api.VllmPDTierConfig.__bases__[0] is api.VllmServiceConfig
    base_fields = set(api.BaseModelServiceConfig.model_fields)
    assert set(api.VllmPDServiceConfig.model_fields) == base_fields | set(UPSTREAM_070["VllmPDServiceConfig"])
    tier_fields = set(api.VllmServiceConfig.model_fields) | set(UPSTREAM_070["VllmPDTierConfig"])
    assert set(api.VllmPDTierConfig.model_fields) == tier_fields


def test_no_field_beyond_the_spec_except_documented_extensions() -> None:
    for name, (_, fields) in SPEC.items():
        cls = getattr(api, name)
        inherited = set()
        for base in cls.__mro__[1:]:
            if isinstance(base, type) and issubclass(base, BaseModel) and base.__name__ in SPEC:
                inherited |= set(SPEC[base.__name__][1])
        assert set(cls.model_fields) == set(fields) | inherited | EXTENSIONS.get(name, set()), name


def test_submit_config_fields() -> None:
    fields = api.SubmitConfig.model_fields
    assert set(fields) == {"compute", "driver", "job", "otel", "services"}
    assert fields["otel"].get_default() == api.OtelConfig()
    assert api.SubmitConfig.__bases__[0] is api._StrictModel


def test_strict_model_forbids_extra_keys() -> None:
    assert api._StrictModel.model_config["extra"] == "forbid"


def test_module_constants() -> None:
    assert api.RUNTIME_ENV_PREFIX == "runtime:"
    assert api._ENV_VAR_NAME_RE.pattern == "^[A-Za-z_][A-Za-z0-9_]*$"
    assert isinstance(api._ENV_VAR_NAME_RE, re.Pattern)


def test_service_union_is_discriminated_on_type() -> None:
    from pydantic import TypeAdapter

    ta = TypeAdapter(api.ServiceConfig)
    assert isinstance(ta.validate_python({"type": "ray", "container": "c"}), api.RayServiceConfig)
    assert isinstance(ta.validate_python({"type": "vllm", "container": "c", "model": "m"}), api.VllmServiceConfig)
    pd = {"type": "vllm_pd", "container": "c", "model": "m", "prefill": {}, "decode": {}}
    assert isinstance(ta.validate_python(pd), api.VllmPDServiceConfig)
    compute = TypeAdapter(api.ComputeConfig).validate_python({"type": "slurm", "account": "a"})
    assert isinstance(compute, api.SlurmComputeConfig)
    # Extension: the local compute type (same job on this machine).
    local = TypeAdapter(api.ComputeConfig).validate_python({"type": "local"})
    assert isinstance(local, api.LocalComputeConfig) and local.node_pools == {}


def test_spec_named_validators_exist() -> None:
    for cls, name in [
        (api.BaseServiceConfig, "_resolve_env_prefixes"),
        (api.DriverConfig, "_resolve_env_prefixes"),
        (api.OtelConfig, "_validate_positive"),
        (api.OtelConfig, "_validate_token_env"),
        (api.RayServiceConfig, "_validate_shape"),
        (api.VllmServiceConfig, "_default_health_check"),
        (api.VllmServiceConfig, "_validate_number_of_instances"),
        (api.SubmitConfig, "_resolve_and_validate_placements"),
        (api.SubmitConfig, "_validate_vllm_gpu_footprint"),
    ]:
        assert hasattr(cls, name), f"{cls.__name__}.{name}"
