"""Pools that differ run as one heterogeneous Slurm job on the local cluster, whose nodes differ
as a real site's do: n1-n3 with 4 GPUs (partition debug), n4 with 1 (small), n5 with none (cpu).
The services and the driver are the recording stand-ins (no GPU, no image here)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from conftest import STANDIN_PATH, job_fields, standin_records

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

POOLS = {
    "gpu": {"partition": "debug", "nodes": 1, "gpus_per_node": 4},
    "judge": {"partition": "small", "nodes": 1, "gpus_per_node": 1},
    "cpu": {"partition": "cpu", "nodes": 1},
}
SERVICES = {
    "policy": {"type": "vllm", "model": "big", "node_pool": "gpu", "tensor_parallel_size": 4},
    "judge": {"type": "vllm", "model": "small", "port": 8001, "node_pool": "judge"},
    "envs": {"type": "ray", "node_pools": ["cpu"]},
}


def het_config(cluster_run, benchmarks: dict, **driver_env: str) -> dict:
    env = {
        "PATH": STANDIN_PATH,
        "GYM_TEST_JUDGE_URL": "runtime:GYM_SERVICE_URL_JUDGE",
        "RAY_ADDRESS": "runtime:GYM_RAY_ADDRESS_ENVS",
        **{k: f"lit:{v}" for k, v in driver_env.items()},
    }
    return cluster_run.config(
        services=json.loads(json.dumps(SERVICES)),
        pools=POOLS,
        benchmarks=benchmarks,
        driver={"policy_model": "policy", "env": env},
        compute={"walltime": "1"},
    )


def test_a_policy_a_judge_and_cpu_workers_run_as_one_heterogeneous_job_that_resumes(cluster_run) -> None:
    """60 rollouts at 2 s each outlast the 1-minute walltime even though Slurm enforces limits only
    every 30 s: the heterogeneous job times out, its successor (a heterogeneous job too) resumes and
    finishes. Each step ran on its component's node with its component's GPUs, and the driver
    reached the judge on another component."""
    rollouts = 60
    config = het_config(
        cluster_run, {"bench": {"resumable": True, "run": {"standin_rollouts": rollouts, "standin_rollout_seconds": 2}}}
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    running = cluster_run.wait_for("bench", {"running"}, timeout=60)
    first = running["job_id"]
    components = [
        line for line in Path(job["job_dir"], f"slurm-{first}.out").read_text().splitlines() if "nodes" in line
    ]
    assert job_fields(first).get("HetJobId") == first, job_fields(first)  # Slurm's own word: heterogeneous
    final = cluster_run.wait_for("bench", {"succeeded", "failed", "cancelled", "timed out", "unknown"}, timeout=300)
    assert final["state"] == "succeeded", (final, components)
    assert len(final["chain"]) >= 2 and final["chain"][0] == first
    cluster_run.job_ids += final["chain"][1:]
    assert job_fields(first)["JobState"] == "TIMEOUT"
    for record in standin_records(job["job_dir"], "vllm"):
        model, host, gpus = record["argv"][1], record["host"], record["env"].get("CUDA_VISIBLE_DEVICES")
        assert (model, host, gpus) in {("big", "n1", "0,1,2,3"), ("small", "n4", "0")}, record
    workers = [r for r in standin_records(job["job_dir"], "ray") if "--head" not in r["argv"]]
    assert workers and {r["host"] for r in workers} == {"n5"}
    assert all(not r["env"].get("CUDA_VISIBLE_DEVICES") for r in workers)  # the CPU pool has no GPU
    drivers = standin_records(job["job_dir"], "gym-run")
    assert {r["host"] for r in drivers} == {"n1"}
    assert all(r["env"]["GYM_TEST_JUDGE_URL"] == "http://198.18.0.14:8001/v1" for r in drivers)  # n4's address
    rows = Path(job["job_dir"], "artifacts", "rollouts.jsonl").read_text().splitlines()
    assert len(rows) == rollouts


def test_cancel_stops_every_component_of_a_heterogeneous_job(cluster_run) -> None:
    config = het_config(cluster_run, {"bench": {}}, STANDIN_DRIVER_SECONDS="120")
    [job] = cluster_run.submit(config)["benchmarks"]
    cluster_run.wait_for("bench", {"running"}, timeout=60)
    proc = cluster_run.cli("cancel", "--last")
    assert proc.returncode == 0 and "cancelled bench" in proc.stdout, proc.stderr
    deadline = time.monotonic() + 30
    # scontrol prints one line per component of a heterogeneous job (the leader's id shows them all).
    while any(state not in ("CANCELLED", "COMPLETED", "FAILED") for state in component_states(job["job_id"]).values()):
        assert time.monotonic() < deadline, component_states(job["job_id"])
        time.sleep(0.5)
    states = component_states(job["job_id"])
    assert len(states) == 3 and set(states.values()) == {"CANCELLED"}, states  # every component, not only the leader
    seen = cluster_run.status()["bench"]
    assert seen["state"] == "cancelled", (seen, states)


def component_states(job_id: str) -> dict[str, str]:
    """Each component's JobId -> its JobState, as scontrol shows the heterogeneous job."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True).stdout
    fields = [dict(t.split("=", 1) for t in line.split() if "=" in t) for line in out.splitlines() if line.strip()]
    return {f["JobId"]: f.get("JobState", "") for f in fields if "JobId" in f}
