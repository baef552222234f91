"""Sharded benchmarks on the real local Slurm cluster, with the stand-in vLLM and gym (they speak
gym 0.7.0's commands for it: dataset collate, eval run on a prepared slice, env start, eval
aggregate): each shard a task of one job array with its own deployment, given a disjoint slice of
the prepared inputs; the last to finish merges them; status, results and cancel see one benchmark."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import left_in_squeue, standin_records

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def sharded_config(cluster_run, tasks: int, shards: int = 3, **run: object) -> dict:
    return cluster_run.config(
        services={"policy": {"type": "vllm", "model": "/models/tiny", "served_model_name": "tiny"}},
        benchmarks={"math": {"shards": shards, "run": {"standin_rollouts": tasks, **run}}},
        driver={"policy_model": "policy"},
    )


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_three_shards_are_three_array_tasks_each_given_a_disjoint_third_and_merged_complete(cluster_run) -> None:
    record = cluster_run.submit(sharded_config(cluster_run, tasks=9))
    [bench] = record["benchmarks"]
    ids = [shard["job_id"] for shard in bench["shards"]]
    array = ids[0].split("_")[0]
    assert ids == [f"{array}_{i}" for i in range(3)] and bench["job_id"] is None
    job = cluster_run.wait_for("math", {"succeeded", "failed", "incomplete", "unknown", "cancelled"}, timeout=240)
    assert job["state"] == "succeeded", job
    assert (job["samples"], job["expected_samples"], job["complete"]) == (9, 9, True)
    assert [shard["state"] for shard in job["shards"]] == ["succeeded"] * 3
    for k, shard in enumerate(bench["shards"], 1):
        # Each shard ran gym on its own slice: the tasks k-1, k+2, k+5 of the 9, by their global index.
        written = rows(Path(shard["job_dir"], "artifacts", "rollouts.jsonl"))
        assert [r["_ng_task_index"] for r in written] == [k - 1, k + 2, k + 5]
        [served] = standin_records(shard["job_dir"], "vllm")
        assert served["env"]["SLURM_JOB_ID"]  # a deployment of its own, on its own node
    hosts = {standin_records(s["job_dir"], "vllm")[0]["host"] for s in bench["shards"]}
    assert len(hosts) == 3
    # One shard merged them all, with gym eval aggregate, into the benchmark's own directory.
    merges = [r for s in bench["shards"] for r in standin_records(s["job_dir"], "gym-aggregate")]
    assert len(merges) == 1 and len(merges[0]["shards"]) == 3
    merged = rows(Path(bench["job_dir"], "artifacts", "rollouts.jsonl"))
    assert [r["_ng_task_index"] for r in merged] == list(range(9))
    proc = cluster_run.cli("results", record["gym_job_id"])
    assert proc.returncode == 0, proc.stderr
    [line] = [line for line in proc.stdout.splitlines() if line.startswith("math")]
    assert line.split()[:3] == ["math", "succeeded", "9/9"], proc.stdout
    sacct = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", array, "-o", "JobID,State"], capture_output=True, text=True
    ).stdout.split()
    assert sorted(sacct) == sorted(f"{i}|COMPLETED" for i in ids) or not sacct  # without accounting: nothing


def test_a_failed_shard_fails_the_benchmark_with_its_reason_and_nothing_is_merged(cluster_run) -> None:
    config = sharded_config(cluster_run, tasks=4, shards=2)
    config["driver"]["benchmarks"]["math"]["run"]["standin_fail_shard"] = 2  # its driver fails, rows listed
    record = cluster_run.submit(config)
    job = cluster_run.wait_for("math", {"succeeded", "failed", "incomplete", "unknown", "cancelled"}, timeout=240)
    assert job["state"] == "failed", job
    assert "1 of 2 shards succeeded; shard 2 failed" in job["detail"]
    [bench] = record["benchmarks"]
    assert not Path(bench["job_dir"], "artifacts", "rollouts.jsonl").exists()
    # Its samples are the shards' own, counted across them.
    assert (job["samples"], job["expected_samples"]) == (2, 4)


def test_cancel_of_a_sharded_benchmark_cancels_every_shard(cluster_run) -> None:
    record = cluster_run.submit(sharded_config(cluster_run, tasks=3, standin_rollout_seconds=60))
    cluster_run.wait_for("math", {"running"}, timeout=120)
    proc = cluster_run.cli("cancel", record["gym_job_id"])
    assert proc.returncode == 0, proc.stderr
    job = cluster_run.wait_for("math", {"cancelled", "failed", "succeeded"}, timeout=60)
    assert job["state"] == "cancelled", job
    assert [shard["state"] for shard in job["shards"]] == ["cancelled"] * 3
    # scancel only asks: a shard may be "completing" a few seconds while its processes are killed.
    shards = {s["job_id"] for s in record["benchmarks"][0]["shards"]}
    assert not left_in_squeue(shards, within_seconds=60)


def test_a_shard_that_failed_is_resubmitted_alone_and_then_merges_them_all(cluster_run, tmp_path) -> None:
    """One shard's model server fails to start (the stand-in, once: whichever shard starts it first);
    the benchmark fails once the other has ended; gym eval resubmit queues that shard alone, which
    finishes its slice and, every shard done now, merges them."""
    from test_resubmit import fails_once, resubmit

    model = tmp_path / "ckpt"
    model.mkdir()
    config = sharded_config(cluster_run, tasks=6, shards=2)
    config["services"]["policy"]["model"] = fails_once(model)
    record = cluster_run.submit(config)
    [bench] = record["benchmarks"]
    failed = cluster_run.wait_for("math", {"succeeded", "failed", "incomplete", "unknown", "cancelled"}, timeout=240)
    assert failed["state"] == "failed" and "1 of 2 shards succeeded" in failed["detail"], failed
    [k] = [i for i, shard in enumerate(failed["shards"], 1) if shard["state"] == "failed"]
    assert failed["shards"][k - 1]["attempt_history"][0]["cause"] == "startup-failed"
    rc, answer = resubmit(cluster_run, record["gym_job_id"])
    queued = [(b["benchmark"], b["job_id"]) for run in answer["runs"] for b in run["benchmarks"] if b["job_id"]]
    assert rc == 0 and [unit for unit, _ in queued] == [f"math@{k}"], answer
    done = cluster_run.wait_for("math", {"succeeded", "failed", "incomplete", "unknown", "cancelled"}, timeout=240)
    assert done["state"] == "succeeded" and (done["samples"], done["expected_samples"]) == (6, 6), done
    assert done["shards"][k - 1]["job_id"] == queued[0][1]
    merged = rows(Path(bench["job_dir"], "artifacts", "rollouts.jsonl"))
    assert [r["_ng_task_index"] for r in merged] == list(range(6))
