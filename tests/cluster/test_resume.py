"""Resumable benchmarks on the real local cluster (no accounting, so no sacct): a job cut short is
followed by the job it queued, which continues from the rollouts on disk, and every chain ends.
The model service and the driver are stand-ins (no GPU, no model here); Slurm, its walltime
enforcement, dependencies, scancel and the job scripts are real."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

import pytest
from conftest import STANDIN_PATH, job_fields, standin_records

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def driver(**env: str) -> dict:
    return {"policy_model": "policy", "env": {"PATH": STANDIN_PATH, **{k: f"lit:{v}" for k, v in env.items()}}}


def chain_records(job_dir: str) -> list[list[str]]:
    path = Path(job_dir, ".gym", "chain")
    return [line.split("\t") for line in path.read_text().splitlines()] if path.exists() else []


def wait_final(cluster_run, timeout: float) -> dict:
    job = cluster_run.wait_for("bench", {"succeeded", "failed", "cancelled", "timed out", "unknown"}, timeout=timeout)
    # Nothing of the chain may still be queued or running once status calls it final.
    time.sleep(2)
    for job_id in job["chain"]:
        assert job_fields(job_id).get("JobState") not in ("PENDING", "RUNNING"), (job_id, job)
    return job


SECRET = "s3cr3t-resume-value"


def test_a_job_cut_by_its_walltime_resumes_from_its_rollouts_and_finishes(cluster_run, monkeypatch) -> None:
    """60 rollouts at 2 s each cannot fit a 1-minute walltime: the first job times out part way,
    its successor resumes from the rows on disk (gym's resume_from_cache) and completes them. A
    host: secret reaches the successor too, through the environment, never through a file."""
    monkeypatch.setenv("GYM_TEST_RESUME_SECRET", SECRET)
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        benchmarks={"bench": {"resumable": True, "run": {"standin_rollouts": 60, "standin_rollout_seconds": 2}}},
        driver=driver(),
        compute={"walltime": "1"},
    )
    config["driver"]["env"]["STANDIN_SECRET"] = "host:GYM_TEST_RESUME_SECRET"
    [job] = cluster_run.submit(config)["benchmarks"]
    seen = set()
    deadline = time.monotonic() + 420
    while True:
        status = cluster_run.status()["bench"]
        seen.add((status["state"], status["detail"]))
        if status["state"] in ("succeeded", "failed", "cancelled", "timed out", "unknown"):
            break
        assert time.monotonic() < deadline, status
        time.sleep(1)
    assert status["state"] == "succeeded", status
    first, *later = status["chain"]
    assert first == job["job_id"] and later, status
    cluster_run.job_ids += later
    assert job_fields(first)["JobState"] == "TIMEOUT"
    assert Path(job["job_dir"], ".gym", first, "cause").read_text() == "walltime\n"  # what it knew at its TERM
    # While the second job runs, status says it resumes the first.
    assert any(state == "running" and "resumed 1 time(s), 0 of them retries" in detail for state, detail in seen), seen

    rows = [json.loads(line) for line in Path(job["job_dir"], "artifacts", "rollouts.jsonl").read_text().splitlines()]
    assert sorted(r["task_index"] for r in rows) == list(range(60))  # every row once: nothing lost, nothing twice
    runs = sorted(standin_records(job["job_dir"], "gym-run"), key=lambda r: r["time"])
    assert all(r["overrides"]["resume_from_cache"] == "true" for r in runs)
    assert runs[0]["resumed_from"] == 0 and 0 < runs[1]["resumed_from"] < 60, [r["resumed_from"] for r in runs]
    digest = "sha256:" + hashlib.sha256(SECRET.encode()).hexdigest()
    # Two jobs, or three on a loaded machine (the second cut by its walltime too): each got the secret.
    assert len(runs) >= 2 and [r["env"]["STANDIN_SECRET"] for r in runs] == [digest] * len(runs)
    on_disk = [p for p in Path(job["job_dir"]).parent.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert on_disk == []

    verdicts = [r for r in chain_records(job["job_dir"]) if r[0] == "verdict"]
    assert verdicts[0][1:3] == [first, "timeout"] and verdicts[0][5] == "free", verdicts
    text = cluster_run.cli("status", "--last")
    assert " -> ".join(status["chain"]) in text.stdout, text.stdout
    driver_log = cluster_run.cli("logs", "--last", "--driver").stdout  # the latest job's
    assert f"{runs[-1]['resumed_from']} kept from earlier" in driver_log, driver_log
    results = json.loads(cluster_run.cli("results", "--last", "--json").stdout)
    assert results["benchmarks"][0]["samples"] == 60


def test_a_service_that_keeps_dying_spends_the_retries_and_the_chain_stops(cluster_run) -> None:
    config = cluster_run.config(
        services={
            "policy": {"type": "vllm", "model": "m", "env": {"PATH": STANDIN_PATH, "STANDIN_DIE_AFTER": "lit:2"}}
        },
        benchmarks={"bench": {"resumable": {"max_retries": 1}, "run": {"standin_rollouts": 5}}},
        driver=driver(STANDIN_DRIVER_SECONDS="300"),
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    final = wait_final(cluster_run, timeout=180)
    cluster_run.job_ids += final["chain"]
    assert final["state"] == "failed", final
    assert final["detail"].startswith("gave up: 2 resumes without progress or after failures (max_retries 1)"), final
    # The first job, one retry, and the job that judged the retry and stopped (it ran no service).
    records = chain_records(job["job_dir"])
    assert [r[0] for r in records].count("start") == 2
    assert [r[5] for r in records if r[0] == "verdict"] == ["retry", "retry"]
    assert records[-1][:2] == ["end", "failed"]
    assert len(standin_records(job["job_dir"], "gym-run")) == 2


def test_max_walltime_caps_the_whole_chain(cluster_run) -> None:
    config = cluster_run.config(
        services={
            "policy": {"type": "vllm", "model": "m", "env": {"PATH": STANDIN_PATH, "STANDIN_DIE_AFTER": "lit:12"}}
        },
        benchmarks={"bench": {"resumable": {"max_retries": 10, "max_walltime": "0:20"}}},
        driver=driver(STANDIN_DRIVER_SECONDS="300"),
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    final = wait_final(cluster_run, timeout=240)
    cluster_run.job_ids += final["chain"]
    assert final["state"] == "timed out", final
    assert final["detail"].startswith("max_walltime 0:20 reached"), final
    verdicts = [r for r in chain_records(job["job_dir"]) if r[0] == "verdict"]
    assert 1 <= len(verdicts) <= 3 and sum(int(v[3]) for v in verdicts) >= 20, verdicts


def test_cancel_stops_the_running_job_and_the_one_queued_to_resume_it(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        benchmarks={"bench": {"resumable": True, "run": {"standin_rollouts": 100, "standin_rollout_seconds": 1}}},
        driver=driver(),
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    running = cluster_run.wait_for("bench", {"running"}, timeout=60)
    [first, successor] = running["chain"]
    cluster_run.job_ids.append(successor)
    assert job_fields(successor)["JobState"] == "PENDING"
    out = cluster_run.cli("cancel", "--last")
    assert out.returncode == 0, out.stderr
    assert f"{first} -> {successor}" in out.stdout
    final = wait_final(cluster_run, timeout=60)
    assert final["state"] == "cancelled", final
    assert job_fields(successor)["JobState"] == "CANCELLED"
    assert Path(job["job_dir"], ".gym", first, "cause").read_text() == "cancelled\n"  # Slurm's word, at its TERM
    # The successor never ran: nothing judged, nothing restarted.
    assert not [r for r in chain_records(job["job_dir"]) if r[0] == "verdict"]


def test_a_successful_job_leaves_no_resume_job_behind(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}}, benchmarks={"bench": {"resumable": True}}, driver=driver()
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    final = wait_final(cluster_run, timeout=60)
    assert final["state"] == "succeeded" and final["chain"] == [job["job_id"]], final
    [successor] = [r[1] for r in chain_records(job["job_dir"]) if r[0] == "successor"]
    cluster_run.job_ids.append(successor)
    # Slurm drops the successor whose dependency (afternotok) can never be met, without running it.
    deadline = time.monotonic() + 30
    while job_fields(successor).get("JobState") == "PENDING":
        assert time.monotonic() < deadline, job_fields(successor)
        time.sleep(0.5)
    assert job_fields(successor)["JobState"] == "CANCELLED"
    assert not Path(job["job_dir"], f"slurm-{successor}.out").exists()
    subprocess.run(["scancel", successor], capture_output=True)


def test_a_driver_that_exits_0_short_of_its_samples_is_resumed_by_its_chain_and_ends_complete(cluster_run) -> None:
    """The stand-in driver writes 2 of its 5 rows per run and exits 0: each job of the chain ends
    cut short (its samples counted by the staged judge), the next resumes from the rows on disk
    spending a retry, and the third job completes them."""
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        benchmarks={
            "bench": {
                "resumable": {"max_retries": 3},
                "run": {"standin_rollouts": 5, "standin_rows_per_run": 2},
            }
        },
        driver=driver(),
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    final = wait_final(cluster_run, timeout=180)
    assert (final["state"], final["samples"], final["expected_samples"]) == ("succeeded", 5, 5), final
    assert [a["cause"] for a in final["attempt_history"]] == ["cut-short", "cut-short", None], final
    verdicts = [r for r in chain_records(job["job_dir"]) if r[0] == "verdict"]
    assert [v[5] for v in verdicts] == ["retry", "retry"], verdicts
    rows = Path(job["job_dir"], "artifacts", "rollouts.jsonl").read_text().splitlines()
    assert sorted(json.loads(r)["_ng_task_index"] for r in rows) == list(range(5))  # each once


def test_a_driver_failure_ends_the_chain_at_once_without_running_the_successor(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        benchmarks={"bench": {"resumable": True, "run": {"standin_fail": True}}},
        driver=driver(),
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    final = wait_final(cluster_run, timeout=60)
    assert final["state"] == "failed", final
    assert final["detail"] == "driver failed with exit status 5; not resumed: a rerun would fail the same way", final
    [successor] = [r[1] for r in chain_records(job["job_dir"]) if r[0] == "successor"]
    cluster_run.job_ids.append(successor)
    assert job_fields(successor)["JobState"] == "CANCELLED"
    assert not Path(job["job_dir"], f"slurm-{successor}.out").exists()  # it never took an allocation


def test_a_node_failure_requeues_the_job_and_it_continues_from_its_rollouts(cluster_run) -> None:
    """The node under a running job goes down: Slurm requeues the job (same id, as it does by
    default); the restarted job judges its first attempt and continues from the rows on disk."""
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        benchmarks={"bench": {"resumable": True, "run": {"standin_rollouts": 40, "standin_rollout_seconds": 0.5}}},
        driver=driver(),
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    rollouts = Path(job["job_dir"], "artifacts", "rollouts.jsonl")
    deadline = time.monotonic() + 60
    while not rollouts.exists() or len(rollouts.read_text().splitlines()) < 5:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    node = job_fields(job["job_id"])["NodeList"]
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=gym-test-node-lost"], check=True)
    try:
        final = wait_final(cluster_run, timeout=300)  # Slurm holds a requeued job for cred_expire (20 s here)
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"])
    cluster_run.job_ids += final["chain"]
    assert final["state"] == "succeeded" and final["chain"] == [job["job_id"]], final
    [verdict] = [r for r in chain_records(job["job_dir"]) if r[0] == "verdict"]
    assert verdict[1:3] == [job["job_id"], "requeued"] and verdict[5] == "free" and int(verdict[4]) >= 5, verdict
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    assert sorted(r["task_index"] for r in rows) == list(range(40))
    runs = sorted(standin_records(job["job_dir"], "gym-run"), key=lambda r: r["time"])
    assert runs[-1]["resumed_from"] >= 5
