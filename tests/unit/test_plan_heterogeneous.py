"""Pools that differ make one heterogeneous Slurm job: one component per pool, every step in its
pool's component, addresses across components by the global node list."""

from __future__ import annotations

import copy
import warnings

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.plan.building import build_plan

HET = {
    "services": {
        "policy": {"type": "vllm", "container": "v", "model": "big", "node_pool": "gpu", "tensor_parallel_size": 4},
        "judge": {"type": "vllm", "container": "v", "model": "small", "port": 8001, "node_pool": "small"},
        "envs": {"type": "ray", "container": "r", "node_pools": ["cpu"]},
    },
    "compute": {
        "c": {
            "type": "slurm",
            "account": "a",
            "walltime": "1:00:00",
            "extra_args": {"exclusive": ""},
            "node_pools": {
                "gpu": {"partition": "debug", "nodes": 2, "gpus_per_node": 4},
                "small": {"partition": "small", "nodes": 1, "gpus_per_node": 1},
                "cpu": {"partition": "cpu", "nodes": 1, "ntasks_per_node": 2},
            },
        }
    },
    "driver": {"policy_model": "policy", "benchmarks": {"b": {}}},
    "job": {"output_path": "/runs"},
    "otel": {"enabled": False},
}


def job_of(data: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_plan(SubmitConfig.model_validate(data), "gym-job-20260101T000000Z-000000").jobs[0]


def test_one_component_per_pool_with_the_job_wide_options_in_the_first() -> None:
    job = job_of(copy.deepcopy(HET))
    first, small, cpu = (dict(component) for component in job.directives)
    assert first["job-name"] == "gym-b" and first["time"] == "1:00:00" and "job-name" not in small
    assert (first["partition"], first["nodes"], first["gpus-per-node"]) == ("debug", "2", "4")
    assert (small["partition"], small["nodes"], small["gpus-per-node"]) == ("small", "1", "1")
    assert (cpu["partition"], cpu["ntasks-per-node"]) == ("cpu", "2") and "gpus-per-node" not in cpu
    assert all(component["exclusive"] is None for component in (first, small, cpu))
    assert job.component_pools == ("gpu", "small", "cpu") and job.gpus == 2 * 4 + 1


def test_every_step_runs_in_its_pools_component_and_is_told_whether_it_has_gpus() -> None:
    job = job_of(copy.deepcopy(HET))
    launches = {step.name: step.launch for step in job.steps}
    assert {name: launch.component for name, launch in launches.items()} == {
        "policy": 0,
        "judge": 1,
        "envs": 0,
        "envs_cpu_workers": 2,  # the Ray head beside the driver
    }
    assert launches["judge"].gpus and not launches["envs_cpu_workers"].gpus
    assert job.driver.launch.component == 0 and job.driver.node == 0
    urls = {url.service: (url.node, url.port) for url in job.service_urls}
    assert urls == {"policy": (0, 8000), "judge": (2, 8001)}  # the judge's node is the third of the job


def test_pools_that_agree_keep_one_component_and_no_het_groups() -> None:
    data = copy.deepcopy(HET)
    pools = data["compute"]["c"]["node_pools"]
    pools["small"] = {"partition": "debug", "nodes": 1, "gpus_per_node": 4}
    del pools["cpu"]
    data["services"]["envs"]["node_pools"] = ["small"]
    data["services"]["judge"]["tensor_parallel_size"] = 4
    job = job_of(data)
    [component] = job.directives
    assert dict(component)["nodes"] == "3" and job.component_pools == ()
    assert all(step.launch.component is None for step in job.steps)
