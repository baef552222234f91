"""The plan of 0.7.0's shapes: prefill/decode tiers and their router, command benchmarks, the
policy host read on the node, gym telemetry — decisions checked as data."""

from __future__ import annotations

import copy
import warnings

import pytest

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.plan.model import PlainStep, VllmDataParallelStep, VllmRouterStep
from nemo_gym.orchestration.validate import validate_config

PD = {
    "services": {
        "pd": {
            "type": "vllm_pd",
            "container": "c",
            "model": "m",
            "prefill": {"node_pool": "p"},
            "decode": {"node_pool": "d", "number_of_instances": 2},
        }
    },
    "compute": {
        "cluster": {
            "type": "slurm",
            "account": "a",
            "node_pools": {
                "p": {"partition": "x", "nodes": 1, "gpus_per_node": 1},
                "d": {"partition": "x", "nodes": 2, "gpus_per_node": 1},
            },
        }
    },
    "driver": {"policy_model": "pd", "benchmarks": {"b": {}}},
    "job": {"output_path": "/runs"},
    "otel": {"enabled": False},
}


def plan_of(data: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_plan(SubmitConfig.model_validate(data), "gym-job-20260101T000000Z-000000")


def steps(data: dict) -> dict:
    return {step.name: step for step in plan_of(data).jobs[0].steps}


def test_tiers_come_before_their_router_which_lists_each_tier_head() -> None:
    planned = steps(copy.deepcopy(PD))
    assert list(planned) == ["pd-prefill", "pd-decode", "pd"]
    prefill, decode, router = planned.values()
    assert isinstance(prefill, PlainStep) and isinstance(decode, VllmDataParallelStep)
    assert isinstance(router, VllmRouterStep)
    assert router.prefill == ((0, 8001),) and router.decode == ((1, 8002),)  # the tier heads' nodes
    assert router.nodes.start == 0 and router.health.port == 8000  # beside the driver, probed on its port
    assert {v.key: v.kind for v in prefill.env}["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "node-address"
    assert decode.argv[decode.argv.index("--data-parallel-rpc-port") + 1] == "13346"


def test_one_server_per_node_is_probed_and_listed_on_every_node() -> None:
    data = copy.deepcopy(PD)
    data["services"]["pd"]["server_per_node"] = True
    data["services"]["pd"]["decode"].pop("number_of_instances")
    planned = steps(data)
    assert planned["pd-decode"].health.nodes == (1, 2) and isinstance(planned["pd-decode"], PlainStep)
    assert planned["pd"].decode == ((1, 8002), (2, 8002))


def test_each_router_gets_its_own_metrics_port_and_a_clash_with_it_is_refused() -> None:
    data = copy.deepcopy(PD)
    data["services"]["pd2"] = {**copy.deepcopy(data["services"]["pd"]), "port": 9000}
    data["services"]["pd2"]["prefill"]["port"] = 9001
    data["services"]["pd2"]["decode"]["port"] = 9002
    data["services"]["pd2"]["nixl_side_channel_port"] = 5700
    data["services"]["pd2"]["decode"]["data_parallel_rpc_port"] = 13400
    data["services"]["pd2"]["prefill"]["data_parallel_rpc_port"] = 13399
    planned = steps(data)
    assert (planned["pd"].metrics_port, planned["pd2"].metrics_port) == (29000, 29001)
    data["services"]["pd2"]["port"] = 29000
    with pytest.raises(UserError, match="both use port 29000 on node pool 'p'"):
        validate_config(data)


def test_command_env_wins_over_driver_env_which_wins_over_telemetry() -> None:
    data = copy.deepcopy(PD)
    data["driver"]["gym_install"] = {"ref": "v0.7.0"}
    data["driver"]["env"] = {"NEMO_GYM_OTEL_RUN_ID": "lit:mine", "NEMO_GYM_BENCH_DIR": "lit:not this"}
    data["driver"]["benchmarks"] = {"b": {"command": "true"}}
    data["otel"] = {"endpoint": "https://otel.example.com", "service_name": "s"}
    driver = plan_of(data).jobs[0].driver
    env = {var.key: var.value for var in driver.env}
    assert env["NEMO_GYM_OTEL_RUN_ID"] == "mine" and env["NEMO_GYM_OTEL_ENABLED"] == "1"
    assert env["NEMO_GYM_BENCH_DIR"] == "/runs/gym-job-20260101T000000Z-000000/b"
    assert env["NEMO_GYM_POLICY_BASE_URL"] == "http://localhost:8000/v1"
    assert driver.run_argv == () and driver.command == "true" and driver.gym_extras == "telemetry"


def test_a_policy_host_read_on_the_node_is_left_to_the_driver() -> None:
    data = copy.deepcopy(PD)
    data["driver"]["policy_host"] = "runtime:HEAD_NODE_IP"
    driver = plan_of(data).jobs[0].driver
    assert driver.policy_host_variable == "HEAD_NODE_IP"
    assert any("//runtime:HEAD_NODE_IP:8000/v1" in arg for arg in driver.run_argv)
