"""Preemption on the real local cluster, both as sites configure it (scripts/local-slurm): a job of
partition `urgent` takes node n5 from a job of `spot` (PreemptMode=REQUEUE: Slurm requeues it) or
of `spot-cancel` (PreemptMode=CANCEL: Slurm cancels it, and --requeue does nothing). The model
service and the driver are stand-ins (no GPU here); Slurm's preemption, the TERM it sends and the
job scripts are real."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import STANDIN_PATH, job_fields, wait_for_rows
from test_resubmit import resubmit

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def spot_config(cluster_run, partition: str, bench: dict) -> dict:
    return cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        pools={"spot": {"partition": partition}},  # n5: no GPU
        benchmarks={"bench": bench},
        driver={"policy_model": "policy", "env": {"PATH": STANDIN_PATH}},
    )


def preempt_once_rows_are_written(cluster_run, job: dict, rows: int = 5) -> None:
    """Wait for ``rows`` rollouts, then take the job's node with an urgent job (which ends at once)."""
    wait_for_rows(job["job_dir"], rows)
    urgent = subprocess.run(
        ["sbatch", "--parsable", "-p", "urgent", "-N1", "--exclusive", "-o", "/dev/null", "--wrap", "sleep 1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    cluster_run.job_ids.append(urgent)


def test_a_job_preempted_where_the_site_cancels_is_told_preempted_and_resubmit_finishes_it(cluster_run) -> None:
    rollouts = {"standin_rollouts": 30, "standin_rollout_seconds": 0.5}
    [job] = cluster_run.submit(spot_config(cluster_run, "spot-cancel", {"run": rollouts}))["benchmarks"]
    preempt_once_rows_are_written(cluster_run, job)
    told = cluster_run.wait_for("bench", {"preempted", "failed", "succeeded", "cancelled"}, timeout=60)
    assert told["state"] == "preempted", told
    assert "preempted" in told["detail"], told
    # Its own record names the preemption too (PreemptTime set at its TERM), never a user's cancel.
    cause = Path(job["job_dir"], ".gym", job["job_id"], "cause")
    assert cause.read_text() == "preempted\n"
    info = cluster_run.cli("info", "--last", "--json")
    assert info.returncode == 0 and '"remedy": "requeue"' in info.stdout, info.stdout

    rc, answer = resubmit(cluster_run, "--last")
    [bench] = answer["runs"][0]["benchmarks"]
    assert rc == 0 and (bench["remedy"], bench["attempt"]) == ("requeue", 2), answer
    done = cluster_run.wait_for("bench", {"succeeded", "failed", "preempted"}, timeout=120)
    assert (done["state"], done["attempts"]) == ("succeeded", 2), done
    results = json.loads(cluster_run.cli("results", "--last", "--json").stdout)
    assert results["benchmarks"][0]["samples"] == 30


def test_a_job_preempted_where_the_site_requeues_continues_from_its_rollouts(cluster_run) -> None:
    bench = {"resumable": True, "run": {"standin_rollouts": 30, "standin_rollout_seconds": 0.5}}
    [job] = cluster_run.submit(spot_config(cluster_run, "spot", bench))["benchmarks"]
    preempt_once_rows_are_written(cluster_run, job)
    final = cluster_run.wait_for("bench", {"succeeded", "failed", "preempted", "timed out"}, timeout=240)
    cluster_run.job_ids += final["chain"]
    # Requeued by Slurm under the same id, then judged and continued from the rows on disk.
    assert final["state"] == "succeeded" and final["chain"] == [job["job_id"]], final
    assert int(job_fields(job["job_id"]).get("Restarts", "0")) >= 1
    chain = [line.split("\t") for line in Path(job["job_dir"], ".gym", "chain").read_text().splitlines()]
    [verdict] = [r for r in chain if r[0] == "verdict"]
    assert verdict[1:3] == [job["job_id"], "requeued"] and verdict[5] == "free" and int(verdict[4]) >= 5, verdict
    rows = [json.loads(line) for line in Path(job["job_dir"], "artifacts", "rollouts.jsonl").read_text().splitlines()]
    assert sorted(r["task_index"] for r in rows) == list(range(30))
