"""`gym eval status | logs | cancel | results` on the real local cluster, with faults injected.
The cluster runs without accounting (no sacct), as many do: status must stay true without it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import STANDIN_PATH

from nemo_gym.orchestration import contract

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def slow_driver(seconds: int) -> dict:
    return {"policy_model": "policy", "env": {"PATH": STANDIN_PATH, "STANDIN_DRIVER_SECONDS": f"lit:{seconds}"}}


def test_status_follows_a_job_from_queued_to_succeeded(cluster_run) -> None:
    config = cluster_run.config(services={"policy": {"type": "vllm", "model": "m"}}, driver=slow_driver(4))
    [job] = cluster_run.submit(config)["benchmarks"]
    seen = {cluster_run.wait_for("bench", {"running"})["detail"]}
    assert any("driver running" in d for d in seen)
    final = cluster_run.wait_for("bench", {"succeeded", "failed"}, timeout=60)
    assert final["state"] == "succeeded" and final["rollouts"] == 3
    results = cluster_run.cli("results", "--last", "--json")
    assert '"samples": 3' in results.stdout


def test_cancel_while_starting(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m", "health_check": {"path": "/never", "timeout_seconds": 300}}}
    )
    cluster_run.submit(config)
    deadline = time.monotonic() + 60
    while (job := cluster_run.status()["bench"])["detail"] != "waiting for policy":
        assert time.monotonic() < deadline and job["state"] in ("queued", "starting"), job
        time.sleep(0.3)
    assert job["state"] == "starting"
    cancel = cluster_run.cli("cancel", "--last")
    assert cancel.returncode == 0 and "cancelled bench" in cancel.stdout
    job = cluster_run.wait_for("bench", {"cancelled", "failed", "unknown"}, timeout=30)
    assert job["state"] == "cancelled", job


def test_cancel_while_running_and_cancel_again(cluster_run) -> None:
    config = cluster_run.config(services={"policy": {"type": "vllm", "model": "m"}}, driver=slow_driver(300))
    cluster_run.submit(config)
    cluster_run.wait_for("bench", {"running"})
    assert cluster_run.cli("cancel", "--last", "bench").returncode == 0
    job = cluster_run.wait_for("bench", {"cancelled", "failed", "unknown"}, timeout=30)
    assert job["state"] == "cancelled", job
    again = cluster_run.cli("cancel", "--last")
    assert "already cancelled, nothing to cancel" in again.stdout


def test_service_killed_mid_run_is_named_in_status(cluster_run) -> None:
    config = cluster_run.config(
        services={
            "policy": {"type": "vllm", "model": "m", "env": {"PATH": STANDIN_PATH, "STANDIN_DIE_AFTER": "lit:3"}}
        },
        driver=slow_driver(300),
    )
    cluster_run.submit(config)
    job = cluster_run.wait_for("bench", {"failed", "succeeded"}, timeout=60)
    assert job["state"] == "failed"
    assert job["detail"] == "service policy died on node n1 (exit status 7)"
    log = cluster_run.cli("logs", "--last", "--service", "policy")
    assert "dying as asked" in log.stdout


def test_sbatch_refusal_shows_in_status(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}}, pools={"gpu": {"partition": "nosuchpartition"}}
    )
    cluster_run.submit(config, expect_rc=1)
    job = cluster_run.status()["bench"]
    assert job["state"] == "failed" and job["detail"].startswith("sbatch refused:")
    assert "invalid partition" in job["detail"].lower()


def test_walltime_reached_is_timed_out(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}}, driver=slow_driver(600), compute={"walltime": "1"}
    )
    cluster_run.submit(config)
    job = cluster_run.wait_for("bench", {"timed out", "failed", "succeeded", "unknown"}, timeout=200)
    assert job["state"] == "timed out", job
    assert job["detail"] == "walltime reached (00:01:00)"


def test_logs_follow_while_the_job_writes_them(cluster_run) -> None:
    config = cluster_run.config(services={"policy": {"type": "vllm", "model": "m"}}, driver=slow_driver(5))
    cluster_run.submit(config)
    cluster_run.wait_for("bench", {"starting", "running"})
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "logs", "--last", "-f"],
        capture_output=True,
        text=True,
        timeout=90,
        env={**__import__("os").environ, "XDG_CACHE_HOME": str(cluster_run.tmp_path / "cache")},
    )
    assert proc.returncode == 0, proc.stderr
    assert "waiting for policy" in proc.stdout or "policy is healthy" in proc.stdout
    assert "job finished with status 0" in proc.stdout  # it kept printing until the end
    assert time.monotonic() - start < 60  # and then stopped by itself


def test_shared_deployment_on_the_cluster_one_job_each_benchmark_its_own_status(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        driver=slow_driver(1),
        benchmarks={"a": {}, "b": {"run": {"standin_fail": True}}, "c": {}},
    )
    config["job"].update(deployment="shared", benchmarks_at_once=2)
    record = cluster_run.submit(config)
    [job_id] = {b["job_id"] for b in record["benchmarks"]}
    fields = cluster_run.wait(job_id)
    assert fields["JobState"] == "FAILED"  # one benchmark failed, so the job says so...
    status = cluster_run.status()
    assert {b: j["state"] for b, j in status.items()} == {"a": "succeeded", "b": "failed", "c": "succeeded"}
    assert status["c"]["rollouts"] == 3  # ...but the others ran to the end
    results = cluster_run.cli("results", "--last", "--json")
    samples = {b["benchmark"]: b["samples"] for b in json.loads(results.stdout)["benchmarks"]}
    assert samples == {"a": 3, "b": 0, "c": 3}


def test_a_node_going_away_mid_run_is_reported_as_a_node_failure(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m", "number_of_instances": 2}},
        pools={"gpu": {"partition": "debug", "nodes": 2, "gpus_per_node": 4}},
        driver=slow_driver(300),
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    cluster_run.wait_for("bench", {"running"})
    nodes = subprocess.run(["squeue", "-h", "-j", job["job_id"], "-o", "%N"], capture_output=True, text=True).stdout
    lost = subprocess.run(
        ["scontrol", "show", "hostnames", nodes.strip()], capture_output=True, text=True
    ).stdout.split()[-1]
    subprocess.run(["scontrol", "update", f"nodename={lost}", "state=down", "reason=gym-test-node-lost"], check=True)
    try:
        # Slurm requeues a job whose node failed (the default); others would end it NODE_FAIL.
        deadline = time.monotonic() + 60
        while True:
            status = cluster_run.status()["bench"]
            if status["state"] in ("failed", "queued") and (
                "node" in status["detail"] or "requeued" in status["detail"]
            ):
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.5)
    finally:
        subprocess.run(["scontrol", "update", f"nodename={lost}", "state=resume"])
    assert (
        status["detail"].startswith("requeued by Slurm after a node failure")
        or status["detail"] == "a node failed (NODE_FAIL)"
    )


def test_a_requeued_job_starts_clean_and_succeeds(cluster_run) -> None:
    """Same job id, second attempt: the first attempt's exit markers must not fail it."""
    config = cluster_run.config(services={"policy": {"type": "vllm", "model": "m"}}, driver=slow_driver(6))
    [job] = cluster_run.submit(config)["benchmarks"]
    cluster_run.wait_for("bench", {"running"})
    subprocess.run(["scontrol", "requeue", job["job_id"]], check=True)
    time.sleep(1)
    final = cluster_run.wait_for("bench", {"succeeded", "failed"}, timeout=300)  # Slurm holds a requeue for cred_expire
    assert final["state"] == "succeeded", final
    attempts = sorted(p.name for p in (Path(job["job_dir"]) / ".gym").iterdir() if p.is_dir())
    assert attempts == [job["job_id"], f"{job['job_id']}.attempt-1"]
    # Each attempt recorded what it ran (the stand-ins' versions), the last one's line last.
    made = (Path(job["job_dir"]) / contract.PROVENANCE_FILE).read_text().splitlines()
    assert made[-2:] == ["vllm_version.policy=0.0.0+standin", "gym_version=NeMo Gym stand-in v0.0.0"], made
