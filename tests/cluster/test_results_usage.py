"""GPU-hours and wall time on the real local Slurm cluster, in status and results alike. Its
controller keeps accounts in a real slurmdbd, which the default client configuration does not name
(as on a site without accounting): there, each job's own start/end record times the GPUs the plan
gave it. Seen through LOCAL_SLURM_ACCOUNTING_CONF, the same cluster answers sacct, and the source is
Slurm's own elapsed time and allocated GPUs."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def events(job_dir: str, job_id: str) -> dict[str, float]:
    out = {}
    for line in Path(job_dir, ".gym", job_id, "events").read_text().splitlines():
        stamp, _, event = line.partition(" ")
        out[event] = float(stamp)
    return out


def four_gpu_config(cluster_run) -> dict:
    return cluster_run.config(
        services={"policy": {"type": "vllm", "model": "/models/tiny", "served_model_name": "tiny"}},
        pools={"gpu": {"partition": "debug", "nodes": 1, "gpus_per_node": 4}},
        benchmarks={"a": {"run": {"standin_rollouts": 5}}},
    )


def test_gpu_hours_without_accounting_are_the_jobs_own_times_the_planned_gpus(cluster_run) -> None:
    assert "accounting storage is disabled" in subprocess.run(["sacct", "-n"], capture_output=True, text=True).stderr
    config = four_gpu_config(cluster_run)
    record = cluster_run.submit(config)
    [job] = record["benchmarks"]
    assert job["gpus"] == 4
    assert cluster_run.wait(job["job_id"])["JobState"] == "COMPLETED"
    times = events(job["job_dir"], job["job_id"])
    wall = times["job-end 0"] - times["job-start"]
    assert wall > 0
    status = json.loads(cluster_run.cli("status", "--last", "--json").stdout)
    [probed] = status["jobs"]
    assert probed["state"] == "succeeded"
    assert (probed["gpus"], probed["usage_source"], probed["usage_approximate"]) == (4, "job record", False)
    assert probed["wall_seconds"] == round(wall, 1)
    assert probed["gpu_hours"] == round(4 * wall / 3600, 4)
    assert status["gpu_hours"] == probed["gpu_hours"] and status["wall_seconds"] == probed["wall_seconds"]
    shown = cluster_run.cli("results", "--last", "--json")
    result = json.loads(shown.stdout)
    assert result["gpu_hours"] == probed["gpu_hours"] and result["benchmarks"][0]["gpu_hours"] == probed["gpu_hours"]
    table = cluster_run.cli("status", "--last").stdout
    assert f"Total: {4 * wall / 3600:.2f} GPU-hours" in table


def accounted(job_id: str, timeout: float = 30) -> tuple[int, str]:
    """Slurm's own elapsed seconds and allocated TRES of a finished job, once slurmdbd has it."""
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,ElapsedRaw,AllocTRES"],
            capture_output=True,
            text=True,
        ).stdout.split()
        if out and out[0].startswith("COMPLETED"):
            _, elapsed, tres = out[0].split("|")
            return int(elapsed), tres
        assert time.monotonic() < deadline, f"slurmdbd never recorded job {job_id} as completed: {out}"
        time.sleep(0.5)


def test_gpu_hours_with_accounting_are_slurms_elapsed_time_times_the_allocated_gpus(cluster_run, monkeypatch) -> None:
    monkeypatch.setenv("SLURM_CONF", os.environ["LOCAL_SLURM_ACCOUNTING_CONF"])  # status and results see sacct
    record = cluster_run.submit(four_gpu_config(cluster_run))
    [job] = record["benchmarks"]
    assert cluster_run.wait(job["job_id"])["JobState"] == "COMPLETED"
    elapsed, tres = accounted(job["job_id"])
    assert "gres/gpu=4" in tres.split(","), tres  # Slurm's word on the GPUs, not the plan's
    status = json.loads(cluster_run.cli("status", "--last", "--json").stdout)
    [probed] = status["jobs"]
    assert probed["state"] == "succeeded"
    assert (probed["gpus"], probed["usage_source"], probed["usage_approximate"]) == (4, "accounting", False), probed
    assert probed["wall_seconds"] == elapsed
    assert probed["gpu_hours"] == round(4 * elapsed / 3600, 4)
    result = json.loads(cluster_run.cli("results", "--last", "--json").stdout)
    assert result["benchmarks"][0]["gpu_hours"] == probed["gpu_hours"] == result["gpu_hours"]
