"""vllm_pd (prefill/decode disaggregation) as NeMo Gym 0.7.0 configures it, plus where we do better:
every rule by its exact line (path, problem, fix), tier inheritance, deployment order, round trip."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import pytest
import yaml

from nemo_gym.orchestration import api
from nemo_gym.orchestration.api import SubmitConfig, VllmPDServiceConfig, VllmPDTierConfig, env_sources_of
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.resolved import resolved_config_dict
from nemo_gym.orchestration.validate import validate_config

SECRET = "hf-pd-secret-value"

# A 0.7.0-style prefill/decode deployment (notes §7): three pools, the router beside the driver on
# the first one, each tier data-parallel over its own two nodes, a plain and a `command` benchmark.
REALISTIC_070 = """
services:
  qwen:
    type: vllm_pd
    container: vllm/vllm-openai:v0.11.0
    model: /models/Qwen3-235B-A22B-FP8
    served_model_name: qwen3-235b
    node_pool: router
    port: 8000
    env:
      HF_TOKEN: host:GYM_PD_HF_TOKEN
      VLLM_LOGGING_LEVEL: lit:INFO
    mounts: [/lustre/models:/models]
    prefill_policy: cache_aware
    decode_policy: round_robin
    intra_node_data_parallel_size: 1
    request_timeout_secs: 7200
    log_level: info
    kv_connector: NixlConnector
    kv_load_failure_policy: recompute
    nixl_side_channel_port: 5700
    health_check: {timeout_seconds: 1800}
    prefill:
      node_pool: prefill
      tensor_parallel_size: 8
      number_of_instances: 2
      extra_args: --max-num-batched-tokens 16384 --enable-expert-parallel
      health_check: {timeout_seconds: 1800}
    decode:
      node_pool: decode
      tensor_parallel_size: 8
      number_of_instances: 2
      data_parallel_rpc_port: 13400
      extra_args: --enable-expert-parallel
      health_check: {timeout_seconds: 1800}
compute:
  cluster:
    type: slurm
    account: llm-evals
    walltime: "04:00:00"
    node_pools:
      router: {partition: batch, nodes: 1, gpus_per_node: 8}
      prefill: {partition: batch, nodes: 2, gpus_per_node: 8}
      decode: {partition: batch, nodes: 2, gpus_per_node: 8}
driver:
  container: python:3.12
  gym_install: {ref: v0.7.0}
  policy_model: qwen
  policy_host: localhost
  benchmarks:
    aime24:
      prepare: {split: test}
      run: {num_repeats: 4}
    swebench:
      command: |
        python -m swebench_harness --endpoint "$NEMO_GYM_POLICY_BASE_URL" --out "$NEMO_GYM_BENCH_DIR"
job: {output_path: /lustre/gym-runs}
otel:
  endpoint: https://otel.example.com
  service_name: gym-evals
  gym_span_groups: default,verify
"""


@pytest.fixture(autouse=True)
def _hf_token(monkeypatch) -> None:
    monkeypatch.setenv("GYM_PD_HF_TOKEN", SECRET)


@pytest.fixture
def pd() -> dict[str, Any]:
    """A minimal valid vllm_pd config: router, prefill and decode pools, no GPU counts."""
    return {
        "services": {
            "pd": {
                "type": "vllm_pd",
                "container": "vllm:1",
                "model": "m",
                "prefill": {"node_pool": "prefill"},
                "decode": {"node_pool": "decode"},
            }
        },
        "compute": {
            "cluster": {
                "type": "slurm",
                "account": "acct",
                "node_pools": {
                    "router": {"partition": "p"},
                    "prefill": {"partition": "p"},
                    "decode": {"partition": "p"},
                },
            }
        },
        "driver": {"policy_model": "pd", "benchmarks": {"b": {}}},
        "job": {"output_path": "/scratch/runs"},
        "otel": {"enabled": False},
    }


def valid(data: dict[str, Any]) -> SubmitConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return validate_config(copy.deepcopy(data))[0]


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(UserError) as info:
        validate_config(copy.deepcopy(data))
    return info.value.problems


def problem(data: dict[str, Any]) -> str:
    (line,) = problems(data)
    return line


def tier(config: SubmitConfig, name: str) -> VllmPDTierConfig:
    deployed = config.deployed_services[name]
    assert isinstance(deployed, VllmPDTierConfig)
    return deployed


# -- a realistic 0.7.0 config --------------------------------------------------------------------


def test_realistic_070_config_validates_and_deploys_three_services() -> None:
    config, notes = validate_config(yaml.safe_load(REALISTIC_070))
    assert notes == []  # each tier fills its nodes' GPUs exactly
    assert list(config.deployed_services) == ["qwen-prefill", "qwen-decode", "qwen"]
    prefill, decode = tier(config, "qwen-prefill"), tier(config, "qwen-decode")
    assert (prefill.port, decode.port) == (8001, 8002)
    assert (prefill.data_parallel_rpc_port, decode.data_parallel_rpc_port) == (13345, 13400)
    assert (prefill.nixl_side_channel_port, decode.nixl_side_channel_port) == (5700, 5701)
    assert prefill.kv_transfer_config == {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_producer",
        "kv_load_failure_policy": "recompute",
    }
    assert decode.kv_transfer_config["kv_role"] == "kv_consumer"
    assert prefill.served_model_name == decode.served_model_name == "qwen3-235b"
    assert (prefill.placement, decode.placement) == ("cluster", "cluster")
    router = config.services["qwen"]
    assert (router.health_check.port, router.health_check.timeout_seconds) == (8000, 1800)
    assert (prefill.health_check.port, decode.health_check.port) == (8001, 8002)
    for bench in config.driver.benchmarks.values():
        assert bench.run["policy_base_url"] == "http://localhost:8000/v1"
        assert bench.run["policy_model_name"] == "qwen3-235b"
    assert config.driver.benchmarks["swebench"].command.startswith("python -m swebench_harness")


def test_realistic_070_config_round_trips_without_its_secret() -> None:
    config, _ = validate_config(yaml.safe_load(REALISTIC_070))
    text = yaml.safe_dump(resolved_config_dict(config))
    assert SECRET not in text
    again, _ = validate_config(yaml.safe_load(text))
    assert again == config
    assert resolved_config_dict(again) == resolved_config_dict(config)


def test_resolve_only_prints_references_and_reads_back_the_same(capsys, tmp_path) -> None:
    from nemo_gym.orchestration.cli.main import main

    first_path = tmp_path / "pd.yaml"
    first_path.write_text(REALISTIC_070)
    assert main(["eval", "submit", "-c", str(first_path), "--resolve-only"]) == 0
    first = capsys.readouterr().out
    assert SECRET not in first
    assert yaml.safe_load(first)["services"]["qwen"]["prefill"]["env"]["HF_TOKEN"] == "host:GYM_PD_HF_TOKEN"
    again_path = tmp_path / "again.yaml"
    again_path.write_text(first)
    assert main(["eval", "submit", "-c", str(again_path), "--resolve-only"]) == 0
    assert capsys.readouterr().out == first


# -- tiers: what they take from the service ------------------------------------------------------


def test_tiers_take_type_container_model_and_served_name_from_the_service(pd) -> None:
    pd["services"]["pd"]["served_model_name"] = "served"
    config = valid(pd)
    for name in ("pd-prefill", "pd-decode"):
        t = tier(config, name)
        assert (t.type, t.container, t.model, t.served_model_name) == ("vllm", "vllm:1", "m", "served")


def test_a_tiers_own_container_model_and_served_name_win(pd) -> None:
    pd["services"]["pd"]["prefill"].update(container="vllm:prefill", model="m-fp8", served_model_name="p")
    config = valid(pd)
    prefill, decode = tier(config, "pd-prefill"), tier(config, "pd-decode")
    assert (prefill.container, prefill.model, prefill.served_model_name) == ("vllm:prefill", "m-fp8", "p")
    assert (decode.container, decode.model, decode.served_model_name) == ("vllm:1", "m", None)


def test_tier_ports_default_to_service_port_plus_one_and_two(pd) -> None:
    pd["services"]["pd"]["port"] = 9000
    config = valid(pd)
    assert (tier(config, "pd-prefill").port, tier(config, "pd-decode").port) == (9001, 9002)
    pd["services"]["pd"]["decode"]["port"] = 9100
    assert tier(valid(pd), "pd-decode").port == 9100


def test_decode_rpc_port_defaults_to_prefills_plus_one(pd) -> None:
    config = valid(pd)
    assert (tier(config, "pd-prefill").data_parallel_rpc_port, tier(config, "pd-decode").data_parallel_rpc_port) == (
        13345,
        13346,
    )
    pd["services"]["pd"]["prefill"]["data_parallel_rpc_port"] = 20000
    assert tier(valid(pd), "pd-decode").data_parallel_rpc_port == 20001


def test_side_channel_ports_are_p_and_p_plus_one(pd) -> None:
    config = valid(pd)
    assert (tier(config, "pd-prefill").nixl_side_channel_port, tier(config, "pd-decode").nixl_side_channel_port) == (
        5600,
        5601,
    )


def test_server_per_node_is_copied_to_both_tiers(pd) -> None:
    pd["services"]["pd"]["server_per_node"] = True
    config = valid(pd)
    assert tier(config, "pd-prefill").server_per_node and tier(config, "pd-decode").server_per_node


def test_kv_transfer_config_per_tier(pd) -> None:
    pd["services"]["pd"].update(kv_connector="LMCacheConnectorV1", kv_load_failure_policy="recompute")
    config = valid(pd)
    for name, role in (("pd-prefill", "kv_producer"), ("pd-decode", "kv_consumer")):
        assert tier(config, name).kv_transfer_config == {
            "kv_connector": "LMCacheConnectorV1",
            "kv_role": role,
            "kv_load_failure_policy": "recompute",
        }


def test_the_router_probes_its_own_port(pd) -> None:
    pd["services"]["pd"]["port"] = 8100
    hc = valid(pd).services["pd"].health_check
    assert (hc.path, hc.port, hc.timeout_seconds) == ("/health", 8100, 60)
    pd["services"]["pd"]["health_check"] = {"path": "/v1/models", "port": 8200}
    hc = valid(pd).services["pd"].health_check
    assert (hc.path, hc.port) == ("/v1/models", 8200)


def test_tiers_method_names_the_deployed_tiers(pd) -> None:
    service = valid(pd).services["pd"]
    assert isinstance(service, VllmPDServiceConfig)
    assert list(service.tiers("pd")) == ["pd-prefill", "pd-decode"]


# -- tiers: env, mounts and pre_command (0.7.0 gives them to the router only) ---------------------


def test_tiers_inherit_env_key_by_key_the_tiers_value_winning(pd) -> None:
    pd["services"]["pd"]["env"] = {"A": "lit:service", "B": "lit:service"}
    pd["services"]["pd"]["prefill"]["env"] = {"B": "lit:prefill", "C": "runtime:NODE_VAR"}
    config = valid(pd)
    assert tier(config, "pd-prefill").env == {"A": "service", "B": "prefill", "C": "runtime:NODE_VAR"}
    assert tier(config, "pd-decode").env == {"A": "service", "B": "service"}
    assert config.services["pd"].env == {"A": "service", "B": "service"}  # the router keeps its own


def test_tiers_inherit_mounts_service_first_each_once(pd) -> None:
    pd["services"]["pd"]["mounts"] = ["/models:/models", "/data:/data:ro"]
    pd["services"]["pd"]["decode"]["mounts"] = ["/cache:/cache", "/models:/models"]
    config = valid(pd)
    assert tier(config, "pd-prefill").mounts == ["/models:/models", "/data:/data:ro"]
    assert tier(config, "pd-decode").mounts == ["/models:/models", "/data:/data:ro", "/cache:/cache"]


def test_tiers_inherit_pre_command_unless_they_set_their_own(pd) -> None:
    pd["services"]["pd"]["pre_command"] = "source /opt/site.sh"
    pd["services"]["pd"]["decode"]["pre_command"] = "ulimit -n 65536"
    config = valid(pd)
    assert tier(config, "pd-prefill").pre_command == "source /opt/site.sh"
    assert tier(config, "pd-decode").pre_command == "ulimit -n 65536"


def test_an_inherited_host_secret_stays_a_reference(pd) -> None:
    pd["services"]["pd"]["env"] = {"HF_TOKEN": "host:GYM_PD_HF_TOKEN"}
    config = valid(pd)
    for name in ("pd-prefill", "pd-decode"):
        t = tier(config, name)
        assert t.env["HF_TOKEN"] == SECRET  # the process gets the value...
        source = env_sources_of(t)["HF_TOKEN"]
        assert (source.kind, source.ref) == ("host", "GYM_PD_HF_TOKEN")  # ...output only the reference
    resolved = resolved_config_dict(config)
    assert SECRET not in yaml.safe_dump(resolved)
    for field in ("prefill", "decode"):
        assert resolved["services"]["pd"][field]["env"] == {"HF_TOKEN": "host:GYM_PD_HF_TOKEN"}


def test_a_tiers_own_host_secret_stays_a_reference_too(pd) -> None:
    pd["services"]["pd"]["decode"]["env"] = {"HF_TOKEN": "host:GYM_PD_HF_TOKEN"}
    resolved = resolved_config_dict(valid(pd))
    assert SECRET not in yaml.safe_dump(resolved)
    assert resolved["services"]["pd"]["decode"]["env"] == {"HF_TOKEN": "host:GYM_PD_HF_TOKEN"}


# -- deployment order ----------------------------------------------------------------------------


def test_deployed_services_put_each_pds_tiers_right_before_its_router(pd) -> None:
    pd["services"] = {
        "judge": {"type": "vllm", "container": "c", "model": "j", "node_pool": "router", "port": 9000},
        "pd": pd["services"]["pd"],
        "envs": {"type": "ray", "container": "ray"},
        "pd2": {**copy.deepcopy(pd["services"]["pd"]), "port": 8100},
    }
    config = valid(pd)
    assert list(config.deployed_services) == [
        "judge",
        "pd-prefill",
        "pd-decode",
        "pd",
        "envs",
        "pd2-prefill",
        "pd2-decode",
        "pd2",
    ]
    assert list(config.services) == ["judge", "pd", "envs", "pd2"]  # services keeps what was written


# -- rules ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["prefill", "decode"])
@pytest.mark.parametrize("key, value", [("server_per_node", True), ("nixl_side_channel_port", 5800)])
def test_pair_settings_are_refused_on_a_tier(pd, field, key, value) -> None:
    pd["services"]["pd"][field][key] = value
    assert problem(pd) == (
        f"services.pd.{field}.{key}: is set on the {field} tier, but it applies to both tiers together; "
        f"set {key} on the vllm_pd service itself"
    )


def test_kv_settings_on_a_tier_are_unknown_keys(pd) -> None:
    pd["services"]["pd"]["prefill"]["kv_role"] = "kv_consumer"
    assert problem(pd).startswith("services.pd.prefill.kv_role: unknown key")


def test_tier_names_must_not_collide_with_a_service(pd) -> None:
    pd["services"]["pd-decode"] = {"type": "vllm", "container": "c", "model": "m", "node_pool": "decode", "port": 9000}
    assert problem(pd) == (
        "services.pd: a vllm_pd service deploys its tiers as pd-prefill and pd-decode, but "
        "services.pd-decode already exists; rename one of the two services"
    )


def test_a_tier_needs_a_node_pool(pd) -> None:
    del pd["services"]["pd"]["prefill"]["node_pool"]
    assert problem(pd) == (
        "services.pd.prefill.node_pool: a prefill/decode tier needs nodes of its own, but none is set; "
        "pin it to one of compute 'cluster''s node pools (router, prefill, decode)"
    )


def test_a_tier_needs_a_node_pool_even_without_pools(pd) -> None:
    pd["compute"]["cluster"]["node_pools"] = {}
    for field in ("prefill", "decode"):
        del pd["services"]["pd"][field]["node_pool"]
    assert problem(pd) == (
        "services.pd.prefill.node_pool: a prefill/decode tier needs nodes of its own, but none is set; "
        "declare node_pools under compute.cluster and pin each tier to one"
    )


def test_a_tier_cannot_run_on_local_compute(pd) -> None:
    pd["compute"] = {"here": {"type": "local"}}
    for field in ("prefill", "decode"):
        del pd["services"]["pd"][field]["node_pool"]
    assert problem(pd) == (
        "services.pd.prefill.node_pool: a prefill/decode tier needs nodes of its own, but none is set; "
        "compute 'here' is local, which has no node pools; submit to a Slurm compute"
    )


def test_a_tiers_unknown_pool_names_its_yaml_path(pd) -> None:
    pd["services"]["pd"]["decode"]["node_pool"] = "gpu"
    assert problem(pd) == (
        "Service 'pd-decode' node_pool 'gpu' does not match any node pool of compute 'cluster' "
        "(router, prefill, decode); fix services.pd.decode.node_pool."
    )


def test_router_pinned_away_from_the_driver_is_refused(pd) -> None:
    pd["services"]["pd"]["node_pool"] = "decode"
    pd["services"]["judge"] = {"type": "vllm", "container": "c", "model": "j", "node_pool": "router", "port": 9000}
    pd["driver"]["policy_model"] = "judge"  # the driver runs on the judge's pool
    assert problem(pd) == (
        "services.pd.node_pool: is 'decode', but a vllm_pd service's router runs on the driver's node, "
        "which is on node pool 'router'; pin it to 'router' or remove node_pool"
    )


def test_router_pinned_away_from_the_first_pool_without_a_policy_is_refused(pd) -> None:
    pd["services"]["pd"]["node_pool"] = "prefill"
    pd["driver"]["policy_model"] = None
    assert problem(pd).startswith("services.pd.node_pool: is 'prefill', but a vllm_pd service's router")


def test_router_pinned_to_the_drivers_pool_is_fine(pd) -> None:
    pd["services"]["pd"]["node_pool"] = "router"
    assert valid(pd).services["pd"].node_pool == "router"
    # As the policy model, its pool is where the driver runs, so any pool is the driver's.
    pd["services"]["pd"]["node_pool"] = "decode"
    pd["services"]["pd"]["port"] = 8100  # beside the decode tier's 8002
    valid(pd)


def test_equal_rpc_ports_are_refused(pd) -> None:
    pd["services"]["pd"]["decode"]["data_parallel_rpc_port"] = 13345
    assert problem(pd) == (
        "services.pd.decode.data_parallel_rpc_port: the prefill and decode tiers both use "
        "data_parallel_rpc_port 13345; give decode another port (by default it is prefill's + 1), or remove it"
    )


def test_server_per_node_needs_one_instance_per_tier(pd) -> None:
    pd["services"]["pd"]["server_per_node"] = True
    pd["services"]["pd"]["decode"]["number_of_instances"] = 2
    assert problem(pd) == (
        "services.pd.decode.number_of_instances: is 2, but with server_per_node each node of the tier's pool "
        "runs one server, which is one instance; set it to 1 (or remove it), or turn server_per_node off"
    )


def test_server_per_node_checks_each_nodes_gpus(pd) -> None:
    pools = pd["compute"]["cluster"]["node_pools"]
    for pool in pools.values():
        pool.update(nodes=2, gpus_per_node=8)
    pd["services"]["pd"]["server_per_node"] = True
    pd["services"]["pd"]["prefill"]["tensor_parallel_size"] = 8
    pd["services"]["pd"]["decode"]["tensor_parallel_size"] = 8
    valid(pd)  # one 8-GPU server per node: fits, although the pool has 16 GPUs
    pd["services"]["pd"]["decode"]["tensor_parallel_size"] = 16
    assert problem(pd).startswith(
        "Service 'pd-decode' (services.pd.decode) requires 16 GPUs (tensor_parallel_size=16 x "
        "pipeline_parallel_size=1 x number_of_instances=1), which exceeds the node pool's gpus_per_node (8)"
    )


def test_a_tiers_idle_gpus_warning_names_its_path(pd) -> None:
    for pool in pd["compute"]["cluster"]["node_pools"].values():
        pool["gpus_per_node"] = 8
    pd["services"]["pd"]["decode"]["tensor_parallel_size"] = 8
    _, notes = validate_config(pd)
    assert notes == [
        "Service 'pd-prefill' (services.pd.prefill) uses 1 of 8 GPUs (tensor_parallel_size=1 x "
        "pipeline_parallel_size=1 x number_of_instances=1), leaving 7 GPU(s) idle on compute 'cluster'; "
        "raise tensor_parallel_size or number_of_instances to use them."
    ]


def test_tiers_on_one_pool_must_not_share_a_port(pd) -> None:
    pd["services"]["pd"]["decode"].update(node_pool="prefill", port=8001)
    assert problem(pd) == (
        "services.pd.decode.port and services.pd.prefill.port both use port 8001 on node pool 'prefill'; "
        "give services.pd.decode.port another value"
    )


def test_the_router_port_is_taken_on_the_drivers_pool_only(pd) -> None:
    pd["services"]["pd"]["prefill"]["port"] = 8000  # on the prefill pool: no clash with the router
    valid(pd)
    pd["services"]["pd"]["prefill"]["node_pool"] = "router"
    assert problem(pd) == (
        "services.pd.port and services.pd.prefill.port both use port 8000 on node pool 'router'; "
        "give services.pd.port another value"
    )


def test_side_channel_port_leaves_room_for_decode(pd) -> None:
    pd["services"]["pd"]["nixl_side_channel_port"] = 65535
    assert problem(pd) == (
        "services.pd.nixl_side_channel_port: 65535 leaves no TCP port for the decode tier (it uses this + 1); "
        "use 1 to 65534"
    )


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("prefill_policy", "cache aware", "'cache aware' is not a single word; write it without spaces"),
        ("log_level", "", "'' is not a single word; write it without spaces"),
        ("intra_node_data_parallel_size", 0, "must be >= 1, got 0"),
        ("request_timeout_secs", -1, "must be >= 1, got -1"),
    ],
)
def test_router_settings_nobody_could_mean(pd, key, value, message) -> None:
    pd["services"]["pd"][key] = value
    assert problem(pd) == f"services.pd.{key}: {message}"


def test_a_missing_tier_is_named(pd) -> None:
    del pd["services"]["pd"]["decode"]
    assert problems(pd) == ["services.pd.decode: required key is missing; add it"]


# -- policy model --------------------------------------------------------------------------------


def test_policy_model_names_the_router(pd) -> None:
    pd["services"]["pd"].update(port=8300, served_model_name="served")
    pd["driver"]["policy_host"] = "gpu-node-017"
    run = valid(pd).driver.benchmarks["b"].run
    assert run == {
        "policy_base_url": "http://gpu-node-017:8300/v1",
        "policy_model_name": "served",
        "policy_api_key": "dummy",
    }


def test_policy_model_cannot_name_a_tier(pd) -> None:
    pd["driver"]["policy_model"] = "pd-prefill"
    assert problem(pd) == (
        "driver.policy_model: 'pd-prefill' is a tier of vllm_pd service 'pd', whose router is the endpoint "
        "for both tiers; set driver.policy_model to 'pd'"
    )


# -- round trip ----------------------------------------------------------------------------------


def test_resolved_vllm_pd_config_validates_to_the_same_object(pd) -> None:
    svc = pd["services"]["pd"]
    svc.update(
        env={"HF_TOKEN": "host:GYM_PD_HF_TOKEN", "MODE": "lit:pd"},
        mounts=["/models:/models"],
        pre_command="source /opt/site.sh",
        server_per_node=True,
        nixl_side_channel_port=6000,
    )
    svc["prefill"].update(env={"MODE": "lit:prefill"}, port=8050, tensor_parallel_size=2)
    svc["decode"].update(mounts=["/cache:/cache"], data_parallel_rpc_port=14000)
    pd["driver"]["benchmarks"]["cmd"] = {"command": "echo $NEMO_GYM_POLICY_BASE_URL"}
    config = valid(pd)
    resolved = resolved_config_dict(config)
    dumped = yaml.safe_dump(resolved)
    # What the tiers are built with stays private: only what a user writes is in the output.
    assert "kv_transfer_config" not in dumped and "_tiers" not in dumped and SECRET not in dumped
    again = valid(yaml.safe_load(dumped))
    assert again == config
    assert again.deployed_services == config.deployed_services
    assert resolved_config_dict(again) == resolved


def test_unknown_service_type_lists_vllm_pd(pd) -> None:
    pd["services"]["pd"]["type"] = "vllm-pd"
    assert problem(pd) == "services.pd.type: 'vllm-pd' is not a known type; use one of: vllm, ray, vllm_pd"


def test_the_tier_class_is_never_written_by_users(pd) -> None:
    # A tier is a plain vllm entry; the deployed tier's own fields cannot be set on a vllm service.
    pd["services"]["solo"] = {
        "type": "vllm",
        "container": "c",
        "model": "m",
        "node_pool": "decode",
        "port": 9000,
        "kv_transfer_config": {},
    }
    assert problem(pd).startswith("services.solo.kv_transfer_config: unknown key")
    assert api.VllmPDTierConfig.model_fields["kv_transfer_config"].is_required()
