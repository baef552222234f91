"""GPU-hours and wall time on the real local Slurm cluster, which keeps no accounting: each job's
own start/end record times the GPUs the plan gave it, in status and results alike. (With
accounting the source is sacct; that path runs against the fake Slurm in tests/unit, since this
test bed has no slurmdbd.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def events(job_dir: str, job_id: str) -> dict[str, float]:
    out = {}
    for line in Path(job_dir, ".gym", job_id, "events").read_text().splitlines():
        stamp, _, event = line.partition(" ")
        out[event] = float(stamp)
    return out


def test_gpu_hours_without_accounting_are_the_jobs_own_times_the_planned_gpus(cluster_run) -> None:
    assert "accounting storage is disabled" in subprocess.run(["sacct", "-n"], capture_output=True, text=True).stderr
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "/models/tiny", "served_model_name": "tiny"}},
        pools={"gpu": {"partition": "debug", "nodes": 1, "gpus_per_node": 4}},
        benchmarks={"a": {"run": {"standin_rollouts": 5}}},
    )
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
